"""Frontier scale (issue 47): what plan no longer does at every run is done here, once per rendered stack."""
from __future__ import annotations

from pathlib import Path

import pytest

from multinode import placement, schema_check
from multinode import plan as mplan
from policy.engine import Context, Resource
from policy.rules.gangs import check_gang_schema, rendered_by_project

ROOT = Path(__file__).resolve().parent.parent
STACKS = sorted([*ROOT.glob("stacks/Pulumi.*.yaml"), *ROOT.glob("tests/guides/Pulumi.*.yaml")])


def _gang_objects(path: Path) -> list[tuple[str, dict]]:
    result = mplan.plan(path.stem.split(".", 1)[1], None, path)       # the mocks of its cloud (or the fleet's)
    assert result.exit_code in (mplan.EXIT_OK, mplan.EXIT_POLICY), result.error
    out = []
    for r in result.registrations:
        if not mplan.is_k8s_object(r):
            continue
        group = str(r.inputs.get("apiVersion", "")).rpartition("/")[0]
        if group not in ("", "apps", "batch") and (group, r.inputs.get("kind")) in placement.READERS:
            out.append((r.urn, r.inputs))
    return out


@pytest.mark.parametrize("path", STACKS, ids=lambda p: p.stem.split(".", 1)[1])
def test_every_gang_object_the_project_renders_matches_its_crd(path):
    """The rule gang-object-schema skips the objects of the project's own renderers (policy/rules/gangs.py,
    RENDERING_COMPONENTS); this is where they are validated: every gang object of every example and guide stack."""
    got = _gang_objects(path)
    if path.stem.endswith(("fleet-dev",)):
        assert got, "the fleet stack renders a Volcano Job"
    for urn, obj in got:
        assert schema_check.validate_object(obj) == [], urn


def test_the_rule_skips_rendered_objects_and_validates_hand_written_ones():
    bad = {"apiVersion": "leaderworkerset.x-k8s.io/v1", "kind": "LeaderWorkerSet", "metadata": {"name": "l"},
           "spec": {"replicas": "two", "leaderWorkerTemplate": {"size": 2, "workerTemplate": {"spec": {
               "containers": [{"name": "c", "image": "x"}]}}}}}
    typ = "kubernetes:leaderworkerset.x-k8s.io/v1:LeaderWorkerSet"
    ours = ("urn:pulumi:dev::proj::multinode:index:Platform$multinode:index:Workload$" + typ + "::l")
    byo = "urn:pulumi:dev::proj::multinode:index:Platform$" + typ + "::manifest-l"
    other = "urn:pulumi:dev::proj::" + typ + "::l"
    assert rendered_by_project(ours) and not rendered_by_project(byo) and not rendered_by_project(other)
    assert not rendered_by_project("") and not rendered_by_project("urn:pulumi:dev::proj::multinode:index:Workload::w")
    assert list(check_gang_schema(Resource(type=typ, name="l", urn=ours, props=bad), Context())) == []
    for urn in (byo, other, ""):
        (msg,) = check_gang_schema(Resource(type=typ, name="l", urn=urn, props=bad), Context())
        assert "spec.replicas" in msg and "not a valid LeaderWorkerSet" in msg


# ------------------------------------------------------------------ cloud limits at scale (issue 47 item 3)
def _pools(n_pools: int, nodes: int, template: dict) -> list[dict]:
    return [{**template, "name": f"gpu{i}", "nodeCount": nodes} for i in range(n_pools)]


def _load(tmp_path, stack, edit):
    from multinode import checks, stackfile
    from tests.cloudstacks import write_variant
    raw, secrets, _ = stackfile.read_stack_file(write_variant(tmp_path, stack, edit))
    return checks.load(raw, secrets)


def _advised(cfg, key):
    from multinode import checks
    return [a for a in checks.advisories(cfg) if a.path == key]


@pytest.mark.parametrize("nodes,advised", [(450, False), (451, True)])
def test_eks_nodes_per_managed_node_group_is_a_quota_to_raise(tmp_path, nodes, advised):
    def edit(c):
        c["multinode:nodePools"][0]["nodeCount"] = nodes
    cfg = _load(tmp_path, "aws-dev", edit)
    got = _advised(cfg, "nodePools[0].nodeCount")
    got = [a for a in got if "Nodes per managed node group" in a.message]
    assert bool(got) is advised
    if advised:
        assert "(450, adjustable; docs.aws.amazon.com/eks/latest/userguide/service-quotas.html)" in got[0].message
        assert "Service Quotas" in got[0].message and "split the pool" in got[0].message


@pytest.mark.parametrize("pools,advised", [(30, False), (31, True)])
def test_eks_managed_node_groups_per_cluster_is_a_quota_to_raise(tmp_path, pools, advised):
    def edit(c):
        c["multinode:nodePools"] = _pools(pools, 2, c["multinode:nodePools"][0])
        for w in c.get("multinode:workloads") or []:
            w["nodePool"] = "gpu0"
    cfg = _load(tmp_path, "aws-dev", edit)
    got = [a for a in _advised(cfg, "nodePools") if "Managed node groups per cluster" in a.message]
    assert bool(got) is advised
    if advised:
        assert got[0].message.startswith("31 pools are 31 EKS managed node groups")
        assert "(30, adjustable" in got[0].message


@pytest.mark.parametrize("pools,nodes,outcome", [(2, 500, "ok"), (3, 334, "advised"), (10, 500, "advised"),
                                                 (11, 455, "refused")])
def test_aks_nodes_per_cluster_limit_and_its_default_quota(tmp_path, pools, nodes, outcome):
    """1,000 nodes pass quietly; 1,001-5,000 are advised (the default node limit quota); 5,005 are refused."""
    from multinode.errors import ConfigError

    def edit(c):
        c["multinode:nodePools"] = _pools(pools, nodes, c["multinode:nodePools"][0])
        for w in c.get("multinode:workloads") or []:
            w["nodePool"] = "gpu0"
    if outcome == "refused":
        with pytest.raises(ConfigError) as e:
            _load(tmp_path, "azure-dev", edit)
        (p,) = [p for p in e.value.problems if p.path == "nodePools"]
        assert p.message.startswith(f"{pools * nodes} nodes over all pools") and "maximum of 5000" in p.message
        assert "learn.microsoft.com/azure/aks/quotas-skus-regions" in p.message
        return
    cfg = _load(tmp_path, "azure-dev", edit)
    got = [a for a in _advised(cfg, "nodePools") if "default node limit" in a.message]
    assert bool(got) is (outcome == "advised")


def test_plan_exits_2_on_a_hard_cloud_limit_before_writing_anything(tmp_path):
    from tests.cloudstacks import write_variant

    def edit(c):
        c["multinode:nodePools"] = _pools(11, 455, c["multinode:nodePools"][0])
        for w in c.get("multinode:workloads") or []:
            w["nodePool"] = "gpu0"
    path = write_variant(tmp_path, "azure-dev", edit)
    result = mplan.plan("azure-dev", tmp_path / "out", path)
    assert result.exit_code == mplan.EXIT_CONFIG == 2 and "maximum of 5000 nodes per cluster" in result.error
    assert not (tmp_path / "out").exists()
