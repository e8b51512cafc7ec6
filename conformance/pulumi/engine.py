"""Run a multinode stack through the real Pulumi engine: the CLI and the kubernetes provider built by
`make pulumi-tools` (bin/), the CrossGuard pack in policy/, a local file backend and passphrase secrets.

    .venv/bin/python conformance/pulumi/engine.py preview <stack | path/Pulumi.<stack>.yaml>
        [--kubeconfig FILE] [--out build/<stack>/engines/pulumi] [--fresh]

The Python language host (github.com/pulumi/pulumi/sdk/python/cmd/pulumi-language-python/v3) is not served
by the Go module proxy this project may use (every version asked, pseudo-versions included, answers 403;
README.md here). So the program runs the way the Automation API runs an inline program: the Pulumi Python
SDK's own language server (pulumi 3.272 pulumi/automation/_server.py LanguageServer) serves the engine's
LanguageRuntime in this process and the CLI is started with `--client=<its address>`
(pulumi/automation/_stack.py: preview/up/destroy append `--client`). The program is the repo's __main__.py,
unchanged. The pack has no language host to start it either: `--policy-pack` names
plugins/multinode-policy-pack, an executable the CLI starts as a binary analyzer plugin (pkg/v3@v3.274.0
resource/plugin/analyzer_plugin.go NewPolicyAnalyzer), which starts policy/__main__.py with the project's .venv.

The stack's config is the repo's stack file with its `secure:` values left out (they are placeholders a
passphrase cannot decrypt); the secrets are set again with `pulumi config set --secret` (Automation API
set_config(secret=True)): the kubeconfig given (default: one naming a loopback port where nothing listens,
so the cluster is unreachable) and a dummy hfToken.

Runs `multinode plan --file` of the same stack file into <out>/plan/, then the preview; writes
<out>/preview.json (the pack's findings as the engine reported them, the change summary) and
<out>/policy-diff.txt (one line per finding only one side has), and exits non-zero when the preview fails
(a mandatory finding fails it) or the engine's findings differ from plan's policy.json.
"""
from __future__ import annotations

import argparse
import json
import os
import runpy
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent.parent
BIN = HERE / "bin"
PLUGINS = HERE / "plugins"
POLICY_PACK = PLUGINS / "multinode-policy-pack"    # starts policy/ (see that file)
PASSPHRASE = "multinode-e2e-not-a-secret"       # test stacks only; the state lives under build/
HF_TOKEN_DUMMY = "hf_e2e_dummy_token_not_real"
NGC_API_KEY_DUMMY = "nvapi-e2e-dummy-key-not-real"
UNREACHABLE_KUBECONFIG = """apiVersion: v1
kind: Config
clusters:
- name: unreachable
  cluster: {server: "https://127.0.0.1:9"}
contexts:
- name: unreachable
  context: {cluster: unreachable, user: nobody}
current-context: unreachable
users:
- name: nobody
  user: {token: not-a-token}
"""


def engine_env(home: Path, state: Path) -> dict[str, str]:
    """What the CLI needs to run offline: our binaries first on PATH (ambient plugins), a private PULUMI_HOME,
    the file backend, the passphrase, and no update checks or plugin downloads."""
    return {
        "PATH": os.pathsep.join([str(BIN), os.environ.get("PATH", "")]),
        "PULUMI_HOME": str(home),
        "PULUMI_BACKEND_URL": f"file://{state}",
        "PULUMI_CONFIG_PASSPHRASE": PASSPHRASE,
        "PULUMI_SKIP_UPDATE_CHECK": "true",
        # pulumi/pulumi sdk/v3@v3.274.0 go/common/env/env.go: DisableAutomaticPluginAcquisition
        "PULUMI_DISABLE_AUTOMATIC_PLUGIN_ACQUISITION": "true",
        "PULUMI_SKIP_CONFIRMATIONS": "true",
        "PULUMI_DIY_BACKEND_NO_LEGACY_WARNING": "true",
        # the pack's interpreter (plugins/multinode-policy-pack)
        "MULTINODE_VENV_PYTHON": sys.executable,
    }


