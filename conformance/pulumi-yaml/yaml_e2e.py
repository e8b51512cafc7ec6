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
import signal
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


# How a secret value is written in an exported deployment (pulumi/pulumi sdk/v3@v3.274.0 go/common/resource/
# sig/sig.go Secret "1b47061264138c4ac30d75fd1eb44270" under the key "4dabf18193072939515e22adb298388d"; with
# --show-secrets the value is the JSON text under "plaintext": pkg/v3@v3.274.0 resource/stack/deployment.go
# SerializePropertyValue), unwrapped before comparing
SIG_KEY, SECRET_SIG = "4dabf18193072939515e22adb298388d", "1b47061264138c4ac30d75fd1eb44270"


def reveal(value: Any) -> Any:
    """A state value with its secret wrappers removed (the plaintext of --show-secrets, itself a wrapped secret when
    the value was made secret twice), else the value."""
    while isinstance(value, dict) and value.get(SIG_KEY) == SECRET_SIG:
        value = json.loads(value["plaintext"]) if "plaintext" in value else value.get("value")
    return value


def _subset(want: Any, have: Any, path: str, secrets: set[str]) -> list[str]:
    """Where `have` lacks or differs from a value of `want` (what the Python program gives must be registered).
    A secret the Python program gave (recorded as RECORDED_SECRET) must hold one of the secrets the run set."""
    have = reveal(have)
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
        if isinstance(have, str) and have in secrets:
            return []
        sizes = f"{len(have)} characters; the values set: {sorted(len(v) for v in secrets)}" \
            if isinstance(have, str) else type(have).__name__
        return [f"{path}: a secret the Python program gives; the YAML program's state holds "
                f"{'another value' if have is not None else 'nothing'} (not shown: {sizes})"]
    if _same_quantity(want, have):
        return [f"{SAME_QUANTITY}: {path} {want!r} kept by the kubernetes provider as {have!r}"]
    return [f"{path}: the Python program gives {want!r}, the YAML program's state holds {have!r}"[:300]]


def _extra_keys(want: Any, have: Any, path: str) -> list[str]:
    """Input paths the state holds that the Python program did not give (objects only)."""
    have = reveal(have)
    if isinstance(want, dict) and isinstance(have, dict):
        out = [f"{path}.{k}" for k in have if k not in want]
        return out + [p for k in want if k in have for p in _extra_keys(want[k], have[k], f"{path}.{k}")]
    if isinstance(want, list) and isinstance(have, list) and len(want) == len(have):
        return [p for i, (w, h) in enumerate(zip(want, have, strict=True)) for p in _extra_keys(w, h, f"{path}[{i}]")]
    return []


# What the engine's state holds of a resource's options (pulumi/pulumi sdk/v3@v3.274.0 go/common/apitype/core.go
# ResourceV3: protect, retainOnDelete; deleteBeforeReplace is in neither ResourceV3 nor the step events' state
# metadata, events.go StepEventStateMetadata, so it cannot be compared from outside the engine)
STATE_FLAGS = ("protect", "retainOnDelete")
# The kubernetes provider's Check normalizes the inputs it keeps (pulumi-kubernetes provider/v4@v4.25.0
# pkg/provider/provider.go:2569 normalizeInputs -> pkg/clients/unstructured.go:68 Normalize): a typed round trip,
# so a quantity is kept in its canonical form ("1024Gi" -> "1Ti"), and a Secret's stringData becomes base64 `data`
# (unstructured.go:126 normalizeSecretStringData). The same value is compared, not the same spelling.
SAME_QUANTITY = "same quantity"


def secret_string_data(want: dict[str, Any], have: dict[str, Any]) -> tuple[dict[str, Any], bool]:
    """`have` with the stringData the Python program gives decoded back from the `data` the provider's Check moved
    it to (a Secret), and whether it was."""
    import base64
    if want.get("kind") != "Secret" or "stringData" not in want or "stringData" in have:
        return have, False
    data = reveal(have.get("data"))
    if not isinstance(data, dict):
        return have, False
    decoded: dict[str, Any] = {}
    for key in (want.get("stringData") or {}):
        raw = reveal(data.get(key))
        if isinstance(raw, str):
            try:
                decoded[key] = base64.b64decode(raw, validate=True).decode()
            except ValueError:
                decoded[key] = raw
    return {**have, "stringData": decoded}, True


