"""Day two in the box (issue 44; needs conformance/bin/clusterbox, vc-scheduler and vc-controller-manager, and for the
LWS stack conformance/bin/lws; skips with the reason otherwise). Two stacks as plan renders them, four boxes:
- VOLCANO: a 2-node Volcano training job on a pool of 2 nodes (no spare node). Rendered, it plays every scenario of
  daytwo.go without a finding: a node failure (whole-Pending while the node is gone, never half-bound; whole again
  once it is repaired), a node that keeps its Lease and reports Ready=False (--day-two-not-ready: tainted not-ready,
  its pod gone after the API server's default toleration, the gang whole once the node is Ready), a cordoned bad node
  (its running pod kept, the release health gate refusing with 1 cordoned node of 0 spare, the failed pod's
  replacement kept off the cordoned node), a surge upgrade (2 surge nodes, every old node drained through the Eviction
  API). No LeaderWorkerSet: the rollout is listed as not checked.
- LWS: a LeaderWorkerSet of 2 groups of 2 and the same Volcano job on a pool of 8 (2 spare: plan renders maxSurge 1,
  maxUnavailable 0). Rendered, it plays the four scenarios without a finding: the failed node's gang back whole at
  once on a spare node, the gate passing with 2 cordoned nodes and refusing with 3, the rollout surge group first,
  then groups 1 and 0, never fewer than 2 groups ready.
Each planted defect fails the box for its own reason, and only for it; two boxes carry several:
- VOLCANO with three: a budget that allows no disruption (`minAvailable` = every pod: the drain refused until the
  box's drain timeout although 2 surge nodes wait); a gang tolerating the unreachable and the not-ready taints without
  `tolerationSeconds` (its pod stays on the dead node, and on the node that reports Ready=False); a gang tolerating
  the unschedulable taint (its replacement lands on the cordoned bad node);
- LWS on a pool of 6 (no spare) with two: a Volcano job without its restart policies (the master's eviction does
  not restart the job whole) and an LWS rollout with maxSurge 1 where plan renders 0 (the surge group never finds
  nodes: the rollout stalls)."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from boxnet import netns_flags

HERE = Path(__file__).resolve().parent.parent
ROOT = HERE.parent.parent
BIN_DIR = ROOT / "conformance" / "bin"
BOX = BIN_DIR / "clusterbox"
VOLCANO = [BIN_DIR / n for n in ("vc-scheduler", "vc-controller-manager")]
pytestmark = pytest.mark.skipif(not BOX.exists() or not all(p.exists() for p in VOLCANO),
                                reason=f"not built: {BOX} (make -C conformance/cluster build) or {VOLCANO} "
                                       "(make -C conformance/volcano build)")
STACK = """\
config:
  multinode:cloud: aws
  multinode:cluster: {name: box, region: us-east-1}
  multinode:nodePools:
    - name: gpu
      machine: p5.48xlarge
      nodeCount: 2
      zone: us-east-1a
      subnetId: subnet-0a1b2c3d4e5f60718
  multinode:storage: {kind: fsx-lustre, sizeGib: 2400, throughput: 250}
  multinode:addons: {lws: {enabled: false}}
  multinode:workloads:
    - name: train
      kind: volcano-training
      engine: torchrun
      image: public.ecr.aws/deep-learning-containers/pytorch-training:2.8.0-gpu-py312-cu129-ubuntu22.04-ec2
      nodePool: gpu
      nodes: 2
      script: /workspace/train.py
"""


LWS_STACK = """\
config:
  multinode:cloud: aws
  multinode:cluster: {name: box, region: us-east-1}
  multinode:nodePools:
    - name: gpu
      machine: p5.48xlarge
      nodeCount: NODES
      zone: us-east-1a
      subnetId: subnet-0a1b2c3d4e5f60718
  multinode:storage: {kind: fsx-lustre, sizeGib: 2400, throughput: 250}
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
    - name: train
      kind: volcano-training
      engine: torchrun
      image: public.ecr.aws/deep-learning-containers/pytorch-training:2.8.0-gpu-py312-cu129-ubuntu22.04-ec2
      nodePool: gpu
      nodes: 2
      script: /workspace/train.py
