"""Fleet rule: a Karmada PropagationPolicy never splits a gang across clusters, and never sends a multi-node
gang to a member without a GPU fabric (NCCL between clusters, or over TCP inside one, has no fabric).

For every PropagationPolicy / ClusterPropagationPolicy whose resourceSelectors select a gang kind (the kinds
policy.objects reads as gangs: Volcano Job, LeaderWorkerSet, PodCliqueSet, MPIJob, PyTorchJob, Indexed Job):
  - `replicaScheduling.replicaSchedulingType: Divided` divides the object's replicas among clusters (Karmada's
    interpreter revises the replica count per cluster: for a Volcano Job, Volcano Global's ReviseReplica sets
    tasks[0].replicas), so part of the gang runs in each: refused;
  - Duplicated (the default) copies the whole object to every selected cluster: unless the placement keeps it
    to exactly one (spreadConstraints spreadByField cluster with maxGroups 1, or clusterAffinity naming one
    cluster), the same gang would start in several members: refused;
  - a selected object whose gang spans nodes must reach only clusters labelled with a fabric
    (multinode.dev/fabric on the Karmada Cluster, set by the fleet from the member's pools): every recorded
    Cluster the placement admits is checked, and an admitted cluster with fabric none (or no label) is refused.
Under `pulumi preview` of a stack whose Clusters are not in the same program, the fabric check has no
Clusters to read and checks nothing; the split checks need only the policy itself.
"""
from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from multinode import pools

from .. import objects
from ..engine import MANDATORY, Context, Resource, Rule

POLICY_KINDS = {("policy.karmada.io", "PropagationPolicy"), ("policy.karmada.io", "ClusterPropagationPolicy")}
CLUSTER_KIND = ("cluster.karmada.io", "Cluster")
FABRIC_LABEL = pools.FABRIC_NODE_LABEL


def _selects(selector: dict[str, Any], props: dict[str, Any], policy_ns: str | None) -> bool:
    if objects.text(selector.get("apiVersion")) != props.get("apiVersion") or \
            objects.text(selector.get("kind")) != props.get("kind"):
        return False
    meta = objects.mapping(props.get("metadata"))
    ns = objects.text(selector.get("namespace")) or policy_ns
    if ns and objects.text(meta.get("namespace")) not in (ns, None):
        return False
    name = objects.text(selector.get("name"))
    if name and meta.get("name") != name:
        return False
    wanted = objects.mapping(objects.get(selector, "labelSelector", "matchLabels"))
    return objects.selector_matches({str(k): str(v) for k, v in wanted.items()},
                                    {str(k): str(v) for k, v in objects.mapping(meta.get("labels")).items()})


def _affinity_terms(placement: dict[str, Any]) -> list[dict[str, Any]]:
    terms = [objects.mapping(placement.get("clusterAffinity"))] if placement.get("clusterAffinity") else []
    terms += [objects.mapping(t) for t in objects.seq(placement.get("clusterAffinities"))]
    return terms


def _admits(term: dict[str, Any], name: str, labels: dict[str, str]) -> bool:
    names = [str(n) for n in objects.seq(term.get("clusterNames"))]
    if names and name not in names:
        return False
    if name in [str(n) for n in objects.seq(term.get("exclude"))]:
        return False
    wanted = objects.mapping(objects.get(term, "labelSelector", "matchLabels"))
    if not objects.selector_matches({str(k): str(v) for k, v in wanted.items()}, labels):
        return False
    for expr in objects.seq(objects.get(term, "labelSelector", "matchExpressions")):
        e = objects.mapping(expr)
        key, op, values = str(e.get("key")), e.get("operator"), [str(v) for v in objects.seq(e.get("values"))]
        if (op == "In" and labels.get(key) not in values) or (op == "NotIn" and labels.get(key) in values) \
                or (op == "Exists" and key not in labels) or (op == "DoesNotExist" and key in labels):
            return False
    return True