def stack_config(stack_file: Path) -> tuple[dict[str, Any], list[str]]:
    """The stack file's config without its `secure:` values, and the keys that were secure."""
    import yaml

    doc = yaml.safe_load(stack_file.read_text()) or {}
    plain: dict[str, Any] = {}
    secure: list[str] = []
    for k, v in (doc.get("config") or {}).items():
        if isinstance(v, dict) and set(v) == {"secure"}:
            secure.append(k)
        else:
            plain[k] = v
    return plain, secure


# E2E HARNESS SETTING, NOT THE PRODUCT: resource types given with --skip-await get the kubernetes provider's
# `pulumi.com/skipAwait: "true"` annotation from a stack transform registered here, before the program runs. The
# box cannot give what the provider waits for on them (e2e.py FULL_STACK_SKIP_AWAIT says which and why); the
# product's objects do not carry it (whether they should is a product decision, not this harness's).
SKIP_AWAIT: set[str] = set()
SKIP_AWAIT_ANNOTATION = "pulumi.com/skipAwait"


def _skip_await_transform(args: Any) -> Any:
    import pulumi

    if args.type_ not in SKIP_AWAIT:
        return None

    def annotate(md: Any) -> dict[str, Any]:
        out: dict[str, Any] = dict(md or {})
        out["annotations"] = {**dict(out.get("annotations") or {}), SKIP_AWAIT_ANNOTATION: "true"}
        return out
    props = dict(args.props)
    md = props.get("metadata")
    props["metadata"] = (pulumi.Output.from_input(md).apply(annotate) if isinstance(md, pulumi.Output)
                         else annotate(md))
    return pulumi.ResourceTransformResult(props=props, opts=args.opts)


def program() -> None:
    """The repo's Pulumi program, unchanged (Pulumi.yaml: main is the project root)."""
    if SKIP_AWAIT:
        import pulumi

        pulumi.runtime.register_resource_transform(_skip_await_transform)
    runpy.run_path(str(ROOT / "__main__.py"), run_name="__main__")


def open_stack(name: str, stack_file: Path, kubeconfig: str, out: Path) -> Any:
    import yaml
    from pulumi import automation as auto

    if not (BIN / "pulumi").exists():
        sys.exit(f"{BIN / 'pulumi'} is missing: run `make pulumi-tools` first")
    work, home, state = out / "project", out / "home", out / "state"
    for d in (work, home, state):
        d.mkdir(parents=True, exist_ok=True)
    env = engine_env(home, state)
    os.environ.update(env)          # the in-process program and pulumi.automation see the same environment
    opts = auto.LocalWorkspaceOptions(
        work_dir=str(work), pulumi_home=str(home), env_vars=env, secrets_provider="passphrase",
        project_settings=auto.ProjectSettings(name="multinode", runtime="python"),
        pulumi_command=auto.PulumiCommand(root=str(HERE)),      # HERE/bin/pulumi
    )
    stack = auto.create_or_select_stack(stack_name=name, project_name="multinode", program=program, opts=opts)
    plain, secure = stack_config(stack_file)
    # The plain config goes into the stack file as structured YAML (what `pulumi config set --path` would write
    # key by key), next to the encryptionsalt `pulumi stack init` wrote; then the secrets through the CLI.
    sf = work / f"Pulumi.{name}.yaml"
    settings = yaml.safe_load(sf.read_text()) if sf.exists() else {}
    settings = settings or {}
    settings["config"] = plain
    sf.write_text(yaml.safe_dump(settings, sort_keys=False))
    secrets = {"multinode:kubeconfig": kubeconfig, "multinode:hfToken": HF_TOKEN_DUMMY,
               "multinode:ngcApiKey": NGC_API_KEY_DUMMY}
    for key in secure:
        if key not in secrets:
            sys.exit(f"{stack_file}: secure key {key} has no e2e value (engine.py secrets)")
        stack.set_config(key, auto.ConfigValue(value=secrets[key], secret=True))
    return stack


