"""Stack rule: every gang of every workload is placed on the stack's nodes at once (multinode.placement).

The simulation is the pure core's (one source of truth); this rule only feeds it the objects and the pools
and turns its findings into violations. Findings another rule already reports are left to that rule:
one gang larger than its pool for the kinds node-count-within-pool reads (LWS, Jobs, MPIJob, PyTorchJob, the
Kubeflow Trainer runtimes),
and pods that ask more GPUs than their node has (gpus-per-pod-within-machine).
"""
from __future__ import annotations

from collections.abc import Iterator

from multinode import placement

from ..engine import MANDATORY, Context, Resource, Rule, default_profile

_NODE_COUNT_RULE_KINDS = ("LeaderWorkerSet ", "Job ", "MPIJob ", "PyTorchJob ", "ClusterTrainingRuntime ",
                          "TrainingRuntime ")


def pool_specs(ctx: Context) -> list[placement.PoolSpec]:
    """From the stack config when there is one; under `pulumi preview`, from the node-pool resources (their
    taints are not read there, so the check is lenient about tolerations)."""
    if ctx.config is not None:
        return placement.pools_from_config(ctx.config)
    out = []
    for p in ctx.pools:
        if p.machine is None or p.node_count is None:
            continue
        cloud = p.machine.cloud if p.machine.cloud in ("aws", "azure", "gcp", "oci") else "existing"
        out.append(placement.PoolSpec(p.name, p.node_count, p.machine, dict(p.labels), [],
                                      p.profile or default_profile(p.machine), cloud))
    return out


def _reported_elsewhere(f: placement.Finding) -> bool:
    if f.kind == placement.GANG_TOO_LARGE and f.owner.startswith(_NODE_COUNT_RULE_KINDS):
        return True
    return f.kind == placement.POD_TOO_LARGE and placement.GPU in f.resources     # devices follow the GPUs


def check_stack_fits(resources: list[Resource], ctx: Context) -> Iterator[tuple[Resource | None, str]]:
    pools = pool_specs(ctx)
    if not pools:
        return
    k8s = [r for r in resources if r.is_k8s]
    by_label = {r.label: r for r in k8s}
    # plan has simulated this stack already (ctx.placement); the same objects on the same pools are not simulated twice
    result = placement.reuse_or_simulate([r.props for r in k8s], pools, ctx.placement)
    for f in result.findings:
        if not _reported_elsewhere(f):
            yield by_label.get(f.owner), f.message


RULES = [
    Rule("stack-fits-node-pools",
         "Every gang of every workload fits on the stack's node pools: the long-running services all at once, "
         "each batch job beside them (GPUs, fabric devices, cpu, memory incl. memory-backed volumes; node "
         "selectors, taints and anti-affinity honoured; gangs all-or-nothing).",
         MANDATORY, check_stack_fits, scope="stack",
         remediation="Add nodes to the pool named in the message, or move a workload to another pool."),
]
