"""The budgets of multi-node gangs (issues 36, 40), three rules:

multi-node-gang-has-disruption-budget (mandatory, team choice): every GPU pod of a multi-node *serving* gang (an LWS
group, a Grove PodCliqueSet replica) is selected by a PodDisruptionBudget (policy/v1) in its namespace. Without
one, a node drain (an upgrade, `kubectl drain`, the autoscaler) evicts every pod of the service on the node at once,
on every node it touches, and nothing holds the next eviction while a group reloads its model: the service loses
several groups at once.

multi-node-batch-gang-has-disruption-budget (advisory, team choice): the same for a *batch* gang (Volcano Job,
Indexed Job, MPIJob, PyTorchJob, a TrainJob's runtime pods). Advisory by default, the decision of issue 40: a drain
that evicts one pod of a batch gang restarts the whole job from its last checkpoint whether a budget selects it or
not (Volcano PodEvicted -> RestartJob; torchrun loses its rendezvous), so the budget changes little more than the
order of evictions, and restarting from the checkpoint is a team's choice. The guides' hand-written batch jobs (a
NeMo-annotated Job) plan without one; a team that wants budgets on them makes the rule mandatory in its policy
config. multinode still renders one for its own batch workloads (manifests/workloads/disruption.py).

gang-budget-allows-a-drain (mandatory; a policy config may make it advisory): a budget that selects pods of a
multi-node gang allows at least one disruption while the gang is whole, as the disruption controller counts it
(multinode/manifests/workloads/disruption.allowed_when_whole): maxUnavailable 0, minAvailable = every pod, a
percentage or maxUnavailable over pods whose controller has no scale subresource (batch Job, Volcano Job, MPIJob,
a TrainJob's Jobs: the controller fails to sync and writes 0, reason SyncFailed), or maxUnavailable 1 over one LWS
group of a set with 2+ groups (the leader StatefulSet's whole scale is counted) each refuse every drain of the
gang's nodes until the cloud gives up (EKS 15 min, AKS its drain timeout: the upgrade fails; GKE deletes the
node after 60 min). The message names the budget's key and the form that works for the pods' owners.

Pods are matched with the labels they will carry: their template's, plus for a LeaderWorkerSet the labels the
LWS controller adds to every pod of group i (leaderworkerset.sigs.k8s.io/name = the set,
leaderworkerset.sigs.k8s.io/group-index = i; kubernetes-sigs/lws api/leaderworkerset/v1/leaderworkerset_types.go),
so a budget per group and a budget per set both count. A TrainJob's pods come from its runtime's template. The
owners are the controllers that own the pods: an LWS group's leader in the set's leader StatefulSet (scale = the
set's groups) and its workers in the group's worker StatefulSet (size - 1); a Grove clique's pods in a PodClique
per replica; a Volcano Job's, an MPIJob's workers' and a PyTorchJob's in the job; an Indexed Job's, an MPIJob's
launcher's and a TrainJob's in batch Jobs. Pods of other controllers a budget also selects (a Deployment) are not
counted.
"""
from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from multinode.budgets import PodSet, allowed_when_whole, working_form

from .. import objects
from ..engine import ADVISORY, MANDATORY, Context, Resource, Rule

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


def _runtime_labels(name: str, resources: list[Resource]) -> list[tuple[str, dict[str, Any]]]:
    for r in resources:
        if r.is_k8s and r.kind in RUNTIMES and objects.get(r.props, "metadata", "name") == name:
            return [(role.name, role.labels) for g in objects.gangs(r.props, r.name) for role in g.gpu_roles]
    return []


BATCH_GANGS = ("VolcanoJob", "Job", "MPIJob", "PyTorchJob", "TrainJob")
# the controller that owns each gang kind's pods (module docstring), as group/kind
OWNER_KIND = {"VolcanoJob": "batch.volcano.sh/Job", "Job": "batch/Job", "PyTorchJob": "kubeflow.org/PyTorchJob",
              "TrainJob": "batch/Job"}


@dataclass
class GangPods:
    """The pods of one multi-node gang: (labels, owner and count, has GPUs) per template."""
    what: str
    batch: bool
    sets: list[tuple[dict[str, Any], PodSet, bool]] = field(default_factory=list)
    roles: list[str] = field(default_factory=list)       # the role of each entry of `sets`

    @property
    def pod_sets(self) -> list[PodSet]:
        return [ps for _, ps, _ in self.sets]


