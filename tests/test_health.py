"""Issue 34 part B: gangs avoid bad nodes (health taints), spare nodes, preflight, the release gate reads health."""
from __future__ import annotations

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
    assert [(v["enforcementLevel"], v["resource"]) for v in out] == [
        ("mandatory", "LeaderWorkerSet research/byo-llama")]
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


# ------------------------------------------------------------------ the release gate reads health (item 5)
def _node(name, pool="gpu", taints=(), cordoned=False):
    from multinode.release.health import NodeInfo
    return NodeInfo(name, {"multinode.dev/node-pool": pool}, list(taints), cordoned)


def _release(nodes, spare=1, pools=None):
    from multinode.release import pipeline as p
    from multinode.release.health import PoolHealthSpec
    from tests import test_release as R

    class Cluster(R.FakeCluster):
        def list_nodes(self):
            return list(nodes)

    base = R.cluster_with(50, 40, True)
    cluster = Cluster(base.configmaps, base.pods)
    calls: list[tuple] = []
    ws = R.Workspace(calls, prod=R.FakeStack("prod", calls))
    pools = [PoolHealthSpec("gpu", {"multinode.dev/node-pool": "gpu"}, spare, 4)] if pools is None else pools
    clock = R.FakeClock()
    waiter = R.bw.VerdictWaiter(parse=R.fake_parse, interval=5, clock=clock, sleep=clock.sleep)
    opts = p.ReleaseOptions(stack="prod", policy_packs=["/repo/policy"], timeout=60, revision="abcdef1234567890")
    report = p.run_release(opts, open_stack=ws, connect_cluster=lambda _kc: cluster, bandwidth_check=waiter,
                           checks=[R.CHECK], pools=pools, now=lambda: R.NOW, clock=clock, log=lambda _m: None)
    return report, ws.stacks["prod"]


QUARANTINED = {"key": "node.kubernetes.io/unschedulable", "effect": "NoSchedule"}


def test_release_passes_with_bad_nodes_within_the_spares():
    from multinode.release import pipeline as p
    report, stack = _release([_node("a"), _node("b", taints=[QUARANTINED]), _node("c"), _node("d")], spare=1)
    assert report.exit_code == p.EXIT_OK, report.message
    assert [s["name"] for s in report.steps][-2:] == ["bandwidth-check", "health-gate"]
    doc = report.to_json()
    assert doc["health"]["pass"] is True and doc["health"]["pools"][0]["unhealthy"] == {"b": [
        "node.kubernetes.io/unschedulable:NoSchedule"]}
    assert stack.tags[p.TAG_KEY].startswith("pass ")


def test_release_gate_blocks_on_a_tainted_pool():
    from multinode.release import pipeline as p
    nodes = [_node("a", taints=[QUARANTINED]), _node("b", cordoned=True),
             _node("c", taints=[{"key": "nvidia.com/gpu-error", "value": "fatal", "effect": "NoSchedule"}]),
             _node("d"), _node("x", pool="cpu", taints=[QUARANTINED])]       # another pool's node is not counted
    report, stack = _release(nodes, spare=1)
    assert report.exit_code == p.EXIT_HEALTH, report.message
    doc = report.to_json()
    assert doc["outcome"] == "nodes-unhealthy" and doc["health"]["pass"] is False
    assert "pool gpu: 3 unhealthy of 4 node(s), more than its 1 spare" in report.message
    assert report.steps[-1] == {**report.steps[-1], "name": "health-gate", "status": "failed"}
    assert stack.tags[p.TAG_KEY].startswith("fail ")       # the verdict is recorded: promotion from it is refused


def test_a_node_not_ready_counts_and_zero_spares_refuse_one_bad_node():
    from multinode.release import pipeline as p
    nodes = [_node("a", taints=[{"key": "node.kubernetes.io/not-ready", "effect": "NoExecute"}]), _node("b")]
    assert _release(nodes, spare=0)[0].exit_code == p.EXIT_HEALTH
    assert _release([_node("a"), _node("b", taints=[{"key": "nvidia.com/gpu", "effect": "NoSchedule"}])],
                    spare=0)[0].exit_code == p.EXIT_OK          # a GPU taint is not a health taint


def test_pools_for_stack_reads_selectors_and_spares():
    from multinode import pools as mpools
    from multinode.release.health import pools_for_stack
    specs = pools_for_stack("aws-dev")
    assert specs and all(mpools.POOL_LABEL in s.selector or s.selector for s in specs)
    assert all(0 <= s.spare_nodes <= s.node_count for s in specs)


def test_pools_for_stack_file_reads_a_stack_file_anywhere(tmp_path):
    """The cluster box's day two runs the gate on test stacks outside stacks/ (conformance/cluster/health_gate.py)."""
    from multinode import stackfile
    from multinode.release.health import pools_for_stack, pools_for_stack_file
    f = tmp_path / "Pulumi.elsewhere.yaml"
    f.write_text(stackfile.stack_path("aws-dev").read_text())
    assert pools_for_stack_file(f) == pools_for_stack("aws-dev")