def _one_cluster(placement: dict[str, Any]) -> bool:
    for c in objects.seq(placement.get("spreadConstraints")):
        c = objects.mapping(c)
        if objects.text(c.get("spreadByField")) == "cluster" and objects.as_int(c.get("maxGroups")) == 1:
            return True
    terms = _affinity_terms(placement)
    return bool(terms) and all(len(objects.seq(t.get("clusterNames"))) == 1 and not t.get("labelSelector")
                               for t in terms)


def check_fleet_placement(resources: list[Resource], ctx: Context) -> Iterator[tuple[Resource | None, str]]:
    k8s = [r for r in resources if r.is_k8s]
    clusters = {objects.text(objects.get(r.props, "metadata", "name")) or r.name:
                {str(k): str(v) for k, v in objects.mapping(objects.get(r.props, "metadata", "labels")).items()}
                for r in k8s if r.kind == CLUSTER_KIND}
    gang_kinds = set(objects.READERS)
    for pol in (r for r in k8s if r.kind in POLICY_KINDS):
        spec = objects.mapping(pol.props.get("spec"))
        placement = objects.mapping(spec.get("placement"))
        ns = objects.text(objects.get(pol.props, "metadata", "namespace"))
        selectors = [objects.mapping(s) for s in objects.seq(spec.get("resourceSelectors"))]
        gang_selectors = [s for s in selectors
                          if objects.kind_of({"apiVersion": s.get("apiVersion"), "kind": s.get("kind")}) in gang_kinds]
        if not gang_selectors:
            continue
        what = ", ".join(f"{s.get('kind')} {s.get('name') or '(all)'}" for s in gang_selectors)
        kind = objects.text(objects.get(placement, "replicaScheduling", "replicaSchedulingType")) or "Duplicated"
        if kind == "Divided":
            yield pol, (f"{pol.label}: replicaSchedulingType Divided divides the replicas of {what} among member "
                        f"clusters, so one gang would run partly in each (NCCL has no fabric between clusters); "
                        f"use Duplicated with spreadConstraints [{{spreadByField: cluster, maxGroups: 1, "
                        f"minGroups: 1}}]")
        elif not _one_cluster(placement):
            yield pol, (f"{pol.label}: Duplicated copies {what} whole into every cluster the placement admits, so "
                        f"the same gang could start in several members; keep it to one: add spreadConstraints "
                        f"[{{spreadByField: cluster, maxGroups: 1, minGroups: 1}}] or name one cluster in "
                        f"clusterAffinity.clusterNames")
        multi = [r for r in k8s if any(_selects(s, r.props, ns) for s in gang_selectors)
                 and any(g.multi_node for g in objects.gangs(r.props, r.name))]
        if not multi or not clusters:
            continue
        terms = _affinity_terms(placement) or [{}]
        admitted = [n for n, labels in clusters.items() if any(_admits(t, n, labels) for t in terms)]
        bare = [n for n in admitted if clusters[n].get(FABRIC_LABEL, "none") == "none"]
        if bare:
            yield pol, (f"{pol.label}: could send the multi-node gang {', '.join(r.label for r in multi)} to member "
                        f"cluster(s) {', '.join(sorted(bare))}, which have no GPU fabric ({FABRIC_LABEL} none or "
                        f"unset); restrict clusterAffinity to members whose GPU pools have a fabric")


RULES = [
    Rule("fleet-gang-in-one-member",
         "A Karmada PropagationPolicy places each gang (Volcano Job, LeaderWorkerSet, ...) whole in exactly one "
         "member cluster, and a multi-node gang only in members with a GPU fabric.",
         MANDATORY, check_fleet_placement, scope="stack",
         remediation="Use replicaSchedulingType Duplicated with spreadConstraints spreadByField cluster, maxGroups 1; "
                     "limit clusterAffinity to members whose pools have the fabric."),
]
