"""`multinode release` on the real Pulumi engine against the cluster in a box (issue 29): run as the box's
--compare command by `e2e.sh --release <stack>` (make release-e2e). Verdict: <build>/<stack>/engines/release/.

What is the product's and what is this harness's:
- the product's: multinode.release.pipeline.run_release (every stage: select, refresh, preview with the pack,
  up replacing the NCCL check, outputs -> kubeconfig, connect, the bandwidth gate, the stack tag, the report),
  multinode.release.adapters.AutomationStack (the Automation API calls) and KubernetesCluster (reads the verdict
  ConfigMap and the master pod's log), bandwidth.VerdictWaiter, bandwidth.checks_for_stack, the program.
- the harness's, as engine.py does for `make e2e`, because the Python language host is not built (README.md):
  the stack is opened with an INLINE program (engine.open_stack: the repo's __main__.py run in this process)
  instead of adapters.open_stack_factory's work_dir program, and the pack is the analyzer plugin
  plugins/multinode-policy-pack instead of the `policy` folder (which needs the language host to start);
  the e2e skipAwait setting of e2e.py FULL_STACK_SKIP_AWAIT.
- FAKE, clearly: the box has no GPUs and runs no Volcano, so the check's Volcano Job makes no pod. Once the Job
  is on the box (it was applied by the release's `up`), this harness writes into its verdict ConfigMap what
  the check's master pod would write, with a FAKE bus bandwidth (FAKE_BUSBW_GBPS) and the threshold the
  rendered check carries; the verdict says so in its `detail`. The gate then reads it through the product's
  KubernetesCluster from the real API server. A second run with a fake bandwidth below the threshold must stop
  the release with exit 5 (the gate can fail).

    .venv/bin/python conformance/pulumi/release_e2e.py <stack file> <kubeconfig> --build DIR
"""
from __future__ import annotations

import argparse
import json
import sys
import threading
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

import e2e  # noqa: E402
import engine  # noqa: E402

FAKE_BUSBW_GBPS = 321.0      # FAKE: not measured (no GPUs in the box)
FAKE_NOTE = "FAKE verdict written by conformance/pulumi/release_e2e.py: the box has no GPUs; not a measurement"


def threshold_of(api: Any, namespace: str, job: str) -> float:
    """THRESHOLD= of the check's script as rendered on the box (the Volcano Job's master task)."""
    from kubernetes import dynamic

    obj = dynamic.DynamicClient(api).resources.get(api_version="batch.volcano.sh/v1alpha1", kind="Job").get(
        name=job, namespace=namespace).to_dict()
    text = json.dumps(obj)
    marker = "THRESHOLD="
    i = text.index(marker) + len(marker)
    j = i
    while j < len(text) and (text[j].isdigit() or text[j] == "."):
        j += 1
    return float(text[i:j])


def fake_nccl_check(api: Any, specs: list[Any], busbw: float, stop: threading.Event, log: list[str]) -> None:
    """Stand-in for the check's master pod (FAKE, see the module docstring)."""
    from kubernetes import client
    from kubernetes.client.exceptions import ApiException

    core = client.CoreV1Api(api)
    pending = {s.name: s for s in specs}
    while pending and not stop.wait(2):
        for name, s in list(pending.items()):
            try:
                threshold = threshold_of(api, s.namespace, s.name)
                cm = core.read_namespaced_config_map(s.configmap, s.namespace)
            except (ApiException, ValueError):
                continue            # the release's up has not applied the check yet
            if (cm.data or {}).get("status") != "pending":
                continue
            ok = busbw >= threshold
            verdict = {"version": 1, "pass": ok, "status": "pass" if ok else "fail", "busbw_GBps": busbw,
                       "threshold_GBps": threshold, "message_bytes": 0, "exit_code": 0 if ok else 1,
                       "reason": "FAKE", "detail": {"note": FAKE_NOTE}}
            core.patch_namespaced_config_map(s.configmap, s.namespace, {"data": {
                "status": verdict["status"], "verdict.json": json.dumps(verdict)}})
            log.append(f"fake NCCL check {s.namespace}/{s.name}: Job on the box, verdict ConfigMap {s.configmap} "
                       f"patched with FAKE busbw {busbw:g} GB/s (threshold {threshold:g} from the rendered Job)")
            del pending[name]


