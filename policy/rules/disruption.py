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


class Budgets:
    """A namespace's budget selectors, indexed so that a pod is tried only against the selectors that can select
    it: `covers(labels)` == any(selects(sel, labels) for sel in the selectors, in order), without trying every
    budget for every gang (one budget per gang made that gangs x budgets: quadratic in the stack's size).

    A selector whose matchLabels has a pair (k, v) selects only pods with str(labels[k]) == str(v): it is filed under
    its first pair and tried for pods carrying that pair; the others (no matchLabels) are always tried; one that is
    not a dict never selects (selects()). A namespace with a selector selects() could raise on (matchExpressions, or
    an expression's values, a number or true: not iterable) is answered by the plain scan in order instead, so even a
    malformed budget gives the same answer or the same error as before the index (the rule reports the error)."""

    def __init__(self) -> None:
        self.selectors: list[Any] = []
        self.by_pair: dict[tuple[Any, str], list[dict[str, Any]]] = {}
        self.always: list[dict[str, Any]] = []
        self.regular = True

    def add(self, selector: Any) -> None:
        self.selectors.append(selector)
        if not isinstance(selector, dict):
            return
        if not _iterable(selector.get("matchExpressions")) or any(
                isinstance(e, dict) and not _iterable(e.get("values")) for e in selector.get("matchExpressions") or []):
            self.regular = False
        pairs = objects.mapping(selector.get("matchLabels"))
        if pairs:
            k, v = next(iter(pairs.items()))
            self.by_pair.setdefault((k, str(v)), []).append(selector)
        else:
            self.always.append(selector)

    def covers(self, labels: dict[str, Any]) -> bool:
        if not self.regular:
            return any(selects(sel, labels) for sel in self.selectors)
        if any(selects(sel, labels) for sel in self.always):
            return True
        return any(selects(sel, labels) for k, v in labels.items() for sel in self.by_pair.get((k, str(v)), ()))


def _iterable(value: Any) -> bool:
    """What `for x in value or []` walks without raising, for values read from JSON."""
    return not value or isinstance(value, (list, dict, str))


def check_gang_budgets(resources: list[Resource], ctx: Context) -> Iterator[tuple[Resource | None, str]]:
    budgets: dict[str, Budgets] = {}
    for r in resources:
        if r.is_k8s and r.kind == PDB:
            budgets.setdefault(_ns(r.props), Budgets()).add(objects.get(r.props, "spec", "selector"))
    none = Budgets()
    for r in resources:
        if not r.is_k8s:
            continue
        ns = _ns(r.props)
        for what, labels in pods_to_cover(r, resources):
            if not budgets.get(ns, none).covers(labels):
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
