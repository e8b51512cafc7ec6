"""compare.py on hand-made observations: each finding it must make is planted here (no Go needed)."""
from __future__ import annotations

import copy
import json
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
import compare  # noqa: E402

OWNER = "Job multinode/train"
PLACEMENT = {"services": [], "batchEachBesideServices": [
    {"gang": "train", "owner": OWNER, "pods": 2, "whole": True, "placed": True, "pools": ["gpu"],
     "nodes": {"train-master-0": "gpu-0", "train-worker-0": "gpu-1"}}]}
EFFECTIVE = {"metadata": {"labels": {"multinode.dev/workload": "train", "multinode.dev/role": "master"}},
             "spec": {"containers": [{"name": "trainer", "resources": {"limits": {"vpc.amazonaws.com/efa": "32"}},
                                      "env": [{"name": "NCCL_NET", "value": "AWS Libfabric"}]}]}}


def _pod(name: str, node: str, role: str, message: str = "") -> dict[str, Any]:
    spec = copy.deepcopy(EFFECTIVE["spec"])
    spec["containers"][0]["imagePullPolicy"] = "IfNotPresent"          # an API server default: not compared
    spec["containers"][0]["resources"]["limits"]["vpc.amazonaws.com/efa"] = "32"
    return {"namespace": "multinode", "name": name, "owner": OWNER, "node": node,
            "phase": "Running" if node else "Pending",
            **({"scheduled": {"status": "False", "reason": "Unschedulable", "message": message}} if not node else {}),
            "pod": {"metadata": {"labels": {"multinode.dev/workload": "train", "multinode.dev/role": role}},
                    "spec": spec}}


def _observed() -> dict[str, Any]:
    return {"stack": "s", "versions": {}, "nodes": ["gpu-0", "gpu-1"], "seconds": 1.0, "phases": [
        {"name": "services", "settled": True, "seconds": 1, "pods": [], "events": [], "applied": [
            {"file": "001-Namespace-multinode.yaml", "object": "Namespace multinode", "result": "applied"}]},
        {"name": f"batch {OWNER}", "settled": True, "seconds": 1, "events": [], "applied": [],
         "pods": [_pod("train-0", "gpu-0", "master"), _pod("train-1", "gpu-1", "worker")]}]}


def _stack(tmp_path: Path, observed: dict[str, Any], effective: dict[str, Any] | None = None) -> Path:
    box = tmp_path / "engines" / "cluster"
    box.mkdir(parents=True)
    (box / "observed.json").write_text(json.dumps(observed))
    (box / "crds.yaml").write_text(json.dumps({"replace": {}, "extra": [], "missing": []}))
    (box / "nodes.yaml").write_text(yaml.safe_dump({"items": [
        {"metadata": {"name": n, "labels": {"multinode.dev/node-pool": p}}} for n, p in
        (("gpu-0", "gpu"), ("gpu-1", "gpu"), ("cpu-0", "cpu"))]}))
    (tmp_path / "placement.json").write_text(json.dumps(PLACEMENT))
    (tmp_path / "effective").mkdir()
    (tmp_path / "effective" / "train-tasks-0.yaml").write_text(yaml.safe_dump(effective or EFFECTIVE))
    return tmp_path


def test_agreeing_box_passes(tmp_path: Path) -> None:
    r = compare.compare(_stack(tmp_path, _observed()), kyverno=True)
    assert r["findings"] == [] and r["pass"]
    assert r["workloads"][0]["verdict"] == "ok" and r["effective"][0]["verdict"] == "equal"


def test_pending_pod_is_a_finding_with_the_schedulers_message(tmp_path: Path) -> None:
    obs = _observed()
    msg = "0/2 nodes are available: 2 Insufficient nvidia.com/gpu."
    obs["phases"][1]["pods"][1] = _pod("train-1", "", "worker", msg)
    r = compare.compare(_stack(tmp_path, obs), kyverno=True)
    assert any(msg in f for f in r["findings"])
    assert any("half-bound" in f for f in r["findings"])


def test_other_count_per_node_is_a_finding(tmp_path: Path) -> None:
    obs = _observed()
    obs["phases"][1]["pods"][1]["node"] = "gpu-0"
    r = compare.compare(_stack(tmp_path, obs), kyverno=True)
    assert any("pods per node [2]" in f for f in r["findings"])


