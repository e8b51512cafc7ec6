"""cloud: gcp, in the pure core (no Pulumi, no SDK): the same sections as every multinode/clouds module.

GKE facts and rules the GCP components and the config checks share:
- config rules: `CLUSTER_KEYS`, `STORAGE_KINDS`, `REQUIRED_FABRIC`, `CAPACITY_BLOCKS`, `CREATES_POOLS`
  (read by multinode/checks.py) and `config_problems(cfg)`;
- fabric profile: `FABRICS`, `NCCL_NET`, `fabric_settings` (GPUDirect-TCPX, -TCPXO, RDMA; assembled by
  multinode/fabric.py);
- mock data for `plan`: `MOCK_CALLS`, `MOCK_OUTPUTS` (registered by multinode/recording.py);

- the GPU network plan of a pool (extra VPCs / subnets / MTU / GKE Network names) per fabric;
- the GKE `GKENetworkParamSet` and `Network` objects that expose those networks to pods;
- Filestore and Managed Lustre capacity rules (minimum, maximum and step per tier);
- what the looked-up cluster must have (multi-networking, Dataplane V2, CSI drivers);
- the config-time refusals for cloud gcp.

Sources (cited by key in comments below):
  G2  GoogleCloudPlatform/cluster-toolkit modules/compute/gke-node-pool, examples/gke-a3-* (via hardware.md)
  G3  GoogleCloudPlatform/container-engine-accelerators gpudirect-tcpxo (via hardware.md)
  G5  cloud.google.com/filestore/docs/service-tiers (Zonal 1-9.75 TiB in 256 GiB steps, 10-100 TiB in
      2.5 TiB steps; Enterprise 1-10 TiB in 256 GiB steps)
  G6  cloud.google.com/managed-lustre/docs/performance-tiers (min / max / step per MB/s/TiB tier)
  G7  cloud.google.com/vpc/docs/rdma-network-profiles (RoCE VPC: profile <zone>-vpc-roce, MTU 8896,
      implicit allow ingress/egress, no VPC firewall rules) and cloud.google.com/firewall/docs/firewall-for-roce
"""
from __future__ import annotations

import dataclasses
import ipaddress
import itertools
import json
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from .. import catalog, pools
from ..catalog import Machine
from ..config import NodePool, StackConfig
from ..errors import Problem

# ---------------------------------------------------------------- config rules
CLUSTER_KEYS = ("name", "project", "location")
STORAGE_KINDS = ("filestore", "gcp-lustre")
REQUIRED_FABRIC = None         # which GPUDirect fabric follows from the machine; pools without one still run
CAPACITY_BLOCKS = False
CREATES_POOLS = True

GKE_NETWORK_API = "networking.gke.io/v1"

# Extra GPU networks each fabric needs at least (G2: additional_node_network_configs >= 4 on A3 High,
# >= 8 on A3 Mega; A3 Ultra / A4 attach 8 RDMA subnets).
MIN_GPU_NETWORKS = {catalog.TCPX: 4, catalog.TCPXO: 8, catalog.GCP_RDMA: 8}
# MTU of the extra VPCs: 8244 for the GPUDirect-TCPX(O) VPCs (hardware.md / G2, G3); 8896 for RoCE (G7).
GPU_VPC_MTU = 8244
ROCE_VPC_MTU = 8896
GVNIC_MTU = 8244   # the second gVNIC of A3 Ultra / A4 (G2 examples set the same MTU as the GPU VPCs)

FILESTORE_CSI = "filestore.csi.storage.gke.io"
LUSTRE_CSI = "lustre.csi.storage.gke.io"

# (min GiB, max GiB, step GiB) ranges per tier (G5, G6). A size must sit on a step of one range.
FILESTORE_TIERS: dict[str, tuple[tuple[int, int, int], ...]] = {
    "ZONAL": ((1024, 9984, 256), (10240, 102400, 2560)),
    "ENTERPRISE": ((1024, 10240, 256),),
}
# Managed Lustre: per_unit_storage_throughput (MB/s per TiB) -> ranges. Above the step threshold the
# larger step applies, counted from the threshold (G6 gives the threshold and both steps).
LUSTRE_TIERS: dict[int, tuple[tuple[int, int, int], ...]] = {
    1000: ((9000, 1530000, 9000), (1530000, 10008000, 72000)),
    500: ((18000, 3060000, 18000), (3060000, 20016000, 144000)),
    250: ((36000, 6120000, 36000), (6120000, 40032000, 288000)),
    125: ((72000, 12240000, 72000),),
}
DEFAULT_LUSTRE_THROUGHPUT = 1000


@dataclass(frozen=True)
class GpuNetwork:
    """One extra network of a pool: a VPC + subnet on GCP and a GKE Network object in the cluster."""
    name: str            # GKE Network and GKENetworkParamSet name (pods name it in their annotation)
    vpc: str             # Compute Engine VPC name
    subnet: str          # subnet name
    cidr: str
    mtu: int
    device_mode: str     # GKENetworkParamSet deviceMode: NetDevice | RDMA
    rdma: bool = False   # lives in the RoCE VPC (shared by the 8 RDMA subnets)


def gpu_network_count(cfg: StackConfig, pool: NodePool) -> int:
    """GPU networks of the pool: the machine's fabric NICs, or fabric.devicesPerGpu x GPUs when set."""
    m = cfg.machine(pool)
    if cfg.fabric.devices_per_gpu is not None:
        return max(0, round(cfg.fabric.devices_per_gpu * m.gpus))
    return m.fabric_nics or 0


def default_cidr(pool_index: int) -> str:
    """Each pool gets its own /20 of 192.168.0.0/16 unless the stack sets gpuNetworkCidr."""
    return f"192.168.{16 * pool_index}.0/20"


def vpc_prefix(cfg: StackConfig, pool: NodePool) -> str:
    return f"{cfg.cluster.name}-{pool.name}"


def _network_layout(cfg: StackConfig, pool: NodePool) -> list[GpuNetwork]:
    """The extra networks of a pool in NIC order (eth1, eth2, ...), named, without their ranges (cidr empty)."""
    m = cfg.machine(pool)
    if m.fabric not in MIN_GPU_NETWORKS or not cfg.fabric.enabled:
        return []
    names = pools.gcp_network_names(pool, gpu_network_count(cfg, pool))
    prefix = vpc_prefix(cfg, pool)
    if m.fabric == catalog.GCP_RDMA:
        # eth1: a second gVNIC on its own VPC; eth2..: one RoCE VPC with one subnet per RDMA NIC (G2, G7)
        out = [GpuNetwork(f"{pool.name}-gvnic-1", f"{prefix}-gvnic", f"{prefix}-gvnic-sub", "", GVNIC_MTU,
                          "NetDevice")]
        out += [GpuNetwork(n, f"{prefix}-rdma", f"{prefix}-rdma-sub-{i}", "", ROCE_VPC_MTU, "RDMA", rdma=True)
                for i, n in enumerate(names)]
        return out
    # TCPX / TCPXO: one VPC + subnet per GPU NIC (G2, G3)
    return [GpuNetwork(n, f"{prefix}-gpu-{i + 1}", f"{prefix}-gpu-{i + 1}-sub", "", GPU_VPC_MTU, "NetDevice")
            for i, n in enumerate(names)]