def _same_quantity(want: Any, have: Any) -> bool:
    if not (isinstance(want, str) and isinstance(have, str)):
        return False
    from multinode.placement import quantity
    a, b = quantity(want), quantity(have)
    return a is not None and a == b


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
        for flag in STATE_FLAGS:
            if bool(w.get(flag)) != bool(h.get(flag)):
                diffs.append(f"{urn}: {flag} {bool(w.get(flag))} (Python) vs {bool(h.get(flag))} (YAML)")
        if w.get("deleteBeforeReplace"):
            explained.append(f"{urn}: deleteBeforeReplace (the Python program sets it) not compared: the engine "
                             f"keeps it in neither the state nor the events")
        if not w.get("custom", True) or not h.get("custom", False):
            continue        # a component's inputs are its args: the YAML side passes them over gRPC, compared below
        wi = w.get("inputs") or {}
        hi, moved = secret_string_data(wi, h.get("inputs") or {})
        if moved:
            explained.append(f"{urn}: inputs.stringData compared with the base64 `data` the kubernetes provider's "
                             f"Check moved it to")
        found = _subset(wi, hi, "inputs", secrets)
        diffs += [f"{urn}: {d}" for d in found if not d.startswith(SAME_QUANTITY)]
        explained += [f"{urn}: {d}" for d in found if d.startswith(SAME_QUANTITY)]
        for extra in _extra_keys(wi, hi, "inputs"):
            if not (moved and extra == "inputs.data"):
                explained.append(f"{urn}: {extra} set by the provider's Check (the Python program gives none)")
    return diffs, explained


# ------------------------------------------------------------------------------------------ the engine
class Cli:
    """The Pulumi CLI run in the YAML project's folder, offline, with the tools on PATH. Each command's output goes to
    <work>/logs/<n>-<command>.log; with YAML_E2E_VERBOSE=1 the engine's own log too (`--logtostderr -v=9
    --logflow`: the plugins it starts and every RPC, the way to see where a run waits)."""

    def __init__(self, work: Path, tools: Path) -> None:
        self.project = work / "project"
        self.logs = work / "logs"
        home, state = work / "home", work / "state"
        for d in (self.project, home, state, self.logs):
            d.mkdir(parents=True, exist_ok=True)
        env = engine.engine_env(home, state)
        # the CLI and the kubernetes provider (conformance/pulumi/bin), the YAML language host (conformance/bin),
        # and `pulumi-resource-multinode` alone from the package's venv (tools/): nothing else of the venv on PATH
        env["PATH"] = os.pathsep.join([str(engine.BIN), str(ROOT / "conformance" / "bin"), str(tools),
                                       "/usr/bin", "/bin"])
        env.pop("MULTINODE_VENV_PYTHON", None)
        # `--event-log` (preview, up, destroy) is registered only when PULUMI_DEBUG_COMMANDS is true (pulumi/pulumi
        # pkg/v3@v3.274.0 cmd/pulumi/operations/preview.go:869 `if env.DebugCommands.Value()`, up.go:1023 alike;
        # sdk/v3@v3.274.0 go/common/env/env.go:55 DebugCommands); the Automation API sets it for the same reason
        env["PULUMI_DEBUG_COMMANDS"] = "true"
        self.env = env
        self.verbose = os.environ.get("YAML_E2E_VERBOSE") == "1"
        self.count = 0

    def __call__(self, *args: str, stdin: str | None = None, timeout: float = 1500) -> subprocess.CompletedProcess[str]:
        self.count += 1
        log = self.logs / f"{self.count:02d}-{args[0]}.log"
        cmd = [str(engine.BIN / "pulumi"), *args, "--non-interactive"]
        if self.verbose:
            cmd += ["--logtostderr", "--logflow", "-v=9"]
        # a session of its own: on a timeout the CLI and every plugin it started (language host, providers, pack)
        # are killed together, none left running
        with log.open("w") as out:
            proc = subprocess.Popen(cmd, cwd=self.project, env=self.env, stdin=subprocess.PIPE, stdout=out,
                                    stderr=subprocess.STDOUT, text=True, start_new_session=True)
            try:
                proc.communicate(stdin, timeout=timeout)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()
                out.write(f"\nyaml-e2e: killed after {timeout:.0f} s\n")
        text = log.read_text(errors="replace")
        r = subprocess.CompletedProcess(cmd, proc.returncode, text, "")
        print(f"$ pulumi {' '.join(args)}: exit {r.returncode} ({log.name})\n{text[-2500:]}", flush=True)
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
    # the value read from stdin loses one trailing newline (pulumi/pulumi pkg/v3@v3.274.0
    # cmd/pulumi/config/config.go:875 cmdutil.RemoveTrailingNewline unless --raw): the state holds that value
    kubeconfig_value = kubeconfig.read_text().removesuffix("\n")
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
    diffs, explained = compare_registrations(state, records, {kubeconfig_value, engine.HF_TOKEN_DUMMY})
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

    # --skip-preview, as the Automation API's destroy (conformance/pulumi/e2e.py): the preview before a destroy fails
    # on the protected claim and the CLI then deletes nothing at all
    r = cli("destroy", "--stack", name, "--yes", "--skip-preview", "--color", "never")
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
