"""Volcano network topology (HyperNodes) and Queues, as plain dicts.

HyperNode (topology.volcano.sh/v1alpha1): tier 1 = the nodes of one pool, selected by label, for
clouds where a pool is one tight network domain the infrastructure creates:
  aws   cluster placement group per pool (hardware.md section 3)
  azure one VM scale set per agent pool = one InfiniBand fabric partition, proximity placement
  gcp   compact placement policy per pool
  oci   one cluster network per RDMA pool
`existing` stacks describe nodes they did not place, so no tier is claimed for them.
Volcano's network-topology-aware scheduling then keeps a job with networkTopology
{mode: hard, highestTierAllowed: 1} inside one pool.

Queue (scheduling.volcano.sh/v1beta1): one per cfg.queues entry, weight and capability nvidia.com/gpu.
"""
from __future__ import annotations

from typing import Any

from .. import pools
from ..config import StackConfig

TOPOLOGY_TIER_CLOUDS = {"aws": "placement group", "azure": "VM scale set / InfiniBand partition",
                        "gcp": "compact placement", "oci": "cluster network"}


def hypernodes(cfg: StackConfig) -> list[dict[str, Any]]:
    if cfg.cloud not in TOPOLOGY_TIER_CLOUDS:
        return []
    out = []
    for pool in cfg.node_pools:
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


def queues(cfg: StackConfig) -> list[dict[str, Any]]:
    out = []
    for q in cfg.queues:
        spec: dict[str, Any] = {"weight": q.weight, "reclaimable": True}
        if q.gpus is not None:
            spec["capability"] = {"nvidia.com/gpu": str(q.gpus)}
        out.append({"apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "Queue",
                    "metadata": {"name": q.name}, "spec": spec})
    return out
