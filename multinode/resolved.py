"""The resolved model of a workload: every default of its shape applied once, here (pure).

A workload (or a prefill/decode role of a disaggregated one) leaves GPUs per node and tensor parallel
unset to mean "fill the machine"; pipeline parallel and replicas default in the config model. This
module turns one into a `Gang` with every number filled in, and a workload into a `ResolvedWorkload`:
its own gang and the gangs of its roles. The config checks (config._workload_problems), the manifests
(LWS, Grove, Dynamo, training builders through StackConfig.gpus_per_node / tensor_parallel) and plan's
summary read these values; none of them repeats a default.

Nothing here imports the config model (config reads this module): the functions take anything with
the config model's attribute names, and the machine's GPUs per node from the caller, who resolved the
pool's machine (StackConfig.machine) or reports why it could not.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

# The roles a disaggregated workload splits into, in the order every consumer lists them.
DISAGGREGATED_ROLES = ("prefill", "decode")


def default_tensor_parallel(nodes: int, gpus_per_node: int, pipeline_parallel: int) -> int:
    """Default tensor parallel: fill every GPU of the gang with one tensor x pipeline group."""
    return max(1, (nodes * gpus_per_node) // pipeline_parallel)


def nccl_test_nodes(nodes: int, pool_node_count: int) -> int:
    """An nccl-test spans `nodes` when set above 1, else every node of its pool."""
    return nodes if nodes > 1 else pool_node_count


@dataclass(frozen=True)
class Gang:
    """The shape of one gang of pods (a workload, or one role of a disaggregated workload)."""
    name: str                 # "engine" for the workload itself, else the role ("prefill", "decode")
    nodes: int
    gpus_per_node: int
    tensor_parallel: int
    pipeline_parallel: int
    replicas: int


def gang(name: str, spec: Any, machine_gpus: int) -> Gang:
    """`spec`: a config Workload or Role (nodes, gpus_per_node, tensor_parallel, pipeline_parallel, replicas)."""
    gpus_per_node = spec.gpus_per_node or machine_gpus
    tensor_parallel = spec.tensor_parallel or default_tensor_parallel(spec.nodes, gpus_per_node,
                                                                       spec.pipeline_parallel)
    return Gang(name, spec.nodes, gpus_per_node, tensor_parallel, spec.pipeline_parallel, spec.replicas)


@dataclass(frozen=True)
class ResolvedWorkload:
    name: str
    kind: str
    node_pool: str
    machine_gpus: int
    main: Gang                                   # the workload's own nodes/GPUs/parallel sizes
    roles: dict[str, Gang]                       # prefill/decode of a disaggregated workload, else empty

    @property
    def gpus_per_node(self) -> int:
        return self.main.gpus_per_node

    @property
    def tensor_parallel(self) -> int:
        return self.main.tensor_parallel

    def serving_gangs(self) -> tuple[Gang, ...]:
        """What serves the model: the roles of a disaggregated workload, else the workload itself."""
        return tuple(self.roles.values()) if self.roles else (self.main,)


def resolve_workload(workload: Any, machine_gpus: int) -> ResolvedWorkload:
    """Every default of one workload, given the GPUs per node of its pool's machine."""
    roles: dict[str, Gang] = {}
    disaggregated: Any | None = workload.disaggregated
    if disaggregated is not None:
        roles = {r: gang(r, getattr(disaggregated, r), machine_gpus) for r in DISAGGREGATED_ROLES}
    return ResolvedWorkload(workload.name, workload.kind, workload.node_pool, machine_gpus,
                            gang("engine", workload, machine_gpus), roles)
