"""`pulumi preview --policy-pack $(multinode policy-path)` of a `multinode new` project on the real engine, run by the
interpreter of the venv the wheel is installed in, from the project's folder (`make package-preview`,
tools/package_check.py --engine copies this file next to the project and runs it there: nothing of the checkout
is on its path).

The Python language host is not available on these machines (conformance/pulumi/README.md), so the project's
program runs the way the Automation API runs an inline program: the Pulumi SDK's language server in this process,
the CLI started with `--client`. The program is the project's own `__main__.py` (its three lines), run with runpy
in the project folder; the project's Pulumi.yaml and Pulumi.<stack>.yaml are the CLI's (LocalWorkspace work_dir).
The pack is the executable given (what `multinode policy-path` prints), started by the CLI as a binary analyzer.

What a team does before its first preview is done here too: the `secure:` placeholder values of the template are
replaced with `pulumi config set --secret` (the kubeconfig given, a dummy for any other secret). With
--addons-provided every add-on the stack enables is marked `provided: true` first (the product setting for a
cluster that already runs them: a Helm release fetches its chart during preview, and there is no network here).

    python project_preview.py <project> <stack> --pulumi DIR --pack EXE --kubeconfig FILE [--addons-provided]

Prints one `project-preview: FAIL mandatory policy <rule> on <urn>: <message>` line per mandatory finding, then
`project-preview: <stack>: ...`; exit 0 passed, 1 a mandatory finding, 3 the preview failed for another reason.
"""
from __future__ import annotations

import argparse
import os
import runpy
import sys
from pathlib import Path
from typing import Any

import yaml

PASSPHRASE = "multinode-package-check-not-a-secret"     # a throw-away stack in a temporary folder
DUMMY_SECRET = "package-check-dummy-secret"


def addons_provided(stack_file: Path) -> list[str]:
    """Mark every add-on the stack enables `provided: true` (with the installed package's own config model)."""
    from multinode import checks, stackfile
    from multinode.config import Addons

    raw, secrets, _ = stackfile.read_stack_file(stack_file)
    cfg = checks.load(dict(raw), secrets)
    doc = yaml.safe_load(stack_file.read_text())
    addons = dict(doc["config"].get("multinode:addons") or {})
    marked = []
    for field, info in Addons.model_fields.items():
        if getattr(cfg.addons, field).enabled:
            key = info.alias or field
            addons[key] = {**dict(addons.get(key) or {}), "provided": True}
            marked.append(key)
    doc["config"]["multinode:addons"] = addons
    stack_file.write_text(yaml.safe_dump(doc, sort_keys=False))
    return marked


def main(argv: list[str]) -> int:
    from pulumi import automation as auto
    from pulumi.automation import errors as auto_errors

    ap = argparse.ArgumentParser()
    ap.add_argument("project")
    ap.add_argument("stack")
    ap.add_argument("--pulumi", required=True, help="folder with the `pulumi` CLI and pulumi-resource-kubernetes")
    ap.add_argument("--pack", required=True, help="the policy pack executable (`multinode policy-path`)")
    ap.add_argument("--kubeconfig", required=True)
    ap.add_argument("--state", required=True, help="folder for the file backend and PULUMI_HOME")
    ap.add_argument("--addons-provided", action="store_true")
    a = ap.parse_args(argv)
    project, state = Path(a.project).resolve(), Path(a.state).resolve()
    stack_file = project / f"Pulumi.{a.stack}.yaml"
    if a.addons_provided:
        print(f"project-preview: add-ons marked provided: {', '.join(addons_provided(stack_file)) or 'none'}")
    doc: dict[str, Any] = yaml.safe_load(stack_file.read_text()) or {}
    conf = dict(doc.get("config") or {})
    secure = [k for k, v in conf.items() if isinstance(v, dict) and set(v) == {"secure"}]
    doc["config"] = {k: v for k, v in conf.items() if k not in secure}
    stack_file.write_text(yaml.safe_dump(doc, sort_keys=False))
    (state / "home").mkdir(parents=True, exist_ok=True)
    (state / "backend").mkdir(parents=True, exist_ok=True)
    env = {
        "PATH": os.pathsep.join([str(Path(a.pulumi).resolve()), os.environ.get("PATH", "")]),
        "PULUMI_HOME": str(state / "home"),
        "PULUMI_BACKEND_URL": f"file://{state / 'backend'}",
        "PULUMI_CONFIG_PASSPHRASE": PASSPHRASE,
        "PULUMI_SKIP_UPDATE_CHECK": "true",
        "PULUMI_DISABLE_AUTOMATIC_PLUGIN_ACQUISITION": "true",
        "PULUMI_DIY_BACKEND_NO_LEGACY_WARNING": "true",
    }
    os.environ.update(env)
    os.chdir(project)
    import multinode
    print(f"project-preview: the multinode package from {Path(multinode.__file__).resolve().parent}", flush=True)

    def program() -> None:
        runpy.run_path(str(project / "__main__.py"), run_name="__main__")

    name = yaml.safe_load((project / "Pulumi.yaml").read_text())["name"]
    opts = auto.LocalWorkspaceOptions(work_dir=str(project), pulumi_home=env["PULUMI_HOME"], env_vars=env,
                                      secrets_provider="passphrase",
                                      pulumi_command=auto.PulumiCommand(root=str(Path(a.pulumi).resolve().parent)))
    stack = auto.create_or_select_stack(stack_name=a.stack, project_name=name, program=program, opts=opts)
    for key in secure:
        value = Path(a.kubeconfig).read_text() if key.endswith(":kubeconfig") else DUMMY_SECRET
        stack.set_config(key, auto.ConfigValue(value=value, secret=True))
    found: list[dict[str, str]] = []

    def on_event(event: Any) -> None:
        p = getattr(event, "policy_event", None)
        if p is not None:
            found.append({"policy": p.policy_name, "level": p.enforcement_level, "urn": p.resource_urn or "",
                          "message": p.message.strip()})
    failed = ""
    summary: dict[str, int] = {}
    try:
        res = stack.preview(policy_packs=[a.pack], on_event=on_event, color="never")
        summary = {str(k): v for k, v in res.change_summary.items()}
    except auto_errors.CommandError as e:
        failed = str(e)[-3000:]
    mandatory = [f for f in found if f["level"] == "mandatory"]
    for f in mandatory:
        print(f"project-preview: FAIL mandatory policy {f['policy']} on {f['urn'] or 'the stack'}: {f['message']}")
    if mandatory:
        print(f"project-preview: {a.stack}: {len(mandatory)} mandatory finding(s) "
              f"({', '.join(sorted({f['policy'] for f in mandatory}))}), preview "
              f"{'failed' if failed else 'passed (the engine did not fail it)'}")
        return 1
    if failed:
        print(f"project-preview: {a.stack}: pulumi preview failed without a policy finding:\n{failed}")
        return 3
    print(f"project-preview: {a.stack}: passed, {len(found)} advisory finding(s), changes {summary}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
