"""multi-node-gang-has-disruption-budget: every pod of a multi-node gang is selected by a PodDisruptionBudget
(policy/v1) in its namespace. Without one, a node drain (an upgrade, `kubectl drain`, the autoscaler) evicts
every pod of the gang that is on the node at once and again on every node it touches, and nothing holds the
next eviction while the gang restarts (multinode/manifests/workloads/disruption.py says which budget we render).

Pods are matched with the labels they will carry: their template's, plus for a LeaderWorkerSet the labels the
LWS controller adds to every pod of group i (leaderworkerset.sigs.k8s.io/name = the set,
leaderworkerset.sigs.k8s.io/group-index = i; kubernetes-sigs/lws api/leaderworkerset/v1/leaderworkerset_types.go),
so a budget per group and a budget per set both count. A TrainJob's pods come from its runtime's template.
"""
from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from .. import objects
from ..engine import MANDATORY, Context, Resource, Rule

PDB = ("policy", "PodDisruptionBudget")
LWS = ("leaderworkerset.x-k8s.io", "LeaderWorkerSet")
TRAINJOB = ("trainer.kubeflow.org", "TrainJob")
RUNTIMES = (("trainer.kubeflow.org", "ClusterTrainingRuntime"), ("trainer.kubeflow.org", "TrainingRuntime"))
LWS_NAME_LABEL = "leaderworkerset.sigs.k8s.io/name"
LWS_GROUP_INDEX_LABEL = "leaderworkerset.sigs.k8s.io/group-index"


def _ns(props: dict) -> str:
    return str(objects.get(props, "metadata", "namespace") or "default")


def selects(selector: Any, labels: dict[str, Any]) -> bool:
    """A LabelSelector (matchLabels + matchExpressions In/NotIn/Exists/DoesNotExist) against pod labels. An empty
    selector selects every pod in the namespace (policy/v1); a selector we cannot read selects nothing."""
    if not isinstance(selector, dict):
        return False
    for k, v in objects.mapping(selector.get("matchLabels")).items():
        if k not in labels or str(labels[k]) != str(v):
            return False
    for e in selector.get("matchExpressions") or []:
        if not isinstance(e, dict):
            return False
        key, op, values = str(e.get("key")), e.get("operator"), [str(v) for v in e.get("values") or []]
        have = key in labels
        if op == "In" and not (have and str(labels[key]) in values):
            return False
        if op == "NotIn" and have and str(labels[key]) in values:
            return False
        if op == "Exists" and not have:
            return False
        if op == "DoesNotExist" and have:
            return False
        if op not in ("In", "NotIn", "Exists", "DoesNotExist"):
            return False
    return True


def _runtime_labels(name: str, resources: list[Resource]) -> list[dict[str, Any]]:
    for r in resources:
        if r.is_k8s and r.kind in RUNTIMES and objects.get(r.props, "metadata", "name") == name:
            return [role.labels for g in objects.gangs(r.props, r.name) for role in g.gpu_roles]
    return []


def pods_to_cover(r: Resource, resources: list[Resource]) -> list[tuple[str, dict[str, Any]]]:
    """(which pods, their labels) of every multi-node gang the object runs; [] for anything else."""
    out: list[tuple[str, dict[str, Any]]] = []
    if r.kind in RUNTIMES:        # checked through the TrainJob that uses it (namespace, numNodes)
        return out
    for g in objects.gangs(r.props, r.name):
        if r.kind == TRAINJOB:
            nodes = objects.as_int(g.extra.get("numNodes")) or 1
            if nodes > 1:
                out += [(f"{g.name} (runtime {g.extra.get('runtime')})", labels)
                        for labels in _runtime_labels(str(g.extra.get("runtime") or ""), resources)]
            continue
        if g.pods <= 1:
            continue
        if r.kind == LWS:
            set_name = str(objects.get(r.props, "metadata", "name") or "")
            for i in range(max(1, g.copies)):
                out += [(f"{g.name} group {i} {role.name}", {**role.labels, LWS_NAME_LABEL: set_name,
                                                              LWS_GROUP_INDEX_LABEL: str(i)})
                        for role in g.gpu_roles]
        else:
            out += [(f"{g.name} {role.name}", role.labels) for role in g.gpu_roles]
    return out


def check_gang_budgets(resources: list[Resource], ctx: Context) -> Iterator[tuple[Resource | None, str]]:
    budgets: dict[str, list[Any]] = {}
    for r in resources:
        if r.is_k8s and r.kind == PDB:
            budgets.setdefault(_ns(r.props), []).append(objects.get(r.props, "spec", "selector"))
    for r in resources:
        if not r.is_k8s:
            continue
        ns = _ns(r.props)
        for what, labels in pods_to_cover(r, resources):
            if not any(selects(sel, labels) for sel in budgets.get(ns, [])):
                yield r, (f"{r.label}: the pods of {what} are in no PodDisruptionBudget of namespace {ns}: a node "
                          f"drain evicts them with nothing holding the next eviction while the gang restarts. Add "
                          f"a policy/v1 PodDisruptionBudget per gang (maxUnavailable 1; for a LeaderWorkerSet "
                          f"select {LWS_NAME_LABEL} and {LWS_GROUP_INDEX_LABEL}), as multinode renders")
                break


RULES = [
    Rule("multi-node-gang-has-disruption-budget",
         "Every pod of a multi-node gang is selected by a PodDisruptionBudget in its namespace, so a node drain "
         "cannot take the gang's pods at will (docs/day-two.md).",
         MANDATORY, check_gang_budgets, scope="stack", team_choice=True),   # a team may accept restarts on drains
]
