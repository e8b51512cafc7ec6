"""The topology contract: pure functions shared by the config checks and the policy pack.

Each check returns a list of Findings. A Finding names the field it is about (so callers can
prefix their own key path or resource name), quotes the numbers, and says how to fix it.
"""
from __future__ import annotations

from dataclasses import dataclass

from . import models

ERROR = "error"
ADVISORY = "advisory"


@dataclass(frozen=True)
class Finding:
    field: str
    message: str
    severity: str = ERROR


def _machine_label(machine_name: str | None) -> str:
    return f" ({machine_name})" if machine_name else ""


def suggest_parallel(nodes: int, gpus_per_node: int, pipeline_parallel: int | None = None) -> tuple[int, int]:
    """A (tp, pp) pair that fills nodes x GPUs: keep the pipeline size the user chose when it
    divides the total, else tensor parallel inside a node (NVLink) and one pipeline stage per node."""
    total = nodes * gpus_per_node
    if pipeline_parallel and pipeline_parallel > 1 and total % pipeline_parallel == 0:
        return total // pipeline_parallel, pipeline_parallel
    return gpus_per_node, nodes


def check_parallelism(tensor_parallel: int, pipeline_parallel: int, nodes: int, gpus_per_node: int,
                      machine_name: str | None = None) -> list[Finding]:
    """Inference: tensorParallel x pipelineParallel must equal nodes x GPUs per node."""
    used = tensor_parallel * pipeline_parallel
    total = nodes * gpus_per_node
    if used == total:
        return []
    tp, pp = suggest_parallel(nodes, gpus_per_node, pipeline_parallel)
    return [Finding(
        "tensorParallel",
        f"tensorParallel {tensor_parallel} x pipelineParallel {pipeline_parallel} = {used} GPUs, but "
        f"{nodes} node{'s' if nodes != 1 else ''} x {gpus_per_node} GPUs{_machine_label(machine_name)} = {total}; "
        f"use tensorParallel {tp} with pipelineParallel {pp}")]


def check_gpus_per_pod(gpus_per_pod: int, machine_gpus: int, machine_name: str | None = None) -> list[Finding]:
    """A pod cannot hold more GPUs than its node has."""
    if gpus_per_pod <= machine_gpus:
        return []
    return [Finding(
        "gpusPerNode",
        f"{gpus_per_pod} GPUs per pod, but {machine_name or 'the machine'} has {machine_gpus}; "
        f"use gpusPerNode {machine_gpus} or fewer and add nodes instead")]


def check_tensor_parallel_span(tensor_parallel: int, gpus_per_node: int, fabric: str,
                               machine_name: str | None = None) -> list[Finding]:
    """Tensor parallel across nodes is only sensible over a GPU fabric (advisory)."""
    if tensor_parallel <= gpus_per_node or fabric not in ("none", "", None):
        return []
    return [Finding(
        "tensorParallel",
        f"tensorParallel {tensor_parallel} spans nodes of {gpus_per_node} GPUs{_machine_label(machine_name)} "
        f"with no GPU fabric; every layer would cross plain Ethernet. Prefer tensorParallel {gpus_per_node} "
        f"and pipeline parallel across nodes", ADVISORY)]


def check_model_fit(params_b: float | None, precision: str, nodes: int, gpus_per_node: int,
                    gpu_memory_gb: float | None, machine_name: str | None = None,
                    model: str = "the model") -> list[Finding]:
    """The weights at the chosen precision must fit in WEIGHTS_SHARE of the GPU memory."""
    if params_b is None or gpu_memory_gb is None:
        return []
    need = models.weights_gb(params_b, precision)
    have = nodes * gpus_per_node * gpu_memory_gb
    budget = have * models.WEIGHTS_SHARE
    if need <= budget:
        return []
    per_node = gpus_per_node * gpu_memory_gb * models.WEIGHTS_SHARE
    nodes_needed = int(-(-need // per_node))
    return [Finding(
        "nodes",
        f"{model} at {precision} needs {need:.0f} GB of weights, but {nodes} node{'s' if nodes != 1 else ''} x "
        f"{gpus_per_node} GPUs x {gpu_memory_gb:g} GB{_machine_label(machine_name)} = {have:.0f} GB "
        f"({models.WEIGHTS_SHARE:.0%} usable for weights = {budget:.0f} GB); use {nodes_needed} nodes "
        f"or a smaller precision")]


def check_training(nnodes: int, nproc_per_node: int, pods: int, gpus_per_pod: int,
                   tensor_parallel: int | None = None, pipeline_parallel: int | None = None) -> list[Finding]:
    """Training: nnodes x nproc_per_node = world size = pods x GPUs per pod; world % (tp x pp) == 0."""
    out: list[Finding] = []
    world = nnodes * nproc_per_node
    gpus = pods * gpus_per_pod
    if nnodes != pods:
        out.append(Finding("nodes", f"torchrun --nnodes {nnodes}, but the job runs {pods} pods; "
                                    f"use --nnodes {pods}"))
    if nproc_per_node != gpus_per_pod:
        out.append(Finding("gpusPerNode", f"torchrun --nproc_per_node {nproc_per_node}, but each pod has "
                                          f"{gpus_per_pod} GPUs; use --nproc_per_node {gpus_per_pod}"))
    if not out and world != gpus:  # only reachable when both above hold; kept for direct callers
        out.append(Finding("nodes", f"world size {world} != {pods} pods x {gpus_per_pod} GPUs = {gpus}"))
    model_parallel = (tensor_parallel or 1) * (pipeline_parallel or 1)
    if gpus % model_parallel:
        out.append(Finding(
            "tensorParallel",
            f"world size {pods} pods x {gpus_per_pod} GPUs = {gpus} is not divisible by tensorParallel "
            f"{tensor_parallel or 1} x pipelineParallel {pipeline_parallel or 1} = {model_parallel}; "
            f"pick sizes whose product divides {gpus}"))
    return out
