"""What the AWS and Azure services accept, and the config-time checks built on it (pure).

`config.semantic_problems` calls `problems(cfg)`; the cloud components read the same constants
(sku names, throughput tiers), so the check and the resource cannot disagree.

Sources (checked 2026-11-22 with the docs search):
- FSX_SIZES: Amazon FSx API reference, CreateFileSystem.StorageCapacity: "For SCRATCH_2, PERSISTENT_2,
  and PERSISTENT_1 deployment types using SSD storage type, the valid values are 1200 GiB, 2400 GiB,
  and increments of 2400 GiB" (the n x 3600 steps in hardware.md are SCRATCH_1 only).
  FSx file systems with EFA enabled have other steps; we never enable EFA on FSx.
- FSX_THROUGHPUT: FSx for Lustre guide, "Managing throughput capacity": PERSISTENT_2 SSD takes
  125, 250, 500 and 1000 MB/s/TiB.
- AZURE_FILES_*: premium (FileStorage) shares have a 100 GiB minimum (kubernetes/kubernetes#99122,
  hardware.md Z7); Microsoft.Storage FileShare.shareQuota is at most 102400 GiB for large file shares.
- AMLFS_TIERS: Azure Managed Lustre, "Create a file system in the portal", Throughput configurations
  table (MicrosoftDocs/azure-stack-docs azure-managed-lustre/create-file-system-portal.md):
  MB/s per TiB -> (minimum TiB, maximum TiB, increment TiB). Larger sizes need a support request.
"""
from __future__ import annotations

from typing import Any, Dict, List, Optional, Tuple

from ..errors import Problem

FSX_DEPLOYMENT_TYPE = "PERSISTENT_2"
FSX_THROUGHPUT = (125, 250, 500, 1000)
FSX_DEFAULT_THROUGHPUT = 250
FSX_FIRST_SIZES = (1200, 2400)
FSX_STEP = 2400

AZURE_FILES_MIN_GIB = 100
AZURE_FILES_MAX_GIB = 102400

AMLFS_TIERS: Dict[int, Tuple[int, int, int]] = {
    40: (48, 768, 48),
    125: (16, 128, 16),
    250: (8, 128, 8),
    500: (4, 128, 4),
}
AMLFS_DEFAULT_THROUGHPUT = 125
GIB_PER_TIB = 1024

# Fabric each cloud's node pools wire up (the machine must have it unless fabric.enabled is false).
CLOUD_FABRIC = {"aws": "efa", "azure": "infiniband"}


def amlfs_sku(throughput: int) -> str:
    return f"AMLFS-Durable-Premium-{throughput}"


def fsx_size_ok(gib: int) -> bool:
    return gib in FSX_FIRST_SIZES or (gib > 0 and gib % FSX_STEP == 0)


def fsx_nearest(gib: int) -> List[int]:
    """The allowed sizes just below and just above `gib`."""
    if gib < 1200:
        return [1200]
    if gib < 2400:
        return [1200, 2400]
    lower = gib // FSX_STEP * FSX_STEP
    return [lower, lower + FSX_STEP] if lower != gib else [gib]


def amlfs_allowed_tib(throughput: int) -> List[int]:
    lo, hi, step = AMLFS_TIERS[throughput]
    return list(range(lo, hi + 1, step))


def amlfs_nearest_gib(gib: int, throughput: int) -> List[int]:
    allowed = [t * GIB_PER_TIB for t in amlfs_allowed_tib(throughput)]
    below = [a for a in allowed if a <= gib]
    above = [a for a in allowed if a >= gib]
    return sorted({*(below[-1:]), *(above[:1])})


def _sizes(values: List[int]) -> str:
    return " or ".join(f"{v} GiB" for v in values)


