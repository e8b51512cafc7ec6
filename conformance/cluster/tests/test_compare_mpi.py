"""compare.py on hand-made observations of an MPIJob (no Go needed): what the MPI operator made (launcher and
workers, the Volcano PodGroup of --gang-scheduling=volcano) against the stack; each finding planted. And the
not-checked reasons of the controllers the box cannot run."""
from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
import compare  # noqa: E402

OWNER = "MPIJob multinode/mpi"
PHASE = f"batch {OWNER}"
PLACEMENT = {"services": [], "batchEachBesideServices": [
    {"gang": "mpi", "owner": OWNER, "pods": 3, "whole": True, "placed": True, "pools": ["gpu", "cpu"],
     "nodes": {"mpi-launcher-0": "cpu-0", "mpi-worker-0": "gpu-0", "mpi-worker-1": "gpu-1"}}]}
MPIJOB = {"apiVersion": "kubeflow.org/v2beta1", "kind": "MPIJob", "metadata": {"name": "mpi", "namespace": "multinode"},
          "spec": {"mpiReplicaSpecs": {"Launcher": {"replicas": 1}, "Worker": {"replicas": 2}},
                   "runPolicy": {"schedulingPolicy": {"minAvailable": 2, "queue": "default"}}}}
NODES = {"cpu-0": "cpu", "gpu-0": "gpu", "gpu-1": "gpu"}


def _pod(name: str, node: str) -> dict[str, Any]:
    return {"namespace": "multinode", "name": name, "owner": OWNER, "node": node, "phase": "Running",
            "pod": {"metadata": {"annotations": {"scheduling.k8s.io/group-name": "mpi"}},
                    "spec": {"schedulerName": "volcano", "containers": [{"name": "mpi"}]}}}


def _observed(mpi: bool = True, volcano: bool = True, pods: bool = True) -> dict[str, Any]:
    versions = {**({"mpi-operator": "github.com/kubeflow/mpi-operator v0.8.0"} if mpi else {}),
                **({"volcano": "conformance/bin"} if volcano else {})}
    made = [_pod("mpi-launcher-x", "cpu-0"), _pod("mpi-worker-0", "gpu-0"), _pod("mpi-worker-1", "gpu-1")]
    return {"stack": "s", "versions": versions, "nodes": list(NODES), "seconds": 1.0, "phases": [
        {"name": "services", "settled": True, "seconds": 1, "pods": [], "events": [], "applied": []},
        {"name": PHASE, "settled": True, "seconds": 1, "pods": made if pods else [], "events": [],
         "podGroups": [{"namespace": "multinode", "name": "mpi", "owner": OWNER, "minMember": 2, "queue": "default",
                        "phase": "Running"}] if pods else [],
         "applied": [{"file": "020-MPIJob-mpi.yaml", "apiVersion": "kubeflow.org/v2beta1", "object": OWNER,
                      "result": "applied"}]}]}


def _stack(tmp_path: Path, observed: dict[str, Any]) -> Path:
    box = tmp_path / "engines" / "cluster"
    box.mkdir(parents=True)
    (box / "observed.json").write_text(json.dumps(observed))
    (box / "crds.yaml").write_text(json.dumps({"replace": {}, "extra": [], "missing": []}))
    (box / "nodes.yaml").write_text(yaml.safe_dump({"items": [
        {"metadata": {"name": n, "labels": {"multinode.dev/node-pool": p}}} for n, p in NODES.items()]}))
    (tmp_path / "placement.json").write_text(json.dumps(PLACEMENT))
    (tmp_path / "k8s").mkdir()
    (tmp_path / "k8s" / "020-MPIJob-mpi.yaml").write_text(yaml.safe_dump(MPIJOB))
    return tmp_path


def test_an_mpijob_bound_as_planned_with_its_podgroup_passes(tmp_path: Path) -> None:
    r = compare.compare(_stack(tmp_path, _observed()), kyverno=False)
    assert r["findings"] == [], r["findings"]
    (w,) = r["workloads"]
    assert w["verdict"] == "ok" and w["podGroups"] == [{"name": "mpi", "minMember": 2, "queue": "default",
                                                        "phase": "Running"}]


