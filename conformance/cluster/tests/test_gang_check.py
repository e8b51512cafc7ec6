"""gang_check.py on hand-made observations (no Go, no box): a formed MPI gang and a formed Ray group agree with
placement.json; each way a gang goes wrong is planted: no verdict within the bound, a world size other than plan's,
one slot too many per worker, a worker with no rank, a Ray node that did not join."""
from __future__ import annotations

import copy
import json
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from gang_check import gang_findings, parse_verdict  # noqa: E402

T0 = "2026-11-28T13:00:00.123456789Z"
PLACEMENT = {
    "pools": [{"name": "gpu", "use": {"workloads": [{"gang": "nim", "kind": "batch", "nodes": 2, "gpus": 16.0},
                                                    {"gang": "llm", "kind": "service", "nodes": 2, "gpus": 16.0}]}}],
    "services": [{"gang": "llm", "owner": "LeaderWorkerSet ns/llm", "pods": 2}],
    "batchEachBesideServices": [{"gang": "nim", "owner": "MPIJob ns/nim", "pods": 3}],
}


def _pod(name: str, labels: dict[str, str], node: str = "gpu-0", ip: str = "10.245.1.2", phase: str = "Running",
         gang: list[str] | None = None, logs: list[str] | None = None) -> dict[str, Any]:
    return {"namespace": "ns", "name": name, "node": node, "gang": gang or [],
            "logs": {"main": logs or [f"{T0} stdout F hello from {name}"]},
            "pod": {"metadata": {"labels": labels},
                    "spec": {"hostname": name},
                    "status": {"phase": phase, "podIP": ip,
                               "containerStatuses": [{"name": "main", "state": {"running": {"startedAt": T0}}}]}}}


def _verdict(rec: dict[str, Any], at: str = "2026-11-28T13:00:12.5Z") -> str:
    return f"main {at} stdout F MULTINODE_GANG {json.dumps(rec)}"


def _mpi(per_host: dict[str, int], world: int = 16, formed: bool = True, verdict: bool = True,
         launcher_phase: str = "Running") -> dict[str, Any]:
    role = "training.kubeflow.org/job-role"
    job = {"training.kubeflow.org/job-name": "nim"}
    rec = {"engine": "mpi", "formed": formed, "worldSize": world, "expected": world, "ranksPerHost": per_host}
    pods = [_pod("nim-launcher-abcde", {**job, role: "launcher"}, phase=launcher_phase,
                 gang=[_verdict(rec)] if verdict else [],
                 logs=[f"{T0} stderr F There are not enough slots available in the system"]),
            _pod("nim-worker-0", {**job, role: "worker"}, ip="10.245.1.3"),
            _pod("nim-worker-1", {**job, role: "worker"}, node="gpu-1", ip="10.245.2.2")]
    return {"realNodes": [{"name": "gpu-0"}, {"name": "gpu-1"}], "gangTimeout": 240.0,
            "phases": [{"name": "batch MPIJob ns/nim", "pods": pods}]}


def _ray(members: list[str], verdict: bool = True) -> dict[str, Any]:
    lws = {"leaderworkerset.sigs.k8s.io/name": "llm", "leaderworkerset.sigs.k8s.io/group-index": "0"}
    rec = {"engine": "ray", "formed": len(members) == 2, "worldSize": len(members), "expected": 2, "members": members}
    pods = [_pod("llm-0", {**lws, "leaderworkerset.sigs.k8s.io/worker-index": "0"}, ip="10.245.1.2",
                 gang=[_verdict(rec)] if verdict else []),
            _pod("llm-0-1", {**lws, "leaderworkerset.sigs.k8s.io/worker-index": "1"}, node="gpu-1", ip="10.245.2.2",
                 logs=[f"{T0} stdout F waiting for the Ray head at no-such-name"])]
    return {"realNodes": [{"name": "gpu-0"}, {"name": "gpu-1"}], "gangTimeout": 90.0,
            "phases": [{"name": "services", "pods": pods}]}


def test_verdict_line_parsed_with_its_time() -> None:
    c, when, rec = parse_verdict(_verdict({"engine": "mpi", "worldSize": 3}, at=T0))  # type: ignore[misc]
    assert c == "main" and rec["worldSize"] == 3 and when is not None and when.microsecond == 123456
    assert when.utcoffset() is not None     # the kubelet's "Z" kept: comparable with the pods' startedAt