def gang_pods(r: Resource, resources: list[Resource]) -> list[GangPods]:
    """Every multi-node gang the object runs, with its pods' labels and owners; [] for anything else."""
    out: list[GangPods] = []
    if r.kind in RUNTIMES:        # checked through the TrainJob that uses it (namespace, numNodes)
        return out
    ns = _ns(r.props)
    for g in objects.gangs(r.props, r.name):
        if r.kind == TRAINJOB:
            nodes = objects.as_int(g.extra.get("numNodes")) or 1
            if nodes > 1:
                runtime = str(g.extra.get("runtime") or "")
                gp = GangPods(f"{g.name} (runtime {runtime})", True)
                found = _runtime_labels(runtime, resources)
                gp.sets = [(labels, PodSet(nodes, "batch/Job", f"{g.name} {job}"), True) for job, labels in found]
                gp.roles = [job for job, _ in found]
                if gp.sets:
                    out.append(gp)
            continue
        if g.pods <= 1:
            continue
        if r.kind == LWS:
            set_name = str(objects.get(r.props, "metadata", "name") or "")
            groups = max(1, g.copies)
            for i in range(groups):
                gp = GangPods(f"{g.name} group {i}", False)
                for role in g.roles:
                    leader = role.name == "leader"
                    owner = f"{ns}/{set_name}" if leader else f"{ns}/{set_name}-{i}"
                    gp.sets.append(({**role.labels, LWS_NAME_LABEL: set_name, LWS_GROUP_INDEX_LABEL: str(i)},
                                    PodSet(role.pods, "apps/StatefulSet", owner, groups if leader else role.pods),
                                    role.gpus > 0))
                    gp.roles.append(role.name)
                out.append(gp)
        elif g.kind == "PodCliqueSet":
            # one PodClique per replica and clique, each of scale role.pods: the replicas' cliques as one owner of
            # their summed scale (a budget selects a clique's pods in every replica alike: same labels)
            copies = max(1, g.copies)
            gp = GangPods(g.name, False)
            gp.sets = [(role.labels, PodSet(role.pods * copies, "grove.io/PodClique", f"{g.name}/{role.name}",
                                            role.pods * copies), role.gpus > 0) for role in g.roles]
            gp.roles = [role.name for role in g.roles]
            out.append(gp)
        else:
            gp = GangPods(g.name, g.kind in BATCH_GANGS)
            workers = next((role.pods for role in g.roles if role.name == "Worker"), None)
            for role in g.roles:
                if g.kind == "MPIJob":      # the launcher is a batch Job of the operator's, the workers the MPIJob's
                    ps = (PodSet(role.pods, "batch/Job", f"{g.name} launcher") if role.name == "Launcher"
                          else PodSet(role.pods, "kubeflow.org/MPIJob", g.name))
                else:
                    ps = PodSet(role.pods, OWNER_KIND.get(g.kind, g.kind), g.name,
                                workers if g.kind == "PyTorchJob" else None)
                gp.sets.append((role.labels, ps, role.gpus > 0))
                gp.roles.append(role.name)
            out.append(gp)
    return out


def pods_to_cover(r: Resource, resources: list[Resource]) -> list[tuple[str, dict[str, Any]]]:
    """(which pods, their labels) of every multi-node gang the object runs; [] for anything else."""
    return [(f"{gp.what} {role}", labels) for gp in gang_pods(r, resources) for role, labels in _gpu_sets(gp)]


def _gpu_sets(gp: GangPods) -> list[tuple[str, dict[str, Any]]]:
    return [(role, labels) for role, (labels, _, gpus) in zip(gp.roles, gp.sets) if gpus]


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
        self.owners: list[Any] = []              # what added each selector (a budget's Resource), in order

    def add(self, selector: Any, owner: Any = None) -> None:
        self.selectors.append(selector)
        self.owners.append(owner)
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

    def selecting(self, labels: dict[str, Any]) -> list[Any]:
        """The owners of every selector that selects these labels, in the order they were added (same index)."""
        if self.regular:
            ids = {id(sel) for sel in self.always} | {id(sel) for k, v in labels.items()
                                                      for sel in self.by_pair.get((k, str(v)), ())}
            return [o for sel, o in zip(self.selectors, self.owners) if id(sel) in ids and selects(sel, labels)]
        return [o for sel, o in zip(self.selectors, self.owners) if selects(sel, labels)]


def _iterable(value: Any) -> bool:
    """What `for x in value or []` walks without raising, for values read from JSON."""
    return not value or isinstance(value, (list, dict, str))


def _budget_index(resources: list[Resource]) -> dict[str, Budgets]:
    budgets: dict[str, Budgets] = {}
    for r in resources:
        if r.is_k8s and r.kind == PDB:
            budgets.setdefault(_ns(r.props), Budgets()).add(objects.get(r.props, "spec", "selector"), r)
    return budgets


