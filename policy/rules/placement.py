"""Stack rule: every gang of every workload is placed on the stack's nodes at once (multinode.placement).

The simulation is the pure core's (one source of truth); this rule only feeds it the objects and the pools
and turns its findings into violations. A finding another rule already reports about the same object is left
to that rule: one gang larger than its pool when node-count-within-pool reports that object, and pods that ask
more GPUs than their node has when gpus-per-pod-within-machine (or, under `pulumi preview`,
workload-matches-node-pool) reports it. Whether the other rule reports it is asked of that rule itself, never
guessed from the object's kind: every placement finding ("does not fit" in plan's table, `fits: false` in
placement.json) is a finding of some mandatory rule (issue 31: an MPIJob whose launcher requests GPUs was
counted by node-count-within-pool without its launcher, and its gang-too-large finding was dropped here).
"""
from __future__ import annotations

from collections.abc import Iterator

from multinode import placement

from ..engine import MANDATORY, Context, Resource, Rule, default_profile


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


def _labels_reported_by_other_rules(k8s: list[Resource], ctx: Context) -> tuple[set[str], set[str]]:
    """(objects node-count-within-pool reports, objects a GPUs-per-pod rule reports), each rule asked as the pack
    runs it: gpus-per-pod-within-machine is a resource rule, which sees the pools offline and no pools under
    `pulumi preview` (there workload-matches-node-pool judges GPUs per pod against the pools)."""
    from .dynamo import RULES as DGD_RULES
    from .stack import check_node_count, check_workload_pool
    from .workloads import check_gpus_within_machine
    node_count = {r.label for r, _ in check_node_count(k8s, ctx) if r is not None}
    gpus = {r.label for r, _ in check_workload_pool(k8s, ctx)}
    alone = ctx if ctx.resource_rules_see_pools else Context(settings=ctx.settings)
    per_resource = [check_gpus_within_machine] + [r.check for r in DGD_RULES
                                                  if r.name == "dynamo-gpus-per-node-within-machine"]
    gpus |= {r.label for r in k8s if any(True for check in per_resource for _ in check(r, alone))}
    return node_count, gpus


def _reported_elsewhere(f: placement.Finding, node_count: set[str], gpus: set[str]) -> bool:
    if f.kind == placement.GANG_TOO_LARGE:
        return f.owner in node_count
    # devices follow the GPUs: a pod too large only in GPUs (and its devices) is the GPU rule's finding
    return f.kind == placement.POD_TOO_LARGE and placement.GPU in f.resources and f.owner in gpus


def check_stack_fits(resources: list[Resource], ctx: Context) -> Iterator[tuple[Resource | None, str]]:
    pools = pool_specs(ctx)
    if not pools:
        return
    k8s = [r for r in resources if r.is_k8s]
    by_label = {r.label: r for r in k8s}
    # plan has simulated this stack already (ctx.placement); the same objects on the same pools are not simulated twice
    result = placement.reuse_or_simulate([r.props for r in k8s], pools, ctx.placement)
    if not result.findings:
        return
    node_count, gpus = _labels_reported_by_other_rules(k8s, ctx)
    for f in result.findings:
        if not _reported_elsewhere(f, node_count, gpus):
            yield by_label.get(f.owner), f.message


RULES = [
    Rule("stack-fits-node-pools",
         "Every gang of every workload fits on the stack's node pools: the long-running services all at once, "
         "each batch job beside them (GPUs, fabric devices, cpu, memory incl. memory-backed volumes; node "
         "selectors, taints and anti-affinity honoured; gangs all-or-nothing).",
         MANDATORY, check_stack_fits, scope="stack",
         remediation="Add nodes to the pool named in the message, or move a workload to another pool."),
]