def test_other_pool_is_a_finding(tmp_path: Path) -> None:
    obs = _observed()
    obs["phases"][1]["pods"][1]["node"] = "cpu-0"
    r = compare.compare(_stack(tmp_path, obs), kyverno=True)
    assert any("bound on pools ['cpu', 'gpu']" in f for f in r["findings"])


def test_refused_object_is_a_finding(tmp_path: Path) -> None:
    obs = _observed()
    obs["phases"][0]["applied"].append({"file": "002-Job-x.yaml", "object": "Job multinode/x", "result": "refused",
                                        "error": "admission webhook denied the request"})
    r = compare.compare(_stack(tmp_path, obs), kyverno=True)
    assert any("refused: admission webhook denied" in f for f in r["findings"])


def test_admitted_pod_that_differs_from_effective_is_a_finding(tmp_path: Path) -> None:
    eff = copy.deepcopy(EFFECTIVE)
    eff["spec"]["containers"][0]["env"][0]["value"] = "Socket"
    r = compare.compare(_stack(tmp_path, _observed(), eff), kyverno=True)
    assert any("NCCL_NET" in f and "Socket" in f for f in r["findings"])


def test_without_kyverno_effective_is_listed_not_passed(tmp_path: Path) -> None:
    r = compare.compare(_stack(tmp_path, _observed()), kyverno=False)
    assert r["effective"][0]["verdict"] == "not checked"
    assert any("Kyverno does not run" in n for n in r["notChecked"])


def test_pod_unknown_to_placement_is_a_finding(tmp_path: Path) -> None:
    obs = _observed()
    stray = _pod("stray-0", "gpu-0", "x")
    stray["owner"] = "Deployment multinode/stray"
    obs["phases"][0]["pods"].append(stray)
    r = compare.compare(_stack(tmp_path, obs), kyverno=True)
    assert any("stray-0" in f and "not a pod of placement.json" in f for f in r["findings"])


@pytest.mark.parametrize("n", [1, 3])
def test_missing_or_extra_pods_are_findings(tmp_path: Path, n: int) -> None:
    obs = _observed()
    pods = obs["phases"][1]["pods"]
    obs["phases"][1]["pods"] = pods[:1] if n == 1 else pods + [_pod("train-2", "gpu-1", "worker")]
    r = compare.compare(_stack(tmp_path, obs), kyverno=True)
    assert any(f"{n} pods in the box, placement.json counts 2" in f for f in r["findings"])


def test_admission_additions_and_omitted_zero_values_are_not_differences(tmp_path: Path) -> None:
    eff = copy.deepcopy(EFFECTIVE)
    eff["spec"]["tolerations"] = [{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}]
    eff["spec"]["containers"][0]["readOnly"] = False
    obs = _observed()
    for p in obs["phases"][1]["pods"]:
        p["pod"]["spec"]["tolerations"] = copy.deepcopy(eff["spec"]["tolerations"]) + [
            {"key": "node.kubernetes.io/not-ready", "operator": "Exists", "effect": "NoExecute",
             "tolerationSeconds": 300}]
    r = compare.compare(_stack(tmp_path, obs, eff), kyverno=True)
    assert r["findings"] == []
    eff["spec"]["tolerations"][0]["effect"] = "NoExecute"                 # a wanted toleration not admitted
    r = compare.compare(_stack(tmp_path / "b", obs, eff), kyverno=True)
    assert any("spec.tolerations" in f and "not in the admitted pod" in f for f in r["findings"])


# Volcano: the same gang as a Volcano Job (schedulerName volcano, its PodGroup named on the pods).
PG = {"namespace": "multinode", "name": "train-3f2a", "owner": OWNER, "minMember": 2, "phase": "Pending",
      "conditions": [{"type": "Unschedulable", "status": "True", "reason": "NotEnoughResources",
                      "message": "2/2 tasks in gang unschedulable: pod group is not ready, 2 Pending, 2 minAvailable"}]}


def _volcano(observed: dict[str, Any], ran: bool = True, pods: bool = True, pg: dict[str, Any] | None = None
             ) -> dict[str, Any]:
    if ran:
        observed["versions"]["volcano"] = "conformance/bin/vc-scheduler"
    batch = observed["phases"][1]
    batch["applied"] = [{"file": "014-Job-train.yaml", "apiVersion": "batch.volcano.sh/v1alpha1", "object": OWNER,
                         "result": "applied"}]
    for p in batch["pods"]:
        p["pod"]["spec"]["schedulerName"] = "volcano"
        p["pod"]["metadata"]["annotations"] = {"scheduling.k8s.io/group-name": PG["name"]}
    if not pods:
        batch["pods"] = []
    batch["podGroups"] = [pg] if pg else []
    return observed