def policy_events() -> tuple[list[dict[str, str]], Any]:
    found: list[dict[str, str]] = []

    def on_event(event: Any) -> None:
        p = getattr(event, "policy_event", None)
        if p is not None:
            found.append({"policy": p.policy_name, "enforcementLevel": p.enforcement_level,
                          "urn": p.resource_urn or "", "message": p.message.strip(), "pack": p.policy_pack_name})
    return found, on_event


def step_events(on_event: Any) -> tuple[list[dict[str, Any]], Any]:
    """The engine's steps other than `same` (ResourcePreEvent: op, keys causing a replace, the changed keys and the
    provider's detailed diff), recorded beside what on_event records."""
    steps: list[dict[str, Any]] = []

    def record(event: Any) -> None:
        on_event(event)
        pre = getattr(event, "resource_pre_event", None)
        md = getattr(pre, "metadata", None)
        if md is None:
            return
        op = getattr(md.op, "value", str(md.op))
        if op == "same":
            return
        detailed = {k: getattr(getattr(v, "diff_kind", None), "value", str(getattr(v, "diff_kind", "")))
                    for k, v in (md.detailed_diff or {}).items()}
        steps.append({"urn": md.urn, "type": md.type, "op": op, "keys": list(md.keys or []),
                      "diffs": list(md.diffs or []), "detailedDiff": detailed})
    return steps, record


def resource_of(urn: str) -> tuple[str, str]:
    """(type, name) of a URN: the last type of its type chain and its name ("", "") for a stack finding)."""
    if not urn:
        return ("", "")
    _, _, chain, name = urn.split("::", 3)
    return (chain.rsplit("$", 1)[-1], name)


def compare(engine: list[dict[str, str]], plan: list[dict[str, Any]]) -> list[str]:
    """One line per finding only one side has, by (policy, level, resource type, resource name), and one line
    per finding both have under different URNs."""
    def key(f: dict[str, Any]) -> tuple[str, str, str, str]:
        level = "mandatory" if f["enforcementLevel"] == "mandatory" else "advisory"
        return (f["policy"], level, *resource_of(f.get("urn") or ""))
    eng = {key(f): f.get("urn") or "" for f in engine}
    pl = {key(f): f.get("urn") or "" for f in plan}
    lines = [f"policy.json: {k[0]} [{k[1]}] {pl[k] or 'stack'}: found by `multinode plan`, not by the pack under "
             f"the engine" for k in sorted(pl.keys() - eng.keys())]
    lines += [f"engine: {k[0]} [{k[1]}] {eng[k] or 'stack'}: found by the pack under the engine, not by "
              f"`multinode plan`" for k in sorted(eng.keys() - pl.keys())]
    lines += [f"urn: {k[0]} [{k[1]}] {k[2]} {k[3]}: the engine names it {eng[k]}, policy.json {pl[k]}"
              for k in sorted(eng.keys() & pl.keys()) if eng[k] != pl[k]]
    return lines


def plan(stack_file: Path, out: Path) -> Path:
    """`multinode plan --file` of the same stack file (exit 1 is a mandatory finding, still a plan)."""
    exe = Path(sys.executable).parent / "multinode"
    r = subprocess.run([str(exe), "plan", "--file", str(stack_file), "--out", str(out)],
                       capture_output=True, text=True, cwd=ROOT)
    if r.returncode not in (0, 1):
        sys.exit(f"multinode plan --file {stack_file} failed:\n{r.stdout[-2000:]}{r.stderr[-2000:]}")
    return out / stack_name(stack_file) / "policy.json"


def stack_name(stack_file: Path) -> str:
    return stack_file.name.removeprefix("Pulumi.").removesuffix(".yaml")


