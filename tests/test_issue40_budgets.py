"""Issue 40, items 2 and 3: the LWS client Service leaves the set's name to LWS, and every gang budget allows a drain.

Each test says what it asserted on the rendering before the fix (the old value is planted where the test needs it)."""
from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import pytest
import yaml

from multinode import budgets, stackfile, upgrades
from multinode import config as mconfig
from multinode import plan as mplan
from multinode.budgets import PodSet, allowed_when_whole
from multinode.manifests import workloads as wm
from multinode.manifests.workloads import disruption
from policy.engine import Context, Resource
from policy.rules import disruption as pdb_rule
from policy.rules import names as names_rule

from .conftest import EXAMPLE_STACKS, example_raw

GUIDES = Path(__file__).resolve().parent / "guides"
GUIDE_STACKS = sorted(p.stem.removeprefix("Pulumi.") for p in GUIDES.glob("Pulumi.*.yaml"))
LWS_NAME = "leaderworkerset.sigs.k8s.io/name"
GROUP = "leaderworkerset.sigs.k8s.io/group-index"


def _cfg(raw: dict[str, Any]) -> mconfig.StackConfig:
    return mconfig.load(raw, {k for k in raw if k in mconfig.SECRET_KEYS})


def _raw(stack: str) -> dict[str, Any]:
    if stack in EXAMPLE_STACKS:
        return example_raw(stack)[0]
    raw, _, _ = stackfile.read_stack_file(GUIDES / f"Pulumi.{stack}.yaml")
    return copy.deepcopy(raw)


def _stack_file(stack: str, tmp_path: Path, manifests: list[dict[str, Any]]) -> Path:
    """The stack's own file (its secure values kept) with `manifests` appended."""
    src = stackfile.stack_path(stack) if stack in EXAMPLE_STACKS else GUIDES / f"Pulumi.{stack}.yaml"
    doc = yaml.safe_load(src.read_text())
    doc["config"]["multinode:manifests"] = list(doc["config"].get("multinode:manifests") or []) + manifests
    f = tmp_path / f"Pulumi.{stack}-x.yaml"
    f.write_text(yaml.safe_dump(doc))
    return f


def _objects(raw: dict[str, Any]) -> list[dict[str, Any]]:
    cfg = _cfg(raw)
    out: list[dict[str, Any]] = []
    for w in cfg.workloads:
        out += wm.build(cfg, w).objects
    return out + list(raw.get("manifests") or [])


def _res(objs: list[dict[str, Any]]) -> list[Resource]:
    return [Resource(type="kubernetes:x:y", name=f"o{i}", props=o) for i, o in enumerate(objs)]


def _drain(objs: list[dict[str, Any]]) -> list[str]:
    return [m for _, m in pdb_rule.check_budgets_allow_a_drain(_res(objs), Context())]


def _names(objs: list[dict[str, Any]]) -> list[str]:
    return [m for _, m in names_rule.check_service_names(_res(objs), Context())]


# ---------------------------------------------------------------- A. the LWS client Service
@pytest.mark.parametrize("stack", ["aws-dev", "nim-lws", "nim-lws-options"])
def test_the_lws_client_service_is_name_leader_and_leaves_the_set_name_to_lws(stack):
    """Before: the Service was named like the LeaderWorkerSet (`llama-405b`), LWS's headless Service could not be
    created and LWS_LEADER_ADDRESS had no DNS record. Asserted `<name>-leader` and no Service with the set's name."""
    objs = _objects(_raw(stack))
    sets = [o for o in objs if o["kind"] == "LeaderWorkerSet"]
    assert sets
    services = {(o["metadata"]["namespace"], o["metadata"]["name"]): o for o in objs if o["kind"] == "Service"}
    for s in sets:
        ns, name = s["metadata"]["namespace"], s["metadata"]["name"]
        assert (ns, name) not in services, f"{stack}: a Service takes {name}, LWS's headless Service name"
        svc = services[(ns, f"{name}-leader")]
        assert svc["spec"]["selector"] == {LWS_NAME: name, "multinode.dev/role": "leader"}
    assert _names(objs) == []


@pytest.mark.parametrize("stack", EXAMPLE_STACKS + GUIDE_STACKS)
def test_no_stack_renders_a_service_named_like_a_controller_s(stack):
    assert _names(_objects(_raw(stack))) == []


