"""gangs_check.py on hand-made observations (no box): a gang that formed, and each way one does not."""
from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from gangs_check import gang_findings, planned_pods  # noqa: E402

CMD = "exec torchrun --nnodes={n} --nproc_per_node={g} --node_rank=$(JOB_COMPLETION_INDEX) --rdzv_backend=c10d " \
      "--rdzv_endpoint=train-0.train:29500 /workspace/train.py"


def _job(parallelism: int) -> dict[str, Any]:
    return {"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": "train", "namespace": "ml"},
            "spec": {"parallelism": parallelism, "completions": parallelism}}


def _pod(i: int, n: int, g: int, ranks: list[int], world: int, phase: str = "Succeeded", node: str | None = None,
         train_ok: bool = True, port_step: int = 0) -> dict[str, Any]:
    lines = [f"MULTINODE_BOX_RANK {json.dumps({'rank': r, 'worldSize': world, 'groupRank': i, 'seconds': 3.5 + i})}"
             for r in ranks]
    lines += [f"MULTINODE_BOX_TRAIN {json.dumps({'rank': r, 'ok': train_ok, 'problems': [] if train_ok else ['x']})}"
              for r in ranks]
    port = 29500 + i * port_step
    lines += [f"MULTINODE_BOX_LAUNCH {json.dumps({'rdzvEndpoint': f'train-0.train:{port}'})}"]
    lines += ["--- last lines ---", "multinode box: torch.distributed.run", f"waiting line of pod {i}"]
    return {"namespace": "ml", "name": f"train-{i}", "owner": "Job ml/train", "node": node or f"gpu-{i}",
            "phase": phase, "logs": {"trainer": lines},
            "pod": {"spec": {"containers": [{"name": "trainer", "command": ["/bin/bash", "-c"],
                                             "args": [CMD.format(n=n, g=g)]}]}}}


def _obs(pods: list[dict[str, Any]], nproc_max: int = 0) -> dict[str, Any]:
    return {"realNodes": [{"name": f"gpu-{i}"} for i in range(3)],
            "gangSettings": {"bound": 120, "nprocMax": nproc_max, "torchLayer": True},
            "phases": [{"name": "batch Job ml/train", "gangs": [{"bound": 120, "seconds": 30, "finished": True}],
                        "pods": pods}]}


def test_a_gang_that_formed() -> None:
    pods = [_pod(0, 2, 2, [0, 1], 4), _pod(1, 2, 2, [2, 3], 4)]
    findings, report, nc = gang_findings(_obs(pods), lambda o: _job(2))
    assert findings == [] and nc == []
    assert report[0]["formed"] and report[0]["worldSizeSeen"] == 4 and report[0]["secondsToForm"] == 4.5
    assert report[0]["verdict"] == "formed" and report[0]["plannedPods"] == 2


def test_nnodes_one_larger_than_the_replicas() -> None:
    pods = [_pod(0, 3, 2, [], 0, "Running"), _pod(1, 3, 2, [], 0, "Running")]
    findings, report, _ = gang_findings(_obs(pods), lambda o: _job(2))
    assert not report[0]["formed"]
    assert any("--nnodes=3 but plan gives the workload 2 pods" in f for f in findings), findings
    nf = [f for f in findings if "not formed within 120s" in f]
    assert len(nf) == 1 and "node ranks that did not join: [0, 1, 2]" in nf[0]
    assert "only 2 pods of the gang ran for --nnodes=3" in nf[0]
    assert "train-1/trainer: multinode box: torch.distributed.run | waiting line of pod 1" in nf[0]


def test_a_gang_one_pod_short() -> None:
    pods = [_pod(0, 2, 2, [], 0, "Running")]
    findings, _, _ = gang_findings(_obs(pods), lambda o: _job(2))
    assert len(findings) == 1, findings
    assert "node ranks that did not join: [0, 1]" in findings[0]
    assert "only 1 pods of the gang ran for --nnodes=2 (plan gives 2: 1 pod(s) short)" in findings[0]


def test_pods_that_name_different_endpoints() -> None:
    pods = [_pod(0, 2, 2, [], 0, "Running", port_step=1), _pod(1, 2, 2, [], 0, "Failed", port_step=1)]
    findings, _, _ = gang_findings(_obs(pods), lambda o: _job(2))
    assert len(findings) == 1, findings
    assert "the pods name different rendezvous endpoints: ['train-0.train:29500', 'train-0.train:29501']" in findings[0]
    assert "train-1 on gpu-1 Failed (rendezvous train-0.train:29501)" in findings[0]


def test_a_rank_missing_and_a_trainer_check_failed() -> None:
    pods = [_pod(0, 2, 2, [0, 1], 4, train_ok=False), _pod(1, 2, 2, [], 0, "Failed")]
    findings, report, _ = gang_findings(_obs(pods), lambda o: _job(2))
    assert report[0]["verdict"] == "not formed" and report[0]["ranksJoined"] == 2
    assert any("node ranks that did not join: [1]" in f for f in findings), findings
    assert any("rank 0: trainer stand-in: x" in f for f in findings), findings


def test_the_box_cap_on_nproc_is_recorded_and_used() -> None:
    pods = [_pod(0, 2, 8, [0, 1], 4), _pod(1, 2, 8, [2, 3], 4)]
    findings, report, _ = gang_findings(_obs(pods, nproc_max=2), lambda o: _job(2))
    assert findings == [] and report[0]["expectedWorldSize"] == 4 and report[0]["nprocPerNode"] == 8
    assert "capped at 2" in report[0]["boxOnly"]
    # without the cap the same lines are a gang that did not form (8 x 2 ranks expected)
    findings, report, _ = gang_findings(_obs(pods), lambda o: _job(2))
    assert not report[0]["formed"] and findings


def test_pods_on_fake_nodes_are_not_checked() -> None:
    pods = [_pod(0, 2, 2, [], 0, "Running"), _pod(1, 2, 2, [], 0, "Running", node="fake-9")]
    findings, report, nc = gang_findings(_obs(pods), lambda o: _job(2))
    assert findings == [] and report == [] and "not on real nodes" in nc[0]


def test_planned_pods() -> None:
    assert planned_pods(_job(4)) == 4
    assert planned_pods({"apiVersion": "batch.volcano.sh/v1alpha1", "kind": "Job",
                         "spec": {"tasks": [{"replicas": 1}, {"replicas": 3}]}}) == 4
    assert planned_pods(None) is None
