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