def release(stack_file: Path, kubeconfig: Path, out: Path, busbw: float, promote_from: str | None = None,
            dry_run: bool = False) -> tuple[int, dict[str, Any], list[str]]:
    from kubernetes import config

    from multinode.release import adapters, bandwidth
    from multinode.release import pipeline as p

    name = engine.stack_name(stack_file)
    engine.SKIP_AWAIT.update(e2e.FULL_STACK_SKIP_AWAIT)
    kubeconfig_text = kubeconfig.read_text()

    def open_stack(stack: str, create: bool) -> adapters.AutomationStack:
        if stack != name:
            raise p.StackMissing(f"stack {stack} not found (this harness holds {name} only)")
        return adapters.AutomationStack(engine.open_stack(name, stack_file, kubeconfig_text, out), print)

    checks = bandwidth.checks_for_stack(name)      # stacks/Pulumi.<name>.yaml: the same workloads
    api = config.new_client_from_config(config_file=str(kubeconfig))
    notes: list[str] = []
    stop = threading.Event()
    t = threading.Thread(target=fake_nccl_check, args=(api, checks, busbw, stop, notes), daemon=True)
    t.start()
    opts = p.ReleaseOptions(stack=name, promote_from=promote_from, dry_run=dry_run, timeout=300,
                            policy_packs=[str(engine.POLICY_PACK)], revision=None)
    waiter = bandwidth.VerdictWaiter(parse=bandwidth.default_parse_verdict(), interval=3, progress=print)
    report = p.run_release(opts, open_stack=open_stack, connect_cluster=adapters.KubernetesCluster,
                           bandwidth_check=waiter, checks=checks, log=print)
    stop.set()
    doc = report.to_json()
    return report.exit_code, doc, notes


def main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("stack_file")
    ap.add_argument("kubeconfig")
    ap.add_argument("--build", required=True)
    a = ap.parse_args(argv)
    stack_file, kubeconfig = Path(a.stack_file).resolve(), Path(a.kubeconfig).resolve()
    name = engine.stack_name(stack_file)
    out = Path(a.build).resolve() / name / "engines" / "release"
    out.mkdir(parents=True, exist_ok=True)
    import os
    os.chdir(engine.ROOT)
    from kubernetes import config
    api = config.new_client_from_config(config_file=str(kubeconfig))
    lines: list[str] = []
    fails = 0

    def step(ok: bool, text: str) -> None:
        nonlocal fails
        fails += 0 if ok else 1
        lines.append(f"{'ok  ' if ok else 'FAIL'} {text}")
        print(lines[-1], flush=True)

    step(True, e2e.provide_storage(api, {k: v for k, v in
                                         __import__("yaml").safe_load(stack_file.read_text())["config"].items()}))
    stop = threading.Event()
    threading.Thread(target=e2e.finish_batch_pods, args=(api, stop), daemon=True).start()
    t0 = time.monotonic()
    code, doc, notes = release(stack_file, kubeconfig, out, FAKE_BUSBW_GBPS)
    (out / "release.json").write_text(json.dumps(doc, indent=1, default=str) + "\n")
    stages = [f"{s['name']}:{s['status']}" for s in doc.get("steps", [])]
    step(code == 0 and doc.get("pass") is True,
         f"multinode release (run_release, inline program) exit {code} ({doc.get('outcome')}) in "
         f"{time.monotonic() - t0:.0f} s; stages {stages}; {doc.get('message')}; " + "; ".join(notes))
    checks = doc.get("checks") or doc.get("bandwidth") or []
    step(bool(notes) and "FAKE" in json.dumps(doc),
         f"the gate read the verdict from the box (FAKE bandwidth, labelled): {json.dumps(checks)[:600]}")
    # the gate can fail: the same release with a FAKE bandwidth below the threshold stops with exit 5
    code2, doc2, notes2 = release(stack_file, kubeconfig, out, 1.0)
    (out / "release-low.json").write_text(json.dumps(doc2, indent=1, default=str) + "\n")
    step(code2 == 5, f"second release with FAKE busbw 1 GB/s: exit {code2} ({doc2.get('outcome')}): "
                     f"{doc2.get('message')}; " + "; ".join(notes2))
    stop.set()
    (out / "release.txt").write_text("\n".join(lines) + "\n")
    print(f"release e2e of {name}: {len(lines) - fails} ok, {fails} failed")
    return 1 if fails else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