def storage_problems(cloud: str, storage: Any, node_pools: Any = ()) -> List[Problem]:
    p: List[Problem] = []
    s = storage
    size: Optional[int] = s.size_gib
    if s.kind == "fsx-lustre":
        if s.throughput is not None and s.throughput not in FSX_THROUGHPUT:
            p.append(Problem("storage.throughput", f"{s.throughput} MB/s/TiB is not a {FSX_DEPLOYMENT_TYPE} tier; "
                                                   f"use one of {', '.join(map(str, FSX_THROUGHPUT))}"))
        if size is not None and not fsx_size_ok(size):
            p.append(Problem("storage.sizeGib", f"{size} GiB is not an FSx for Lustre {FSX_DEPLOYMENT_TYPE} size "
                                                f"(1200, 2400, then multiples of 2400 GiB); use {_sizes(fsx_nearest(size))}"))
    elif s.kind == "efs":
        if s.throughput is not None:
            p.append(Problem("storage.throughput", "EFS uses elastic throughput (no per-TiB tier); remove "
                                                   "storage.throughput"))
    elif s.kind == "azure-files":
        if size is not None and not (AZURE_FILES_MIN_GIB <= size <= AZURE_FILES_MAX_GIB):
            near = AZURE_FILES_MIN_GIB if size < AZURE_FILES_MIN_GIB else AZURE_FILES_MAX_GIB
            p.append(Problem("storage.sizeGib", f"{size} GiB is outside what a premium Azure Files NFS share holds "
                                                f"({AZURE_FILES_MIN_GIB}-{AZURE_FILES_MAX_GIB} GiB); use {near} GiB"))
        if s.throughput is not None:
            p.append(Problem("storage.throughput", "premium Azure Files scales throughput with the share size; "
                                                   "remove storage.throughput"))
        if not s.subnet_id and not any(pl.subnet_id for pl in node_pools):
            # the share's account admits only named subnets (private networking); an AKS-managed VNet does
            # not report its subnet, so it cannot be found at deploy time
            p.append(Problem("storage.subnetId", "the NFS share admits only the nodes' subnet; set storage.subnetId "
                                                 "(or nodePools[].subnetId) to the AKS node subnet's resource ID, "
                                                 "/subscriptions/.../virtualNetworks/<vnet>/subnets/<subnet>"))
    elif s.kind == "azure-lustre":
        t = s.throughput if s.throughput is not None else AMLFS_DEFAULT_THROUGHPUT
        if t not in AMLFS_TIERS:
            p.append(Problem("storage.throughput", f"{t} MB/s/TiB is not an Azure Managed Lustre tier; use one of "
                                                   f"{', '.join(map(str, sorted(AMLFS_TIERS)))} "
                                                   f"(sku AMLFS-Durable-Premium-<tier>)"))
        elif size is not None:
            lo, hi, step = AMLFS_TIERS[t]
            tib_ok = size % GIB_PER_TIB == 0 and size // GIB_PER_TIB in amlfs_allowed_tib(t)
            if not tib_ok:
                p.append(Problem("storage.sizeGib", f"{size} GiB is not an Azure Managed Lustre size for "
                                                    f"{amlfs_sku(t)} ({lo}-{hi} TiB in steps of {step} TiB); use "
                                                    f"{_sizes(amlfs_nearest_gib(size, t))}"))
        if not s.subnet_id:
            p.append(Problem("storage.subnetId", "Azure Managed Lustre lives in its own subnet of the cluster's "
                                                 "virtual network; set storage.subnetId to that subnet's resource ID"))
    return p


def fabric_problems(cfg: Any, machines: Dict[str, Any]) -> List[Problem]:
    """A pool whose machine lacks the cloud's fabric while the stack asks for it."""
    want = CLOUD_FABRIC.get(cfg.cloud)
    if want is None or not cfg.fabric.enabled:
        return []
    p: List[Problem] = []
    for i, pool in enumerate(cfg.node_pools):
        m = machines.get(pool.name)
        if m is None or m.fabric == want:
            continue
        key = "machineSpec.fabric" if pool.machine_spec is not None else "machine"
        p.append(Problem(f"nodePools[{i}].{key}", f"{m.name} has no {want} (its fabric is {m.fabric}), but "
                                                  f"{cfg.cloud} multi-node pools use {want}; choose a machine with "
                                                  f"{want}, or set fabric.enabled false to run without a fabric"))
    return p


def problems(cfg: Any, machines: Dict[str, Any]) -> List[Problem]:
    out = fabric_problems(cfg, machines)
    if cfg.storage is not None and cfg.cloud in ("aws", "azure"):
        out += storage_problems(cfg.cloud, cfg.storage, cfg.node_pools)
    return out
