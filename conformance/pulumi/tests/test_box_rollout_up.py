"""Issue 44 scenario 4 through `pulumi up` on the real engine (`make day-two-up`, conformance/pulumi/rollout_up.py,
clusterbox --up / --day-two-rollout-up): nim-lws brought up by the engine against a box running Kyverno, LWS and
Volcano, then a second `up` of the stack with the workload's image changed while the box samples the set's pods.
- rendered: the engine updates the LeaderWorkerSet in place, its diff the two images only, nothing else changes;
  LWS replaces the one group (maxSurge 0, maxUnavailable 1: groupPlacement), the rollout completes on the new image;
- a surge (a stack of 2 groups of 2 on 6 nodes: maxSurge 1, maxUnavailable 0): the surge group first, then groups
  1 and 0, never fewer than 2 groups ready;
- planted: `pulumi up --replace` of the LeaderWorkerSet (a change that makes the engine replace it): the engine
  creates the replacement first under the same name and the API server refuses it (a server-side apply conflict
  with the old object's field manager on the images), so the up fails, the set keeps its old image and the rollout
  never starts: the box fails, naming the engine's `create-replacement` step.
Needs `make pulumi-tools`, conformance/bin/clusterbox, lws, vc-scheduler, vc-controller-manager and
conformance/kyverno/bin/kyverno (`make day-two-up-tests` builds them); about 2-4 minutes a box. Not part of
`make pulumi-check` (CI plays it by rotation, .ci/rotation.tsv)."""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent.parent
ROOT = HERE.parent.parent
NEEDED = [HERE / "bin" / "pulumi", HERE / "bin" / "pulumi-resource-kubernetes", ROOT / "conformance" / "bin" / "lws",
          ROOT / "conformance" / "bin" / "vc-scheduler", ROOT / "conformance" / "bin" / "vc-controller-manager",
          ROOT / "conformance" / "kyverno" / "bin" / "kyverno"]
pytestmark = pytest.mark.skipif(
    not all(p.exists() for p in NEEDED),
    reason=f"not built: {[str(p) for p in NEEDED if not p.exists()]} (make day-two-up-tests)")


# 2 groups of 2 on 6 nodes, no groupPlacement: plan renders maxSurge 1, maxUnavailable 0 (2 spare nodes), the
# surge path nim-lws (maxSurge 0: groupPlacement) does not take
SURGE_STACK = """\
config:
  multinode:cloud: existing
  multinode:cluster: {name: lab-cluster}
  multinode:kubeconfig: {secure: v1:c2VjcmV0LWt1YmVjb25maWctcGxhY2Vob2xkZXI=}
  multinode:hfToken: {secure: v1:aGYtdG9rZW4tcGxhY2Vob2xkZXI=}
  multinode:fabric: {kind: none}
  multinode:nodePools:
    - name: gpu
      machine: p5.48xlarge
      nodeCount: 6
      nodeSelector: {node.kubernetes.io/instance-type: p5.48xlarge}
  multinode:storage: {kind: existing, existingStorageClass: efs-sc, sizeGib: 1024}
  multinode:workloads:
    - name: serve
      kind: lws-inference
      engine: vllm
      model: Qwen/Qwen2.5-72B-Instruct
      image: public.ecr.aws/deep-learning-containers/vllm:0.11.1-gpu-py312-ec2
      nodePool: gpu
      nodes: 2
      replicas: 2
      tensorParallel: 8
      pipelineParallel: 2
"""


def _box(out: Path, plant: bool = False, stack: str = "nim-lws", stack_file: Path | None = None
         ) -> tuple[int, str, dict]:
    r = subprocess.run(["make", "--no-print-directory", "-C", str(ROOT / "conformance" / "cluster"), "day-two-up",
                        f"S={stack}", f"ROOT={ROOT}", f"PY={sys.executable}", f"DAY_TWO_UP_OUT={out}",
                        *([f"DAY_TWO_UP_FILE={stack_file}"] if stack_file else []),
                        *(["PLANT=1"] if plant else [])], capture_output=True, text=True, timeout=1500)
    rep_file = out / stack / "day-two.json"
    return r.returncode, r.stdout + r.stderr, json.loads(rep_file.read_text()) if rep_file.exists() else {}