def test_the_pack_refuses_a_service_named_like_a_leaderworkerset_or_an_mpijob():
    """The old rendering planted back (the Service renamed to the set's name) and a hand-written Service named like
    an MPIJob (commit b170870's case): both refused, naming metadata.name and the fix."""
    objs = _objects(_raw("aws-dev"))
    lws = next(o for o in objs if o["kind"] == "LeaderWorkerSet")
    svc = next(o for o in objs if o["kind"] == "Service" and o["metadata"]["name"].endswith("-leader"))
    svc["metadata"]["name"] = lws["metadata"]["name"]
    found = _names(objs)
    assert len(found) == 1 and "metadata.name 'llama-405b'" in found[0] and "llama-405b-leader" in found[0], found
    assert "LWS_LEADER_ADDRESS" in found[0]
    mpi = {"apiVersion": "kubeflow.org/v2beta1", "kind": "MPIJob", "metadata": {"name": "nim", "namespace": "ml"},
           "spec": {}}
    hand = {"apiVersion": "v1", "kind": "Service", "metadata": {"name": "nim", "namespace": "ml"}, "spec": {}}
    other_ns = {"apiVersion": "v1", "kind": "Service", "metadata": {"name": "nim", "namespace": "other"}, "spec": {}}
    found = _names([mpi, hand, other_ns])
    assert len(found) == 1 and "Service ml/nim" in found[0] and "nim-api" in found[0]
    assert "ErrResourceExists" in found[0]


def test_plan_refuses_a_hand_written_service_named_like_the_set(tmp_path):
    """Mandatory in plan: a `manifests` Service taking the LWS's name exits 1 with the rule's finding."""
    raw = _raw("aws-dev")
    lws = next(w for w in raw["workloads"] if w["kind"] == "lws-inference")
    f = _stack_file("aws-dev", tmp_path, [{
        "apiVersion": "v1", "kind": "Service",
        "metadata": {"name": lws["name"], "namespace": lws.get("namespace", "multinode")},
        "spec": {"selector": {"app": "x"}, "ports": [{"port": 80}]}}])
    res = mplan.plan("svc", tmp_path / "build", f)
    found = [v for v in res.violations if v["policy"] == "service-name-not-taken-by-controller"]
    assert res.exit_code == mplan.EXIT_POLICY and found and found[0]["enforcementLevel"] == "mandatory", res.violations


# ---------------------------------------------------------------- B. the disruption controller's arithmetic
def test_allowed_when_whole_follows_the_disruption_controller():
    job = [PodSet(4, "batch.volcano.sh/Job", "j")]
    assert allowed_when_whole({"maxUnavailable": 1}, job)[0] == 0             # SyncFailed: no scale subresource
    assert "SyncFailed" in allowed_when_whole({"maxUnavailable": 1}, job)[1]
    assert allowed_when_whole({"minAvailable": "75%"}, job)[0] == 0           # a percentage needs the scale too
    assert allowed_when_whole({"minAvailable": 3}, job)[0] == 1
    assert allowed_when_whole({"minAvailable": 4}, job)[0] == 0
    # one LWS group of size 2: leader StatefulSet (scale = groups) + the group's worker StatefulSet (1)
    for groups, allowed in ((1, 1), (2, 0), (3, 0)):
        group = [PodSet(1, "apps/StatefulSet", "leaders", groups), PodSet(1, "apps/StatefulSet", "g0", 1)]
        assert allowed_when_whole({"maxUnavailable": 1}, group)[0] == allowed, groups
        assert allowed_when_whole({"minAvailable": 1}, group)[0] == 1
    clique = [PodSet(3, "grove.io/PodClique", "c", 3)]
    assert allowed_when_whole({"maxUnavailable": 1}, clique)[0] == 1
    assert allowed_when_whole({"maxUnavailable": 0}, clique)[0] == 0
    assert allowed_when_whole({"maxUnavailable": "50%"}, clique)[0] == 2     # rounded up, as intstr does
    assert allowed_when_whole({"minAvailable": "100%"}, clique)[0] == 0


@pytest.mark.parametrize("stack", EXAMPLE_STACKS + GUIDE_STACKS)
def test_every_rendered_budget_allows_one_drain_of_its_whole_gang(stack):
    """Before: every Job-like gang's budget was maxUnavailable 1 (0 allowed, SyncFailed); the rule refused them."""
    objs = _objects(_raw(stack))
    assert _drain(objs) == []
    for b in (o for o in objs if o["kind"] == "PodDisruptionBudget"):
        spec = b["spec"]
        if "minAvailable" in spec:
            assert isinstance(spec["minAvailable"], int) and spec["minAvailable"] >= 1, b
        else:
            assert spec["maxUnavailable"] == 1, b


