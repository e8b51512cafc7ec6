"""What a node leaves to pods: allocatable cpu and memory after the managed-Kubernetes system reserve.

    allocatable = capacity - kube-reserved - system-reserved - hard eviction threshold

Each cloud's managed Kubernetes computes the reserve from the node's size (and, for memory, from the
most pods the node may run). The formulas below are the published ones; each is an *estimate* of what
`kubectl get node -o jsonpath='{.status.allocatable}'` shows on a real node (only a real cluster
confirms it: images and versions change their defaults).

A machine whose vcpus / memory_gib the catalog does not give yet (None) gets no estimate for that
resource: `Allocatable.cpu_millis` / `memory_mib` stay None and `skipped` says why. Nothing is guessed.
Pure: no Pulumi, no I/O.
"""
from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from .catalog import Machine

MIB_PER_GIB = 1024

# Sources (looked up 2026-11-22).
EKS_SOURCE = ("awslabs/amazon-eks-ami (bootstrap / nodeadm kubelet config: kube-reserved memory = 11 MiB x maxPods + "
              "255 MiB, cpu = 6% of core 1 + 1% of core 2 + 0.5% of cores 3-4 + 0.25% of the rest, evictionHard "
              "memory.available<100Mi, no system-reserved); maxPods cap 250 for > 30 vCPUs on managed node groups: "
              "docs.aws.amazon.com/eks/latest/userguide/choosing-instance-type.html#max-pods-precedence")
AKS_SOURCE = ("learn.microsoft.com/azure/aks/node-resource-reservations (AKS 1.29+: kube-reserved memory = "
              "min(20 MB x maxPods + 50 MB, 25% of memory), eviction memory.available<100Mi; kube-reserved cpu "
              "table 1:60m 2:100m 4:140m 8:180m 16:260m 32:420m 64:740m)")
GKE_SOURCE = ("cloud.google.com/kubernetes-engine/docs/concepts/plan-node-sizes#memory_and_cpu_reservations "
              "(memory: 25% of the first 4 GiB, 20% of the next 4, 10% of the next 8, 6% of the next 112, 2% "
              "above 128 GiB, + 100 MiB eviction; cpu: 6% of core 1, 1% of core 2, 0.5% of cores 3-4, 0.25% "
              "above 4)")
KUBELET_SOURCE = ("kubernetes.io/docs/tasks/administer-cluster/reserve-compute-resources (kubelet defaults: no "
                  "kube-reserved or system-reserved, evictionHard memory.available<100Mi)")

# The most pods a GPU node may run, which sizes the memory reserve (more pods = more reserve, so the
# larger value is the conservative one).
# EKS managed node groups cap maxPods at 250 for instances with more than 30 vCPUs (EKS_SOURCE); every
# GPU machine of the catalog has more. AKS: 250 is the largest maxPods an agent pool takes and the Azure
# CNI Overlay default (learn.microsoft.com/azure/aks/azure-cni-overlay#maximum-pods-per-node). GKE Standard
# defaults to 110 pods per node (cloud.google.com/kubernetes-engine/docs/how-to/flexible-pod-cidr).
DEFAULT_MAX_PODS = {"aws": 250, "azure": 250, "gcp": 110}


@dataclass(frozen=True)
class Allocatable:
    """Estimated allocatable cpu (millicores) and memory (MiB) of one node; None = not known."""
    cpu_millis: int | None
    memory_mib: int | None
    reserved_cpu_millis: int | None = None
    reserved_memory_mib: int | None = None
    source: str = ""
    skipped: tuple[str, ...] = field(default_factory=tuple)   # why a resource has no estimate (advisory)


def _tiered(amount: float, tiers: Sequence[tuple[float, float]], rest: float) -> float:
    """sum of share x slice over consecutive slices (size, share), then `rest` x what is left."""
    total, left = 0.0, amount
    for size, share in tiers:
        part = min(left, size)
        total += part * share
        left -= part
        if left <= 0:
            return total
    return total + left * rest


def _cpu_6_1_05_025(cores: int) -> int:
    """EKS and GKE: 6% of the first core, 1% of the second, 0.5% of cores 3-4, 0.25% above 4 (millicores)."""
    return int(round(_tiered(cores * 1000, [(1000, 0.06), (1000, 0.01), (2000, 0.005)], 0.0025)))


def _aks_cpu(cores: int) -> int:
    """The AKS table; between its points the lower point's value, above 64 cores its last slope (10m per core,
    the slope of every step from 8 to 64 cores: an extrapolation, stated as such)."""
    table = [(1, 60), (2, 100), (4, 140), (8, 180), (16, 260), (32, 420), (64, 740)]
    if cores >= 64:
        return 740 + 10 * (cores - 64)
    value = table[0][1]
    for c, m in table:
        if cores >= c:
            value = m
    return value


def _gke_memory(mib: float) -> float:
    return _tiered(mib, [(4 * 1024, 0.25), (4 * 1024, 0.20), (8 * 1024, 0.10), (112 * 1024, 0.06)], 0.02)


def estimate(machine: Machine, cloud: str, max_pods: int | None = None) -> Allocatable:
    """Allocatable cpu / memory of one node of `machine` on `cloud` (aws, azure, gcp, oci, existing)."""
    skipped: list[str] = []
    cores = machine.vcpus
    mem = machine.memory_gib * MIB_PER_GIB if machine.memory_gib is not None else None
    if cores is None:
        skipped.append(f"cpu: the catalog gives no vCPU count for {machine.name}; the cpu check is skipped")
    if mem is None:
        skipped.append(f"memory: the catalog gives no memory size for {machine.name}; the memory check is skipped")
    eviction = 100                                   # MiB, every cloud below (memory.available<100Mi)
    if cloud == "aws":
        pods = max_pods or DEFAULT_MAX_PODS["aws"]
        rcpu = _cpu_6_1_05_025(cores) if cores is not None else None
        rmem = 11 * pods + 255 + eviction if mem is not None else None
        source = EKS_SOURCE
    elif cloud == "azure":
        pods = max_pods or DEFAULT_MAX_PODS["azure"]
        rcpu = _aks_cpu(cores) if cores is not None else None
        # MB in the page; taken as MiB (the difference is < 5% of a reserve of a few GiB)
        rmem = int(min(20 * pods + 50, 0.25 * mem)) + eviction if mem is not None else None
        source = AKS_SOURCE
    elif cloud == "gcp":
        rcpu = _cpu_6_1_05_025(cores) if cores is not None else None
        rmem = int(round(_gke_memory(mem))) + eviction if mem is not None else None
        source = GKE_SOURCE
    else:
        # OKE publishes no reserve formula (its node images start the kubelet with upstream defaults unless the
        # pool's cloud-init passes --kube-reserved); `existing` clusters are whatever their operator set. Only
        # the kubelet's default hard eviction is taken off: the estimate is an upper bound for these.
        rcpu = 0 if cores is not None else None
        rmem = eviction if mem is not None else None
        source = KUBELET_SOURCE + ("; OKE publishes no reserve formula" if cloud == "oci" else "")
    return Allocatable(cores * 1000 - rcpu if cores is not None and rcpu is not None else None,
                       int(mem - rmem) if mem is not None and rmem is not None else None,
                       rcpu, rmem, source, tuple(skipped))
