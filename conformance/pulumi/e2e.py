"""`pulumi up` for real against the cluster in a box (issue 29): run with the box up, e.g. as the box's
--compare command (README.md). Steps, each one line of the verdict build/<stack>/engines/pulumi/e2e.txt:

  0. the fake kubelet's missing half: a Job's pod is marked Succeeded (finish_batch_pods);
  1. what the cluster provides: the StorageClass the stack names (storage.existingStorageClass) and a
     pre-provisioned ReadWriteMany PersistentVolume of that class (the box has no CSI driver);
  2. `pulumi up` with the pack;
  3. every object of build/<stack>/k8s is on the box with the fields we set (a subset compare);
  4. a second `pulumi up` changes nothing;
  5. a config change that replaces the checkpoint claim (its StorageClass) is refused by the engine (protect);
  6. `pulumi destroy` deletes everything else and leaves the claim and its volume (it exits non-zero: the
     engine refuses to delete a protected resource).

    .venv/bin/python conformance/pulumi/e2e.py <stack file> <kubeconfig>
"""
from __future__ import annotations

import json
import subprocess
import sys
import threading
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import yaml

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent.parent
ENGINE = HERE / "engine.py"


def engine(op: str, stack_file: Path, kubeconfig: Path, out: Path,
           extra: list[str] | None = None) -> tuple[int, str, dict[str, Any]]:
    r = subprocess.run([sys.executable, str(ENGINE), op, str(stack_file), "--kubeconfig", str(kubeconfig),
                        "--out", str(out), *(extra or [])], capture_output=True, text=True, cwd=ROOT, timeout=1800)
    print(r.stdout[-3000:] + r.stderr[-3000:], flush=True)
    report_file = out / f"{op}.json"
    report = json.loads(report_file.read_text()) if report_file.exists() else {}
    return r.returncode, r.stdout + r.stderr, report


def provide_storage(api: Any, conf: dict[str, Any]) -> str:
    from kubernetes import client

    storage = conf.get("multinode:storage") or {}
    sc = storage.get("existingStorageClass")
    if not sc:
        return "storage: the stack names no existing StorageClass; nothing provided"
    size = f"{storage.get('sizeGib', 1)}Gi"
    client.StorageV1Api(api).create_storage_class(client.V1StorageClass(
        metadata=client.V1ObjectMeta(name=sc), provisioner="kubernetes.io/no-provisioner",
        reclaim_policy="Retain", volume_binding_mode="Immediate"))
    client.CoreV1Api(api).create_persistent_volume(client.V1PersistentVolume(
        metadata=client.V1ObjectMeta(name=f"e2e-{sc}"),
        spec=client.V1PersistentVolumeSpec(
            capacity={"storage": size}, access_modes=["ReadWriteMany"], storage_class_name=sc,
            persistent_volume_reclaim_policy="Retain",
            nfs=client.V1NFSVolumeSource(server="127.0.0.1", path="/e2e"))))
    return f"storage: provided StorageClass {sc} (Retain) and PersistentVolume e2e-{sc} ({size}, RWX)"


def finish_batch_pods(api: Any, stop: threading.Event) -> None:
    """The box's kubelet is fake and runs no container, so a Job's pod never exits; the kubernetes provider
    waits for a Job to complete (pulumi-kubernetes provider/v4@v4.25.0 pkg/await/job.go jobInitAwaiter,
    10 min by default). This marks every Running pod of a Job Succeeded, as a kubelet does when the container
    exits 0; the Job controller of the box then completes the Job."""
    from kubernetes import client

    core = client.CoreV1Api(api)
    while not stop.wait(2):
        for pod in core.list_pod_for_all_namespaces(label_selector="job-name").items:
            if not (pod.status and pod.spec and pod.metadata and pod.metadata.name and pod.metadata.namespace):
                continue
            if pod.status.phase != "Running":
                continue
            now = datetime.now(UTC).isoformat()
            statuses = [{"name": c.name, "ready": False, "restartCount": 0, "image": c.image, "imageID": "",
                         "state": {"terminated": {"exitCode": 0, "reason": "Completed", "startedAt": now,
                                                  "finishedAt": now}}} for c in pod.spec.containers]
            core.patch_namespaced_pod_status(pod.metadata.name, pod.metadata.namespace, {"status": {
                "phase": "Succeeded", "containerStatuses": statuses,
                "conditions": [{"type": "Ready", "status": "False", "reason": "PodCompleted"}]}})