def cmd_preview(args: argparse.Namespace) -> int:
    from pulumi.automation import errors as auto_errors

    given = Path(args.stack)
    stack_file = given if given.suffix == ".yaml" else ROOT / "stacks" / f"Pulumi.{args.stack}.yaml"
    name = stack_name(stack_file)
    out = (Path(args.out) if args.out else ROOT / "build" / name / "engines" / "pulumi").resolve()
    if args.fresh and out.exists():
        shutil.rmtree(out)
    out.mkdir(parents=True, exist_ok=True)
    plan_json = plan(stack_file, out / "plan")
    kubeconfig = Path(args.kubeconfig).read_text() if args.kubeconfig else UNREACHABLE_KUBECONFIG
    stack = open_stack(name, stack_file, kubeconfig, out)
    found, on_event = policy_events()
    failed = ""
    summary: dict[str, Any] = {}
    try:
        res = stack.preview(policy_packs=[str(POLICY_PACK)], on_event=on_event, on_output=print, color="never")
        summary = dict(res.change_summary)
    except auto_errors.CommandError as e:
        failed = str(e)[-4000:]
    report = {"stack": name, "stackFile": str(stack_file), "failed": bool(failed), "changeSummary": summary,
              "findings": found}
    (out / "preview.json").write_text(json.dumps(report, indent=1) + "\n")
    problems: list[str] = []
    mandatory = [f for f in found if f["enforcementLevel"] == "mandatory"]
    if failed and not mandatory:
        problems.append(f"{stack_file}: pulumi preview failed without a mandatory policy finding:\n{failed}")
    if mandatory and not failed:
        problems.append(f"{stack_file}: the pack reported mandatory findings but pulumi preview passed")
    diff = compare(found, json.loads(plan_json.read_text()))
    problems += diff
    (out / "policy-diff.txt").write_text("".join(d + "\n" for d in diff))
    for f in found:
        print(f"[{f['enforcementLevel']}] {f['policy']}: {f['urn'] or 'stack'}")
    print(f"engine preview of {name}: {'failed' if failed else 'passed'}; {len(found)} finding(s) "
          f"({len(mandatory)} mandatory); summary {summary}; {len(problems)} problem(s)")
    for p in problems:
        print(p, file=sys.stderr)
    return 1 if problems or failed else 0


def cmd_pr_check(args: argparse.Namespace) -> int:
    """The pull-request check (`make pr-check STACK=...`): `pulumi preview --policy-pack policy` of the stack on
    the engine; exit 1 on a mandatory finding (one `pr-check: FAIL` line per finding, naming the rule and the
    resource) or on a preview that fails for another reason. No comparison with `multinode plan` (that is
    `make pulumi-preview`, the conformance check)."""
    from pulumi.automation import errors as auto_errors

    given = Path(args.stack)
    stack_file = given if given.suffix == ".yaml" else ROOT / "stacks" / f"Pulumi.{args.stack}.yaml"
    if not stack_file.exists():
        sys.exit(f"pr-check: {stack_file} does not exist (STACK= a stack of stacks/ or a Pulumi.<stack>.yaml)")
    name = stack_name(stack_file)
    out = (Path(args.out) if args.out else ROOT / "build" / name / "engines" / "pr-check").resolve()
    if out.exists():
        shutil.rmtree(out)
    out.mkdir(parents=True)
    kubeconfig = Path(args.kubeconfig).read_text() if args.kubeconfig else UNREACHABLE_KUBECONFIG
    stack = open_stack(name, stack_file, kubeconfig, out)
    found, on_event = policy_events()
    failed = ""
    try:
        stack.preview(policy_packs=[str(POLICY_PACK)], on_event=on_event, on_output=print, color="never")
    except auto_errors.CommandError as e:
        failed = str(e)[-4000:]
    mandatory = [f for f in found if f["enforcementLevel"] == "mandatory"]
    (out / "preview.json").write_text(json.dumps({"stack": name, "failed": bool(failed), "findings": found},
                                                 indent=1) + "\n")
    for f in mandatory:
        print(f"pr-check: FAIL mandatory policy {f['policy']} on {f['urn'] or 'the stack'}: {f['message']}")
    advisory = len(found) - len(mandatory)
    if mandatory:
        rules = ", ".join(sorted({f["policy"] for f in mandatory}))
        print(f"pr-check: {name}: {len(mandatory)} mandatory finding(s) ({rules}), {advisory} advisory")
        return 1
    if failed:
        print(f"pr-check: {name}: pulumi preview failed without a policy finding:\n{failed}")
        return 1
    print(f"pr-check: {name}: passed, no mandatory finding, {advisory} advisory")
    return 0


