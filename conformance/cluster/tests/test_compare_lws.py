"""compare.py on hand-made observations of a LeaderWorkerSet (no Go needed): what the LWS controller made
(pods, Volcano PodGroups) against the stack; each finding planted."""
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

OWNER = "LeaderWorkerSet multinode/llm"
PLACEMENT = {"services": [
    {"gang": "llm", "owner": OWNER, "pods": 2, "whole": True, "placed": True, "pools": ["gpu"],
     "nodes": {"llm-0-leader-0": "gpu-0", "llm-0-worker-0": "gpu-1"}},
    {"gang": "llm replica 1", "owner": OWNER, "pods": 2, "whole": True, "placed": True, "pools": ["gpu"],
     "nodes": {"llm-1-leader-0": "gpu-2", "llm-1-worker-0": "gpu-3"}}], "batchEachBesideServices": []}
LWS = {"apiVersion": "leaderworkerset.x-k8s.io/v1", "kind": "LeaderWorkerSet",
       "metadata": {"name": "llm", "namespace": "multinode",
                    "annotations": {"scheduling.volcano.sh/queue-name": "default"}},
       "spec": {"replicas": 2, "leaderWorkerTemplate": {"size": 2}}}


def _pod(name: str, node: str = "") -> dict[str, Any]:
    return {"namespace": "multinode", "name": name, "owner": OWNER, "node": node,
            "phase": "Running" if node else "Pending",
            "pod": {"metadata": {"labels": {"leaderworkerset.sigs.k8s.io/name": "llm"}},
                    "spec": {"schedulerName": "volcano", "containers": [{"name": "vllm"}]}}}


def _group(name: str, min_member: int = 2, queue: str | None = "default") -> dict[str, Any]:
    return {"namespace": "multinode", "name": name, "owner": OWNER, "minMember": min_member, "queue": queue,
            "phase": None}


def _observed(lws: bool = True) -> dict[str, Any]:
    pods = [_pod(n) for n in ("llm-0", "llm-0-1", "llm-1", "llm-1-1")]
    return {"stack": "s", "versions": {"lws": "sigs.k8s.io/lws v0.9.0"} if lws else {}, "nodes": [],
            "seconds": 1.0, "phases": [
                {"name": "services", "settled": True, "seconds": 1, "pods": pods, "events": [],
                 "podGroups": [_group("llm-0-abc"), _group("llm-1-abc")],
                 "applied": [{"file": "010-LeaderWorkerSet-llm.yaml", "apiVersion": "leaderworkerset.x-k8s.io/v1",
                              "object": OWNER, "result": "applied"}]}]}


def _stack(tmp_path: Path, observed: dict[str, Any], lws: dict[str, Any] | None = None) -> Path:
    box = tmp_path / "engines" / "cluster"
    box.mkdir(parents=True)
    (box / "observed.json").write_text(json.dumps(observed))
    (box / "crds.yaml").write_text(json.dumps({"replace": {}, "extra": [], "missing": []}))
    (box / "nodes.yaml").write_text(yaml.safe_dump({"items": [
        {"metadata": {"name": f"gpu-{i}", "labels": {"multinode.dev/node-pool": "gpu"}}} for i in range(4)]}))
    (tmp_path / "placement.json").write_text(json.dumps(PLACEMENT))
    (tmp_path / "k8s").mkdir()
    (tmp_path / "k8s" / "010-LeaderWorkerSet-llm.yaml").write_text(yaml.safe_dump(lws or LWS))
    return tmp_path


def test_lws_gangs_created_but_not_scheduled_are_listed_never_passed(tmp_path: Path) -> None:
    r = compare.compare(_stack(tmp_path, _observed()), kyverno=False)
    assert r["findings"] == [], r["findings"]
    w = r["workloads"][0]
    assert w["verdict"] == "created, not scheduled (no Volcano)"
    assert [g["minMember"] for g in w["podGroups"]] == [2, 2]
    assert any("4 pods created by LWS, not scheduled (no volcano in the box)" in n for n in r["notChecked"])


def test_without_the_lws_controller_the_gangs_are_not_checked(tmp_path: Path) -> None:
    obs = _observed(lws=False)
    obs["phases"][0]["pods"], obs["phases"][0]["podGroups"] = [], []
    r = compare.compare(_stack(tmp_path, obs), kyverno=False)
    assert r["findings"] == []
    assert r["workloads"][0]["verdict"] == "not checked"
    assert any("controller does not run in the box" in n for n in r["notChecked"])