@pytest.mark.parametrize("plant, want", [
    (lambda gs: gs[0].update(minMember=3), "PodGroup multinode/mpi minMember 3, the MPIJob asks 2"),
    (lambda gs: gs[0].update(queue="research"), "queue 'research', the MPIJob names 'default'"),
    (lambda gs: gs.clear(), "0 PodGroups made by the MPI operator, want 1"),
])
def test_a_podgroup_other_than_the_mpijob_asks_is_a_finding(tmp_path: Path, plant: Any, want: str) -> None:
    obs = _observed()
    plant(obs["phases"][1]["podGroups"])
    r = compare.compare(_stack(tmp_path, obs), kyverno=False)
    assert any(want in f for f in r["findings"]), r["findings"]


def test_the_operator_ran_and_made_no_pods_is_a_finding(tmp_path: Path) -> None:
    r = compare.compare(_stack(tmp_path, _observed(pods=False)), kyverno=False)
    assert any(f.startswith(f"{OWNER}: no pods created") for f in r["findings"]), r["findings"]


def test_without_the_operator_the_mpijob_is_not_checked_and_says_why(tmp_path: Path) -> None:
    r = compare.compare(_stack(tmp_path, _observed(mpi=False, pods=False)), kyverno=False)
    assert r["findings"] == [], r["findings"]
    assert r["workloads"][0]["verdict"] == "not checked"
    assert any("kubeflow.org/MPIJob controller does not run in the box: conformance/mpi-operator is not built" in n
               for n in r["notChecked"]), r["notChecked"]


def test_grove_and_dynamo_are_not_checked_because_the_proxy_does_not_serve_them() -> None:
    for gk in ("grove.io/PodCliqueSet", "nvidia.com/DynamoGraphDeployment"):
        assert "not served by the Go module proxy" in compare.NOT_RUN_WHY[gk]


def _gpu(p: dict[str, Any]) -> dict[str, Any]:
    p["pod"]["spec"]["containers"][0]["resources"] = {"limits": {"nvidia.com/gpu": "8"}}
    return p


def _launcher_elsewhere(tmp_path: Path, worker_1_node: str) -> dict[str, Any]:
    # placement.json packs the launcher beside worker 0; the scheduler put it on an emptier node of the same pool
    placement = {"services": [], "batchEachBesideServices": [
        {"gang": "mpi", "owner": OWNER, "pods": 3, "whole": True, "placed": True, "pools": ["gpu"],
         "nodes": {"mpi-launcher-0": "gpu-0", "mpi-worker-0": "gpu-0", "mpi-worker-1": "gpu-1"}}]}
    obs = _observed()
    obs["phases"][1]["pods"] = [_pod("mpi-launcher-x7k2p", "gpu-2"), _gpu(_pod("mpi-worker-0", "gpu-0")),
                                _gpu(_pod("mpi-worker-1", worker_1_node))]
    stack = _stack(tmp_path, obs)
    (stack / "placement.json").write_text(json.dumps(placement))
    (stack / "engines" / "cluster" / "nodes.yaml").write_text(yaml.safe_dump({"items": [
        {"metadata": {"name": n, "labels": {"multinode.dev/node-pool": "gpu"}}} for n in ("gpu-0", "gpu-1", "gpu-2")]}))
    return compare.compare(stack, kyverno=False)


def test_a_launcher_without_gpus_on_another_node_of_the_pool_is_no_finding(tmp_path: Path) -> None:
    r = _launcher_elsewhere(tmp_path, "gpu-1")
    assert r["findings"] == [], r["findings"]


def test_gpu_workers_on_one_node_are_still_a_finding(tmp_path: Path) -> None:
    r = _launcher_elsewhere(tmp_path, "gpu-0")
    assert any("pods per node [2]" in f for f in r["findings"]), r["findings"]
