"""Volcano network topology (HyperNodes, their discovery from node labels, the scheduler's plugins) and
Queues and PriorityClasses, as plain dicts.

Network tiers, per pool (issue 18):
- Where the cloud labels each node with its place in the network, Volcano's HyperNode auto-discovery
  builds the tiers from those labels (controller `networkTopologyDiscovery`, source `label`, Volcano >=
  1.12; volcano-sh/volcano#4007, #4145; docs/user-guide/how_to_use_hypernode_auto_discovery.md: labels
  listed top to bottom, ending with kubernetes.io/hostname; tier 1 is the label just above the host):
    aws  topology.k8s.aws/network-node-layer-1 (top) .. -3 (bottom; -4 on 4-layer types), EKS docs
         "Place distributed AI/ML workloads with network topology labels"; on the instance types of EC2's
         "Prerequisites for Amazon EC2 topology" (3 layers: p3dn, p4d, p4de, p5, p5e, p5en, p6e-gb200,
         g6e, g7e, trn1, trn1n, trn2, trn2u; 4 layers: p6-b200, p6-b300).
    gcp  cloud.google.com/gce-topology-block (top), -subblock; -host is the physical host, one VM per
         host for the full-host GPU machines, so the node itself. GKE sets them on RDMA-capable GPU nodes
         (GKE AI Hypercomputer "view node topology"; Kueue TAS levels block/subblock/host/hostname); cluster-
         toolkit uses the same levels for A3 Mega (TCPXO) and A3 High (TCPX) pools too.
    oci  none (issue 30). oci.oraclecloud.com/rdma.hpc_island_id, rdma.network_block_id, rdma.local_block_id are
         not set by OKE: oci-hpc-oke's own labeler DaemonSet writes them from the instance metadata
         (oracle-quickstart/oci-hpc-oke@61d210ac terraform/files/oci-hpc-oke-utils/templates/labeler-configmap.yaml
         :123-143), and writes the placeholder `no-imds-data` where the metadata has no locality (docs/using-rdma-
         network-locality-when-running-workloads-on-oke.md). We do not deploy that chart, so an OCI pool gets the
         pool tier below (the cluster network); OCI_TOPOLOGY_LABELS stays for a stack whose nodes carry them.
    azure: AKS publishes no InfiniBand topology labels (none found in the AKS or Azure HPC docs).
- Elsewhere one tier-1 HyperNode per pool, selected by the pool label: the tight network domain our
  infrastructure creates for a pool (aws cluster placement group, azure VM scale set = one InfiniBand
  partition, gcp compact placement, oci cluster network). A pool with label tiers gets no such HyperNode:
  a node must sit in one tree, and the discovered one is the real network.
`existing` stacks describe nodes they did not place: no tier is claimed, so a hard networkTopology is
refused there (config check), and the discovery is not configured (add it through addons.volcano.values).

The scheduler: Volcano's chart config (installer/helm/chart/volcano/config/volcano-scheduler.conf at
v1.15.1) does not run the `network-topology-aware` plugin, so a job's networkTopology would be ignored;
and its actions have no `preempt`. When a workload asks for topology, or addons.volcano.preemption is
set, the chart's `custom.scheduler_config_override` carries that same config plus what is asked.
"""
from __future__ import annotations

from typing import Any

from .. import pools
from ..config import NodePool, StackConfig

TOPOLOGY_TIER_CLOUDS = {"aws": "placement group", "azure": "VM scale set / InfiniBand partition",
                        "gcp": "compact placement", "oci": "cluster network"}
HOSTNAME_LABEL = "kubernetes.io/hostname"

_AWS_LAYERS = [f"topology.k8s.aws/network-node-layer-{i}" for i in (1, 2, 3)]
AWS_TOPOLOGY_MACHINES_3 = ("p3dn.24xlarge", "p4d.24xlarge", "p4de.24xlarge", "p5.48xlarge", "p5e.48xlarge",
                           "p5en.48xlarge", "p6e-gb200.36xlarge", "trn1.2xlarge", "trn1.32xlarge", "trn1n.32xlarge",
                           "trn2.48xlarge", "trn2u.48xlarge")