def _missing(resources: list[Resource], batch: bool) -> Iterator[tuple[Resource | None, str]]:
    budgets = _budget_index(resources)
    none = Budgets()
    for r in resources:
        if not r.is_k8s:
            continue
        ns = _ns(r.props)
        for gp in gang_pods(r, resources):
            if gp.batch != batch:
                continue
            for which, labels in _gpu_sets(gp):
                if budgets.get(ns, none).covers(labels):
                    continue
                restart = ("the job restarts from its last checkpoint on the first eviction either way; with a "
                           "budget the drain takes one pod of it at a time" if batch else
                           "nothing holds the next eviction while a group reloads its model")
                yield r, (f"{r.label}: the pods of {gp.what} ({which}) are in no PodDisruptionBudget of namespace "
                          f"{ns}: a node drain evicts them at will ({restart}): add a policy/v1 PodDisruptionBudget "
                          f"per gang with {working_form(gp.pod_sets)}"
                          + (f", selecting {LWS_NAME_LABEL} and {LWS_GROUP_INDEX_LABEL}" if r.kind == LWS else "")
                          + ", as multinode renders (docs/day-two.md)")
                break


def check_gang_budgets(resources: list[Resource], ctx: Context) -> Iterator[tuple[Resource | None, str]]:
    yield from _missing(resources, batch=False)


def check_batch_gang_budgets(resources: list[Resource], ctx: Context) -> Iterator[tuple[Resource | None, str]]:
    yield from _missing(resources, batch=True)


def _spec_key(props: dict[str, Any]) -> str:
    spec = objects.mapping(props.get("spec"))
    if "maxUnavailable" in spec:
        return f"spec.maxUnavailable ({spec.get('maxUnavailable')!r})"
    if "minAvailable" in spec:
        return f"spec.minAvailable ({spec.get('minAvailable')!r})"
    return "spec"


def check_budgets_allow_a_drain(resources: list[Resource], ctx: Context) -> Iterator[tuple[Resource | None, str]]:
    budgets = _budget_index(resources)
    # each budget: the pod sets it selects, and the multi-node gangs it touches (in order)
    selected: dict[int, tuple[Resource, list[PodSet], list[GangPods]]] = {}
    for r in resources:
        if not r.is_k8s:
            continue
        index = budgets.get(_ns(r.props))
        if index is None:
            continue
        for gp in gang_pods(r, resources):
            for labels, ps, _ in gp.sets:
                for b in index.selecting(labels):
                    entry = selected.setdefault(id(b), (b, [], []))
                    entry[1].append(ps)
                    if not any(g is gp for g in entry[2]):
                        entry[2].append(gp)
    for b, sets, gangs in selected.values():
        spec = objects.mapping(b.props.get("spec"))
        allowed, why = allowed_when_whole(spec, sets)
        if allowed >= 1:
            continue
        names = ", ".join(g.what for g in gangs)
        fix = "; ".join(f"{g.what}: {working_form(g.pod_sets)}" for g in gangs)
        yield b, (f"{b.label}: {_spec_key(b.props)} allows 0 disruptions of {names} while it is whole ({why}): "
                  f"every drain of its nodes is refused until the cloud gives up (EKS 15 min, AKS its drain timeout: "
                  f"the upgrade fails; GKE deletes the node after 60 min): use one budget per gang with {fix} "
                  f"(docs/day-two.md)")


RULES = [
    Rule("multi-node-gang-has-disruption-budget",
         "Every pod of a multi-node serving gang (LWS group, Grove replica) is selected by a PodDisruptionBudget in "
         "its namespace, so a node drain cannot take the gang's pods at will (docs/day-two.md).",
         MANDATORY, check_gang_budgets, scope="stack", team_choice=True),   # a team may accept restarts on drains
    Rule("multi-node-batch-gang-has-disruption-budget",
         "Every pod of a multi-node batch gang (Volcano Job, Indexed Job, MPIJob, PyTorchJob, TrainJob) is selected "
         "by a PodDisruptionBudget; advisory: a drain restarts the job from its checkpoint either way "
         "(docs/day-two.md).",
         ADVISORY, check_batch_gang_budgets, scope="stack", team_choice=True),
    Rule("gang-budget-allows-a-drain",
         "A PodDisruptionBudget over a multi-node gang allows one disruption while the gang is whole, as the "
         "disruption controller counts it for the pods' owners (integer minAvailable for Job-owned pods and LWS "
         "groups); else every drain of its nodes is refused (issue 40, docs/day-two.md).",
         MANDATORY, check_budgets_allow_a_drain, scope="stack"),
]