def test_volcano_gang_bound_as_planned_passes(tmp_path: Path) -> None:
    r = compare.compare(_stack(tmp_path, _volcano(_observed(), pg={**PG, "phase": "Running", "conditions": []})),
                        kyverno=True)
    assert r["findings"] == [] and [w["verdict"] for w in r["workloads"]] == ["ok"]


def test_volcano_gang_without_volcano_in_the_box_is_not_checked(tmp_path: Path) -> None:
    obs = _volcano(_observed(), ran=False)
    for p in obs["phases"][1]["pods"]:
        p["node"], p["phase"] = "", "Pending"
    r = compare.compare(_stack(tmp_path, obs), kyverno=False)
    assert r["findings"] == [] and r["workloads"][0]["verdict"] == "not checked"
    assert any("scheduler volcano" in n and "Volcano did not run" in n for n in r["notChecked"]), r["notChecked"]


def test_volcano_job_without_volcano_in_the_box_is_not_checked(tmp_path: Path) -> None:
    r = compare.compare(_stack(tmp_path, _volcano(_observed(), ran=False, pods=False)), kyverno=False)
    assert r["findings"] == []
    assert any("batch.volcano.sh/Job controller does not run" in n and "Volcano did not run" in n
               for n in r["notChecked"]), r["notChecked"]


def test_volcano_job_held_back_whole_is_a_finding_with_the_podgroups_reason(tmp_path: Path) -> None:
    obs = _volcano(_observed(), pods=False, pg=PG)
    obs["phases"][1]["events"] = [{"object": f"PodGroup multinode/{PG['name']}", "type": "Warning",
                                   "reason": "Unschedulable", "message": "0/2 nodes are unavailable: 2 Insufficient "
                                   "nvidia.com/gpu.", "source": "volcano", "count": 3}]
    r = compare.compare(_stack(tmp_path, obs), kyverno=False)
    assert len(r["findings"]) == 1, r["findings"]
    f = r["findings"][0]
    assert "no pods created (held back whole by Volcano)" in f and "NotEnoughResources" in f \
        and "2 Insufficient nvidia.com/gpu" in f, f


def test_volcano_pods_pending_name_their_podgroups_reason_and_are_not_half_bound(tmp_path: Path) -> None:
    obs = _volcano(_observed(), pg=PG)
    for p in obs["phases"][1]["pods"]:
        p["node"], p["phase"] = "", "Pending"
        p["scheduled"] = {"status": "False", "reason": "Unschedulable", "message": "pod group is not ready"}
    r = compare.compare(_stack(tmp_path, obs), kyverno=False)
    assert not any("half-bound" in f for f in r["findings"]), r["findings"]
    held = [f for f in r["findings"] if "Pending under Volcano" in f]
    assert len(held) == 1 and "2 of 2 pods" in held[0] and "NotEnoughResources" in held[0], r["findings"]
    assert r["workloads"][0]["verdict"] == "differs"


def test_volcano_gang_half_bound_is_a_finding(tmp_path: Path) -> None:
    obs = _volcano(_observed(), pg=PG)
    p = obs["phases"][1]["pods"][1]
    p["node"], p["phase"] = "", "Pending"
    r = compare.compare(_stack(tmp_path, obs), kyverno=False)
    assert any("half-bound (1 of 2 pods bound)" in f for f in r["findings"]), r["findings"]


# LWS + Volcano: the LeaderWorkerSet's pods (test_compare_lws.py's observation) scheduled by Volcano.
def _lws_with_volcano(bound: bool) -> dict[str, Any]:
    import test_compare_lws as tl
    obs = tl._observed()
    obs["versions"]["volcano"] = "conformance/bin"
    ph = obs["phases"][0]
    nodes = {"llm-0": "gpu-0", "llm-0-1": "gpu-1", "llm-1": "gpu-2", "llm-1-1": "gpu-3"}
    for p in ph["pods"]:
        group = ph["podGroups"][0 if p["name"].startswith("llm-0") else 1]["name"]
        p["pod"]["metadata"]["annotations"] = {"scheduling.k8s.io/group-name": group}
        if bound:
            p["node"], p["phase"] = nodes[p["name"]], "Running"
    for g in ph["podGroups"]:
        g["phase"] = "Running" if bound else "Pending"
        if not bound:
            g["conditions"] = [{"type": "Unschedulable", "status": "True", "reason": "NotEnoughResources",
                                "message": "2/2 tasks in gang unschedulable"}]
    return obs