def subset_diff(want: Any, have: Any, path: str = "") -> list[str]:
    """Fields of `want` missing or different in `have` (what we set must be what the cluster holds)."""
    if isinstance(want, dict):
        if not isinstance(have, dict):
            return [f"{path or '.'}: expected an object"]
        out: list[str] = []
        for k, v in want.items():
            out += subset_diff(v, have.get(k), f"{path}.{k}")
        return out
    if isinstance(want, list):
        if not isinstance(have, list) or len(have) != len(want):
            return [f"{path}: expected {len(want)} items, found {len(have) if isinstance(have, list) else have!r}"]
        return [d for i, (w, h) in enumerate(zip(want, have, strict=True)) for d in subset_diff(w, h, f"{path}[{i}]")]
    if want == have or str(want) == str(have):
        return []
    if have is None and want in (False, 0, "", {}, []):
        return []       # the API server omits a zero value (Go omitempty): readOnly: false reads back absent
    if isinstance(want, str) and isinstance(have, str) and same_quantity(want, have):
        return []       # quantities come back canonical: 1024Gi reads back 1Ti
    return [f"{path}: expected {want!r}, found {have!r}"]


def same_quantity(a: str, b: str) -> bool:
    from kubernetes.utils import parse_quantity

    try:
        return bool(parse_quantity(a) == parse_quantity(b))
    except ValueError:
        return False


def compare_objects(api: Any, k8s_dir: Path) -> list[str]:
    from kubernetes import dynamic
    from kubernetes.dynamic.exceptions import NotFoundError

    dyn = dynamic.DynamicClient(api)
    out: list[str] = []
    for f in sorted(k8s_dir.glob("*.yaml")):
        obj = yaml.safe_load(f.read_text())
        md = obj.get("metadata", {})
        res = dyn.resources.get(api_version=obj["apiVersion"], kind=obj["kind"])
        try:
            live = res.get(name=md["name"], namespace=md.get("namespace")).to_dict()
        except NotFoundError:
            out.append(f"{f.name}: {obj['kind']} {md.get('namespace', '')}/{md['name']}: not on the cluster")
            continue
        want = {k: v for k, v in obj.items() if k not in ("status",)}
        if obj["kind"] == "Secret":
            want.pop("stringData", None)     # the API server stores stringData as data (base64)
        out += [f"{f.name}: {d}" for d in subset_diff(want, live)]
    return out


def still_there(api: Any, k8s_dir: Path) -> list[str]:
    """`Kind namespace/name` of every object of build/<stack>/k8s still on the cluster."""
    from kubernetes import dynamic
    from kubernetes.dynamic.exceptions import NotFoundError

    dyn = dynamic.DynamicClient(api)
    out = []
    for f in sorted(k8s_dir.glob("*.yaml")):
        obj = yaml.safe_load(f.read_text())
        md = obj.get("metadata", {})
        try:
            dyn.resources.get(api_version=obj["apiVersion"], kind=obj["kind"]).get(
                name=md["name"], namespace=md.get("namespace"))
        except NotFoundError:
            continue
        out.append(f"{obj['kind']} {md.get('namespace', '')}/{md['name']}")
    return out


# `make e2e STACK=existing-dev|dynamo-dev`: the example stack as it is, with every add-on it enables marked
# `provided` (the box provides it: its CRDs are applied by the box, its controller may be missing; docs/
# addons-fabric.md) and the fabric on (the box runs Kyverno). E2E HARNESS SETTING, NOT THE PRODUCT: the box
# cannot give what the kubernetes provider waits for on these types, so they get pulumi.com/skipAwait from the
# harness (engine.py SKIP_AWAIT):
#  - kubernetes:batch/v1:Job: the provider waits for the Job to complete (provider/v4@v4.25.0 pkg/await/job.go);
#    the stacks' multi-node Jobs name schedulerName volcano (or kai-scheduler) and no such scheduler runs in the
#    box, so their pods stay Pending for ever;
#  - kubernetes:core/v1:Service: the provider waits for endpoints of a Service with a selector
#    (pkg/await/service.go); the selected pods come from the LWS/Grove/Job controllers above, absent or blocked.
# Custom resources are not awaited by this provider (no generic await unless PULUMI_K8S_AWAIT_ALL), the Kyverno
# policies are (`pulumi.com/waitFor` on status.conditionStatus.ready, which the box's Kyverno sets).
FULL_STACK_SKIP_AWAIT = ("kubernetes:batch/v1:Job", "kubernetes:core/v1:Service")


def provided_variant(src: Path, dst: Path) -> list[str]:
    """Write the stack file `src` with every add-on it enables marked provided: true; return their keys."""
    from multinode import checks, stackfile
    from multinode.config import Addons

    raw, secrets, _ = stackfile.read_stack_file(src)
    cfg = checks.load(dict(raw), secrets)
    doc = yaml.safe_load(src.read_text())
    addons = dict(doc["config"].get("multinode:addons") or {})
    marked = []
    for field, info in Addons.model_fields.items():
        if getattr(cfg.addons, field).enabled:
            key = info.alias or field
            addons[key] = {**dict(addons.get(key) or {}), "provided": True}
            marked.append(key)
    doc["config"]["multinode:addons"] = addons
    dst.parent.mkdir(parents=True, exist_ok=True)
    dst.write_text(f"# {src.name} with every add-on it enables provided by the cluster (conformance/pulumi/e2e.py)\n"
                   + yaml.safe_dump(doc, sort_keys=False))
    return marked