def network_plan(cfg: StackConfig, pool: NodePool) -> list[GpuNetwork]:
    """The extra networks of a pool, in NIC order (eth1, eth2, ...), each with its /24 of the pool's GPU range.
    Empty for machines without a fabric."""
    layout = _network_layout(cfg, pool)
    if not layout:
        return []
    index = [p.name for p in cfg.node_pools].index(pool.name)
    subnets = ipaddress.ip_network(pool.gpu_network_cidr or default_cidr(index)).subnets(new_prefix=24)
    # one /24 each, in NIC order; a range with fewer /24s than networks fails here (zip strict)
    return [dataclasses.replace(net, cidr=str(sub))
            for net, sub in zip(layout, itertools.islice(subnets, len(layout)), strict=True)]


def firewall_name(vpc: str) -> str:
    """The node-to-node firewall rule of a GPU VPC (components/clouds/gcp.py; RoCE VPCs take none, G7)."""
    return f"{vpc}-internal"


# Names the GPU networks of a pool take, checked at config time (issue 47):
# - Compute Engine resource names (VPC, subnet, firewall rule): 1-63 characters, [a-z]([-a-z0-9]*[a-z0-9])?
#   (cloud.google.com/compute/docs/naming-resources#resource-name-format; the same rule in
#   hashicorp/terraform-provider-google google/services/compute/resource_compute_instance.go, commit e911480).
#   Ours are '<cluster.name>-<pool name>-gpu-<n>-sub' and the like: a 40-character pool name on a long cluster name
#   does not fit.
# - GKE Network objects of type Device: at most 41 characters, because the name is part of the UNIX domain socket
#   path GKE makes on the node and Linux bounds that path below 107 bytes (cloud.google.com/kubernetes-engine/docs/
#   how-to/setup-multinetwork-support-for-pods, "General limitations"). Every GPU network is a Device network
#   (network_object), named '<pool name>-gpu-<n>' or '<pool name>-gvnic-1'.
GCE_NAME_CHARS = 63
GCE_NAME = re.compile(r"^[a-z]([-a-z0-9]*[a-z0-9])?\Z")
GCE_NAMES_SOURCE = "cloud.google.com/compute/docs/naming-resources"
GKE_DEVICE_NETWORK_NAME_CHARS = 41
GKE_NETWORK_NAMES_SOURCE = "cloud.google.com/kubernetes-engine/docs/how-to/setup-multinetwork-support-for-pods"


def network_name_problems(cfg: StackConfig, pool: NodePool, at: str) -> list[Problem]:
    """The pool's GPU network names that Compute Engine or GKE would refuse, one problem per kind."""
    layout = _network_layout(cfg, pool)
    if not layout:
        return []
    out: list[Problem] = []
    gce = [n for net in layout for n in (net.vpc, net.subnet)]
    gce += [firewall_name(net.vpc) for net in layout if not net.rdma]
    longest = max(reversed(gce), key=len)      # the last of the longest: gpu-8 rather than gpu-1
    if not cfg.cluster.name:
        pass                            # cluster.name missing: refused by the generic checks (CLUSTER_KEYS)
    elif not GCE_NAME.match(longest):   # the pool name is a DNS label: only cluster.name can break the pattern
        out.append(Problem("cluster.name", f"{cfg.cluster.name!r}: this pool's GPU VPCs are named after the "
                                           f"cluster ({longest!r}) and Compute Engine names start with a lowercase "
                                           f"letter and hold only lowercase letters, digits and '-' "
                                           f"({GCE_NAMES_SOURCE})"))
    elif len(longest) > GCE_NAME_CHARS:
        fits = len(pool.name) - (len(longest) - GCE_NAME_CHARS)
        fix = (f"shorten {at}.name to at most {fits} characters" if fits >= 1
               else "use a shorter cluster.name")
        out.append(Problem(f"{at}.name", f"this pool's GPU networks get Compute Engine names such as {longest!r} "
                                         f"({len(longest)} characters: '<cluster.name>-<pool name>-...'), above the "
                                         f"{GCE_NAME_CHARS} characters Compute Engine allows ({GCE_NAMES_SOURCE}); "
                                         f"{fix}"))
    network = max(reversed([net.name for net in layout]), key=len)
    if len(network) > GKE_DEVICE_NETWORK_NAME_CHARS:
        fits = len(pool.name) - (len(network) - GKE_DEVICE_NETWORK_NAME_CHARS)
        out.append(Problem(f"{at}.name", f"this pool's GPU networks become GKE Network objects such as {network!r} "
                                         f"({len(network)} characters), above the {GKE_DEVICE_NETWORK_NAME_CHARS} "
                                         f"characters GKE allows a Device network (the name is part of a socket "
                                         f"path on the node: {GKE_NETWORK_NAMES_SOURCE}); shorten {at}.name to at "
                                         f"most {fits} characters"))
    return out


def roce_network_profile(project: str, zone: str) -> str:
    """The RDMA network profile a RoCE VPC is created with (G7)."""
    return f"projects/{project}/global/networkProfiles/{zone}-vpc-roce"


def network_param_set(net: GpuNetwork) -> dict:
    return {"apiVersion": GKE_NETWORK_API, "kind": "GKENetworkParamSet",
            "metadata": {"name": net.name, "labels": {"app.kubernetes.io/managed-by": "multinode"}},
            "spec": {"vpc": net.vpc, "vpcSubnet": net.subnet, "deviceMode": net.device_mode}}


def network_object(net: GpuNetwork) -> dict:
    return {"apiVersion": GKE_NETWORK_API, "kind": "Network",
            "metadata": {"name": net.name, "labels": {"app.kubernetes.io/managed-by": "multinode"}},
            "spec": {"type": "Device", "parametersRef": {"group": "networking.gke.io",
                                                         "kind": "GKENetworkParamSet", "name": net.name}}}


