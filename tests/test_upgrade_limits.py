"""Issue 40 item 7: upgrade settings stay inside the clouds' own limits (multinode/upgrades.py). Each limit is tested
at its boundary: the limit passes, one past it is refused (config time, exit 2 from plan, naming the key and the fix)
or, where it is a default of ours, clamped with an advisory; the rendered value never exceeds the cloud's limit."""
from __future__ import annotations

from typing import Any

import pytest

from multinode import checks, upgrades

from .cloudrun import of_type, problems, run
from .conftest import example_raw


def _gang(stack: str, nodes: int, pool_nodes: int | None = None) -> tuple[dict[str, Any], set[str]]:
    """The example stack with one pool and one Volcano job of `nodes` nodes on it."""
    raw, secrets = example_raw(stack)
    raw["nodePools"] = raw["nodePools"][:1]
    raw["nodePools"][0]["nodeCount"] = pool_nodes or nodes + 1
    raw["nodePools"][0].pop("capacityReservation", None)
    pool = raw["nodePools"][0]["name"]
    job = next((w for w in raw["workloads"] if w["kind"] == "volcano-training"), None)
    if job is None:          # azure-dev runs no training job: its LWS, sized by the defaults
        job = next(w for w in raw["workloads"] if w["kind"] == "lws-inference")
        job = {k: v for k, v in job.items() if k not in ("tensorParallel", "pipelineParallel")}
        job["replicas"] = 1
    raw["workloads"] = [{**job, "nodePool": pool, "nodes": nodes}]
    return raw, secrets


# ------------------------------------------------------------------ EKS maxUnavailable <= 100
@pytest.mark.parametrize("nodes,rendered,advised", [(100, 100, False), (101, 100, True), (300, 100, True)])
def test_eks_max_unavailable_never_exceeds_the_apis_maximum(nodes, rendered, advised):
    """The default surge follows the largest gang; EKS's NodegroupUpdateConfig.maxUnavailable stops at 100."""
    raw, secrets = _gang("aws-dev", nodes)
    cfg = checks.load(raw, secrets)
    p = upgrades.plan_pool(cfg, cfg.node_pools[0])
    assert p.settings["update_config"]["max_unavailable"] == rendered == p.max_unavailable
    adv = [a for a in checks.advisories(cfg) if a.path == "nodePools[0].upgrade.surge"]
    assert bool(adv) == advised
    if advised:
        assert f"spans {nodes} nodes" in adv[0].message and "100" in adv[0].message
        assert any("above EKS's maximum maxUnavailable of 100" in n for n in p.notes)


def test_eks_max_unavailable_reaches_the_node_group():
    raw, secrets = _gang("aws-dev", 101)
    reg = of_type(run(raw, secrets, "aws-dev"), "aws:eks/nodeGroup:NodeGroup")[0]
    assert reg.inputs["updateConfig"]["maxUnavailable"] == 100


@pytest.mark.parametrize("surge,ok", [(100, True), (101, False)])
def test_an_explicit_surge_is_bounded_at_the_eks_limit(surge, ok):
    raw, secrets = _gang("aws-dev", 2, 4)
    raw["nodePools"][0]["upgrade"] = {"surge": surge}
    found = problems(raw, secrets)
    assert (not any(p == "nodePools[0].upgrade.surge" for p, _ in found)) == ok, found


# ------------------------------------------------------------------ AKS drain timeout >= 5 minutes
@pytest.mark.parametrize("minutes,ok", [(5, True), (4, False), (1, False), (1440, True)])
def test_aks_drain_timeout_below_its_minimum_is_refused(minutes, ok):
    raw, secrets = _gang("azure-dev", 2, 4)
    raw["nodePools"][0]["upgrade"] = {"drainTimeoutMinutes": minutes}
    found = [(p, m) for p, m in problems(raw, secrets) if p == "nodePools[0].upgrade.drainTimeoutMinutes"]
    assert (not found) == ok, found
    if not ok:
        assert "minimum node drain timeout of 5 minutes" in found[0][1] and "set 5 to 1440" in found[0][1]