def test_lws_gangs_bound_by_volcano_pass(tmp_path: Path) -> None:
    import test_compare_lws as tl
    r = compare.compare(tl._stack(tmp_path, _lws_with_volcano(bound=True)), kyverno=False)
    assert r["findings"] == [] and r["workloads"][0]["verdict"] == "ok", r["findings"]
    assert not any("not scheduled" in n for n in r["notChecked"]), r["notChecked"]


def test_lws_gangs_held_back_by_volcano_are_findings_with_the_podgroups_reason(tmp_path: Path) -> None:
    import test_compare_lws as tl
    r = compare.compare(tl._stack(tmp_path, _lws_with_volcano(bound=False)), kyverno=False)
    held = [f for f in r["findings"] if "Pending under Volcano" in f]
    assert len(held) == 1 and "4 of 4 pods" in held[0] and held[0].count("NotEnoughResources") == 2, r["findings"]
    assert not any("half-bound" in f for f in r["findings"])


def test_pool_from_the_box_annotation_when_nodes_lack_the_pool_label(tmp_path: Path) -> None:
    # an existing cluster's pools carry the user's labels, not multinode.dev/node-pool: the pool comes from
    # prepare.py's annotation, and a pod on another pool is still a finding
    stack = _stack(tmp_path, _observed())
    nodes = stack / "engines" / "cluster" / "nodes.yaml"
    nodes.write_text(yaml.safe_dump({"items": [
        {"metadata": {"name": n, "labels": {}, "annotations": {compare.POOL_ANNOTATION: p}}} for n, p in
        (("gpu-0", "gpu"), ("gpu-1", "gpu"), ("cpu-0", "cpu"))]}))
    assert compare.compare(stack, kyverno=True)["findings"] == []
    obs = _observed()
    obs["phases"][1]["pods"][1]["node"] = "cpu-0"
    (stack / "engines" / "cluster" / "observed.json").write_text(json.dumps(obs))
    assert any("bound on pools ['cpu', 'gpu']" in f for f in compare.compare(stack, kyverno=True)["findings"])


def test_node_of_no_known_pool_is_a_finding(tmp_path: Path) -> None:
    stack = _stack(tmp_path, _observed())
    (stack / "engines" / "cluster" / "nodes.yaml").write_text(yaml.safe_dump({"items": [
        {"metadata": {"name": n, "labels": {}}} for n in ("gpu-0", "gpu-1", "cpu-0")]}))
    r = compare.compare(stack, kyverno=True)
    assert any("of no known pool" in f for f in r["findings"]) and not r["pass"]


def _real(observed: dict[str, Any]) -> dict[str, Any]:
    """The observation of a box whose gpu nodes were real (realnode_check.py reads these keys)."""
    lo = {"links": [{"ifname": "lo"}], "defaultRoute": False, "outside": []}
    observed.update({"netns": lo, "netnsEnd": lo, "realNodes": [{"name": "gpu-0", "ready": True},
                                                                 {"name": "gpu-1", "ready": True}]})
    return observed


def test_real_nodes_idle_because_no_workload_can_run_are_not_checked(tmp_path: Path) -> None:
    """dynamo-dev: every workload of a kind whose controller the box does not run: nothing can reach a real node."""
    r = compare.compare(_stack(tmp_path, _real(_volcano(_observed(), ran=False, pods=False))), kyverno=False)
    assert r["findings"] == []
    assert any(n.startswith("real nodes ['gpu-0', 'gpu-1']: no pod was placed on them: every workload of the stack "
                            f"is of a kind whose controller the box does not run ({OWNER})") for n in r["notChecked"])


def test_real_nodes_idle_while_a_workload_ran_elsewhere_is_a_finding(tmp_path: Path) -> None:
    obs = _real(_observed())
    obs["realNodes"] = [{"name": "cpu-0", "ready": True}]
    r = compare.compare(_stack(tmp_path, obs), kyverno=True)
    assert "real nodes ['cpu-0']: no pod was placed on them" in r["findings"]