def gke_taints(cfg: StackConfig) -> list[dict[str, str]]:
    """pools.node_taints in the GKE API spelling (NoSchedule -> NO_SCHEDULE).

    GKE taints GPU nodes itself with nvidia.com/gpu=present:NoSchedule (in clusters that also run
    non-GPU pools); a node cannot carry two taints with the same key and effect, so on GKE the GPU
    taint uses GKE's value "present" and both spellings collapse into one. Our tolerations use
    operator Exists, so either value is tolerated (unverified against a live GKE API).
    """
    spell = {"NoSchedule": "NO_SCHEDULE", "PreferNoSchedule": "PREFER_NO_SCHEDULE", "NoExecute": "NO_EXECUTE"}
    out = []
    for t in pools.node_taints(cfg):
        value = "present" if t["key"] == pools.GPU_TAINT["key"] else t["value"]
        out.append({"key": t["key"], "value": value, "effect": spell[t["effect"]]})
    return out


# ---------------------------------------------------------------- storage sizes
def _on_step(size: int, ranges: Sequence[tuple[int, int, int]]) -> bool:
    return any(lo <= size <= hi and (size - lo) % step == 0 for lo, hi, step in ranges)


def nearest_sizes(size: int, ranges: Sequence[tuple[int, int, int]]) -> list[int]:
    """The allowed sizes just below and just above `size` (one of them when at an end)."""
    below: int | None = None
    above: int | None = None
    for lo, hi, step in ranges:
        if size < lo:
            above = lo if above is None else min(above, lo)
            continue
        k = min((size - lo) // step * step + lo, hi - (hi - lo) % step)
        below = k if below is None else max(below, k)
        up = k + step if k < size else k
        if up <= hi and up >= size:
            above = up if above is None else min(above, up)
    return [s for s in (below, above) if s is not None and s != size]


def filestore_size_problem(tier: str, size: int) -> str | None:
    ranges = FILESTORE_TIERS[tier]
    if _on_step(size, ranges):
        return None
    spans = "; ".join(f"{lo}-{hi} GiB in steps of {st} GiB" for lo, hi, st in ranges)
    near = " or ".join(str(s) for s in nearest_sizes(size, ranges))
    return f"{size} GiB is not a size Filestore {tier} allows ({spans}); use {near}"


def lustre_size_problem(throughput: int, size: int) -> str | None:
    ranges = LUSTRE_TIERS[throughput]
    if _on_step(size, ranges):
        return None
    spans = "; ".join(f"{lo}-{hi} GiB in steps of {st} GiB" for lo, hi, st in ranges)
    near = " or ".join(str(s) for s in nearest_sizes(size, ranges))
    return (f"{size} GiB is not a size Managed Lustre allows at {throughput} MB/s per TiB ({spans}); "
            f"use {near}")


def filestore_tier(tier: str | None) -> str:
    return (tier or "ZONAL").upper()


# ---------------------------------------------------------------- the looked-up cluster
def cluster_version_problems(cfg: StackConfig, master_version: str | None) -> list[str]:
    """The looked-up cluster's version against each fabric pool's GPUDirect minimum (gke_version_problem)."""
    if not master_version or not cfg.fabric.enabled:
        return []
    out: list[str] = []
    for pool in cfg.node_pools:
        try:
            m = cfg.machine(pool)
        except catalog.UnknownMachine:
            continue
        msg = gke_version_problem(m.fabric, m.name, master_version)
        if msg and msg not in out:
            out.append(f"node pool {pool.name!r}: {msg}")
    return out


def cluster_readiness(enable_multi_networking: bool | None, datapath_provider: str | None,
                      needs_networks: bool) -> list[str]:
    """What the existing GKE cluster lacks for GPU networks; each message says what to change."""
    out: list[str] = []
    if needs_networks and not enable_multi_networking:
        out.append("the cluster does not have multi-networking enabled, so pods cannot attach the GPU networks; "
                   "update it with `gcloud container clusters update CLUSTER --enable-multi-networking` "
                   "(needs Dataplane V2) before the node pool is created")
    if needs_networks and (datapath_provider or "") != "ADVANCED_DATAPATH":
        out.append(f"the cluster's datapath is {datapath_provider or 'LEGACY_DATAPATH'!s}, but multi-networking "
                   f"needs Dataplane V2 (ADVANCED_DATAPATH), which can only be chosen when the cluster is "
                   f"created: create a new cluster with --enable-dataplane-v2 --enable-multi-networking")
    return out


def csi_readiness(kind: str, enabled: bool | None) -> list[str]:
    """The CSI driver the storage kind needs must be enabled as a GKE add-on."""
    if enabled:
        return []
    flag = ("--update-addons=GcpFilestoreCsiDriver=ENABLED" if kind == "filestore"
            else "--enable-lustre-csi-driver")
    return [f"the cluster's {kind} CSI driver add-on is not enabled; run "
            f"`gcloud container clusters update CLUSTER {flag}` or the checkpoint volume will not mount"]


# ---------------------------------------------------------------- minimum GKE version for GPUDirect
# The oldest GKE patch of each minor that supports GPUDirect on the machine, from GoogleCloudPlatform/
# cluster-toolkit@10470803 (2026-06-25) modules/compute/gke-node-pool/gpu_direct.tf:36-40 and :51-57,
# gpu_direct_settings[<machine>].major_minor_version_acceptable_map: a3-highgpu-8g (TCPX) and a3-megagpu-8g
# (TCPXO). Issue 30: every minimum was raised since the table we had (commit 03c47e74), and TCPX's 1.30 row was
# dropped (1.30 and later are newer than the table: accepted, as upstream). That file has no entry for the RDMA
# machines (a3-ultragpu / a4), so gcp-rdma is not gated. Like upstream, a minor newer than the table's last is
# accepted; unlike upstream, a minor older than its first is refused (upstream accepts it by default, and its
# lookup at :70 still reads `local.gpu_direct_setting`, a name that does not exist, so its check never fires).
MIN_GKE_VERSION: dict[str, dict[str, str]] = {
    "tcpx": {"1.27": "1.27.16-gke.2874000", "1.28": "1.28.15-gke.3163000", "1.29": "1.29.15-gke.2467000"},
    "tcpxo": {"1.28": "1.28.15-gke.3163000", "1.29": "1.29.15-gke.2467000", "1.30": "1.30.14-gke.1922000",
              "1.31": "1.31.14-gke.1243000", "1.32": "1.32.11-gke.1174000"},
}
MIN_GKE_VERSION_SOURCE = "cluster-toolkit modules/compute/gke-node-pool/gpu_direct.tf"
_GKE_VERSION = re.compile(r"^v?(\d+)\.(\d+)\.(\d+)-gke\.(\d+)\Z")


def parse_gke_version(version: str) -> tuple[int, int, int, int] | None:
    """'1.32.2-gke.1489001' -> (1, 32, 2, 1489001); None when it is not a GKE version."""
    m = _GKE_VERSION.match((version or "").strip())
    return tuple(int(x) for x in m.groups()) if m else None  # type: ignore[return-value]


def gke_version_problem(fabric: str, machine: str, version: str) -> str | None:
    """Why this GKE version cannot run the fabric's GPUDirect, or None (also None for ungated fabrics)."""
    table = MIN_GKE_VERSION.get(fabric)
    if not table:
        return None
    have = parse_gke_version(version)
    if have is None:
        return f"{version!r} is not a GKE version; use the form 1.X.Y-gke.Z (`gcloud container clusters describe`)"
    # the table's own entries always parse (a test reads every one)
    mins = sorted((v_parsed, v) for v in table.values() if (v_parsed := parse_gke_version(v)) is not None)
    minor = f"{have[0]}.{have[1]}"
    if minor in table:
        need = table[minor]
    elif have < mins[0][0]:
        need = mins[0][1]
    else:
        return None                          # a minor newer than the table: accepted, as upstream does
    need_v = parse_gke_version(need)
    if need_v is not None and have >= need_v:
        return None
    oldest = f"the oldest {minor} patch" if minor in table else "the oldest version"
    return (f"GKE {version} is older than {need}, {oldest} with GPUDirect-{fabric.upper()} for {machine} "
            f"({MIN_GKE_VERSION_SOURCE}); upgrade the cluster (and its node pools) to {need} or later")


# ---------------------------------------------------------------- config-time refusals
def _region_of(location: str) -> str:
    parts = location.split("-")
    return "-".join(parts[:2]) if len(parts) >= 3 else location


# GKE "Quotas and limits" (cloud.google.com/kubernetes-engine/quotas, "Limits per cluster", Standard clusters):
# "Nodes per cluster" 15,000 (a limit: refused), and "running more than 5,000 nodes requires lifting a cluster size
# quota" (advised: ask support first); "Nodes per node pool zone" 1,000, held by the config model (every pool we
# create is zonal, compact placement, and NodePool.node_count <= 512).
GKE_NODES_PER_CLUSTER = 15000
GKE_NODES_QUOTA = 5000
GKE_QUOTAS_SOURCE = "cloud.google.com/kubernetes-engine/quotas"


# Compact placement (issue 47): every GPU pool is created with placement_policy COMPACT (components/clouds/gcp.py),
# which Compute Engine takes for these accelerator machine series only: A4X Max, A4X, A4, A3 Ultra, A3 Mega, A3 High,
# A3 Edge, A2, G4 and G2 (docs.cloud.google.com/ai-hypercomputer/docs/placement-policy-and-workload-policy, the
# comparison table's "Supported machine types" of compact placement policies). By machine type prefix: a4x (A4X,
# A4X Max), a4, a3 (Ultra, Mega, High, Edge), a2, g4, g2. Every GCP machine of the catalog is one of them
# (tests/test_scale.py); a machineSpec of another series is refused.
# How many nodes one Standard node pool's compact policy holds was not readable here: the GKE page's Autopilot
# section gives 1,500 nodes per placement group (cloud.google.com/kubernetes-engine/docs/how-to/compact-placement),
# an older Compute Engine page gave 150 VMs per compact policy for A2/C2/G2/C2D/N2/N2D
# (cloud.google.com/compute/docs/instances/define-instance-placement, ja, restrictions), an older copy of
# cloud.google.com/compute/docs/accelerator-optimized-machines says of A3 that compact placement "supports up to 96
# VMs in a lower-latency subset of the network" (a placement statement, not clearly a cap on the policy), and the
# current placement-policies-overview's per-series table (restrictions of compact policies) was not readable in the
# stored copies (2026-11-29). The pool's placement_policy names no policy (no policy_name), so GKE makes one; no
# source read gives its size. Not checked (docs/scale.md): a pool is held by the config model's 512 nodes only.
COMPACT_PLACEMENT_SERIES = ("a4x", "a4", "a3", "a2", "g4", "g2")
COMPACT_PLACEMENT_SOURCE = "docs.cloud.google.com/ai-hypercomputer/docs/placement-policy-and-workload-policy"


def compact_placement_problem(machine_type: str) -> str | None:
    """Why a GPU pool of this machine type cannot take the COMPACT placement policy every pool gets, or None."""
    series = machine_type.split("-", 1)[0].lower()
    if series in COMPACT_PLACEMENT_SERIES:
        return None
    return (f"{machine_type}: every GPU node pool gets a COMPACT placement policy, which Compute Engine takes for the "
            f"A4X, A4, A3, A2, G4 and G2 machine series only ({COMPACT_PLACEMENT_SOURCE}); use one of those, e.g. "
            f"a3-megagpu-8g")


def _cluster_nodes(cfg: StackConfig) -> int:
    return sum(p.node_count for p in cfg.node_pools)


def config_problems(cfg: StackConfig, machines: dict[str, Any]) -> list[Problem]:
    p: list[Problem] = []
    total = _cluster_nodes(cfg)
    if total > GKE_NODES_PER_CLUSTER:
        p.append(Problem("nodePools", f"{total} nodes over all pools (nodePools[].nodeCount), above GKE's limit of "
                                      f"{GKE_NODES_PER_CLUSTER} nodes per Standard cluster ({GKE_QUOTAS_SOURCE}); "
                                      f"lower the pools' nodeCount or split the stack into clusters "
                                      f"(multinode:fleet)"))
    for i, pool in enumerate(cfg.node_pools):
        if not pool.zone:
            p.append(Problem(f"nodePools[{i}].zone", "GPU node pools with compact placement live in one zone; "
                                                     "set zone, e.g. us-central1-a"))
    cidrs: list[tuple[int, ipaddress.IPv4Network]] = []
    region = _region_of(cfg.cluster.location or "")
    for i, pool in enumerate(cfg.node_pools):
        at = f"nodePools[{i}]"
        try:
            m = cfg.machine(pool)
        except catalog.UnknownMachine:
            continue  # reported by the generic checks
        if m.cloud not in ("gcp",) and pool.machine:
            continue
        msg = compact_placement_problem(m.name)
        if msg:
            p.append(Problem(f"{at}.machine" if pool.machine else f"{at}.machineSpec.name", msg))
        p.extend(network_name_problems(cfg, pool, at))
        if m.accelerator is None:
            p.append(Problem(f"{at}.machineSpec", f"{m.name}: the GKE accelerator type is not known for a machine "
                                                  f"described by machineSpec; use a catalog machine such as "
                                                  f"a3-megagpu-8g"))
        if cfg.cluster.gke_version and cfg.fabric.enabled:
            msg = gke_version_problem(m.fabric, m.name, cfg.cluster.gke_version)
            if msg:
                p.append(Problem("cluster.gkeVersion", msg))
        need = MIN_GPU_NETWORKS.get(m.fabric)
        if need and cfg.fabric.enabled:
            have = gpu_network_count(cfg, pool)
            if have < need:
                key = ("fabric.devicesPerGpu" if cfg.fabric.devices_per_gpu is not None
                       else f"{at}.machineSpec.fabricNics")
                p.append(Problem(key, f"{m.name} ({m.fabric}) needs {need} GPU networks, but this gives {have}; "
                                      f"a pool with fewer networks than GPU NICs leaves NICs idle and NCCL slower: "
                                      f"use {need} (remove the override)"))
        if pool.gpu_network_cidr is not None:
            try:
                net = ipaddress.ip_network(pool.gpu_network_cidr)
            except ValueError as e:
                p.append(Problem(f"{at}.gpuNetworkCidr", f"{pool.gpu_network_cidr!r} is not an IPv4 range ({e}); "
                                                          f"use e.g. 192.168.0.0/20"))
                net = None
            if net is not None:
                if net.version != 4 or net.prefixlen > 20:
                    p.append(Problem(f"{at}.gpuNetworkCidr", f"{pool.gpu_network_cidr!r} must be an IPv4 /20 or "
                                                              f"larger (one /24 per GPU network, up to 9); "
                                                              f"use e.g. 192.168.0.0/20"))
                else:
                    for j, other in cidrs:
                        if net.overlaps(other):
                            p.append(Problem(f"{at}.gpuNetworkCidr", f"{net} overlaps nodePools[{j}] GPU range "
                                                                      f"{other}; give each pool its own range"))
                    cidrs.append((i, net))
        elif i >= 16:
            p.append(Problem(f"{at}.gpuNetworkCidr", "only the first 16 pools get a default GPU range; set "
                                                      "gpuNetworkCidr, e.g. 10.200.0.0/20"))
        if pool.zone and region and not pool.zone.startswith(region + "-"):
            p.append(Problem(f"{at}.zone", f"{pool.zone!r} is not in the cluster's region {region!r} "
                                           f"(cluster.location {cfg.cluster.location!r}); use a zone such as "
                                           f"{region}-a"))
        # Whether a zone offers the machine is not checked: no source in this project lists GPU zones.
    s = cfg.storage
    if s is not None and s.size_gib is not None:
        if s.kind == "filestore":
            tier = filestore_tier(s.tier)
            if tier not in FILESTORE_TIERS:
                p.append(Problem("storage.tier", f"{s.tier!r}: checkpoint storage on Filestore uses tier ZONAL or "
                                                 f"ENTERPRISE (RWX at GPU-cluster scale); use ZONAL"))
            else:
                msg = filestore_size_problem(tier, s.size_gib)
                if msg:
                    p.append(Problem("storage.sizeGib", msg))
        elif s.kind == "gcp-lustre":
            tp = s.throughput or DEFAULT_LUSTRE_THROUGHPUT
            if tp not in LUSTRE_TIERS:
                p.append(Problem("storage.throughput", f"{tp} MB/s per TiB is not a Managed Lustre tier; use one "
                                                       f"of {', '.join(str(t) for t in sorted(LUSTRE_TIERS))}"))
            else:
                msg = lustre_size_problem(tp, s.size_gib)
                if msg:
                    p.append(Problem("storage.sizeGib", msg))
        if s.kind == "gcp-lustre" and s.tier:
            p.append(Problem("storage.tier", "Managed Lustre has no tier; choose its throughput with "
                                             "storage.throughput (MB/s per TiB)"))
    return p


# Node repair (issue 34, docs/node-health.md): GKE node auto-repair on our node pools, `management.auto_repair`
# = cluster.nodeRepair (components/clouds/gcp.py). GKE repairs a node that reports NotReady, or nothing, for about
# 10 minutes, or runs out of boot disk (cloud.google.com/kubernetes-engine/docs/concepts/node-auto-repair); on by
# default for new node pools. A GPU fault that leaves the node Ready is NVSentinel's to report.


# VPC networks per project (issue 47 item 3). Each GPU pool makes its own VPC networks (network_plan: one per GPU NIC
# for GPUDirect-TCPX / TCPXO, 4 / 8; one gVNIC VPC and one RoCE VPC for A3 Ultra / A4, 2); the stack makes no other
# (the GKE cluster and its network exist already). Compute Engine counts every VPC network of the project against the
# per-project quota "Networks" (cloud.google.com/vpc/docs/quota, "Per project": "This includes the default network,
# which you can remove"; the value is shown in the console, not on the page; quota errors name it
# Quota 'NETWORKS', metric compute.googleapis.com/networks, limit NETWORKS-per-project). Its default is not one
# number in what was read (2026-11-29): the Compute Engine API's Network description, "you can have up to five
# networks per project by default" (as generated into docs.ansible.com/ansible/2.7/modules/gcp_compute_network_module
# .html); Google Cloud's course "Essential Google Cloud Infrastructure: Core Services", "fifteen VPC networks per
# project" (campus.datacamp.com/courses/essential-google-cloud-infrastructure-core-services/resource-management);
# projects have hit "Limit: 5.0 globally" (github.com/fortinet/fortigate-tutorial-gcp/issues/9, 2024) and
# "Limit: 15.0 globally" (github.com/pulumi/pulumi-gcp/issues/1147, 2023). The quota is adjustable, so a stack is
# advised, not refused, when its pools make more networks than the lower documented default, 5.
GCP_NETWORKS_QUOTA_DEFAULT = 5
GCP_NETWORKS_SOURCE = "cloud.google.com/vpc/docs/quota"


def vpc_networks(cfg: Any) -> dict[str, int]:
    """How many VPC networks each pool makes, by pool name (pools without GPU networks left out)."""
    out: dict[str, int] = {}
    for pool in cfg.node_pools:
        try:
            vpcs = {n.vpc for n in _network_layout(cfg, pool)}
        except (catalog.UnknownMachine, KeyError):
            continue
        if vpcs:
            out[pool.name] = len(vpcs)
    return out


def networks_quota_advisory(by_pool: dict[str, int]) -> Problem | None:
    """The advisory for a stack whose pools make more VPC networks than the default 'Networks' quota, or None."""
    total = sum(by_pool.values())
    if total <= GCP_NETWORKS_QUOTA_DEFAULT:
        return None
    made = ", ".join(f"{name} {n}" for name, n in by_pool.items())
    return Problem("nodePools", (
        f"{total} VPC networks made by the pools' GPU networks ({made}), above {GCP_NETWORKS_QUOTA_DEFAULT}, the "
        f"lower of the defaults documented for Compute Engine's per-project quota 'Networks' "
        f"(compute.googleapis.com/networks; 5 and 15 are both documented, and the project's own networks, the "
        f"default one and the cluster's, count too; {GCP_NETWORKS_SOURCE}): check the quota in the console (IAM & "
        f"Admin > Quotas, 'Networks') and request more before `pulumi up`"))


def advisories(cfg: Any) -> list[Problem]:
    """Non-fatal findings of this cloud: a cluster above GKE's default cluster size quota; pools making more VPC
    networks than the project's default 'Networks' quota."""
    out: list[Problem] = []
    total = _cluster_nodes(cfg)
    if GKE_NODES_QUOTA < total <= GKE_NODES_PER_CLUSTER:
        out.append(Problem("nodePools", f"{total} nodes over all pools, above the {GKE_NODES_QUOTA} nodes a GKE "
                                        f"cluster runs before its cluster size quota is lifted ({GKE_QUOTAS_SOURCE}): "
                                        f"ask Google Cloud support to lift it (up to {GKE_NODES_PER_CLUSTER}) before "
                                        f"`pulumi up`"))
    networks = networks_quota_advisory(vpc_networks(cfg))
    if networks is not None:
        out.append(networks)
    return out

# ---------------------------------------------------------------- access
def kubeconfig(cluster_name: str, endpoint: str, ca_certificate: str) -> str:
    """A kubeconfig for a GKE cluster that authenticates with gke-gcloud-auth-plugin (no key in the file)."""
    import yaml
    ctx = f"gke-{cluster_name}"
    return yaml.safe_dump({
        "apiVersion": "v1", "kind": "Config", "current-context": ctx,
        "clusters": [{"name": ctx, "cluster": {"server": f"https://{endpoint}",
                                              "certificate-authority-data": ca_certificate}}],
        "contexts": [{"name": ctx, "context": {"cluster": ctx, "user": ctx}}],
        "users": [{"name": ctx, "user": {"exec": {
            "apiVersion": "client.authentication.k8s.io/v1beta1", "command": "gke-gcloud-auth-plugin",
            "provideClusterInfo": True, "interactiveMode": "IfAvailable",
            "installHint": "install gke-gcloud-auth-plugin: gcloud components install gke-gcloud-auth-plugin"}}}],
    }, sort_keys=False)


def region_of(zone_or_region: str) -> str:
    return _region_of(zone_or_region)


# ---------------------------------------------------------------- fabric profile
FABRICS = (catalog.TCPX, catalog.TCPXO, catalog.GCP_RDMA)
NCCL_NET = {
    # The GPUDirect-TCPX plugin registers "GPUDirectTCPX_v7": GoogleCloudPlatform/cluster-toolkit
    # and NVIDIA JAX-Toolbox GCP scripts export NCCL_NET=GPUDirectTCPX_v7 (the old table said
    # "GPUDirectTCPX", which matches no plugin name).
    "tcpx": "GPUDirectTCPX_v7",
    # The TCPXO plugin registers "FasTrak" (GoogleCloudPlatform/container-engine-accelerators
    # gpudirect-tcpxo docs and users export NCCL_NET=FasTrak).
    "tcpxo": "FasTrak",
    # Google's gIB plugin for A3 Ultra / A4 RDMA: NCCL_NET=gIB (hardware.md section 2, G2).
    "gcp-rdma": "gIB",
}

# GKE GPUDirect images (hardware.md section 2, source G3 / container-engine-accelerators).
TCPXO_DAEMON_IMAGE = "us-docker.pkg.dev/gce-ai-infra/gpudirect-tcpxo/tcpgpudmarxd-dev:v1.0.21"
TCPX_DAEMON_IMAGE = "us-docker.pkg.dev/gce-ai-infra/gpudirect-tcpx/tcpgpudmarxd-dev:v2.0.12"


def fabric_settings(kind: str, cfg: Any, pool: Any, machine: Machine,
                    count: int) -> tuple[str | None, int, dict[str, Any]]:
    """(device resource, devices per node, what the pod gets) for a GPUDirect pool (multinode/fabric.py).
    GKE exposes the GPU NICs as extra pod networks, not as a device resource."""
    build = {catalog.TCPXO: _tcpxo, catalog.TCPX: _tcpx, catalog.GCP_RDMA: _gcp_rdma}[kind]
    return None, 0, build(pool, machine, count)


def _gke_interfaces(first_eth: int, networks: list[str]) -> str:
    items = [{"interfaceName": "eth0", "network": "default"}]
    items += [{"interfaceName": f"eth{first_eth + i}", "network": n} for i, n in enumerate(networks)]
    return json.dumps(items, separators=(",", ":"))


def _gke_daemon_devices(gpus: int) -> str:
    # devices.gke.io/container.<name>: the NRI device injector hands these to the sidecar
    # (hardware.md section 2; container-engine-accelerators gpudirect-tcpxo/nccl-test-latest.yaml).
    paths = [f"/dev/nvidia{i}" for i in range(gpus)] + ["/dev/nvidiactl", "/dev/nvidia-uvm",
                                                        "/dev/dmabuf_import_helper"]
    return "".join(f"- path: {p}\n" for p in paths)


_GKE_HOST_VOLUMES = [
    {"name": "fabric-nvidia-lib", "hostPath": {"path": "/home/kubernetes/bin/nvidia/lib64"}},
    {"name": "fabric-sys", "hostPath": {"path": "/sys"}},
    {"name": "fabric-proc-sys", "hostPath": {"path": "/proc/sys"}},
]


# issue 40: the RxDM serves no port and no HTTP path. With HEALTH_CHECK_LOG_FILE set it writes that file once its
# buffer manager is initialised (about 30 s) and never on a failed start; GKE's TCPXO guide probes it with
# `cat <file>` (GoogleCloudPlatform/container-engine-accelerators@992db812 gpudirect-tcpxo/best-practice.md:89-124,
# "Setup Startup Probe for the TCPXO-daemon Sidecar"; the file name may not contain "_"; README.md:628). The kubelet
# starts the init container after a native sidecar once the sidecar's `started` status is true, which with a
# startupProbe means the probe has succeeded (kubernetes.io/docs/concepts/workloads/pods/sidecar-containers/, "Sidecar
# containers and Pod lifecycle"; k8s.io/api core/v1 ContainerStatus.Started), so the NCCL preflight after it starts
# only once the RxDM serves, and a node whose RxDM cannot initialise fails the pod's start early. Timings as upstream's
# example, with failureThreshold 12 (60 s after the first probe) instead of 6 for the ~30 s initialisation's spread.
TCPXO_HEALTH_FILE = "/run/health-check"
TCPXO_STARTUP_PROBE: dict[str, Any] = {
    "exec": {"command": ["cat", TCPXO_HEALTH_FILE]},
    "initialDelaySeconds": 1, "periodSeconds": 5, "timeoutSeconds": 1, "successThreshold": 1, "failureThreshold": 12,
}


def _tcpxo(pool: NodePool, machine: Machine, nics: int) -> dict[str, Any]:
    # hardware.md section 2 "GCP GKE A3 Mega (TCPXO)", source G3.
    networks = pools.gcp_network_names(pool, nics)
    lib = "/usr/local/nvidia/lib64"
    env = {
        "LD_LIBRARY_PATH": lib,
        "NCCL_FASTRAK_LLCM_DEVICE_DIRECTORY": "/dev/aperture_devices",
        "NCCL_FASTRAK_CTRL_DEV": "eth0",
        "NCCL_FASTRAK_IFNAME": ",".join(f"eth{i}" for i in range(1, nics + 1)),
        "NCCL_SOCKET_IFNAME": "eth0",
        "NCCL_CROSS_NIC": "0",
        "NCCL_PROTO": "Simple,LL128",
        "NCCL_MIN_NCHANNELS": "4",
        "NCCL_TUNER_PLUGIN": "libnccl-tuner.so",
        "NCCL_TUNER_CONFIG_PATH": f"{lib}/a3plus_tuner_config.textproto",
        "NCCL_SHIMNET_GUEST_CONFIG_CHECKER_CONFIG_FILE": f"{lib}/a3plus_guest_config.textproto",
        "NCCL_NVLSTREE_MAX_CHUNKSIZE": "131072",
        "NCCL_P2P_NET_CHUNKSIZE": "524288",
        "NCCL_P2P_PCI_CHUNKSIZE": "524288",
        "NCCL_P2P_NVL_CHUNKSIZE": "1048576",
        "NCCL_FASTRAK_NUM_FLOWS": "2",
        "NCCL_FASTRAK_USE_SNAP": "1",
        "NCCL_FASTRAK_PLUGIN_ACCEPT_TIMEOUT_MS": "600000",
        "NCCL_FASTRAK_ENABLE_CONTROL_CHANNEL": "0",
        "NCCL_BUFFSIZE": "8388608",
        "NCCL_NET_GDR_LEVEL": "PIX",
        "NCCL_FASTRAK_ENABLE_HOTPATH_LOGGING": "0",
        "NCCL_FASTRAK_USE_LLCM": "1",
        "NCCL_NVLS_ENABLE": "1",
    }
    sidecar = {
        "name": "tcpxo-daemon",
        "image": TCPXO_DAEMON_IMAGE,
        "imagePullPolicy": "IfNotPresent",
        "restartPolicy": "Always",          # native sidecar: ends with the workload (K8s >= 1.29)
        "command": ["/bin/sh", "-c"],
        # issue 30: the daemon's own repository runs `--num_hops=2` only (container-engine-accelerators@992db812
        # gpudirect-tcpxo/nccl-test-latest.yaml:89-90); its README.md:158 retires `num_nics` from RxDM v1.0.20 (we
        # run v1.0.21). cluster-toolkit@10470803 gpu-direct-workload/scripts/enable-tcpxo-in-workload.py:149 still
        # passes `--num_hops=2 --num_nics=8 --uid= --alsologtostderr`; we follow the daemon's repository.
        "args": ["set -ex; chmod 755 /fts/entrypoint_rxdm_container.sh; "
                 "/fts/entrypoint_rxdm_container.sh --num_hops=2"],
        "securityContext": {"capabilities": {"add": ["NET_ADMIN", "NET_BIND_SERVICE"]}},
        "env": [{"name": "LD_LIBRARY_PATH", "value": lib},
                {"name": "HEALTH_CHECK_LOG_FILE", "value": TCPXO_HEALTH_FILE}],
        "volumeMounts": [{"name": "fabric-nvidia-lib", "mountPath": lib},
                         {"name": "fabric-sys", "mountPath": "/hostsysfs"},
                         {"name": "fabric-proc-sys", "mountPath": "/hostprocsysfs"}],
        "startupProbe": TCPXO_STARTUP_PROBE,
    }
    return {
        "env": env,
        "annotations": {
            "networking.gke.io/default-interface": "eth0",
            "networking.gke.io/interfaces": _gke_interfaces(1, networks),
            "devices.gke.io/container.tcpxo-daemon": _gke_daemon_devices(machine.gpus),
        },
        "volumes": _GKE_HOST_VOLUMES + [
            {"name": "fabric-aperture-devices", "hostPath": {"path": "/dev/aperture_devices"}}],
        "volume_mounts": [{"name": "fabric-nvidia-lib", "mountPath": lib},
                          {"name": "fabric-aperture-devices", "mountPath": "/dev/aperture_devices"}],
        "pod_volume_names": ["fabric-sys", "fabric-proc-sys"],
        "init_containers": [sidecar],
        "networks": networks,
    }


TCPX_NCCL_SETTINGS = {
    "NCCL_PROTO": "Simple",
    "NCCL_NET_GDR_LEVEL": "PIX",
    "NCCL_P2P_PXN_LEVEL": "0",
    "NCCL_DYNAMIC_CHUNK_SIZE": "524288",
    "NCCL_P2P_NET_CHUNKSIZE": "524288",
    "NCCL_P2P_PCI_CHUNKSIZE": "524288",
    "NCCL_P2P_NVL_CHUNKSIZE": "1048576",
    "NCCL_BUFFSIZE": "4194304",
    "NCCL_NSOCKS_PERTHREAD": "4",
    "NCCL_SOCKET_NTHREADS": "1",
    "NCCL_GPUDIRECTTCPX_PROGRAM_FLOW_STEERING_WAIT_MICROS": "500000",
}
# Which CPUs serve each GPU NIC's TX / RX threads: the a3-highgpu-8g layout (eth1-2 on the first socket's cores,
# eth3-4 on the second's), same file. Machine specific, so only for that machine type.
TCPX_BINDINGS: dict[str, dict[str, str]] = {
    "a3-highgpu-8g": {
        "NCCL_GPUDIRECTTCPX_TX_BINDINGS": "eth1:8-21,112-125;eth2:8-21,112-125;eth3:60-73,164-177;eth4:60-73,164-177",
        "NCCL_GPUDIRECTTCPX_RX_BINDINGS": "eth1:22-35,126-139;eth2:22-35,126-139;eth3:74-87,178-191;eth4:74-87,178-191",
    },
}


def _tcpx(pool: NodePool, machine: Machine, nics: int) -> dict[str, Any]:
    # hardware.md section 2 "A3 High TCPX": sidecar tcpgpudmarxd-dev:v2.0.12, eth1-4, /run/tcpx.
    # The NCCL_GPUDIRECTTCPX_* variable names follow Google's GKE TCPX guide
    # (cloud.google.com/kubernetes-engine/docs/how-to/gpu-bandwidth-gpudirect-tcpx); not in hardware.md.
    networks = pools.gcp_network_names(pool, nics)
    lib = "/usr/local/nvidia/lib64"
    ifnames = ",".join(f"eth{i}" for i in range(1, nics + 1))
    env = {
        "LD_LIBRARY_PATH": lib,
        "NCCL_SOCKET_IFNAME": "eth0",
        "NCCL_GPUDIRECTTCPX_SOCKET_IFNAME": ifnames,
        "NCCL_GPUDIRECTTCPX_CTRL_DEV": "eth0",
        "NCCL_GPUDIRECTTCPX_UNIX_CLIENT_PREFIX": "/run/tcpx",
        "NCCL_CROSS_NIC": "0",
        # issue 30: the socket, chunk and flow-steering settings of upstream's TCPX run
        # (container-engine-accelerators@992db812 gpudirect-tcpx/nccl-config.yaml run-nccl.sh, the mpirun -x list).
        # NCCL_ALGO=Ring,Tree there is the benchmark's choice, left to the workload.
        **TCPX_NCCL_SETTINGS,
    }
    if machine.name in TCPX_BINDINGS:
        env.update(TCPX_BINDINGS[machine.name])
    sidecar = {
        "name": "tcpx-daemon",
        "image": TCPX_DAEMON_IMAGE,
        "imagePullPolicy": "IfNotPresent",
        "restartPolicy": "Always",
        "command": ["/tcpgpudmarxd/build/app/tcpgpudmarxd", "--gpu_nic_preset", "a3vm",
                    "--gpu_shmem_type", "fd", "--uds_path", "/run/tcpx"],
        "securityContext": {"privileged": True},
        "env": [{"name": "LD_LIBRARY_PATH", "value": lib}],
        "volumeMounts": [{"name": "fabric-nvidia-lib", "mountPath": lib},
                         {"name": "fabric-tcpx-socket", "mountPath": "/run/tcpx"},
                         {"name": "fabric-sys", "mountPath": "/hostsysfs"},
                         {"name": "fabric-proc-sys", "mountPath": "/hostprocsysfs"}],
    }
    return {
        "env": env,
        "annotations": {"networking.gke.io/default-interface": "eth0",
                        "networking.gke.io/interfaces": _gke_interfaces(1, networks)},
        "volumes": _GKE_HOST_VOLUMES + [{"name": "fabric-tcpx-socket", "emptyDir": {}}],
        "volume_mounts": [{"name": "fabric-nvidia-lib", "mountPath": lib},
                          {"name": "fabric-tcpx-socket", "mountPath": "/run/tcpx"}],
        "pod_volume_names": ["fabric-sys", "fabric-proc-sys"],
        "init_containers": [sidecar],
        "networks": networks,
    }


def _gcp_rdma(pool: NodePool, machine: Machine, nics: int) -> dict[str, Any]:
    # hardware.md section 2 "A3 Ultra/A4 RDMA": eth2-9 on the RDMA networks, hostPath
    # /home/kubernetes/bin/gib -> /usr/local/gib, NCCL_NET=gIB. (eth1, the second gVNIC, is not a
    # per-pool GPU network and is left to the cluster's defaults.)
    networks = pools.gcp_network_names(pool, nics)
    return {
        "env": {"LD_LIBRARY_PATH": "/usr/local/gib/lib64:/usr/local/nvidia/lib64"},
        "annotations": {"networking.gke.io/default-interface": "eth0",
                        "networking.gke.io/interfaces": _gke_interfaces(2, networks)},
        "volumes": [{"name": "fabric-gib", "hostPath": {"path": "/home/kubernetes/bin/gib"}}],
        "volume_mounts": [{"name": "fabric-gib", "mountPath": "/usr/local/gib"}],
        "networks": networks,
    }


# ---------------------------------------------------------------- mock data for plan
# Canned GCP lookups for offline runs (registered by multinode/recording.py for cloud gcp only).
# The GKE cluster looks like one made for GPU networks: multi-networking on Dataplane V2, the Filestore
# and Lustre CSI add-ons enabled. Results use the provider's wire names (camelCase). Created Filestore
# and Lustre instances get the addresses the service would assign.
# A syntactically valid, made-up CA (base64 of a PEM header): never a real credential.
FAKE_CA = "LS0tLS1CRUdJTiBDRVJUSUZJQ0FURS0tLS0tCk1JSUMtbW9jay1jYQotLS0tLUVORCBDRVJUSUZJQ0FURS0tLS0tCg=="


def gke_cluster(args: dict[str, Any]) -> dict[str, Any]:
    name = args.get("name", "cluster")
    project = args.get("project", "my-project")
    location = args.get("location", "us-central1")
    return {
        "id": f"projects/{project}/locations/{location}/clusters/{name}",
        "name": name, "project": project, "location": location,
        "endpoint": "203.0.113.10",
        "masterAuths": [{"clusterCaCertificate": FAKE_CA, "clientCertificate": "", "clientKey": "",
                         "clientCertificateConfigs": [{"issueClientCertificate": False}]}],
        "network": f"projects/{project}/global/networks/{name}-net",
        "subnetwork": f"projects/{project}/regions/{location}/subnetworks/{name}-subnet",
        "enableMultiNetworking": True,
        "datapathProvider": "ADVANCED_DATAPATH",
        "masterVersion": "1.33.5-gke.1000000",
        "addonsConfigs": [{"gcpFilestoreCsiDriverConfigs": [{"enabled": True}],
                           "lustreCsiDriverConfigs": [{"enabled": True, "enableLegacyLustrePort": False}]}],
    }


MOCK_CALLS: dict[str, Callable[[dict[str, Any]], dict[str, Any]]] = {"gcp:container/getCluster:getCluster": gke_cluster}
MOCK_OUTPUTS: dict[str, Callable[[str, dict[str, Any]], dict[str, Any]]] = {}

MOCK_OUTPUTS["gcp:filestore/instance:Instance"] = lambda name, inputs: {
    "networks": [dict(n, ipAddresses=["10.20.0.2"]) for n in inputs.get("networks", [])],
}
MOCK_OUTPUTS["gcp:lustre/instance:Instance"] = lambda name, inputs: {
    "mountPoint": f"10.90.0.4@tcp:/{inputs.get('filesystem', 'lustre')}",
}