def test_the_aks_minimum_is_azures_only():
    raw, secrets = _gang("aws-dev", 2, 4)
    raw["nodePools"][0]["upgrade"] = {"drainTimeoutMinutes": 1}
    assert not [p for p, _ in problems(raw, secrets) if "drainTimeoutMinutes" in p]


# ------------------------------------------------------------------ blueGreen where nothing renders it or it is refused
@pytest.mark.parametrize("stack,why,fix", [("gcp-dev", "COMPACT placement", "use strategy surge"),
                                           ("oci-dev", "nothing renders blueGreen on oci", "use strategy surge"),
                                           ("existing-dev", "this stack creates no node pool", "remove the key")])
def test_blue_green_is_refused_where_the_cloud_cannot_take_it(stack, why, fix):
    raw, secrets = example_raw(stack)
    raw["nodePools"][0]["upgrade"] = {"strategy": "blueGreen"}
    found = [(p, m) for p, m in problems(raw, secrets) if p == "nodePools[0].upgrade.strategy"]
    assert len(found) == 1 and why in found[0][1] and fix in found[0][1], found
    raw["nodePools"][0]["upgrade"] = {"strategy": "surge"}
    assert not [p for p, _ in problems(raw, secrets) if p.endswith("upgrade.strategy")]


@pytest.mark.parametrize("stack", ["aws-dev", "azure-dev"])
def test_blue_green_stays_where_it_is_rendered(stack):
    raw, secrets = example_raw(stack)
    raw["nodePools"][0].pop("capacityReservation", None)
    raw["nodePools"][0]["upgrade"] = {"strategy": "blueGreen"}
    assert not [p for p, _ in problems(raw, secrets) if p.endswith("upgrade.strategy")]


def test_gke_never_renders_blue_green():
    raw, secrets = example_raw("gcp-dev")
    cfg = checks.load(raw, secrets)
    for pool in cfg.node_pools:
        assert upgrades.plan_pool(cfg, pool).settings["upgrade_settings"]["strategy"] == "SURGE"


# ------------------------------------------------------------------ AWS Capacity Blocks: scaled to 0, not surged
def _block(raw: dict[str, Any]) -> dict[str, Any]:
    raw["nodePools"][0]["capacityReservation"] = {"id": "cr-0fedcba9876543210", "type": "capacityBlock"}
    return raw


def test_a_capacity_block_node_group_is_not_surged():
    raw, secrets = _gang("aws-dev", 2, 4)
    cfg = checks.load(_block(raw), secrets)
    p = upgrades.plan_pool(cfg, cfg.node_pools[0])
    assert p.settings == {} and p.surge == 0 and p.max_unavailable == 0 and not p.room_to_surge
    assert "desired size 0" in p.why_no_room and "capacity-blocks-mng" in p.why_no_room
    adv = [a for a in checks.advisories(cfg) if a.path == "nodePools[0].capacityReservation"]
    assert len(adv) == 1 and "scale it to 0" in adv[0].message
    assert not [a for a in checks.advisories(cfg) if a.path == "nodePools[0]"]     # no "add nodes" advice
    assert "scaled to 0" in upgrades.gang_effect(p, p.gangs[0])
    reg = of_type(run(_block(_gang("aws-dev", 2, 4)[0]), secrets, "aws-dev"), "aws:eks/nodeGroup:NodeGroup")[0]
    assert "updateConfig" not in reg.inputs


@pytest.mark.parametrize("upgrade,key", [({"surge": 2}, "nodePools[0].upgrade.surge"),
                                         ({"strategy": "blueGreen"}, "nodePools[0].upgrade.strategy")])
def test_surge_or_blue_green_on_a_capacity_block_is_refused(upgrade, key):
    raw, secrets = _gang("aws-dev", 2, 4)
    raw["nodePools"][0]["upgrade"] = upgrade
    assert not [p for p, _ in problems(raw, secrets) if p == key]          # an on-demand node group takes it
    found = [(p, m) for p, m in problems(_block(raw), secrets) if p == key]
    assert len(found) == 1 and "desired size 0" in found[0][1], found