def cmd_op(args: argparse.Namespace) -> int:
    """One engine operation on an existing work folder's stack (up, destroy, preview), no --fresh."""
    from pulumi.automation import errors as auto_errors

    given = Path(args.stack)
    stack_file = given if given.suffix == ".yaml" else ROOT / "stacks" / f"Pulumi.{args.stack}.yaml"
    name = stack_name(stack_file)
    out = (Path(args.out) if args.out else ROOT / "build" / name / "engines" / "pulumi").resolve()
    kubeconfig = Path(args.kubeconfig).read_text() if args.kubeconfig else UNREACHABLE_KUBECONFIG
    stack = open_stack(name, stack_file, kubeconfig, out)
    found, on_policy = policy_events()
    steps, on_event = step_events(on_policy)
    try:
        if args.cmd == "up":
            res = stack.up(policy_packs=[str(POLICY_PACK)], on_event=on_event, on_output=print, color="never",
                           replace=args.replace or None)
            summary = dict(res.summary.resource_changes or {})
        elif args.cmd == "destroy":
            res = stack.destroy(on_event=on_event, on_output=print, color="never")
            summary = dict(res.summary.resource_changes or {})
        else:
            pres = stack.preview(policy_packs=[str(POLICY_PACK)], on_event=on_event, on_output=print,
                                 color="never")
            summary = dict(pres.change_summary)
    except auto_errors.CommandError as e:
        print(f"engine {args.cmd} of {name}: failed\n{str(e)[-3000:]}", file=sys.stderr)
        (out / f"{args.cmd}.json").write_text(json.dumps({"failed": True, "error": str(e)[-6000:],
                                                          "findings": found, "steps": steps}, indent=1) + "\n")
        return 1
    (out / f"{args.cmd}.json").write_text(json.dumps({"failed": False, "summary": summary, "findings": found,
                                                      "steps": steps}, indent=1) + "\n")
    print(f"engine {args.cmd} of {name}: {summary}")
    return 0


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    p = sub.add_parser("preview", help="pulumi preview --policy-pack of one stack, compared with multinode plan")
    p.add_argument("stack", help="a stack of stacks/ or a stack file Pulumi.<stack>.yaml")
    p.add_argument("--kubeconfig", help="kubeconfig file for the stack's secret (default: an unreachable cluster)")
    p.add_argument("--out", help="work folder (default build/<stack>/engines/pulumi)")
    p.add_argument("--fresh", action="store_true", help="start from an empty work folder")
    c = sub.add_parser("pr-check", help="the pull-request check: pulumi preview --policy-pack, fails on a mandatory "
                                        "finding naming the rule")
    c.add_argument("stack", help="a stack of stacks/ or a stack file Pulumi.<stack>.yaml")
    c.add_argument("--kubeconfig", help="kubeconfig file for the stack's secret (default: an unreachable cluster)")
    c.add_argument("--out", help="work folder (default build/<stack>/engines/pr-check, emptied first)")
    for op in ("up", "destroy", "op-preview"):
        o = sub.add_parser(op, help=f"pulumi {op} of the stack in its work folder (kept from earlier runs)")
        o.add_argument("stack")
        o.add_argument("--kubeconfig")
        o.add_argument("--out")
        if op == "up":
            o.add_argument("--replace", action="append", default=[], metavar="URN",
                           help="force the engine to replace this resource (`pulumi up --replace`)")
    for q in sub.choices.values():
        q.add_argument("--skip-await", action="append", default=[], metavar="TYPE",
                       help="e2e harness only: annotate resources of this Pulumi type (e.g. "
                            "kubernetes:batch/v1:Job) with pulumi.com/skipAwait (SKIP_AWAIT above)")
    args = ap.parse_args(argv)
    SKIP_AWAIT.update(args.skip_await)
    if args.cmd == "pr-check":
        return cmd_pr_check(args)
    return cmd_preview(args) if args.cmd == "preview" else cmd_op(args)


if __name__ == "__main__":
    sys.exit(main())