def test_an_image_change_through_pulumi_up_updates_the_set_in_place_and_rolls_it(tmp_path: Path) -> None:
    code, log, rep = _box(tmp_path, plant=False)
    assert code == 0, log[-4000:]
    assert rep["findings"] == [], rep["findings"]
    ro = rep["rollout"]
    assert ro["command"] and ro["commandExit"] == 0 and ro["completed"], ro
    assert ro["observedOrder"] == ro["predictedOrder"] == ["0"], ro
    assert ro["fewestReadyGroups"] >= ro["allowedFewestReadyGroups"] and ro["samples"] >= 10, ro
    assert ro["liveImages"] and all(i.endswith(":1.8.0-rollout") for i in ro["liveImages"]), ro
    steps = json.loads((tmp_path / "nim-lws" / "engines" / "pulumi" / "rollout" / "steps.json").read_text())
    assert [(s["op"], sorted(s["detailedDiff"])) for s in steps] == [("update", [
        "spec.leaderWorkerTemplate.leaderTemplate.spec.containers[0].image",
        "spec.leaderWorkerTemplate.workerTemplate.spec.containers[0].image"])], steps
    assert "rollout-up: ok   first pulumi up: {'create': 17}" in log
    assert "rollout-up of nim-lws: passed" in log


def test_a_replace_of_the_set_fails_the_rollout_naming_the_engine_step(tmp_path: Path) -> None:
    code, log, rep = _box(tmp_path, plant=True)
    assert code != 0 and "rollout-up of nim-lws: 3 finding(s)" in log, log[-4000:]
    f = rep["findings"]
    failed = [x for x in f if x.startswith("rollout: the command that sends the change of LeaderWorkerSet "
                                            "multinode/llama-405b-nim failed (exit 1)")]
    assert failed and "is 'create-replacement', not an update in place" in failed[0], f
    assert "Server-Side Apply field conflict" in failed[0], f
    ro = rep["rollout"]
    assert not ro["completed"] and not ro.get("observedOrder"), ro
    assert all(i.endswith(":1.8.0") for i in ro["liveImages"]), ro
    # the set kept its old image: the only other findings say so
    assert all(x in failed or "holds images other than the changed stack's" in x or "did not complete" in x
               for x in f), f


def test_a_surge_rollout_through_pulumi_up_adds_the_surge_group_first_and_keeps_every_group_ready(
        tmp_path: Path) -> None:
    f = tmp_path / "stack" / "Pulumi.lws-surge.yaml"
    f.parent.mkdir()
    f.write_text(SURGE_STACK)
    code, log, rep = _box(tmp_path, stack="lws-surge", stack_file=f)
    assert code == 0, log[-4000:]
    assert rep["findings"] == [], rep["findings"]
    ro = rep["rollout"]
    assert (ro["renderedMaxSurge"], ro["renderedMaxUnavailable"]) == (ro["predictedMaxSurge"],
                                                                      ro["predictedMaxUnavailable"]) == (1, 0), ro
    assert ro["command"] and ro["commandExit"] == 0 and ro["completed"], ro
    assert ro["predictedOrder"] == ro["observedOrder"] == ["surge 2", "1", "0"], ro
    assert ro["fewestReadyGroups"] == ro["allowedFewestReadyGroups"] == 2 and ro["samples"] >= 10, ro
    steps = json.loads((tmp_path / "lws-surge" / "engines" / "pulumi" / "rollout" / "steps.json").read_text())
    assert [(s["op"], len(s["detailedDiff"])) for s in steps] == [("update", 2)], steps
