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
    return {"namespace": "multinode", "name": name, "owner": OWNER, "node": node, "phase": "Running" if node else "Pending",
            **({"scheduled": {"status": "False", "reason": "Unschedulable", "message": message}} if not node else {}),
            "pod": {"metadata": {"labels": {"multinode.dev/workload": "train", "multinode.dev/role": role}}, "spec": spec}}


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