@pytest.mark.parametrize("stack,kind", [("aws-dev", "volcano-training"), ("existing-dev", "indexed-job"),
                                        ("existing-dev", "mpijob"), ("nim-mpijob", "mpijob"),
                                        ("volcano-llm-training", "volcano-training")])
def test_the_old_maxunavailable_on_a_job_like_gang_is_refused_naming_the_key_and_the_form(stack, kind):
    raw = _raw(stack)
    objs = _objects(raw)
    names = {w["name"] for w in raw["workloads"] if w["kind"] == kind}
    assert names, stack
    planted = 0
    for b in objs:
        if b["kind"] == "PodDisruptionBudget" and b["metadata"]["labels"]["multinode.dev/workload"] in names:
            want = b["spec"].pop("minAvailable")
            b["spec"]["maxUnavailable"] = 1              # the rendering before issue 40
            planted += 1
    assert planted
    found = _drain(objs)
    assert len(found) == planted, found
    assert all("spec.maxUnavailable (1)" in m and "SyncFailed" in m and "integer minAvailable" in m for m in found)
    assert any(f"minAvailable: {want}" in m for m in found), found


def test_the_old_lws_budget_with_two_groups_is_refused():
    raw = _raw("aws-dev")
    next(w for w in raw["workloads"] if w["kind"] == "lws-inference")["replicas"] = 2
    raw["nodePools"][0]["nodeCount"] = 6
    objs = _objects(raw)
    assert _drain(objs) == []
    groups = [o for o in objs if o["kind"] == "PodDisruptionBudget" and "-group-" in o["metadata"]["name"]]
    assert len(groups) == 2 and all(g["spec"]["minAvailable"] == 1 for g in groups)
    for g in groups:
        del g["spec"]["minAvailable"]
        g["spec"]["maxUnavailable"] = 1
    found = _drain(objs)
    assert len(found) == 2 and all("controllers' scale 3" in m and "minAvailable: 1" in m for m in found), found


@pytest.mark.parametrize("spec", [{"maxUnavailable": 0}, {"minAvailable": "all"}, {"minAvailable": "100%"},
                                  {"maxUnavailable": "50%"}, {"minAvailable": "50%"}, {"maxUnavailable": 1}])
def test_a_hand_written_budget_that_blocks_every_drain_is_refused(spec):
    """The torchrun guide's hand-written Indexed Job (its pods are a batch Job's) with a budget of each blocking form:
    none was refused before (the pack only asked that a budget exist)."""
    raw = _raw("torchrun-guide-indexed-job")
    job = next(o for o in raw["manifests"] if o["kind"] == "Job")
    labels = job["spec"]["template"]["metadata"]["labels"]
    n = job["spec"]["parallelism"]
    if spec.get("minAvailable") == "all":
        spec = {"minAvailable": n}
    pdb = {"apiVersion": "policy/v1", "kind": "PodDisruptionBudget",
           "metadata": {"name": "hand", "namespace": job["metadata"].get("namespace", "default")},
           "spec": {**spec, "selector": {"matchLabels": labels}}}
    found = _drain(_objects(raw) + [pdb])
    assert len(found) == 1 and "hand" in found[0] and "allows 0 disruptions" in found[0], found
    assert f"integer minAvailable: {n - 1}" in found[0]      # the form that works for a Job's pods
    ok = dict(pdb, spec={"minAvailable": n - 1, "selector": {"matchLabels": labels}})
    assert _drain(_objects(raw) + [ok]) == []


