"""The shared shape of every cloud module: args classes and the pure outputs every pool exports."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Dict, Optional

import pulumi

from multinode import fabric, pools
from multinode.config import NodePool, Storage, StackConfig

TYPE_PREFIX = "multinode:index:"


@dataclass
class ClusterAccessArgs:
    config: StackConfig


@dataclass
class GpuNodePoolArgs:
    config: StackConfig
    pool: NodePool
    cluster: Any                     # the cloud's ClusterAccess component


@dataclass
class CheckpointStorageArgs:
    config: StackConfig
    storage: Storage
    cluster: Any                     # the cloud's ClusterAccess component
    depends_on: Optional[list] = None


def pool_outputs(cfg: StackConfig, pool: NodePool) -> Dict[str, Any]:
    """Outputs every cloud's GpuNodePool exports (pure, so all clouds agree on them)."""
    machine = cfg.machine(pool)
    profile = fabric.profile_for(cfg, pool)
    return {
        "machine": machine.name,
        "nodeCount": pool.node_count,
        "gpusPerNode": machine.gpus,
        "nodeLabels": pools.node_labels(cfg, pool, machine),
        "nodeSelector": pools.node_selector(cfg, pool),
        "nodeTaints": pools.node_taints(cfg),
        "fabric": profile.describe(),
    }


class PoolOutputsMixin:
    """Sets the common outputs as attributes (snake_case) and returns them for register_outputs."""

    def _set_pool_outputs(self, cfg: StackConfig, pool: NodePool) -> Dict[str, Any]:
        out = pool_outputs(cfg, pool)
        self.machine = pulumi.Output.from_input(out["machine"])
        self.node_count = pulumi.Output.from_input(out["nodeCount"])
        self.gpus_per_node = pulumi.Output.from_input(out["gpusPerNode"])
        self.node_labels = pulumi.Output.from_input(out["nodeLabels"])
        self.node_selector = pulumi.Output.from_input(out["nodeSelector"])
        self.node_taints = pulumi.Output.from_input(out["nodeTaints"])
        self.fabric = pulumi.Output.from_input(out["fabric"])
        return out