"""
LWS_BIN = BIN_DIR / "lws"
UNREACHABLE = {"key": "node.kubernetes.io/unreachable", "operator": "Exists", "effect": "NoExecute"}
NOT_READY = {"key": "node.kubernetes.io/not-ready", "operator": "Exists", "effect": "NoExecute"}
UNSCHEDULABLE = {"key": "node.kubernetes.io/unschedulable", "operator": "Exists", "effect": "NoSchedule"}


def _module(folder: str, module: str) -> str:
    return subprocess.run(["go", "list", "-m", "-f", "{{.Dir}}", module], capture_output=True,
                          text=True, check=True, cwd=ROOT / "conformance" / folder).stdout.strip()


def _edit(path: Path, change) -> None:  # type: ignore[no-untyped-def]
    doc = yaml.safe_load(path.read_text())
    change(doc)
    path.write_text(yaml.safe_dump(doc))


def _tolerate(*tolerations: dict) -> object:
    def change(d: dict) -> None:
        for t in d["spec"]["tasks"]:
            t["template"]["spec"].setdefault("tolerations", []).extend(tolerations)
    return change


def _strip_policies(d: dict) -> None:
    d["spec"].pop("policies", None)
    for t in d["spec"]["tasks"]:
        t.pop("policies", None)


def _surge_one(d: dict) -> None:
    d["spec"]["rolloutStrategy"]["rollingUpdateConfiguration"].update(maxSurge=1, maxUnavailable=0)


def _box(tmp_path: Path, name: str, stack: str, plants: tuple[str, ...] = (),
         not_ready: bool = False) -> tuple[int, dict, dict]:
    f = tmp_path / f"Pulumi.{name}.yaml"
    f.write_text(stack)
    py = sys.executable
    subprocess.run([str(Path(py).parent / "multinode"), "plan", "--file", str(f), "--out", str(tmp_path)],
                   capture_output=True, text=True, cwd=ROOT)
    out = tmp_path / name
    assert (out / "upgrades.json").exists(), f"plan wrote no {out}/upgrades.json"
    job = next((out / "k8s").glob("Job-*-train.yaml"))
    budget = next((out / "k8s").glob("PodDisruptionBudget-*-train-gang.yaml"))
    assert yaml.safe_load(budget.read_text())["spec"]["minAvailable"] == 1     # what plan renders for 2 pods
    for plant in plants:
        if plant == "zero-budget":
            _edit(budget, lambda d: d["spec"].update(minAvailable=2))
        elif plant == "forever-toleration":
            _edit(job, _tolerate(UNREACHABLE, NOT_READY))
        elif plant == "cordon-toleration":
            _edit(job, _tolerate(UNSCHEDULABLE))
        elif plant == "no-policies":
            _edit(job, _strip_policies)
        elif plant == "lws-surge":
            lws = next((out / "k8s").glob("LeaderWorkerSet-*.yaml"))
            assert yaml.safe_load(lws.read_text())["spec"]["rolloutStrategy"]["rollingUpdateConfiguration"] == \
                {"maxSurge": 0, "maxUnavailable": 1}         # plan's, with no spare node
            _edit(lws, _surge_one)
        else:
            raise AssertionError(plant)
    lws_args = (["--lws-crds", _module("lws", "sigs.k8s.io/lws") + "/config/crd/bases"]
                if "lws-inference" in stack else [])
    subprocess.run([py, str(HERE / "prepare.py"), str(out), str(f),
                    "--volcano", _module("volcano", "volcano.sh/volcano"), *lws_args], check=True, cwd=ROOT)
    r = subprocess.run([str(BOX), *netns_flags(), "--stack-dir", str(out), "--timeout", "10m", "--settle", "60s",
                        "--volcano", str(BIN_DIR), "--day-two", *(["--lws", str(LWS_BIN)] if lws_args else []),
                        *(["--day-two-not-ready"] if not_ready else []),
                        "--health-gate", f"{py} {HERE / 'health_gate.py'} {f}",
                        "--compare", f"{py} {HERE / 'compare.py'} {out} --day-two"],
                       capture_output=True, text=True, cwd=ROOT, env={**os.environ, "PYTHONPATH": str(ROOT)})
    print(r.stdout[-5000:], r.stderr[-3000:])
    return r.returncode, json.loads((out / "cluster.json").read_text()), json.loads((out / "day-two.json").read_text())


def _only(findings: list[str], *prefixes: str) -> list[str]:
    """the findings that start with none of the prefixes (each planted defect's own)"""
    return [f for f in findings if not f.startswith(prefixes)]


def test_the_rendered_volcano_job_plays_day_two_without_a_finding(tmp_path: Path) -> None:
    code, result, rep = _box(tmp_path, "daytwo-volcano", STACK, not_ready=True)
    assert code == 0, result["findings"]
    fail = rep["nodeFailure"]
    assert fail["taint"] == "node.kubernetes.io/unreachable:NoExecute", fail
    assert all(p["markedForDeletion"] for p in fail["pods"]), fail["pods"]
    # 2 nodes, one lost: the gang cannot come back whole. Which pod the lost node held is the scheduler's choice:
    # the master -> RestartJob, the job whole-Pending; a worker -> RestartTask, the worker Pending beside the master
    # (the rendered fine-grained recovery, upgrades.json partialOn, noted, not a finding)
    (lost,) = {p["role"] for p in fail["pods"]}
    (after,) = fail["gangsAfterLoss"]
    if lost == "master":
        assert after["end"].startswith("whole-Pending"), after
    else:
        assert after["end"].startswith("half-bound (1 of 2") and "partialOn" in after["note"], after
    assert [g["end"] for g in fail["gangsAfterRepair"]] == ["whole"], fail["gangsAfterRepair"]
    # a node that keeps its Lease and reports Ready=False: tainted not-ready, its pod gone after the toleration the
    # API server's DefaultTolerationSeconds admission gave it (the box's 10 s), the gang whole once the node is Ready
    nr = rep["nodeNotReady"]
    assert nr["taint"] == "node.kubernetes.io/not-ready:NoExecute", nr
    assert nr["pods"] and all(p["markedForDeletion"] and p["toleration"] == "10s" and 9 <= p["secondsAfterTaint"] < 40
                              for p in nr["pods"]), nr["pods"]
    assert [g["end"] for g in nr["gangsAfterRepair"]] == ["whole"], nr["gangsAfterRepair"]
    cordon = rep["cordon"]
    assert cordon["taint"] == "node.kubernetes.io/unschedulable:NoSchedule" and cordon["runningPodsKept"], cordon
    # the release gate's own code against the box: 1 cordoned node, 0 spare -> refused
    assert [(g["cordoned"], g["pass"], g["unhealthyCounted"]) for g in cordon["healthGate"]] == \
        [([cordon["node"]], False, 1)], cordon["healthGate"]
    assert not cordon.get("newPodsOnCordonedNode") and [g["end"] for g in cordon["gangsAfterUncordon"]] == ["whole"]
    assert any("not checked" in n or "no LeaderWorkerSet" in n for n in rep["notChecked"]), rep["notChecked"]
    drain = rep["drain"]
    assert len(drain["surgeNodes"]) == 2 and all(s["completed"] for s in drain["steps"]), drain["steps"]
    (g,) = drain["gangs"]
    assert g["end"] == "whole" and g["mostReadyPodsEvictedBeforeWhole"] <= 1, g
    assert 1 <= g["restartsWhole"] + g["partialRestarts"] <= 2, g


def test_three_planted_defects_fail_the_drain_the_node_failure_and_the_cordon(tmp_path: Path) -> None:
    code, result, rep = _box(tmp_path, "daytwo-planted", STACK,
                             ("zero-budget", "forever-toleration", "cordon-toleration"), not_ready=True)
    assert code == 1
    f = rep["findings"]
    # a budget allowing no disruption: the drain refused until the box's timeout, naming the budget and its status
    drain = [x for x in f if x.startswith("drain: node ")]
    assert drain and "still holds" in drain[0] and "multinode/train-gang disruptionsAllowed 0" in drain[0], f
    assert "Cannot evict pod as it would violate the pod's disruption budget" in drain[0], drain
    # the unreachable taint tolerated for ever: the pod stays on the dead node
    dead = [x for x in f if x.startswith("node failure: pod ")]
    assert dead and all("without tolerationSeconds" in x for x in dead), f
    assert {p["toleration"] for p in rep["nodeFailure"]["pods"]} == {"forever"}, rep["nodeFailure"]["pods"]
    # the not-ready taint tolerated for ever: the pod stays on the node that reports Ready=False
    sick = [x for x in f if x.startswith("node not ready: pod ")]
    assert sick and all("tolerates node.kubernetes.io/not-ready without tolerationSeconds" in x for x in sick), f
    assert rep["nodeNotReady"]["taint"] == "node.kubernetes.io/not-ready:NoExecute", rep["nodeNotReady"]
    assert {p["toleration"] for p in rep["nodeNotReady"]["pods"]} == {"forever"}, rep["nodeNotReady"]["pods"]
    # the unschedulable taint tolerated: the failed pod's replacement lands on the cordoned node
    cordoned = [x for x in f if x.startswith("cordon: new pod(s)")]
    assert cordoned and rep["cordon"]["newPodsOnCordonedNode"], f
    # the gate still refuses (it reads the cordon, not the pods): no finding of its own
    assert [g["pass"] for g in rep["cordon"]["healthGate"]] == [False], rep["cordon"]
    # nothing else: every other finding follows from these three (the budget keeps the gang on the old nodes)
    assert not _only(f, "drain: node ", "node failure: pod ", "node not ready: pod ", "cordon: new pod(s)",
                     "drain: gang train is",
                     "drain: gang train restarted", "cordon: gang train"), f


@pytest.mark.skipif(not LWS_BIN.exists(), reason=f"not built: {LWS_BIN} (make -C conformance/lws build)")
def test_the_rendered_lws_and_volcano_job_with_spare_nodes_play_day_two_without_a_finding(tmp_path: Path) -> None:
    code, result, rep = _box(tmp_path, "daytwo-lws", LWS_STACK.replace("NODES", "8"))
    assert code == 0, result["findings"]
    # 2 spare nodes: the failed node's gang whole again at once, before the node is repaired
    assert all(g["end"] == "whole" for g in rep["nodeFailure"]["gangsAfterLoss"]), rep["nodeFailure"]
    gate = rep["cordon"]["healthGate"]
    assert [(len(g["cordoned"]), g["pass"]) for g in gate] == [(1, True), (3, False)], gate
    ro = rep["rollout"]
    assert (ro["renderedMaxSurge"], ro["renderedMaxUnavailable"], ro["completed"]) == (1, 0, True), ro
    assert ro["predictedOrder"] == ["surge 2", "1", "0"] and ro["observedOrder"] == ["surge 2", "1", "0"], ro
    assert ro["fewestReadyGroups"] >= 2 and ro["samples"] >= 10, ro


@pytest.mark.skipif(not LWS_BIN.exists(), reason=f"not built: {LWS_BIN} (make -C conformance/lws build)")
def test_no_restart_policies_and_a_surge_beyond_the_spare_nodes_fail_the_drain_and_the_rollout(tmp_path: Path) -> None:
    code, result, rep = _box(tmp_path, "daytwo-lws-planted", LWS_STACK.replace("NODES", "6"),
                             ("no-policies", "lws-surge"))
    assert code == 1
    f = rep["findings"]
    # a Volcano job without its policies: the master's eviction does not restart the job whole
    mine = [x for x in f if x.startswith("drain: gang train")]
    assert any("role(s) master" in x and "predicts a whole restart" in x for x in mine), f
    # maxSurge 1 with no spare node: the surge group never gets nodes, the rollout stalls
    ro = rep["rollout"]
    assert not ro["completed"] and ro["renderedMaxSurge"] == 1, ro
    stalled = [x for x in f if x.startswith("rollout: LeaderWorkerSet multinode/serve did not complete")]
    assert stalled and "surge group 2 (0 of 2 pods ready)" in stalled[0], f
    assert any(x.startswith("rollout:") and "plan prints maxSurge 0" in x for x in f), f
    assert not [x for x in f if x.startswith("node failure: pod ")], f