def object_keys(k8s_dir: Path) -> dict[tuple[str, str, str, str], Path]:
    out = {}
    for f in sorted(k8s_dir.glob("*.yaml")):
        obj = yaml.safe_load(f.read_text())
        md = obj.get("metadata", {})
        out[(obj["apiVersion"], obj["kind"], md.get("namespace", ""), md["name"])] = f
    return out


def gone(api: Any, keys: list[tuple[str, str, str, str]]) -> list[str]:
    """`Kind namespace/name` of each object still on the cluster."""
    from kubernetes import dynamic
    from kubernetes.dynamic.exceptions import NotFoundError

    dyn = dynamic.DynamicClient(api)
    left = []
    for api_version, kind, ns, name in keys:
        try:
            dyn.resources.get(api_version=api_version, kind=kind).get(name=name, namespace=ns or None)
        except NotFoundError:
            continue
        left.append(f"{kind} {ns}/{name}")
    return left


def plan_file(stack_file: Path, out: Path) -> Path:
    r = subprocess.run([str(Path(sys.executable).parent / "multinode"), "plan", "--file", str(stack_file),
                        "--out", str(out)], capture_output=True, text=True, cwd=ROOT)
    if r.returncode not in (0, 1):
        raise RuntimeError(f"multinode plan --file {stack_file}: {r.stdout[-1500:]}{r.stderr[-1500:]}")
    return out / stack_file.name.removeprefix("Pulumi.").removesuffix(".yaml") / "k8s"


