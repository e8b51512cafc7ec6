"""The deploy critical path: how long `pulumi up` of a stack is bound to take, from the plan's registrations.

The Pulumi engine creates a resource once every resource it depends on (and its provider) exists, and creates
independent resources in parallel, so a deploy's wall time follows the longest chain of resources created one
after another, each weighted by how long its creation takes. This module gives two such chains:

  recorded  the chain the program's dependencies force (resources.json: `dependencies`, a dependency on a
            component counting as one on everything under it, as the engine does, plus each resource's provider)
  needed    the chain the dependencies a resource really needs force: a Kubernetes object that creates no pods
            (Secret, ConfigMap, ServiceAccount, RBAC, Service, PodDisruptionBudget, PodGroup, Queue, policies of
            Karmada...: PASSIVE_KINDS) needs only its provider, the Namespace it lives in and the CRD (or the
            Helm release installing the CRD) of its own kind, found from the object itself, never from its
            recorded dependencies; every other resource keeps its recorded dependencies. So `needed` is a lower
            bound that says how much the program's own ordering of passive objects costs: recorded / needed
            near 1.0 means no Secret or Service holds a deploy up. (A dependency of a pod-creating object or a
            cloud resource that is not needed is not detected here.)

The creation times are a per-type table (CREATION_SECONDS) of stated assumptions, not measurements: no real
cloud runs in this project. Only the relative weight of the chains is meaningful; a real `pulumi up` confirms
the absolute times.
"""
from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

# Kubernetes kinds that create no pods: they need their namespace and the CRD of their own kind, nothing else
# (no node pool, add-on, fabric policy or storage). Every kind not listed is treated as pod-creating (it waits
# for what its pods need): the safe default for a kind this list does not know.
PASSIVE_KINDS = frozenset({
    "Namespace", "Secret", "ConfigMap", "ServiceAccount", "Role", "RoleBinding", "ClusterRole", "ClusterRoleBinding",
    "Service", "PodDisruptionBudget", "HorizontalPodAutoscaler", "NetworkPolicy", "PriorityClass", "ResourceQuota",
    "LimitRange", "PodGroup", "Queue", "CustomResourceDefinition", "MutatingWebhookConfiguration",
    "ValidatingWebhookConfiguration", "PropagationPolicy", "ClusterPropagationPolicy", "OverridePolicy",
    "ClusterOverridePolicy", "ResourceInterpreterCustomization",
})

# Built-in API groups (no CRD needed): "" is core.
_BUILT_IN_GROUP = re.compile(r"^$|^[a-z]+$|\.k8s\.io$")


def creates_pods(obj: dict[str, Any]) -> bool:
    """Does this Kubernetes object (directly or through its controller) create pods? Everything not passive."""
    return str(obj.get("kind", "")) not in PASSIVE_KINDS


def api_group(obj: dict[str, Any]) -> str:
    return str(obj.get("apiVersion", "")).rpartition("/")[0]


def is_custom_kind(obj: dict[str, Any]) -> bool:
    return not _BUILT_IN_GROUP.search(api_group(obj))