def test_formed_mpi_gang_agrees_with_plan() -> None:
    findings, report = gang_findings(_mpi({"nim-worker-0": 8, "nim-worker-1": 8}), PLACEMENT)
    assert findings == []
    assert report == [{"gang": "MPIJob ns/nim", "phase": "batch MPIJob ns/nim", "expected": 16, "formed": True,
                       "worldSize": 16, "engine": "mpi", "secondsToForm": 12.4,
                       "pods": ["nim-launcher-abcde", "nim-worker-0", "nim-worker-1"],
                       "onRealNodes": ["nim-launcher-abcde", "nim-worker-0", "nim-worker-1"],
                       "verdict": report[0]["verdict"]}]


def test_one_slot_too_many_per_worker() -> None:
    findings, _ = gang_findings(_mpi({"nim-worker-0": 9, "nim-worker-1": 7}), PLACEMENT)
    assert len(findings) == 1
    assert "ranks per host {'nim-worker-0': 9, 'nim-worker-1': 7}, plan says 8 per node" in findings[0]


def test_world_size_other_than_plan_and_a_worker_with_no_rank() -> None:
    findings, _ = gang_findings(_mpi({"nim-worker-0": 8}, world=8), PLACEMENT)
    assert len(findings) == 1
    assert "world size 8, plan says 16 (one rank per GPU)" in findings[0]
    assert "workers with no rank (did not join): ['nim-worker-1']" in findings[0]


def test_no_verdict_names_the_pods_and_their_last_lines() -> None:
    findings, report = gang_findings(_mpi({}, verdict=False, launcher_phase="Failed"), PLACEMENT)
    assert len(findings) == 1 and report[0]["formed"] is False
    f = findings[0]
    assert f.startswith("gang MPIJob ns/nim (pods nim-launcher-abcde, nim-worker-0, nim-worker-1): not formed: "
                        "no verdict within 240.0s"), f
    assert "nim-launcher-abcde: phase Failed" in f
    assert "nim-launcher-abcde/main: There are not enough slots available in the system" in f
    assert "nim-worker-1/main: hello from nim-worker-1" in f


def test_ray_group_formed_and_a_node_that_did_not_join() -> None:
    findings, report = gang_findings(_ray(["10.245.1.2", "10.245.2.2"]), PLACEMENT)
    assert findings == [] and report[0]["formed"] and report[0]["expected"] == 2
    findings, _ = gang_findings(_ray(["10.245.1.2"]), PLACEMENT)
    assert len(findings) == 1
    assert "not formed: the ray stand-in saw 1 of 2" in findings[0]
    assert "world size 1, plan says 2 (the group's pods)" in findings[0]
    assert "pods whose Ray node did not join: ['llm-0-1']" in findings[0]
    findings, _ = gang_findings(_ray([], verdict=False), PLACEMENT)
    assert len(findings) == 1 and "llm-0-1/main: waiting for the Ray head at no-such-name" in findings[0]


def test_gangs_only_on_real_nodes() -> None:
    obs = copy.deepcopy(_mpi({}, verdict=False))
    obs["realNodes"] = [{"name": "gpu-9"}]
    assert gang_findings(obs, PLACEMENT) == ([], [])


def test_launcher_on_a_node_of_its_own_is_not_counted_as_a_worker() -> None:
    """existing-dev's mpi-alltoall: plan places the launcher on a node of its own (3 nodes, 16 GPUs on 2 workers):
    8 ranks per worker agree with plan (it was judged against 16 // 3 = 5)."""
    placement = copy.deepcopy(PLACEMENT)
    placement["pools"][0]["use"]["workloads"][0]["nodes"] = 3
    placement["batchEachBesideServices"][0]["nodes"] = {"nim-worker-0": "gpu-6", "nim-worker-1": "gpu-7",
                                                         "nim-launcher-0": "gpu-0"}
    findings, _ = gang_findings(_mpi({"nim-worker-0": 8, "nim-worker-1": 8}), placement)
    assert findings == []
    findings, _ = gang_findings(_mpi({"nim-worker-0": 9, "nim-worker-1": 7}), placement)
    assert len(findings) == 1 and "plan says 8 per node" in findings[0]
