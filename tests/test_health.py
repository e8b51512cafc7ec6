"""Issue 34 part B: gangs avoid bad nodes (health taints), spare nodes, preflight, the release gate reads health."""
from __future__ import annotations

import copy

import pytest

from multinode import health, stackfile
from policy import objects
from policy.engine import Context, Resource
from policy.pack import evaluate
from policy.rules import health as rule
from tests import policy_fixtures as F


def _rec(obj):
    return {"type": f"kubernetes:{obj['apiVersion']}:{obj['kind']}", "name": obj["metadata"]["name"],
            "urn": f"urn:x::{obj['metadata']['name']}", "inputs": obj, "protect": False, "retainOnDelete": False}


def _tolerating(tolerations, role="workerTemplate"):
    obj = F.lws()
    obj["spec"]["leaderWorkerTemplate"][role]["spec"]["tolerations"] = tolerations
    return obj


def _found(obj):
    return list(rule.check_no_health_toleration(Resource.from_record(_rec(obj)), Context()))


# ------------------------------------------------------------------ the taint keys
def test_health_keys_match_kubernetes_and_nvsentinel_defaults():
    assert health.UNSCHEDULABLE == "node.kubernetes.io/unschedulable"      # what a cordon (NVSentinel's default) sets
    assert health.NOT_READY == "node.kubernetes.io/not-ready"
    assert health.UNREACHABLE == "node.kubernetes.io/unreachable"
    assert health.NVSENTINEL_GPU_ERROR == "nvidia.com/gpu-error"
    assert health.DEFAULT_TOLERATION_SECONDS == 300
    assert all(" " in src and ":" in src for src in health.HEALTH_TAINTS.values())   # each with a source


@pytest.mark.parametrize("tolerations,expected", [
    ([{"key": "node.kubernetes.io/unschedulable", "operator": "Exists", "effect": "NoSchedule"}],
     ["node.kubernetes.io/unschedulable"]),
    ([{"key": "nvidia.com/gpu-error", "operator": "Equal", "value": "fatal"}], ["nvidia.com/gpu-error"]),
    ([{"operator": "Exists"}], ["*"]),                                             # tolerates everything
    ([{"key": "node.kubernetes.io/not-ready", "operator": "Exists", "effect": "NoExecute"}],   # forever
     ["node.kubernetes.io/not-ready"]),
    ([{"key": "node.kubernetes.io/unreachable", "operator": "Exists", "effect": "NoExecute",
       "tolerationSeconds": 3600}], ["node.kubernetes.io/unreachable"]),
    ([{"key": "node.kubernetes.io/unreachable", "operator": "Exists", "effect": "NoExecute",
       "tolerationSeconds": 300}], []),                                           # Kubernetes' own default
    ([{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}], []),
    ([{"key": "", "operator": "Equal"}], []),                                       # matches nothing
    (["junk", None], []),
])
def test_tolerated_health_taints(tolerations, expected):
    assert health.tolerated_health_taints(tolerations) == expected


# ------------------------------------------------------------------ the pack rule (planted defects)
def test_clean_lws_passes():
    assert _found(F.lws()) == []


@pytest.mark.parametrize("tol", [
    [{"key": "node.kubernetes.io/unschedulable", "operator": "Exists"}],
    [{"operator": "Exists"}],
    [{"key": "nvidia.com/gpu-error", "operator": "Exists", "effect": "NoSchedule"}],
    [{"key": "node.kubernetes.io/not-ready", "operator": "Exists", "effect": "NoExecute"}],
])
@pytest.mark.parametrize("role", ["leaderTemplate", "workerTemplate"])
def test_gang_tolerating_a_health_taint_is_refused(tol, role):
    found = _found(_tolerating(tol, role))
    assert len(found) == 1 and "tolerate" in found[0] and "Remove the toleration" in found[0], found


def test_refused_through_the_pack_as_mandatory():
    bad = _tolerating([{"operator": "Exists"}])
    out = [v for v in evaluate([_rec(bad)]) if v["policy"] == rule.RULE]
    assert [(v["enforcementLevel"], v["resource"]) for v in out] == [("mandatory", "LeaderWorkerSet research/byo-llama")]
    assert [v for v in evaluate([_rec(F.lws())]) if v["policy"] == rule.RULE] == []


