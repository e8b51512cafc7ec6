"""Run a multinode stack through the real Pulumi engine: the CLI and the kubernetes provider built by
`make pulumi-tools` (bin/), the CrossGuard pack in policy/, a local file backend and passphrase secrets.

    .venv/bin/python conformance/pulumi/engine.py preview <stack> [--file stacks/Pulumi.<stack>.yaml]
        [--kubeconfig FILE] [--out build/<stack>/engines/pulumi]

The Python language host (github.com/pulumi/pulumi/sdk/python/cmd/pulumi-language-python/v3) is not served
by the Go module proxy this project may use (every version asked, pseudo-versions included, answers 403;
README.md here). So the program runs the way the Automation API runs an inline program: the Pulumi Python
SDK's own language server (pulumi 3.272 pulumi/automation/_server.py LanguageServer) serves the engine's
LanguageRuntime in this process and the CLI is started with `--client=<its address>`
(pulumi/automation/_stack.py: preview/up/destroy append `--client`). The program is the repo's __main__.py,
unchanged. The pack has no language host to start it either; the CLI then starts the analyzer plugin
`pulumi-analyzer-policy-python` from PATH (sdk/v3@v3.274.0 go/common/resource/plugin/analyzer_plugin.go,
NewPolicyAnalyzer: "Couldn't get a language plugin, fall back to the old behavior"), which here is
plugins/pulumi-analyzer-policy-python: it starts policy/__main__.py with the project's .venv.

The stack's config is the repo's stack file with its `secure:` values left out (they are placeholders a
passphrase cannot decrypt); the secrets are set again with `pulumi config set --secret` (Automation API
set_config(secret=True)): the kubeconfig given (default: one naming a loopback port where nothing listens,
so the cluster is unreachable) and a dummy hfToken.

Writes <out>/preview.json (the pack's findings as the engine reported them, the change summary) and
<out>/policy-diff.txt, and exits non-zero when the engine's findings differ from `multinode plan`'s
build/<stack>/policy.json or the preview fails.
"""
from __future__ import annotations

import argparse
import json
import os
import runpy
import shutil
import sys
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent.parent
BIN = HERE / "bin"
PLUGINS = HERE / "plugins"
PASSPHRASE = "multinode-e2e-not-a-secret"       # test stacks only; the state lives under build/
HF_TOKEN_DUMMY = "hf_e2e_dummy_token_not_real"
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
        "PATH": os.pathsep.join([str(BIN), str(PLUGINS), os.environ.get("PATH", "")]),
        "PULUMI_HOME": str(home),
        "PULUMI_BACKEND_URL": f"file://{state}",
        "PULUMI_CONFIG_PASSPHRASE": PASSPHRASE,
        "PULUMI_SKIP_UPDATE_CHECK": "true",
        # pulumi/pulumi sdk/v3@v3.274.0 go/common/env/env.go: DisableAutomaticPluginAcquisition
        "PULUMI_DISABLE_AUTOMATIC_PLUGIN_ACQUISITION": "true",
        "PULUMI_SKIP_CONFIRMATIONS": "true",
        "PULUMI_DIY_BACKEND_NO_LEGACY_WARNING": "true",
        # the analyzer plugin's interpreter (plugins/pulumi-analyzer-policy-python)
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


def program() -> None:
    """The repo's Pulumi program, unchanged (Pulumi.yaml: main is the project root)."""
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
    secrets = {"multinode:kubeconfig": kubeconfig, "multinode:hfToken": HF_TOKEN_DUMMY}
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


def compare(engine: list[dict[str, str]], plan: list[dict[str, Any]]) -> list[str]:
    """Findings that one side has and the other does not, by (policy, level, urn); one line each."""
    def key(f: dict[str, Any]) -> tuple[str, str, str]:
        return (f["policy"], "mandatory" if f["enforcementLevel"] == "mandatory" else "advisory", f.get("urn") or "")
    eng = {key(f) for f in engine}
    pl = {key(f) for f in plan}
    lines = [f"policy.json: {p} [{lvl}] {urn or 'stack'}: found by `multinode plan`, not by the pack under the engine"
             for p, lvl, urn in sorted(pl - eng)]
    lines += [f"engine: {p} [{lvl}] {urn or 'stack'}: found by the pack under the engine, not by `multinode plan`"
              for p, lvl, urn in sorted(eng - pl)]
    return lines


def cmd_preview(args: argparse.Namespace) -> int:
    from pulumi.automation import errors as auto_errors

    stack_file = Path(args.file) if args.file else ROOT / "stacks" / f"Pulumi.{args.stack}.yaml"
    out = Path(args.out) if args.out else ROOT / "build" / args.stack / "engines" / "pulumi"
    if args.fresh and out.exists():
        shutil.rmtree(out)
    kubeconfig = Path(args.kubeconfig).read_text() if args.kubeconfig else UNREACHABLE_KUBECONFIG
    stack = open_stack(args.stack, stack_file, kubeconfig, out)
    found, on_event = policy_events()
    failed = ""
    summary: dict[str, Any] = {}
    try:
        res = stack.preview(policy_packs=[str(ROOT / "policy")], on_event=on_event, on_output=print, color="never")
        summary = dict(res.change_summary)
    except auto_errors.CommandError as e:
        failed = str(e)[-4000:]
    report = {"stack": args.stack, "stackFile": str(stack_file), "failed": bool(failed), "changeSummary": summary,
              "findings": found}
    (out / "preview.json").write_text(json.dumps(report, indent=1) + "\n")
    problems: list[str] = []
    mandatory = [f for f in found if f["enforcementLevel"] == "mandatory"]
    if failed and not mandatory:
        problems.append(f"{stack_file}: pulumi preview failed without a mandatory policy finding:\n{failed}")
    if mandatory and not failed:
        problems.append(f"{stack_file}: the pack reported mandatory findings but pulumi preview passed")
    plan_json = Path(args.plan) if args.plan else ROOT / "build" / args.stack / "policy.json"
    if plan_json.exists():
        plan = json.loads(plan_json.read_text())
        problems += compare(found, plan)
    else:
        problems.append(f"{plan_json}: missing; run `multinode plan` first")
    (out / "policy-diff.txt").write_text("".join(p + "\n" for p in problems))
    for f in found:
        print(f"[{f['enforcementLevel']}] {f['policy']}: {f['urn'] or 'stack'}")
    print(f"engine preview of {args.stack}: {'failed' if failed else 'passed'}; {len(found)} finding(s) "
          f"({len(mandatory)} mandatory); summary {summary}; {len(problems)} problem(s)")
    for p in problems:
        print(p, file=sys.stderr)
    return 1 if problems or failed else 0


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    p = sub.add_parser("preview", help="pulumi preview --policy-pack policy of one stack")
    p.add_argument("stack")
    p.add_argument("--file", help="stack file (default stacks/Pulumi.<stack>.yaml)")
    p.add_argument("--kubeconfig", help="kubeconfig file for the stack's secret (default: an unreachable cluster)")
    p.add_argument("--out", help="work folder (default build/<stack>/engines/pulumi)")
    p.add_argument("--plan", help="multinode plan's policy.json to compare with (default build/<stack>/policy.json)")
    p.add_argument("--fresh", action="store_true", help="start from an empty state folder")
    args = ap.parse_args(argv)
    return cmd_preview(args)


if __name__ == "__main__":
    sys.exit(main())
