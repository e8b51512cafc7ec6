"""`make yaml-e2e`: a Pulumi YAML program using `multinode:index:Platform` on the real engine against the cluster in a
box (issue 45, README.md here). Nothing of the Python program runs in-process: the Pulumi CLI (conformance/pulumi),
the YAML language host (conformance/pulumi-yaml) and the provider executable `pulumi-resource-multinode` (the
package's console script) are found on PATH as a user's machine would have them.

    yaml_e2e.py derive <program Pulumi.yaml> <stack file>     the Python program's stack file for the same config
    yaml_e2e.py <program Pulumi.yaml> <stack file> <kubeconfig> --build DIR    the steps, run with the box up

Steps, each one line of the verdict <build>/<stack>/engines/pulumi-yaml/e2e.txt:
  1. what the cluster provides: the StorageClass and a ReadWriteMany PersistentVolume (conformance/pulumi/e2e.py);
  2. `pulumi preview --policy-pack <the package's pack executable>`: passes, and the pack's findings under the
     engine equal `multinode plan`'s policy.json of the stack file (by rule, level, type, name and URN);
  3. `pulumi up` with the pack;
  4. the registrations in the engine's state equal the Python program's (`multinode plan`'s resources.json, whose
     URNs follow the engine's: conformance/pulumi/README.md): the same URNs, types, parents, protect /
     retainOnDelete / deleteBeforeReplace, and every input the Python program gives; what only one side has is
     listed and must be in EXPECTED_ONLY_YAML (each with its reason);
  5. every object of <build>/<stack>/k8s on the box with the fields we set;
  6. a second `pulumi up` changes nothing;
  7. `pulumi destroy` removes the rest and keeps the protected claim and its volume.
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

import yaml

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent.parent
sys.path.insert(0, str(ROOT / "conformance" / "pulumi"))
import e2e  # noqa: E402  (conformance/pulumi/e2e.py: storage, object compare)
import engine  # noqa: E402  (conformance/pulumi/engine.py: the offline engine environment, policy compare)

PREFIX = "multinode:"
# The program's config keys that are secrets: the stack file marks them `secure:` (values plan never reads).
SECRET_PLACEHOLDER = "v1:eWFtbC1lMmUtcGxhY2Vob2xkZXI="
# Registrations only the YAML program makes, and why (anything else only one side has is a failure):
EXPECTED_ONLY_YAML = {
    # the engine's root resource of every program; plan records the resources under it, not the root itself
    "pulumi:pulumi:Stack": "the stack's root resource (plan's records are its children)",
    # a remote component is constructed through a provider resource of its package; the Python program builds
    # the Platform in its own process and needs none
    "pulumi:providers:multinode": "the default provider of the multinode package, through which the engine "
                                  "constructs the remote component",
}


def derive(program: Path, stack_file: Path) -> dict[str, Any]:
    """The stack file of the Python program for the YAML program's config: every property of the Platform as the
    `multinode:` key of the same name; a property that is a `${...}` config reference (the secrets) becomes a
    `secure:` placeholder, set again at run time."""
    doc = yaml.safe_load(program.read_text())
    resources = doc.get("resources") or {}
    platforms = [r for r in resources.values() if r.get("type") == "multinode:index:Platform"]
    if len(platforms) != 1:
        raise SystemExit(f"{program}: expected one multinode:index:Platform, found {len(platforms)}")
    conf: dict[str, Any] = {}
    for key, value in (platforms[0].get("properties") or {}).items():
        if isinstance(value, str) and value.startswith("${"):
            conf[PREFIX + key] = {"secure": SECRET_PLACEHOLDER}
        else:
            conf[PREFIX + key] = value
    out = {"config": conf}
    stack_file.parent.mkdir(parents=True, exist_ok=True)
    stack_file.write_text(f"# derived from {program.relative_to(ROOT)} by {Path(__file__).relative_to(ROOT)}\n"
                          + yaml.safe_dump(out, sort_keys=False))
    return out


# ------------------------------------------------------------------------------------------ registrations
# How plan's recording writes a secret input (multinode/recording.py): the value is not recorded.
RECORDED_SECRET = "[secret]"


def _subset(want: Any, have: Any, path: str, secrets: set[str]) -> list[str]:
    """Where `have` lacks or differs from a value of `want` (what the Python program gives must be registered).
    A secret the Python program gave (recorded as RECORDED_SECRET) must hold one of the secrets the run set."""
    if isinstance(want, dict):
        if not isinstance(have, dict):
            return [f"{path or '.'}: expected an object, found {have!r}"[:300]]
        return [d for k, v in want.items() for d in _subset(v, have.get(k), f"{path}.{k}", secrets)]
    if isinstance(want, list):
        if not isinstance(have, list) or len(want) != len(have):
            return [f"{path}: expected {len(want)} item(s), found {have!r}"[:300]]
        return [d for i, (w, h) in enumerate(zip(want, have, strict=True))
                for d in _subset(w, h, f"{path}[{i}]", secrets)]
    if want == have:
        return []
    if want == RECORDED_SECRET:
        return [] if have in secrets else [f"{path}: a secret the Python program gives; the YAML program's state "
                                           f"holds {'another value' if isinstance(have, str) else repr(have)}"]
    return [f"{path}: the Python program gives {want!r}, the YAML program's state holds {have!r}"[:300]]


def _extra_keys(want: Any, have: Any, path: str) -> list[str]:
    """Input paths the state holds that the Python program did not give (objects only)."""
    if isinstance(want, dict) and isinstance(have, dict):
        out = [f"{path}.{k}" for k in have if k not in want]
        return out + [p for k in want if k in have for p in _extra_keys(want[k], have[k], f"{path}.{k}")]
    if isinstance(want, list) and isinstance(have, list) and len(want) == len(have):
        return [p for i, (w, h) in enumerate(zip(want, have, strict=True)) for p in _extra_keys(w, h, f"{path}[{i}]")]
    return []


def compare_registrations(state: list[dict[str, Any]], records: list[dict[str, Any]],
                          secrets: set[str]) -> tuple[list[str], list[str]]:
    """(differences, explained) between the engine's state of the YAML program (`pulumi stack export
    --show-secrets` resources) and the Python program's registrations (plan's resources.json). `secrets`: the
    values the YAML run set for its secret config (the kubeconfig, the token)."""
    have = {r["urn"]: r for r in state}
    want = {r["urn"]: r for r in records}
    diffs: list[str] = []
    explained: list[str] = []
    for urn in sorted(have.keys() - want.keys()):
        why = EXPECTED_ONLY_YAML.get(have[urn]["type"])
        if why:
            explained.append(f"only the YAML program: {urn} ({why})")
        else:
            diffs.append(f"only the YAML program registers {urn}")
    diffs += [f"only the Python program registers {urn}" for urn in sorted(want.keys() - have.keys())]
    for urn in sorted(want.keys() & have.keys()):
        w, h = want[urn], have[urn]
        if w["type"] != h["type"]:
            diffs.append(f"{urn}: type {w['type']} (Python) vs {h['type']} (YAML)")
        if (w.get("parent") or "") != (h.get("parent") or ""):
            diffs.append(f"{urn}: parent {w.get('parent')} (Python) vs {h.get('parent')} (YAML)")
        for flag in ("protect", "retainOnDelete", "deleteBeforeReplace"):
            if bool(w.get(flag)) != bool(h.get(flag)):
                diffs.append(f"{urn}: {flag} {bool(w.get(flag))} (Python) vs {bool(h.get(flag))} (YAML)")
        if not w.get("custom", True) or not h.get("custom", False):
            continue        # a component's inputs are its args: the YAML side passes them over gRPC, compared below
        wi = w.get("inputs") or {}
        diffs += [f"{urn}: {d}" for d in _subset(wi, h.get("inputs") or {}, "inputs", secrets)]
        for extra in _extra_keys(wi, h.get("inputs") or {}, "inputs"):
            explained.append(f"{urn}: {extra} set by the provider's Check (the Python program gives none)")
    return diffs, explained


# ------------------------------------------------------------------------------------------ the engine
class Cli:
    """The Pulumi CLI run in the YAML project's folder, offline, with the tools on PATH."""

    def __init__(self, work: Path, tools: Path) -> None:
        self.project = work / "project"
        home, state = work / "home", work / "state"
        for d in (self.project, home, state):
            d.mkdir(parents=True, exist_ok=True)
        env = engine.engine_env(home, state)
        # the CLI and the kubernetes provider (conformance/pulumi/bin), the YAML language host (conformance/bin),
        # and `pulumi-resource-multinode` alone from the package's venv (tools/): nothing else of the venv on PATH
        env["PATH"] = os.pathsep.join([str(engine.BIN), str(ROOT / "conformance" / "bin"), str(tools),
                                       "/usr/bin", "/bin"])
        env.pop("MULTINODE_VENV_PYTHON", None)
        self.env = env

    def __call__(self, *args: str, stdin: str | None = None, timeout: float = 1500) -> subprocess.CompletedProcess[str]:
        r = subprocess.run([str(engine.BIN / "pulumi"), *args, "--non-interactive"], cwd=self.project, env=self.env,
                           input=stdin, capture_output=True, text=True, timeout=timeout)
        print(f"$ pulumi {' '.join(args)}: exit {r.returncode}\n{(r.stdout + r.stderr)[-2500:]}", flush=True)
        return r


def events(path: Path) -> list[dict[str, Any]]:
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def findings_of(evs: list[dict[str, Any]]) -> list[dict[str, str]]:
    out = []
    for ev in evs:
        p = ev.get("policyEvent")
        if p:
            out.append({"policy": p.get("policyName", ""), "enforcementLevel": p.get("enforcementLevel", ""),
                        "urn": p.get("resourceUrn") or "", "message": (p.get("message") or "").strip()})
    return out


def summary_of(evs: list[dict[str, Any]]) -> dict[str, int]:
    for ev in reversed(evs):
        s = ev.get("summaryEvent")
        if s:
            return dict(s.get("resourceChanges") or {})
    return {}


def main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("program")
    ap.add_argument("stack_file")
    ap.add_argument("kubeconfig")
    ap.add_argument("--build", required=True)
    ap.add_argument("--pack", default=str(ROOT / ".venv" / "bin" / "multinode-policy-pack"),
                    help="the policy pack executable (default: the package's, as `multinode policy-path` prints)")
    ap.add_argument("--provider", default=str(ROOT / ".venv" / "bin" / "pulumi-resource-multinode"))
    a = ap.parse_args(argv)
    from kubernetes import client, config

    program, stack_file = Path(a.program).resolve(), Path(a.stack_file).resolve()
    kubeconfig, build = Path(a.kubeconfig).resolve(), Path(a.build).resolve()
    name = stack_file.name.removeprefix("Pulumi.").removesuffix(".yaml")
    out = build / name / "engines" / "pulumi-yaml"
    if out.exists():
        shutil.rmtree(out)
    tools = out / "tools"
    tools.mkdir(parents=True)
    (tools / "pulumi-resource-multinode").symlink_to(Path(a.provider))
    cli = Cli(out, tools)
    shutil.copy(program, cli.project / "Pulumi.yaml")
    api = config.new_client_from_config(config_file=str(kubeconfig))
    conf = yaml.safe_load(stack_file.read_text())["config"]
    lines: list[str] = []
    fails = 0

    def step(ok: bool, text: str) -> None:
        nonlocal fails
        fails += 0 if ok else 1
        lines.append(f"{'ok  ' if ok else 'FAIL'} {text}")
        print(lines[-1], flush=True)

    step(True, e2e.provide_storage(api, conf))
    stop = threading.Event()
    threading.Thread(target=e2e.finish_batch_pods, args=(api, stop), daemon=True).start()
    cli("stack", "init", name)
    cli("config", "set", "--secret", "kubeconfig", stdin=kubeconfig.read_text())
    cli("config", "set", "--secret", "hfToken", engine.HF_TOKEN_DUMMY)
    print(f"yaml-e2e: language host {ROOT / 'conformance/bin/pulumi-language-yaml'}, provider {a.provider}, "
          f"pack {a.pack}", flush=True)

    plan_dir = build / name
    policy = json.loads((plan_dir / "policy.json").read_text())
    ev = out / "preview-events.json"
    r = cli("preview", "--stack", name, "--policy-pack", a.pack, "--event-log", str(ev), "--color", "never")
    found = findings_of(events(ev))
    diff = engine.compare(found, policy)
    step(r.returncode == 0 and not diff,
         f"pulumi preview --policy-pack of the YAML program: exit {r.returncode}, {len(found)} finding(s) "
         f"({sum(f['enforcementLevel'] == 'mandatory' for f in found)} mandatory), {len(diff)} difference(s) from "
         f"plan's policy.json; summary {summary_of(events(ev))}" + "".join(f"\n     {d}" for d in diff[:20])
         + ("" if r.returncode == 0 else "\n" + (r.stdout + r.stderr)[-1500:]))

    ev = out / "up-events.json"
    r = cli("up", "--stack", name, "--yes", "--skip-preview", "--policy-pack", a.pack, "--event-log", str(ev),
            "--color", "never")
    step(r.returncode == 0, f"pulumi up of the YAML program: exit {r.returncode}, {summary_of(events(ev))}"
         + ("" if r.returncode == 0 else "\n" + (r.stdout + r.stderr)[-2000:]))

    r = cli("stack", "export", "--stack", name, "--show-secrets", "--file", str(out / "state.json"))
    state = json.loads((out / "state.json").read_text())["deployment"].get("resources") or [] \
        if r.returncode == 0 else []
    records = json.loads((plan_dir / "resources.json").read_text())
    diffs, explained = compare_registrations(state, records, {kubeconfig.read_text(), engine.HF_TOKEN_DUMMY})
    (out / "registrations.txt").write_text("".join(f"DIFF {d}\n" for d in diffs)
                                           + "".join(f"explained {e}\n" for e in explained))
    step(bool(state) and not diffs,
         f"registrations: {len(state)} in the YAML program's state, {len(records)} of the Python program (plan's "
         f"resources.json): {len(diffs)} difference(s), {len(explained)} explained (registrations.txt)"
         + "".join(f"\n     {d}" for d in diffs[:30]))

    k8s_dir = plan_dir / "k8s"
    odiffs = e2e.compare_objects(api, k8s_dir)
    step(not odiffs, f"objects of {k8s_dir.relative_to(ROOT) if k8s_dir.is_relative_to(ROOT) else k8s_dir} on "
                     f"the box: {len(odiffs)} difference(s)" + "".join(f"\n     {d}" for d in odiffs[:30]))

    ev = out / "up2-events.json"
    r = cli("up", "--stack", name, "--yes", "--skip-preview", "--policy-pack", a.pack, "--event-log", str(ev),
            "--color", "never")
    s = summary_of(events(ev))
    step(r.returncode == 0 and set(s) == {"same"}, f"second pulumi up changes nothing: exit {r.returncode}, {s}")

    r = cli("destroy", "--stack", name, "--yes", "--color", "never")
    core = client.CoreV1Api(api)
    ns = (conf.get(PREFIX + "storage") or {}).get("namespace", "multinode")
    claims = [c.metadata.name for c in core.list_namespaced_persistent_volume_claim(ns).items
              if c.metadata and c.metadata.name]
    pvs = [p.metadata.name for p in core.list_persistent_volume().items if p.metadata and p.metadata.name]
    kept = e2e.still_there(api, k8s_dir)
    others = [k for k in kept if not k.startswith(("PersistentVolumeClaim ", "Namespace "))]
    step("checkpoints" in claims and bool(pvs) and not others,
         f"pulumi destroy (exit {r.returncode}: the engine refuses to delete the protected claim) removes the rest "
         f"and keeps the claim and its volume: still there {kept}; volumes {pvs}")
    stop.set()
    (out / "e2e.txt").write_text("\n".join(lines) + "\n")
    print(f"yaml e2e of {name}: {len(lines) - fails} ok, {fails} failed")
    return 1 if fails else 0


if __name__ == "__main__":
    if sys.argv[1:2] == ["derive"]:
        derive(Path(sys.argv[2]).resolve(), Path(sys.argv[3]).resolve())
        sys.exit(0)
    sys.exit(main(sys.argv[1:]))