# Creation time per registration type, seconds: (type regex, seconds, basis). First match wins. Every number is a
# stated assumption of a typical creation (the engine's create call until the resource is ready), chosen for the
# relative weight of chains; a real `pulumi up` is what confirms them.
CREATION_SECONDS: list[tuple[str, float, str]] = [
    (r"^pulumi:providers:", 0, "a provider instance: configured in the engine, no cloud call"),
    (r"^pulumi:pulumi:StackReference$", 1, "assumption: one read of another stack's outputs"),
    (r"^aws:eks/cluster:Cluster$", 600, "assumption: an EKS control plane, about 10 minutes"),
    (r"^aws:eks/nodeGroup:NodeGroup$", 300, "assumption: a managed node group's nodes joined, about 5 minutes"),
    (r"^aws:eks/addon:Addon$", 60, "assumption: an EKS add-on active"),
    (r"^aws:efs/fileSystem:FileSystem$", 30, "assumption: an EFS file system available"),
    (r"^aws:efs/mountTarget:MountTarget$", 90, "assumption: an EFS mount target available"),
    (r"^aws:fsx/lustreFileSystem:LustreFileSystem$", 600, "assumption: an FSx for Lustre file system, ~10 minutes"),
    (r"^aws:ec2/launchTemplate:", 2, "assumption: an API record"),
    (r"^azure-native:containerservice:ManagedCluster$", 480, "assumption: an AKS cluster, about 8 minutes"),
    (r"^azure-native:containerservice:AgentPool$", 300, "assumption: an AKS node pool, about 5 minutes"),
    (r"^azure-native:storagecache:AmlFilesystem$", 900, "assumption: Azure Managed Lustre, about 15 minutes"),
    (r"^azure-native:storage:StorageAccount$", 30, "assumption: a storage account"),
    (r"^gcp:container/cluster:Cluster$", 420, "assumption: a GKE cluster, about 7 minutes"),
    (r"^gcp:container/nodePool:NodePool$", 300, "assumption: a GKE node pool, about 5 minutes"),
    (r"^gcp:filestore/instance:Instance$", 300, "assumption: a Filestore instance, about 5 minutes"),
    (r"^gcp:lustre/instance:Instance$", 900, "assumption: a Managed Lustre instance, about 15 minutes"),
    (r"^oci:ContainerEngine/cluster:Cluster$", 480, "assumption: an OKE cluster, about 8 minutes"),
    (r"^oci:ContainerEngine/nodePool:NodePool$", 420, "assumption: an OKE node pool, about 7 minutes"),
    (r"^oci:Core/clusterNetwork:ClusterNetwork$", 600,
     "assumption: an OCI cluster network's bare-metal GPU instances provisioned, about 10 minutes"),
    (r"^oci:FileStorage/", 20, "assumption: an FSS file system, mount target or export"),
    (r"^kubernetes:helm\.sh/v3:Release$", 90,
     "assumption: a Helm release installed atomically: its Deployments/DaemonSets ready, about 1.5 minutes"),
    (r"^kubernetes:yaml/v2:ConfigGroup$", 0, "a group: its objects are registrations of their own"),
    (r"^kubernetes:apiextensions\.k8s\.io/v1:CustomResourceDefinition$", 2, "assumption: a CRD established"),
    (r"^kubernetes:apps/v1:(Deployment|StatefulSet|DaemonSet)$", 30,
     "assumption: pulumi-kubernetes awaits its rollout (pods ready)"),
    (r"^kubernetes:batch/v1:Job$", 30, "assumption: pulumi-kubernetes awaits a setup Job's completion"),
    (r"^kubernetes:", 1, "assumption: one API call, the object stored (custom resources with no await)"),
    (r"^[a-z-]+:", 5, "assumption: any other cloud resource, one API call and a short wait"),
]
_COMPILED = [(re.compile(p), s) for p, s, _ in CREATION_SECONDS]


def seconds(reg_type: str, custom: bool = True) -> float:
    """The creation time the table gives a registration type (0 for a component: it creates nothing)."""
    if not custom and not reg_type.startswith("kubernetes:yaml"):
        return 0.0
    for rx, s in _COMPILED:
        if rx.search(reg_type):
            return float(s)
    return 0.0


@dataclass
class Chain:
    seconds: float
    urns: list[str]               # first created first


def _graph(records: list[dict[str, Any]], needed: bool, cfg: Any = None) -> dict[str, list[str]]:
    urns = {r["urn"] for r in records}
    children: dict[str, list[str]] = {}
    for r in records:
        if r.get("parent") in urns:
            children.setdefault(r["parent"], []).append(r["urn"])

    def under(urn: str) -> list[str]:
        out = [urn]
        for c in children.get(urn, ()):
            out += under(c)
        return out

    by_urn = {r["urn"]: r for r in records}
    providers = {}
    for r in records:
        if r["type"].startswith("pulumi:providers:"):
            providers[r["urn"]] = r["urn"]
    namespaces: dict[tuple[str, str], list[str]] = {}
    crds: dict[tuple[str, str, str], list[str]] = {}
    for r in records:
        inp = r.get("inputs") or {}
        if not (r.get("custom") and isinstance(inp, dict) and "kind" in inp):
            continue
        if inp.get("kind") == "Namespace":
            namespaces.setdefault((r.get("provider", ""), str((inp.get("metadata") or {}).get("name"))), []).append(
                r["urn"])
        elif inp.get("kind") == "CustomResourceDefinition":
            spec = inp.get("spec") or {}
            names = spec.get("names") or {}
            crds.setdefault((r.get("provider", ""), str(spec.get("group")), str(names.get("kind"))), []).append(
                r["urn"])
    release_of_group = _releases_by_group(records, cfg)

    graph: dict[str, list[str]] = {}
    for r in records:
        deps: list[str] = []
        prov = _provider_of(r, providers)
        if prov:
            deps.append(prov)
        inp = r.get("inputs") or {}
        parent = by_urn.get(r.get("parent", ""))
        if needed and r.get("custom") and isinstance(inp, dict) and "kind" in inp and "apiVersion" in inp \
                and r["type"] != "kubernetes:helm.sh/v3:Release" and not creates_pods(inp):
            pv = r.get("provider", "")
            ns = (inp.get("metadata") or {}).get("namespace")
            if ns:
                deps += namespaces.get((pv, str(ns)), [])
            if is_custom_kind(inp):
                group = api_group(inp)
                deps += crds.get((pv, group, str(inp.get("kind"))), [])
                deps += release_of_group.get(group, [])
        else:
            deps += [u for d in r.get("dependencies") or [] if d in by_urn for u in under(d)]
            if parent is not None and parent["type"] == "kubernetes:yaml/v2:ConfigGroup":
                # the provider creates a group's objects once the group's own dependencies exist
                deps += [u for d in parent.get("dependencies") or [] if d in by_urn for u in under(d)]
        graph[r["urn"]] = list(dict.fromkeys(d for d in deps if d != r["urn"]))
    return graph