def test_the_drain_rule_is_mandatory_in_plan_and_a_team_config_lowers_it(tmp_path):
    raw = _raw("torchrun-guide-indexed-job")
    job = next(o for o in raw["manifests"] if o["kind"] == "Job")
    f = _stack_file("torchrun-guide-indexed-job", tmp_path, [{
        "apiVersion": "policy/v1", "kind": "PodDisruptionBudget",
        "metadata": {"name": "hand", "namespace": job["metadata"].get("namespace", "default")},
        "spec": {"maxUnavailable": 0, "selector": {"matchLabels": job["spec"]["template"]["metadata"]["labels"]}}}])
    cfg = tmp_path / "team.json"
    cfg.write_text('{"indexed-job-gang-scheduled": "advisory"}')
    res = mplan.plan("g", tmp_path / "b1", f, cfg)
    found = [v for v in res.violations if v["policy"] == "gang-budget-allows-a-drain"]
    assert res.exit_code == mplan.EXIT_POLICY and [v["enforcementLevel"] for v in found] == ["mandatory"]
    cfg.write_text('{"indexed-job-gang-scheduled": "advisory", "gang-budget-allows-a-drain": "advisory"}')
    res = mplan.plan("g", tmp_path / "b2", f, cfg)
    found = [v for v in res.violations if v["policy"] == "gang-budget-allows-a-drain"]
    assert res.exit_code == mplan.EXIT_OK and [v["enforcementLevel"] for v in found] == ["advisory"], res.violations


# ---------------------------------------------------------------- B. a missing budget: the advice and the level
def test_a_missing_budget_names_the_form_for_the_owner_kind():
    """Before: the advice was `maxUnavailable 1` for every gang, the one form that blocks drains of a Job."""
    raw = _raw("torchrun-guide-indexed-job")
    res = _res(_objects(raw))
    batch = [m for _, m in pdb_rule.check_batch_gang_budgets(res, Context())]
    assert batch and all("integer minAvailable" in m and "maxUnavailable" not in m for m in batch), batch
    assert [m for _, m in pdb_rule.check_gang_budgets(res, Context())] == []       # a batch gang: not this rule
    objs = [o for o in _objects(_raw("aws-dev")) if o["kind"] != "PodDisruptionBudget"]
    svc = [m for _, m in pdb_rule.check_gang_budgets(_res(objs), Context())]
    assert len(svc) == 1 and "group 0" in svc[0] and "integer minAvailable: 1" in svc[0], svc


def test_a_hand_written_batch_gang_without_a_budget_is_advisory_by_default(tmp_path):
    """The decision of issue 40: the NeMo-annotated guide Job plans with no mandatory budget finding (before: the
    mandatory multi-node-gang-has-disruption-budget refused it)."""
    res = mplan.plan("torchrun-guide-indexed-job", tmp_path / "build",
                     GUIDES / "Pulumi.torchrun-guide-indexed-job.yaml")
    levels = {(v["policy"], v["enforcementLevel"]) for v in res.violations}
    assert ("multi-node-batch-gang-has-disruption-budget", "advisory") in levels, levels
    assert not [p for p, lvl in levels if "disruption-budget" in p and lvl == "mandatory"], levels


# ---------------------------------------------------------------- B. upgrades.py predicts what the budgets allow
@pytest.mark.parametrize("stack", EXAMPLE_STACKS)
def test_the_upgrade_report_agrees_with_the_rendered_budgets(stack):
    cfg = _cfg(_raw(stack))
    for p in upgrades.plans(cfg):
        for g in p.gangs:
            if g.nodes > 1:
                assert g.drains_allowed == 1 and g.budget, (stack, g)
                assert "lets one pod go" in upgrades.gang_effect(p, g)


def test_the_upgrade_report_says_a_drain_is_refused_under_the_old_form(monkeypatch):
    """The old form (maxUnavailable 1 for every gang) planted in the one place both read it: the report says the
    drain is refused for the Volcano job and for an LWS of two groups, and the manifests render the same form."""
    raw = _raw("aws-dev")
    next(w for w in raw["workloads"] if w["kind"] == "lws-inference")["replicas"] = 2
    raw["nodePools"][0]["nodeCount"] = 6
    cfg = _cfg(raw)
    monkeypatch.setattr(budgets, "form_for", lambda kind, pods: {})
    p = upgrades.plan_pool(cfg, cfg.node_pools[0])
    refused = {g.workload for g in p.gangs if "allows no disruption" in upgrades.gang_effect(p, g)}
    assert refused == {w.name for w in cfg.workloads if w.kind in ("lws-inference", "volcano-training")}, refused
    monkeypatch.setattr(disruption, "form_for", lambda kind, pods: {})
    rendered = [b for w in cfg.workloads for b in disruption.budgets(cfg, w, wm.build(cfg, w).objects)]
    assert rendered and all(b["spec"].get("maxUnavailable") == 1 for b in rendered)
