"""PodDisruptionBudgets (policy/v1) for multi-node gangs: a voluntary drain takes one pod of a gang at a time.

What a drain does: `kubectl drain` and every cloud's node upgrade evict each pod of the node through the Eviction
API; an eviction is refused (429) while a PodDisruptionBudget selecting the pod has no disruption left, and the
drain retries until its timeout (multinode/upgrades.DRAIN_WAIT per cloud). A gang cannot run with a pod missing:
LWS recreates the whole group (RecreateGroupOnPodRestart), Volcano restarts the job (PodEvicted -> RestartJob),
an Indexed Job's torchrun loses its rendezvous. So each budget covers exactly one gang and allows exactly one
disruption while the gang is whole:
  - the drain of one node takes one pod of the gang, the gang restarts whole, and no second drain can take
    another pod of it while it is not whole again (IfHealthy...) -- except pods that are not Ready:
    unhealthyPodEvictionPolicy AlwaysAllow, so a gang that cannot become Ready (a member Pending for lack of
    GPUs) never blocks a drain for good (Kubernetes docs: "Unhealthy Pod Eviction Policy", policy/v1);
  - maxUnavailable 0 (or minAvailable = every pod) would block every drain of the gang's nodes until the
    cloud's timeout, then fail the upgrade (AKS, EKS) or delete the node anyway (GKE after 60 minutes): the
    gang is lost just the same, later. Jobs that must finish first are stopped before the upgrade window.

Which form allows that one disruption depends on who owns the pods (issue 40). The disruption controller counts
maxUnavailable, and a percentage minAvailable, against the scale of the pods' controllers, and it finds a scale
only for ReplicationControllers, Deployments, ReplicaSets, StatefulSets and custom resources with a scale
subresource (k8s.io/kubernetes@v1.33.13 pkg/controller/disruption/disruption.go: finders :266, getScaleController
"<resource> does not implement the scale subresource" :395, getExpectedScale "found no controllers for pod" :898,
getExpectedPodCount :806-845). When it cannot, the sync fails and failSafe writes disruptionsAllowed 0 with the
condition DisruptionAllowed=False, reason SyncFailed: every eviction is refused, for ever. An integer minAvailable is
counted against the selected pods themselves, no controller asked. Kubernetes' docs say so too: pods of other
controllers may be given only `.spec.minAvailable`, and only as an integer
(https://kubernetes.io/docs/tasks/run-application/configure-pdb/, "Arbitrary workloads and arbitrary selectors").
So, per owner:
  - batch Job (Indexed Job, a TrainJob's JobSet Jobs, an MPIJob's launcher), Volcano Job, MPIJob: none has a
    scale subresource (schemas/: volcano batch.volcano.sh_jobs.yaml, mpi-operator kubeflow.org_mpijobs.yaml,
    trainer v2.3.0 trainjobs: `subresources: status` only; batch/v1 Job has none): integer
    minAvailable = the gang's pods - 1 (every pod its selector selects: an MPIJob's launcher, a Volcano Job's
    master count);
  - a LeaderWorkerSet group: its pods have two owners, the set's leader StatefulSet `<set>` (replicas = the set's
    groups) and the group's worker StatefulSet `<set>-<i>` (replicas = size - 1) (sigs.k8s.io/lws@v0.10.0
    pkg/controllers/leaderworkerset_controller.go, pod_controller.go). A budget over one group selects one pod of
    the leader StatefulSet but the controller adds that StatefulSet's whole scale: maxUnavailable 1 expects
    groups + size - 1 pods, wants groups + size - 2 healthy, and a whole group of `size` pods is allowed
    2 - groups disruptions: 0 from two groups on. Integer minAvailable = size - 1 counts the group's own pods;
  - a Grove PodClique has a scale subresource (schemas/grove grove.io_podcliques.yaml), and a Grove or Dynamo
    role's budget selects whole cliques: maxUnavailable 1 (which follows the cliques if they are scaled).
multinode/budgets.py holds that arithmetic (`allowed_when_whole`) for a gang whose pods are all Ready; the pack rule
gang-budget-allows-a-drain and multinode/upgrades.py ask it, and the cluster box reads the real controller's
status.disruptionsAllowed (conformance/cluster compare.py budget_findings).

Per group, not per set, for LWS: the LWS controller labels every pod of a group with the set name
(leaderworkerset.sigs.k8s.io/name) and its group index (leaderworkerset.sigs.k8s.io/group-index)
(kubernetes-sigs/lws api/leaderworkerset/v1/leaderworkerset_types.go SetNameLabelKey / GroupIndexLabelKey, read
at commit 47a6181). One budget over the whole set would let the drain of a node holding pods of two groups evict
only one of them and then wait for that group's restart (model load: tens of minutes) before the second: past
EKS's 15 minutes, the update fails. A budget per group lets each group go once.
Other gangs (one per workload: a Volcano Job, an Indexed Job, an MPIJob, a TrainJob, a Grove PodCliqueSet
replica set, a Dynamo graph) are selected by our workload label, which every pod template of ours carries, and
a disaggregated workload's by workload + role (multinode.dev/role: prefill / decode), one budget per role.
"""
from __future__ import annotations

from typing import Any

from ...budgets import JOB_LIKE_KINDS, form_for
from ...config import StackConfig, Workload
from ...resolved import nccl_test_nodes
from . import common as c

LWS_NAME_LABEL = "leaderworkerset.sigs.k8s.io/name"
LWS_GROUP_INDEX_LABEL = "leaderworkerset.sigs.k8s.io/group-index"

