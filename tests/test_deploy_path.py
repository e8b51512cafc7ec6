"""Issue 35: dependencies that say what is needed, and the deploy critical-path report (multinode/deploy_path.py)."""
from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest

from multinode import deploy_path, plan

EXAMPLES = ["aws-dev", "azure-dev", "gcp-dev", "oci-dev", "existing-dev", "dynamo-dev", "fleet-dev"]
PASSIVE_IN_WORKLOADS = ("Secret", "Service", "ConfigMap", "ServiceAccount", "Role", "RoleBinding", "PodGroup")


def _plan(stack: str) -> plan.PlanResult:
    result = plan.plan(stack, out_root=None)
    assert result.exit_code == plan.EXIT_OK, result.error or result.violations
    return result


def _under(records: list[dict[str, Any]], component_type: str) -> set[str]:
    """Every URN under a component of `component_type` (the components themselves included)."""
    children: dict[str, list[str]] = {}
    for r in records:
        children.setdefault(r["parent"], []).append(r["urn"])
    out: set[str] = set()
    todo = [r["urn"] for r in records if r["type"] == component_type]
    while todo:
        u = todo.pop()
        out.add(u)
        todo += children.get(u, [])
    return out


def workload_objects_on_pools(records: list[dict[str, Any]], kinds: tuple[str, ...]) -> list[str]:
    """The workloads' objects of `kinds` that depend on anything of a node pool (GpuNodePool or under it)."""
    pools = _under(records, "multinode:index:GpuNodePool")
    workloads = {r["urn"] for r in records if r["type"] == "multinode:index:Workload"}
    return [r["name"] for r in records
            if r["parent"] in workloads and (r.get("inputs") or {}).get("kind") in kinds
            and pools & set(r["dependencies"])]


@pytest.mark.parametrize("stack", ["aws-dev", "existing-dev"])
def test_workload_secret_and_service_depend_on_no_node_pool(stack: str) -> None:
    records = [r.as_dict() for r in _plan(stack).registrations]
    passive = [r for r in records if (r.get("inputs") or {}).get("kind") in PASSIVE_IN_WORKLOADS
               and r["parent"] in {x["urn"] for x in records if x["type"] == "multinode:index:Workload"}]
    assert {"Secret", "Service"} <= {r["inputs"]["kind"] for r in passive}, "the stack has workload Secrets/Services"
    assert workload_objects_on_pools(records, PASSIVE_IN_WORKLOADS) == []
    # ...while each workload's pod-creating objects still wait for their pool (the check below is not vacuous)
    # (existing-dev's pools are the cluster's own: nothing is registered under them to wait for)
    on_pools = workload_objects_on_pools(records, ("LeaderWorkerSet", "Job", "PodCliqueSet", "MPIJob", "TrainJob"))
    pool_resources = _under(records, "multinode:index:GpuNodePool") - {
        r["urn"] for r in records if r["type"] == "multinode:index:GpuNodePool"}
    assert bool(on_pools) == bool(pool_resources), "pod-creating objects wait for their node pool"
    # a planted defect: a Secret made to wait for a node pool is found
    pool = next(r["urn"] for r in records if r["type"] == "multinode:index:GpuNodePool")
    planted = copy.deepcopy(records)
    workloads = {r["urn"] for r in planted if r["type"] == "multinode:index:Workload"}
    secret = next(r for r in planted if r["type"] == "kubernetes:core/v1:Secret" and r["parent"] in workloads)
    secret["dependencies"].append(pool)
    assert workload_objects_on_pools(planted, ("Secret",)) == [secret["name"]]


@pytest.mark.parametrize("stack", EXAMPLES)
def test_critical_path_within_five_percent_of_needed(stack: str) -> None:
    result = _plan(stack)
    rep = result.deploy_path
    assert rep is not None and rep.needed.seconds > 0
    assert rep.recorded.seconds >= rep.needed.seconds - 1e-9   # needed edges are a subset: never longer
    assert rep.ratio <= 1.05, (stack, rep.line())
    assert "deploy critical path:" in plan.summary(result)


def test_fleet_chain_before_issue_35_is_seen() -> None:
    """The planted defect is the real one: fleet-dev's registrations as the fleet component made them before this
    change (each object waiting for the one registered before it; tests/data, resources.json cut to what the
    report reads). The report finds that chain 19 deep against a needed 4, well above 5%; today's plan is within."""
    old = json.loads((Path(__file__).parent / "data" / "fleet-dev-resources-before-issue35.json").read_text())
    rep = deploy_path.report(old)
    assert len(rep.recorded.urns) == 19 and len(rep.needed.urns) == 4 and rep.ratio > 1.05, rep.line()
    now = deploy_path.report([r.as_dict() for r in _plan("fleet-dev").registrations])
    assert now.ratio <= 1.05 and len(now.recorded.urns) < 19, now.line()


def test_needed_chain_ignores_a_passive_objects_recorded_dependencies() -> None:
    """Synthetic: a Secret recorded after a node group needs only its namespace, so the needed chain skips it."""
    prov = "urn:pulumi:s::p::pulumi:providers:kubernetes::k"
    recs: list[dict[str, Any]] = [
        {"urn": "urn:c", "type": "aws:eks/cluster:Cluster", "name": "c", "parent": "", "custom": True,
         "dependencies": [], "provider": "", "inputs": {}},
        {"urn": "urn:ng", "type": "aws:eks/nodeGroup:NodeGroup", "name": "ng", "parent": "", "custom": True,
         "dependencies": ["urn:c"], "provider": "", "inputs": {}},
        {"urn": prov, "type": "pulumi:providers:kubernetes", "name": "k", "parent": "", "custom": True,
         "dependencies": ["urn:c"], "provider": "", "inputs": {}},
        {"urn": "urn:ns", "type": "kubernetes:core/v1:Namespace", "name": "ns", "parent": "", "custom": True,
         "dependencies": [], "provider": prov + "::id",
         "inputs": {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "w"}}},
        {"urn": "urn:s", "type": "kubernetes:core/v1:Secret", "name": "s", "parent": "", "custom": True,
         "dependencies": ["urn:ng", "urn:ns"], "provider": prov + "::id",
         "inputs": {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "s", "namespace": "w"}}},
        {"urn": "urn:svc", "type": "kubernetes:core/v1:Service", "name": "svc", "parent": "", "custom": True,
         "dependencies": ["urn:s"], "provider": prov + "::id",
         "inputs": {"apiVersion": "v1", "kind": "Service", "metadata": {"name": "svc", "namespace": "w"}}},
    ]
    rep = deploy_path.report(recs)
    assert rep.recorded.seconds == 600 + 300 + 1 + 1
    assert rep.recorded.urns == ["urn:c", "urn:ng", "urn:s", "urn:svc"]
    assert rep.needed.seconds == 600 + 300 and rep.needed.urns == ["urn:c", "urn:ng"]


def test_creation_table_states_a_basis_for_every_entry() -> None:
    assert all(basis for _, _, basis in deploy_path.CREATION_SECONDS)
    assert deploy_path.seconds("multinode:index:Workload", custom=False) == 0
    assert deploy_path.seconds("kubernetes:core/v1:Secret") == 1
