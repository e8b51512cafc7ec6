"""PodDisruptionBudgets (policy/v1) for multi-node gangs: a voluntary drain takes one pod of a gang at a time.

What a drain does: `kubectl drain` and every cloud's node upgrade evict each pod of the node through the Eviction
API; an eviction is refused (429) while a PodDisruptionBudget selecting the pod has no disruption left, and the
drain retries until its timeout (multinode/upgrades.DRAIN_WAIT per cloud). A gang cannot run with a pod missing:
LWS recreates the whole group (RecreateGroupOnPodRestart), Volcano restarts the job (PodEvicted -> RestartJob),
an Indexed Job's torchrun loses its rendezvous. So each budget covers exactly one gang with maxUnavailable 1:
  - the drain of one node takes one pod of the gang, the gang restarts whole, and no second drain can take
    another pod of it while it is not whole again (IfHealthy...) -- except pods that are not Ready:
    unhealthyPodEvictionPolicy AlwaysAllow, so a gang that cannot become Ready (a member Pending for lack of
    GPUs) never blocks a drain for good (Kubernetes docs: "Unhealthy Pod Eviction Policy", policy/v1);
  - maxUnavailable 0 (or minAvailable = every pod) would block every drain of the gang's nodes until the
    cloud's timeout, then fail the upgrade (AKS, EKS) or delete the node anyway (GKE after 60 minutes): the
    gang is lost just the same, later. Jobs that must finish first are stopped before the upgrade window.
Per group, not per set, for LWS: the LWS controller labels every pod of a group with the set name
(leaderworkerset.sigs.k8s.io/name) and its group index (leaderworkerset.sigs.k8s.io/group-index)
(kubernetes-sigs/lws api/leaderworkerset/v1/leaderworkerset_types.go SetNameLabelKey / GroupIndexLabelKey, read
at commit 47a6181). One budget over the whole set with maxUnavailable 1 would let the drain of a node holding
pods of two groups evict only one of them and then wait for that group's restart (model load: tens of minutes)
before the second: past EKS's 15 minutes, the update fails. A budget per group lets each group go once.
Other gangs (one per workload: a Volcano Job, an Indexed Job, an MPIJob, a TrainJob, a Grove PodCliqueSet
replica set, a Dynamo graph) are selected by our workload label, which every pod template of ours carries, and
a disaggregated workload's by workload + role (multinode.dev/role: prefill / decode), one budget per role.
"""
from __future__ import annotations

from typing import Any

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


def budget(w: Workload, name: str, selector: dict[str, str],
           expressions: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    sel: dict[str, Any] = {"matchLabels": selector}
    if expressions:
        sel["matchExpressions"] = expressions
    return {"apiVersion": "policy/v1", "kind": "PodDisruptionBudget",
            "metadata": {"name": name, "namespace": w.namespace, "labels": c.labels(w)},
            "spec": {"maxUnavailable": 1, "selector": sel, "unhealthyPodEvictionPolicy": "AlwaysAllow"}}


def role_labels(w: Workload, role: str) -> list[str]:
    """The multinode.dev/role values the pods of one role carry: Grove splits a role into its leader and worker
    cliques (grove.py), Dynamo labels the role itself (dgd.py)."""
    return [f"{role}-leader", f"{role}-worker"] if w.kind == "grove-inference" else [role]


def budgets(cfg: StackConfig, w: Workload) -> list[dict[str, Any]]:
    """The budgets of one workload: none for a single-node workload."""
    if gang_nodes(cfg, w) <= 1:
        return []
    if w.kind == "lws-inference":
        return [budget(w, f"{w.name}-group-{i}", {LWS_NAME_LABEL: w.name, LWS_GROUP_INDEX_LABEL: str(i)})
                for i in range(w.replicas)]
    roles = cfg.resolved(w).roles
    if roles:    # disaggregated (Grove, Dynamo): one budget per role, so a frontend pod never waits on a decode group
        return [budget(w, f"{w.name}-{role}", {c.WORKLOAD_LABEL: w.name},
                       [{"key": c.ROLE_LABEL, "operator": "In", "values": role_labels(w, role)}])
                for role in roles]
    return [budget(w, f"{w.name}-gang", {c.WORKLOAD_LABEL: w.name})]