def gang_nodes(cfg: StackConfig, w: Workload) -> int:
    """Nodes of the workload's largest gang (a Grove replica spans every role)."""
    if w.kind == "nccl-test":
        return nccl_test_nodes(w.nodes, cfg.pool(w.node_pool).node_count)
    gangs = cfg.resolved(w).serving_gangs()
    if w.kind == "grove-inference":
        return sum(g.nodes for g in gangs)
    return max(g.nodes for g in gangs)


def budget(w: Workload, name: str, selector: dict[str, str], expressions: list[dict[str, Any]] | None = None,
           min_available: int | None = None) -> dict[str, Any]:
    """One gang's budget: the integer `min_available` where the gang's owners give the controller no usable
    scale (module docstring), else maxUnavailable 1."""
    sel: dict[str, Any] = {"matchLabels": selector}
    if expressions:
        sel["matchExpressions"] = expressions
    form: dict[str, Any] = {"maxUnavailable": 1} if min_available is None else {"minAvailable": min_available}
    return {"apiVersion": "policy/v1", "kind": "PodDisruptionBudget",
            "metadata": {"name": name, "namespace": w.namespace, "labels": c.labels(w)},
            "spec": {**form, "selector": sel, "unhealthyPodEvictionPolicy": "AlwaysAllow"}}


def role_labels(w: Workload, role: str) -> list[str]:
    """The multinode.dev/role values the pods of one role carry: Grove splits a role into its leader and worker
    cliques (grove.py), Dynamo labels the role itself (dgd.py)."""
    return [f"{role}-leader", f"{role}-worker"] if w.kind == "grove-inference" else [role]


def _labels(template: Any) -> dict[str, Any]:
    return dict(((template or {}).get("metadata") or {}).get("labels") or {})


def pod_templates(obj: dict[str, Any], objects: list[dict[str, Any]]) -> list[tuple[dict[str, Any], int]]:
    """(pod labels, pods) of each pod template a rendered Job-like object runs (a TrainJob's from its runtime)."""
    kind, spec = obj.get("kind"), obj.get("spec") or {}
    if kind == "Job" and str(obj.get("apiVersion", "")).startswith("batch/"):
        return [(_labels(spec.get("template")), int(spec.get("parallelism") or spec.get("completions") or 1))]
    if kind == "Job":       # batch.volcano.sh/v1alpha1
        return [(_labels(t.get("template")), int(t.get("replicas") or 0)) for t in spec.get("tasks") or []]
    if kind == "MPIJob":
        return [(_labels(rs.get("template")), int(rs.get("replicas") or 0))
                for rs in (spec.get("mpiReplicaSpecs") or {}).values()]
    if kind == "TrainJob":
        nodes = int((spec.get("trainer") or {}).get("numNodes") or 1)
        runtime = (spec.get("runtimeRef") or {}).get("name")
        return [(_labels((job.get("template") or {}).get("spec", {}).get("template")), nodes)
                for o in objects
                if o.get("kind") in ("ClusterTrainingRuntime", "TrainingRuntime") and o["metadata"]["name"] == runtime
                for job in o["spec"]["template"]["spec"]["replicatedJobs"]]
    return []


def selects(selector: dict[str, Any], labels: dict[str, Any]) -> bool:
    """matchLabels and matchExpressions (In/NotIn/Exists/DoesNotExist) against a pod's labels (our own selectors:
    policy/rules/disruption.py reads hand-written ones defensively)."""
    if any(labels.get(k) != v for k, v in (selector.get("matchLabels") or {}).items()):
        return False
    for e in selector.get("matchExpressions") or []:
        key, op, values = e["key"], e["operator"], e.get("values") or []
        have = key in labels
        if (op == "In" and not (have and labels[key] in values)) or (op == "NotIn" and have and labels[key] in values) \
                or (op == "Exists" and not have) or (op == "DoesNotExist" and have):
            return False
    return True


def selected_pods(selector: dict[str, Any], objects: list[dict[str, Any]]) -> int:
    """Pods of the workload's Job-like objects that a budget's selector selects, the gang whole."""
    return sum(pods for o in objects for labels, pods in pod_templates(o, objects) if selects(selector, labels))


def budgets(cfg: StackConfig, w: Workload, objects: list[dict[str, Any]] | None = None) -> list[dict[str, Any]]:
    """The budgets of one workload (its rendered `objects` give a Job-like gang's pods): none for a single-node
    workload. Each allows exactly one disruption of its whole gang (module docstring)."""
    if gang_nodes(cfg, w) <= 1:
        return []
    if w.kind == "lws-inference":
        # integer: a group's pods have two owners and the leader StatefulSet's scale is every group's leader
        return [budget(w, f"{w.name}-group-{i}", {LWS_NAME_LABEL: w.name, LWS_GROUP_INDEX_LABEL: str(i)},
                       **form_for(w.kind, w.nodes))
                for i in range(w.replicas)]
    roles = cfg.resolved(w).roles
    if roles:    # disaggregated (Grove, Dynamo): one budget per role, so a frontend pod never waits on a decode group
        return [budget(w, f"{w.name}-{role}", {c.WORKLOAD_LABEL: w.name},
                       [{"key": c.ROLE_LABEL, "operator": "In", "values": role_labels(w, role)}])
                for role in roles]
    selector = {c.WORKLOAD_LABEL: w.name}
    if w.kind in JOB_LIKE_KINDS:
        pods = selected_pods({"matchLabels": selector}, objects or [])
        if pods < 2:
            raise ValueError(f"workload {w.name}: its budget selects {pods} pod(s) of its rendered objects")
        return [budget(w, f"{w.name}-gang", selector, **form_for(w.kind, pods))]
    return [budget(w, f"{w.name}-gang", selector)]