def test_other_gang_kinds_are_read_too():
    job = F.volcano_job()
    task = job["spec"]["tasks"][0]["template"]["spec"]
    assert _found(job) == []
    task["tolerations"] = [{"key": "node.kubernetes.io/unschedulable", "operator": "Exists"}]
    assert len(_found(job)) == 1


# ------------------------------------------------------------------ our renderers add no such toleration
@pytest.mark.parametrize("stack", stackfile.list_stacks())
def test_no_rendered_pod_tolerates_a_health_taint(stack, tmp_path):
    """Every object `plan` renders for every example stack (build/<stack>/k8s/*.yaml)."""
    import yaml

    from multinode import plan as mplan
    result = mplan.plan(stack, tmp_path)
    assert result.exit_code == mplan.EXIT_OK, result.error
    files = sorted(tmp_path.glob("**/k8s/*.yaml"))
    assert files, list(tmp_path.iterdir())
    for f in files:
        for obj in yaml.safe_load_all(f.read_text()):
            if not isinstance(obj, dict) or obj.get("kind") == "DaemonSet":
                continue                  # node agents (device plugins, monitors) must run on every node
            for spec in objects.pod_specs_anywhere(obj):
                assert health.tolerated_health_taints(health.pod_spec_tolerations(spec)) == [], (stack, f.name)


# ------------------------------------------------------------------ spare nodes (issue 34 item 2)
def _one_service(pool_nodes: int, kind: str = "lws-inference", nodes: int = 2, replicas: int = 1):
    from multinode import config as mconfig
    from tests.conftest import example_raw
    raw, _ = example_raw("aws-dev")
    raw["nodePools"] = raw["nodePools"][:1]
    raw["nodePools"][0]["nodeCount"] = pool_nodes
    raw["nodePools"][0].pop("capacityReservation", None)
    pool = raw["nodePools"][0]["name"]
    lws = next(w for w in raw["workloads"] if w["kind"] == "lws-inference")
    w = {**lws, "nodePool": pool, "nodes": nodes, "replicas": replicas}
    w.pop("tensorParallel", None)
    w.pop("pipelineParallel", None)
    raw["workloads"] = [w]
    return mconfig.load(raw, {k for k in raw if k in mconfig.SECRET_KEYS})


def test_multi_node_service_without_spare_node_gets_the_advisory():
    from multinode import upgrades
    full = _one_service(2)
    adv = upgrades.health_advisories(full)
    assert len(adv) == 1, adv
    assert adv[0].path == "nodePools[0].nodeCount"
    assert "no spare node" in adv[0].message and "Set nodeCount to 3" in adv[0].message
    assert full.node_pools[0].name in adv[0].message
    # one more node: one spare, no advisory; the plan line says one bad node is survived
    roomy = _one_service(3)
    assert upgrades.health_advisories(roomy) == []
    p = upgrades.plan_pool(roomy, roomy.node_pools[0])
    assert p.as_dict()["badNodesSurvived"] == 1
    assert "1 spare node(s)" in upgrades.health_line(p)
    # two groups of 2 on 4 nodes: no spare again
    assert len(upgrades.health_advisories(_one_service(4, replicas=2))) == 1


def test_batch_jobs_and_single_node_services_get_no_spare_advisory():
    from multinode import upgrades
    single = _one_service(2)
    single.workloads[0].nodes = 1                  # one node per group: a bad node moves one pod, no gang waits
    assert upgrades.services_without_spare(upgrades.plan_pool(single, single.node_pools[0])) == []
    cfg = _one_service(2)
    cfg.workloads[0].kind = "volcano-training"       # a batch job restarts from its checkpoint and waits
    assert upgrades.services_without_spare(upgrades.plan_pool(cfg, cfg.node_pools[0])) == []


def test_spare_advisory_reaches_plan(tmp_path):
    from multinode import checks as mchecks
    assert any(a.path == "nodePools[0].nodeCount" and "no spare node" in a.message
               for a in mchecks.advisories(_one_service(2)))
