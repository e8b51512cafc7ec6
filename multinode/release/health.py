"""The release gate reads node health (issue 34): refuse to promote while a pool has more health-tainted nodes than
spare nodes, beside the NCCL bandwidth gate.

A node counts as unhealthy when it carries one of multinode.health's taint keys (any effect) or is cordoned
(spec.unschedulable: NVSentinel's fault quarantine cordons by default). A pool's spare nodes are the day-two plan's
(multinode/upgrades.py plan_pool: nodes beyond every service plus the largest batch job at peak): with more bad nodes
than that, a gang hit by one cannot come back whole, so the stack is not fit to promote. Pools are found on the
cluster by the node selector our workloads use (multinode/pools.py node_selector).
"""
from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from .. import health


@dataclass(frozen=True)
class NodeInfo:
    name: str
    labels: Mapping[str, str]
    taints: Sequence[Mapping[str, Any]] = ()
    unschedulable: bool = False

    def health_problems(self) -> list[str]:
        out = [f"{t.get('key')}:{t.get('effect') or ''}" for t in self.taints
               if isinstance(t, Mapping) and t.get("key") in health.HEALTH_TAINTS]
        if self.unschedulable and not any(p.startswith(health.UNSCHEDULABLE) for p in out):
            out.append("cordoned (spec.unschedulable)")
        return out


@dataclass(frozen=True)
class PoolHealthSpec:
    pool: str
    selector: Mapping[str, str]     # node labels of the pool
    spare_nodes: int
    node_count: int


class NodeReader(Protocol):
    """What the gate needs from the cluster (adapters.KubernetesCluster.list_nodes is the real one)."""

    def list_nodes(self) -> list[NodeInfo]: ...


@dataclass
class PoolHealth:
    pool: str
    nodes: int
    spare_nodes: int
    unhealthy: dict[str, list[str]] = field(default_factory=dict)    # node -> its health taints

    @property
    def passed(self) -> bool:
        return len(self.unhealthy) <= self.spare_nodes

    @property
    def message(self) -> str:
        bad = "; ".join(f"{n} ({', '.join(p)})" for n, p in sorted(self.unhealthy.items()))
        verdict = "within" if self.passed else "more than"
        return (f"pool {self.pool}: {len(self.unhealthy)} unhealthy of {self.nodes} node(s), {verdict} its "
                f"{self.spare_nodes} spare" + (f": {bad}" if bad else ""))

    def to_json(self) -> dict[str, Any]:
        return {"pool": self.pool, "nodes": self.nodes, "spareNodes": self.spare_nodes,
                "unhealthy": {n: list(p) for n, p in sorted(self.unhealthy.items())}, "pass": self.passed,
                "message": self.message}


def judge(nodes: Sequence[NodeInfo], pools: Sequence[PoolHealthSpec]) -> list[PoolHealth]:
    out = []
    for spec in pools:
        mine = [n for n in nodes if all(n.labels.get(k) == v for k, v in spec.selector.items())]
        result = PoolHealth(spec.pool, len(mine), spec.spare_nodes)
        for n in mine:
            problems = n.health_problems()
            if problems:
                result.unhealthy[n.name] = problems
        out.append(result)
    return out


def pools_for_stack(stack: str) -> list[PoolHealthSpec]:
    """The node pools of stacks/Pulumi.<stack>.yaml with their selectors and spare nodes. Raises ConfigError."""
    from .. import stackfile

    return pools_for_stack_file(stackfile.stack_path(stack), f"stack {stack}")


def pools_for_stack_file(path: Path, source: str = "") -> list[PoolHealthSpec]:
    """pools_for_stack for a stack file anywhere (the cluster box's day two runs the gate on test stacks too)."""
    from .. import checks, pools, stackfile, upgrades

    raw, secrets, _ = stackfile.read_stack_file(path)
    cfg = checks.load(raw, secrets, source=source or str(path))
    return [PoolHealthSpec(p.name, pools.node_selector(cfg, p), upgrades.plan_pool(cfg, p).spare_nodes, p.node_count)
            for p in cfg.node_pools]
