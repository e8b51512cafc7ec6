"""compare.py budget_findings on hand-made observations (no Go needed): a budget whose gang is bound and Ready must
have status.disruptionsAllowed >= 1 as the disruption controller wrote it (issue 40); each case planted. The box
itself is run on a Volcano Job with the old `maxUnavailable: 1` budget in test_box_budgets.py."""
from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
import compare  # noqa: E402

SYNC_FAILED = {"type": "DisruptionAllowed", "status": "False", "reason": "SyncFailed",
               "message": 'jobs.batch.volcano.sh does not implement the scale subresource'}
SUFFICIENT = {"type": "DisruptionAllowed", "status": "True", "reason": "SufficientPods", "message": ""}


def _budget(allowed: int, selected: int = 4, bound: int = 4, ready: int = 4, settled: bool = True,
            conditions: list[dict[str, Any]] | None = None, spec: dict[str, Any] | None = None) -> dict[str, Any]:
    return {"namespace": "multinode", "name": "train-gang", "spec": spec or {"minAvailable": "3"},
            "disruptionsAllowed": allowed, "currentHealthy": ready, "desiredHealthy": 3, "expectedPods": selected,
            "conditions": conditions if conditions is not None else [SUFFICIENT], "selected": selected,
            "bound": bound, "ready": ready, "settled": settled}


def _phases(*budgets: dict[str, Any]) -> list[dict[str, Any]]:
    return [{"name": "services", "budgets": [dict(b, selected=0, bound=0, ready=0) for b in budgets]},
            {"name": "batch Job multinode/train", "budgets": list(budgets)}]


def test_a_whole_gang_whose_budget_allows_one_disruption_passes() -> None:
    findings, not_checked, summary = compare.budget_findings(_phases(_budget(1)))
    assert findings == [] and not_checked == []
    assert summary[0]["verdict"] == "ok" and summary[0]["judged"][0]["phase"] == "batch Job multinode/train"


def test_the_old_maxunavailable_on_a_volcano_job_is_a_finding_with_the_controllers_reason() -> None:
    b = _budget(0, conditions=[SYNC_FAILED], spec={"maxUnavailable": "1"})
    findings, _, summary = compare.budget_findings(_phases(b))
    assert len(findings) == 1 and "PodDisruptionBudget multinode/train-gang (maxUnavailable 1" in findings[0]
    assert "disruptionsAllowed 0" in findings[0] and "reason SyncFailed" in findings[0]
    assert "does not implement the scale subresource" in findings[0]
    assert summary[0]["verdict"] == "differs"


def test_a_budget_the_controller_never_wrote_for_the_bound_pods_is_a_finding() -> None:
    findings, _, _ = compare.budget_findings(_phases(_budget(0, settled=False, conditions=[])))
    assert len(findings) == 1 and "wrote no status" in findings[0] and "no condition written" in findings[0]


def test_a_gang_never_bound_is_not_checked_never_passed() -> None:
    findings, not_checked, summary = compare.budget_findings(_phases(_budget(0, bound=2, ready=2)))
    assert findings == [] and len(not_checked) == 1 and "never all bound" in not_checked[0]
    assert summary[0]["verdict"] == "not checked"


# ---------------------------------------------------------------- LWS's own headless Service (issue 40)
LWS = {"apiVersion": "leaderworkerset.x-k8s.io/v1", "kind": "LeaderWorkerSet",
       "metadata": {"name": "llama", "namespace": "multinode"}, "spec": {}}


def _lws_stack(tmp_path: Path) -> Path:
    import yaml
    (tmp_path / "k8s").mkdir(parents=True)
    (tmp_path / "k8s" / "011-LeaderWorkerSet-llama.yaml").write_text(yaml.safe_dump(LWS))
    return tmp_path


def _services(*svcs: dict[str, Any]) -> list[dict[str, Any]]:
    return [{"name": "services", "services": list(svcs)}]


def test_lws_made_its_headless_service_beside_ours(tmp_path: Path) -> None:
    own = {"namespace": "multinode", "name": "llama", "clusterIP": "None", "owners": ["LeaderWorkerSet/llama"]}
    ours = {"namespace": "multinode", "name": "llama-leader", "clusterIP": "10.0.0.9"}
    assert compare.lws_service_findings(_lws_stack(tmp_path), _services(own, ours)) == []


def test_a_service_of_the_stack_under_the_set_name_is_a_finding(tmp_path: Path) -> None:
    """The rendering before issue 40: our ClusterIP Service named like the set, LWS's never made."""
    ours = {"namespace": "multinode", "name": "llama", "clusterIP": "10.0.0.9"}
    found = compare.lws_service_findings(_lws_stack(tmp_path), _services(ours))
    assert len(found) == 1 and "not LWS's headless Service" in found[0] and "LWS_LEADER_ADDRESS" in found[0]
    found = compare.lws_service_findings(_lws_stack(tmp_path / "b"), _services())
    assert len(found) == 1 and "made no headless Service" in found[0]