AWS_TOPOLOGY_MACHINES_4 = ("p6-b200.48xlarge", "p6-b300.48xlarge")
GCP_TOPOLOGY_LABELS = ["cloud.google.com/gce-topology-block", "cloud.google.com/gce-topology-subblock"]
OCI_TOPOLOGY_LABELS = ["oci.oraclecloud.com/rdma.hpc_island_id", "oci.oraclecloud.com/rdma.network_block_id",
                       "oci.oraclecloud.com/rdma.local_block_id"]

# The chart's scheduler config at v1.15.1, as data (installer/helm/chart/volcano/config/volcano-scheduler.conf).
_CHART_ACTIONS = ["enqueue", "allocate", "backfill"]
_CHART_TIERS: list[list[dict[str, Any]]] = [
    [{"name": "priority"}, {"name": "gang", "enablePreemptable": False}, {"name": "conformance"}],
    [{"name": "overcommit"}, {"name": "drf", "enablePreemptable": False}, {"name": "predicates"},
     {"name": "proportion"}, {"name": "nodeorder"}, {"name": "binpack"}],
]
TOPOLOGY_PLUGIN = "network-topology-aware"


def topology_labels(cfg: StackConfig, pool: NodePool) -> list[str]:
    """The node labels that name this pool's network tiers, top tier first ([] when the cloud sets none)."""
    m = cfg.machine(pool)
    if cfg.cloud == "aws" and pool.machine_spec is None:
        if m.name in AWS_TOPOLOGY_MACHINES_4:
            return _AWS_LAYERS + ["topology.k8s.aws/network-node-layer-4"]
        if m.name in AWS_TOPOLOGY_MACHINES_3 or m.name.startswith(("g6e.", "g7e.")):
            return list(_AWS_LAYERS)
    if cfg.cloud == "gcp" and m.fabric in ("gcp-rdma", "tcpxo", "tcpx"):
        # issue 30: cluster-toolkit@10470803 gives A3 Mega and A3 High the same block / subblock / host levels as
        # A3 Ultra and A4 (examples/gke-a3-megagpu/kueue-configuration.yaml.tftpl:21-23, gke-a3-highgpu/ the same)
        return list(GCP_TOPOLOGY_LABELS)
    return []


def tiers_for_pool(cfg: StackConfig, pool_name: str) -> list[str]:
    """The HyperNode tiers this stack gives a pool, tier 1 first: the label tiers (closest first), else the
    pool's own tier-1 HyperNode, else none."""
    pool = cfg.pool(pool_name)
    labels = topology_labels(cfg, pool)
    if labels:
        return list(reversed(labels))
    if cfg.cloud in TOPOLOGY_TIER_CLOUDS:
        return [TOPOLOGY_TIER_CLOUDS[cfg.cloud]]
    return []


def why_no_tiers(cfg: StackConfig) -> str:
    if cfg.cloud == "existing":
        return "an `existing` stack did not place its nodes, so it claims no network tier"
    return f"cloud {cfg.cloud!r} has no network tier here"


def hypernodes(cfg: StackConfig) -> list[dict[str, Any]]:
    """One tier-1 HyperNode per pool whose tiers do not come from node labels."""
    if cfg.cloud not in TOPOLOGY_TIER_CLOUDS:
        return []
    out = []
    for pool in cfg.node_pools:
        if topology_labels(cfg, pool):
            continue
        selector = pools.node_selector(cfg, pool)
        out.append({
            "apiVersion": "topology.volcano.sh/v1alpha1",
            "kind": "HyperNode",
            "metadata": {"name": f"{pool.name}-tier1"[:253],
                         "labels": {pools.POOL_LABEL: pool.name}},
            "spec": {
                "tier": 1,
                "tierName": TOPOLOGY_TIER_CLOUDS[cfg.cloud].replace(" / ", "-").replace(" ", "-"),
                "members": [{"type": "Node",
                             "selector": {"labelMatch": {"matchLabels": dict(selector)}}}],
            },
        })
    return out