def _provider_of(r: dict[str, Any], providers: dict[str, str]) -> str:
    ref = r.get("provider") or ""
    if not ref:
        return ""
    urn = ref.rsplit("::", 1)[0]       # "<urn>::<id>"
    return urn if urn in providers else ""


def _releases_by_group(records: list[dict[str, Any]], cfg: Any) -> dict[str, list[str]]:
    """API group -> the Helm release registrations installing it (the add-ons' ReleaseSpec.installs_crds)."""
    if cfg is None:
        return {}
    from .manifests.addons import addon_releases
    by_name: dict[str, list[str]] = {}
    for r in records:
        if r["type"] == "kubernetes:helm.sh/v3:Release":
            by_name.setdefault(str((r.get("inputs") or {}).get("name")), []).append(r["urn"])
    out: dict[str, list[str]] = {}
    for spec in addon_releases(cfg):
        for g in spec.installs_crds:
            out.setdefault(g, []).extend(by_name.get(spec.release_name, []))
    return out


def longest(records: list[dict[str, Any]], graph: dict[str, list[str]]) -> Chain:
    weight = {r["urn"]: seconds(r["type"], bool(r.get("custom"))) for r in records}
    finish: dict[str, float] = {}
    best: dict[str, str | None] = {}
    state: dict[str, int] = {}

    def visit(u: str) -> float:
        if u in finish:
            return finish[u]
        if state.get(u) == 1:       # a cycle: the engine would refuse it; count the edge as absent
            return 0.0
        state[u] = 1
        top, arg = 0.0, None
        for d in graph.get(u, ()):
            f = visit(d)
            if f > top or arg is None and f >= top:
                top, arg = f, d
        finish[u] = top + weight.get(u, 0.0)
        best[u] = arg
        state[u] = 2
        return finish[u]

    end, total = None, -1.0
    for r in records:
        f = visit(r["urn"])
        if f > total:
            end, total = r["urn"], f
    chain: list[str] = []
    u = end
    while u is not None:
        if weight.get(u, 0.0) > 0 or not chain:
            chain.append(u)
        u = best.get(u)
    chain.reverse()
    return Chain(max(total, 0.0), chain)


@dataclass
class Report:
    recorded: Chain
    needed: Chain

    @property
    def ratio(self) -> float:
        return self.recorded.seconds / self.needed.seconds if self.needed.seconds else 1.0

    def as_dict(self, records: Iterable[dict[str, Any]]) -> dict[str, Any]:
        types = {r["urn"]: r for r in records}

        def chain(c: Chain) -> dict[str, Any]:
            return {"seconds": c.seconds, "length": len(c.urns),
                    "resources": [{"type": types[u]["type"], "name": types[u]["name"],
                                   "seconds": seconds(types[u]["type"], bool(types[u].get("custom")))}
                                  for u in c.urns]}
        return {"recorded": chain(self.recorded), "needed": chain(self.needed), "ratio": round(self.ratio, 4),
                "method": __doc__.split("\n\n")[1] if __doc__ else "",
                "creationSeconds": [{"type": p, "seconds": s, "basis": b} for p, s, b in CREATION_SECONDS]}

    def line(self) -> str:
        def m(s: float) -> str:
            return f"{s / 60:.1f} min"
        return (f"deploy critical path: {len(self.recorded.urns)} resources, {m(self.recorded.seconds)} weighted; "
                f"needed chain {len(self.needed.urns)} resources, {m(self.needed.seconds)} "
                f"(x{self.ratio:.2f}; creation times assumed: critical-path.json)")


def report(records: list[dict[str, Any]], cfg: Any = None) -> Report:
    """Both chains of the plan's registrations (Registration.as_dict records); `cfg`: the stack's StackConfig,
    to know which add-on release installs which API group (None for a fleet stack)."""
    return Report(longest(records, _graph(records, False, cfg)), longest(records, _graph(records, True, cfg)))