def main(argv: list[str]) -> int:
    import argparse

    from kubernetes import client, config

    ap = argparse.ArgumentParser()
    ap.add_argument("stack_file")
    ap.add_argument("kubeconfig")
    ap.add_argument("--build", default=str(ROOT / "build"), help="where `multinode plan` wrote <stack>/k8s")
    ap.add_argument("--full", action="store_true",
                    help="an example stack as it is (add-ons provided, fabric on): preview with the pack compared "
                         "with plan, the FULL_STACK_SKIP_AWAIT harness setting, a workload rename")
    a = ap.parse_args(argv)
    stack_file, kubeconfig = Path(a.stack_file).resolve(), Path(a.kubeconfig).resolve()
    build = Path(a.build).resolve()
    name = stack_file.name.removeprefix("Pulumi.").removesuffix(".yaml")
    out = build / name / "engines" / "pulumi"
    out.mkdir(parents=True, exist_ok=True)
    k8s_dir = build / name / "k8s"
    extra = [f"--skip-await={t}" for t in FULL_STACK_SKIP_AWAIT] if a.full else []
    api = config.new_client_from_config(config_file=str(kubeconfig))
    conf = yaml.safe_load(stack_file.read_text())["config"]
    lines: list[str] = []
    fails = 0

    def step(ok: bool, text: str) -> None:
        nonlocal fails
        fails += 0 if ok else 1
        lines.append(f"{'ok  ' if ok else 'FAIL'} {text}")
        print(lines[-1], flush=True)

    def run(op: str, file: Path) -> tuple[int, str, dict[str, Any]]:
        return engine(op, file, kubeconfig, out, extra)

    step(True, provide_storage(api, conf))
    stop = threading.Event()
    threading.Thread(target=finish_batch_pods, args=(api, stop), daemon=True).start()
    if a.full:
        step(True, f"e2e harness setting (not the product): pulumi.com/skipAwait on {', '.join(FULL_STACK_SKIP_AWAIT)}")
        # the pull-request check's preview, against the box (the stack as it is would need the charts)
        rc, log, rep = engine("preview", stack_file, kubeconfig, out / "preview", extra)
        diff = (out / "preview" / "policy-diff.txt")
        diff_lines = diff.read_text().splitlines() if diff.exists() else ["no policy-diff.txt"]
        findings = rep.get("findings") or []
        step(rc == 0 and not diff_lines,
             f"pulumi preview --policy-pack: {len(findings)} finding(s) "
             f"({sum(f['enforcementLevel'] == 'mandatory' for f in findings)} mandatory), "
             f"{len(diff_lines)} difference(s) from plan's policy.json" +
             "".join(f"\n     {d}" for d in diff_lines[:20]) + ("" if rc == 0 else f"\n{log[-1500:]}"))
    rc, log, rep = run("up", stack_file)
    step(rc == 0, f"pulumi up: {rep.get('summary') or log[-1500:]}")
    diffs = compare_objects(api, k8s_dir)
    step(not diffs, f"objects of {k8s_dir.relative_to(ROOT)} on the box: {len(diffs)} difference(s)" +
         "".join(f"\n     {d}" for d in diffs[:40]))
    rc, log, rep = run("up", stack_file)
    changed = {k: v for k, v in (rep.get("summary") or {}).items() if k != "same"}
    step(rc == 0 and not changed, f"second pulumi up changes nothing: {rep.get('summary') or log[-1500:]}")
    # storageClassName of a claim is immutable: changing it makes the provider replace the claim (same URN),
    # and the engine refuses to replace a protected resource before it changes anything.
    doc = yaml.safe_load(stack_file.read_text())
    doc["config"]["multinode:storage"]["existingStorageClass"] = "other-sc"
    changed_file = out / "storage-change" / f"Pulumi.{name}.yaml"          # same stack name, another StorageClass
    changed_file.parent.mkdir(parents=True, exist_ok=True)
    changed_file.write_text(yaml.safe_dump(doc, sort_keys=False))
    rc, log, rep = run("up", changed_file)
    text = rep.get("error") or log
    # the engine's own refusal (pulumi/pulumi pkg/v3@v3.274.0 resource/deploy/step_generator.go:2058), not any
    # line naming "protect" (a planted run whose stack was called e2e-unprotected passed on that)
    refused = rc != 0 and "as it is currently marked for protection" in text
    claim_ns = (conf.get("multinode:storage") or {}).get("namespace", "multinode")
    core = client.CoreV1Api(api)
    claims = {c.metadata.name: c.spec.storage_class_name
              for c in core.list_namespaced_persistent_volume_claim(claim_ns).items if c.metadata and c.spec}
    step(refused and claims.get("checkpoints") == conf["multinode:storage"].get("existingStorageClass"),
         f"changing the claim's StorageClass (a replace of the protected claim) is refused: claims now {claims}; "
         f"{[ln.strip() for ln in text.splitlines() if 'marked for protection' in ln][:1] or text[-600:]}")
    final_file, final_k8s = stack_file, k8s_dir
    if a.full:
        # a workload renamed in the config: the engine creates the new objects and deletes the old ones
        doc = yaml.safe_load(stack_file.read_text())
        w = doc["config"]["multinode:workloads"][-1]
        old_name, w["name"] = w["name"], w["name"] + "-v2"
        renamed = out / "rename" / f"Pulumi.{name}.yaml"
        renamed.parent.mkdir(parents=True, exist_ok=True)
        renamed.write_text(yaml.safe_dump(doc, sort_keys=False))
        new_k8s = plan_file(renamed, out / "rename" / "plan")
        rc, log, rep = run("up", renamed)
        old_keys, new_keys = object_keys(k8s_dir), object_keys(new_k8s)
        left = gone(api, sorted(old_keys.keys() - new_keys.keys()))
        diffs = compare_objects(api, new_k8s)
        summary = rep.get("summary") or {}
        step(rc == 0 and not left and not diffs and bool(summary.get("create")) and bool(summary.get("delete")),
             f"workload {old_name} renamed {w['name']}: up {summary or log[-1500:]}; "
             f"{len(old_keys.keys() - new_keys.keys())} old object(s), still there {left}; "
             f"{len(new_keys.keys() - old_keys.keys())} new object(s); {len(diffs)} difference(s) from the "
             f"renamed plan" + "".join(f"\n     {d}" for d in diffs[:20]))
        final_file, final_k8s = renamed, new_k8s
    rc, log, rep = run("destroy", final_file)
    left = [c.metadata.name for c in core.list_namespaced_persistent_volume_claim(claim_ns).items
            if c.metadata and c.metadata.name]
    pvs = [p.metadata.name for p in core.list_persistent_volume().items if p.metadata and p.metadata.name]
    kept = still_there(api, final_k8s)
    others = [k for k in kept if not k.startswith(("PersistentVolumeClaim ", "Namespace "))]
    step("checkpoints" in left and bool(pvs) and not others,
         f"pulumi destroy (rc {rc}: the engine refuses to delete the protected claim) removes the rest and leaves "
         f"the claim and its volume: still there {kept}; volumes {pvs}")
    stop.set()
    (out / "e2e.txt").write_text("\n".join(lines) + "\n")
    print(f"e2e of {name}: {len(lines) - fails} ok, {fails} failed")
    return 1 if fails else 0


if __name__ == "__main__":
    if sys.argv[1:2] == ["derive"]:
        print("provided:", ", ".join(provided_variant(Path(sys.argv[2]), Path(sys.argv[3]))))
        sys.exit(0)
    sys.exit(main(sys.argv[1:]))