def discovery_config(cfg: StackConfig) -> dict[str, Any] | None:
    """The Volcano controller's HyperNode discovery from the pools' topology labels (None: no pool has any)."""
    types: dict[str, list[dict[str, str]]] = {}
    for pool in cfg.node_pools:
        labels = topology_labels(cfg, pool)
        if labels:
            name = f"{cfg.cloud}-{len(labels)}-tier"
            types[name] = [{"nodeLabel": lab} for lab in labels + [HOSTNAME_LABEL]]
    if not types:
        return None
    return {"networkTopologyDiscovery": [{"source": "label", "enabled": True,
                                          "config": {"networkTopologyTypes": types}}]}


def wants_topology(cfg: StackConfig) -> bool:
    """A workload, or a Volcano Job among the stack's own `manifests`, asks Volcano to place it by network
    topology."""
    if any(w.network_topology is not None for w in cfg.workloads):
        return True
    return any(str(m.get("apiVersion", "")).startswith("batch.volcano.sh/") and m.get("kind") == "Job"
               and isinstance(m.get("spec"), dict) and isinstance(m["spec"].get("networkTopology"), dict)
               for m in cfg.manifests)


def scheduler_config(cfg: StackConfig) -> dict[str, Any] | None:
    """The chart's scheduler config plus `preempt` and the topology plugin when asked (None: the chart's own)."""
    preempt = cfg.addons.volcano.preemption
    topo = wants_topology(cfg)
    if not (preempt or topo):
        return None
    actions = list(_CHART_ACTIONS)
    if preempt:
        actions.insert(actions.index("backfill"), "preempt")    # enqueue, allocate, preempt, backfill
    tiers = [[dict(p) for p in tier] for tier in _CHART_TIERS]
    if topo:
        tiers[1].append({"name": TOPOLOGY_PLUGIN})
    return {"actions": ", ".join(actions), "tiers": [{"plugins": tier} for tier in tiers]}


def volcano_values(cfg: StackConfig) -> dict[str, Any]:
    """Helm values for the Volcano chart (custom.*_config_override), {} when the chart's defaults do."""
    import yaml
    custom: dict[str, Any] = {}
    sched = scheduler_config(cfg)
    if sched is not None:
        # the chart indents this string into volcano-scheduler.conf (templates/scheduler.yaml)
        custom["scheduler_config_override"] = yaml.safe_dump(sched, sort_keys=False)
    disc = discovery_config(cfg)
    if disc is not None:
        # the chart renders this object with toYaml into volcano-controller.conf (templates/controllers.yaml)
        custom["controller_config_override"] = disc
    return {"custom": custom} if custom else {}


def queues(cfg: StackConfig) -> list[dict[str, Any]]:
    out = []
    for q in cfg.queues:
        spec: dict[str, Any] = {"weight": q.weight, "reclaimable": True}
        if q.gpus is not None:
            spec["capability"] = {"nvidia.com/gpu": str(q.gpus)}
        if q.priority is not None:
            spec["priority"] = q.priority
        out.append({"apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "Queue",
                    "metadata": {"name": q.name}, "spec": spec})
    return out


def priority_classes(cfg: StackConfig) -> list[dict[str, Any]]:
    """scheduling.k8s.io/v1 PriorityClass per priorityClasses entry (job priority for Volcano Jobs)."""
    out = []
    for pc in cfg.priority_classes:
        obj: dict[str, Any] = {"apiVersion": "scheduling.k8s.io/v1", "kind": "PriorityClass",
                               "metadata": {"name": pc.name}, "value": pc.value,
                               "preemptionPolicy": pc.preemption_policy, "globalDefault": False}
        if pc.description:
            obj["description"] = pc.description
        out.append(obj)
    return out