def test_lws_ran_but_made_no_pods_is_a_finding(tmp_path: Path) -> None:
    obs = _observed()
    obs["phases"][0]["pods"], obs["phases"][0]["podGroups"] = [], []
    r = compare.compare(_stack(tmp_path, obs), kyverno=False)
    assert any(f.startswith(f"{OWNER}: no pods created (placement: 4)") for f in r["findings"]), r["findings"]


def test_lws_made_other_count_of_pods_is_a_finding(tmp_path: Path) -> None:
    obs = _observed()
    obs["phases"][0]["pods"].pop()
    r = compare.compare(_stack(tmp_path, obs), kyverno=False)
    assert f"{OWNER}: 3 pods made by LWS, placement.json counts 4" in r["findings"]


@pytest.mark.parametrize("plant, want", [
    (lambda gs: gs.pop(), "1 PodGroups made by LWS, placement.json counts 2 groups"),
    (lambda gs: gs[1].update(minMember=1), "PodGroup minMember [1, 2], the stack's groups [2, 2]"),
    (lambda gs: gs[0].update(queue="research"), "queue 'research', the LeaderWorkerSet names 'default'"),
    (lambda gs: gs[0].update(queue=None), "queue None, the LeaderWorkerSet names 'default'"),
])
def test_podgroups_other_than_the_stack_says_are_findings(tmp_path: Path, plant: Any, want: str) -> None:
    obs = _observed()
    plant(obs["phases"][0]["podGroups"])
    r = compare.compare(_stack(tmp_path, obs), kyverno=False)
    assert any(want in f for f in r["findings"]), r["findings"]


def test_leader_ready_startup_policy_wants_min_member_one(tmp_path: Path) -> None:
    lws = copy.deepcopy(LWS)
    lws["spec"]["startupPolicy"] = "LeaderReady"
    r = compare.compare(_stack(tmp_path, _observed(), lws), kyverno=False)
    assert any("PodGroup minMember [2, 2], the stack's groups [1, 1]" in f for f in r["findings"]), r["findings"]


def test_the_services_pods_seen_again_beside_a_batch_job_are_not_unknown(tmp_path: Path) -> None:
    obs = _observed()
    pods = obs["phases"][0]["pods"]
    obs["phases"].append({"name": "batch Job multinode/x", "settled": True, "seconds": 1, "events": [], "applied": [],
                          "pods": pods + [{**_pod("stray"), "owner": "Job multinode/x"}]})
    r = compare.compare(_stack(tmp_path, obs), kyverno=False)
    assert r["findings"] == ["pod multinode/stray (owner Job multinode/x, phase batch Job multinode/x): not a pod "
                             "of placement.json"], r["findings"]


def test_exclusive_placement_leaders_without_workers_name_the_gang_deadlock(tmp_path: Path) -> None:
    lws = copy.deepcopy(LWS)
    lws["metadata"]["annotations"]["leaderworkerset.sigs.k8s.io/exclusive-topology"] = "topology.k8s.aws/layer-3"
    obs = _observed()
    obs["phases"][0]["pods"] = [_pod("llm-0"), _pod("llm-1")]          # the leaders only: no worker StatefulSet
    r = compare.compare(_stack(tmp_path, obs, lws), kyverno=False)
    # LWS's own behaviour before any scheduler acts: a warning under notChecked (read from the sources), no finding
    assert r["findings"] == [], r["findings"]
    w = next(n for n in r["notChecked"] if "WARNING" in n)
    assert "only the 2 leaders made, placement.json counts 4 pods" in w
    assert "only once its leader is bound" in w and "minMember [2]" in w and "never bound" in w
    # without the annotation the same shortfall is a finding, with no such explanation
    r = compare.compare(_stack(tmp_path / "plain", obs), kyverno=False)
    f = next(f for f in r["findings"] if "2 pods made by LWS, placement.json counts 4" in f)
    assert "leader is bound" not in f
    # with the annotation but a leader missing too, it is a finding (carrying the explanation)
    obs["phases"][0]["pods"].pop()
    r = compare.compare(_stack(tmp_path / "short", obs, lws), kyverno=False)
    f = next(f for f in r["findings"] if "1 pods made by LWS, placement.json counts 4" in f)
    assert "only once its leader is bound" in f
