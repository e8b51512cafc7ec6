"""cloud: azure, in the pure core (no Pulumi, no SDK): the same sections as every multinode/clouds module.

- config rules: `CLUSTER_KEYS`, `STORAGE_KINDS`, `REQUIRED_FABRIC`, `CAPACITY_BLOCKS`, `CREATES_POOLS`
  (read by multinode/checks.py), `config_problems(cfg)` and `advisories(cfg)`;
- fabric profile: `FABRICS`, `NCCL_NET`, `fabric_settings` (InfiniBand; assembled by multinode/fabric.py);
- storage limits: Azure Files and Azure Managed Lustre sizes and tiers (components/clouds/azure.py
  reads the same constants, so the check and the resource cannot disagree);
- mock data for `plan`: `MOCK_CALLS`, `MOCK_OUTPUTS` (registered by multinode/recording.py).

Sources (checked 2026-11-22 with the docs search):
- AZURE_FILES_*: premium (FileStorage) shares have a 100 GiB minimum (kubernetes/kubernetes#99122,
  hardware.md Z7); Microsoft.Storage FileShare.shareQuota is at most 102400 GiB for large file shares.
- AMLFS_TIERS: Azure Managed Lustre, "Create a file system in the portal", Throughput configurations
  table (MicrosoftDocs/azure-stack-docs azure-managed-lustre/create-file-system-portal.md):
  MB/s per TiB -> (minimum TiB, maximum TiB, increment TiB). Larger sizes need a support request.
"""
from __future__ import annotations

import base64
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

from ..catalog import Machine
from ..errors import Problem
from ..pools import node_taints

# ---------------------------------------------------------------- config rules
CLUSTER_KEYS = ("name", "resourceGroup", "location")
STORAGE_KINDS = ("azure-files", "azure-lustre")
REQUIRED_FABRIC = "infiniband"  # ND pools wire up InfiniBand: the machine must have it unless fabric.enabled is false
CAPACITY_BLOCKS = False
CREATES_POOLS = True

# ---------------------------------------------------------------- storage limits
AZURE_FILES_MIN_GIB = 100
AZURE_FILES_MAX_GIB = 102400

AMLFS_TIERS: dict[int, tuple[int, int, int]] = {
    40: (48, 768, 48),
    125: (16, 128, 16),
    250: (8, 128, 8),
    500: (4, 128, 4),
}
AMLFS_DEFAULT_THROUGHPUT = 125
GIB_PER_TIB = 1024


def amlfs_sku(throughput: int) -> str:
    return f"AMLFS-Durable-Premium-{throughput}"


def amlfs_allowed_tib(throughput: int) -> list[int]:
    lo, hi, step = AMLFS_TIERS[throughput]
    return list(range(lo, hi + 1, step))


def amlfs_nearest_gib(gib: int, throughput: int) -> list[int]:
    allowed = [t * GIB_PER_TIB for t in amlfs_allowed_tib(throughput)]
    below = [a for a in allowed if a <= gib]
    above = [a for a in allowed if a >= gib]
    return sorted({*(below[-1:]), *(above[:1])})


def _sizes(values: list[int]) -> str:
    return " or ".join(f"{v} GiB" for v in values)


def storage_problems(storage: Any, node_pools: Any = ()) -> list[Problem]:
    p: list[Problem] = []
    s = storage
    size: int | None = s.size_gib
    if s.kind == "azure-files":
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


# AKS "Service quotas and limits" (learn.microsoft.com/azure/aks/quotas-skus-regions): "Maximum nodes per cluster with
# Virtual Machine Scale Sets and Standard Load Balancer SKU: 5,000 across all node pools" (a limit: refused), whose
# default is 1,000 ("Running more than a 1000 nodes per cluster requires increasing the default node limit quota":
# advised); "Maximum nodes per node pool (Virtual Machine Scale Sets node pools): 1000" and "Maximum node pools per
# cluster: 100" are held by the config model (NodePool.node_count <= 512, limits.NODE_POOLS = 100).
AKS_NODES_PER_CLUSTER = 5000
AKS_DEFAULT_NODES_PER_CLUSTER = 1000
AKS_QUOTAS_SOURCE = "learn.microsoft.com/azure/aks/quotas-skus-regions"


def _cluster_nodes(cfg: Any) -> int:
    return sum(p.node_count for p in cfg.node_pools)


def config_problems(cfg: Any, machines: dict[str, Any]) -> list[Problem]:
    """What only azure refuses: storage the services do not accept, more nodes than an AKS cluster holds."""
    p = storage_problems(cfg.storage, cfg.node_pools) if cfg.storage is not None else []
    total = _cluster_nodes(cfg)
    if total > AKS_NODES_PER_CLUSTER:
        p.append(Problem("nodePools", f"{total} nodes over all pools (nodePools[].nodeCount), above AKS's maximum of "
                                      f"{AKS_NODES_PER_CLUSTER} nodes per cluster ({AKS_QUOTAS_SOURCE}); lower the "
                                      f"pools' nodeCount or split the stack into clusters (multinode:fleet)"))
    return p


# Node repair (issue 34, docs/node-health.md): AKS node auto-repair is built in and has no setting
# (learn.microsoft.com/azure/aks/node-auto-repair: "Both AKS Automatic and AKS Standard clusters come preconfigured
# with node auto-repair"; a node NotReady, or silent, over 10 minutes is rebooted, then reimaged, then redeployed).
# It acts on NotReady only: a GPU fault that leaves the node Ready is NVSentinel's to report. cluster.nodeRepair has
# no effect here.


def advisories(cfg: Any) -> list[Problem]:
    """Non-fatal findings for InfiniBand pools (printed by `plan`, logged as warnings by the program).

    By default GPUDirect RDMA is on (see "GPUDirect RDMA" below): what is left to warn about is a config
    that really runs without the MLNX/DOCA stack nvidia-peermem needs."""
    out: list[Problem] = []
    total = _cluster_nodes(cfg)
    if AKS_DEFAULT_NODES_PER_CLUSTER < total <= AKS_NODES_PER_CLUSTER:
        out.append(Problem("nodePools", f"{total} nodes over all pools, above AKS's default node limit of "
                                        f"{AKS_DEFAULT_NODES_PER_CLUSTER} per cluster ({AKS_QUOTAS_SOURCE}): ask Azure "
                                        f"support to raise the cluster's node limit quota (up to "
                                        f"{AKS_NODES_PER_CLUSTER}) before `pulumi up`"))
    if not (cfg.fabric.enabled and cfg.fabric_kind() == "infiniband"):
        return out
    # Azure/AKS#3507 via hardware.md section 2: ~4 GB/s instead of ~186 GB/s without nvidia_peermem
    slow = "NCCL over InfiniBand then runs without GPUDirect RDMA (~4 GB/s instead of ~186 GB/s)"
    if cfg.fabric.doca_driver_version == HOST_DRIVERS:
        out.append(Problem("fabric.docaDriverVersion", "'host' means the node image brings MLNX_OFED/DOCA, which "
                                                       "AKS Ubuntu node images do not: nvidia-peermem cannot load and "
                                                       f"{slow}; unset it to install the DOCA driver container "
                                                       f"({DOCA_DRIVER_VERSION}) unless your node image has it"))
    elif not cfg.addons.network_operator.enabled:
        out.append(Problem("addons.networkOperator.enabled", "with the Network Operator off this stack installs no "
                                                             "DOCA driver, so nvidia-peermem has no peer-memory "
                                                             f"ib_core to load against and {slow}; enable it or "
                                                             "make sure the cluster runs a DOCA driver container"))
    return out


# ---------------------------------------------------------------- GPUDirect RDMA (nvidia-peermem)
# One default, as Azure/aks-rdma-infiniband ships it (commit 700dabb4fe04, 2026-07-16,
# website/docs/configurations/02-gpu-drivers.md "Option 1: AKS-managed GPU Driver"): AKS installs the
# GPU driver (gpuProfile.driver Install: AKS-supported, no preview) and does NOT load nvidia-peermem, so a
# privileged DaemonSet on the InfiniBand GPU nodes loads it (configs/nvidia-peermem-reloader/ds.yaml), and
# the Network Operator's NicClusterPolicy installs the DOCA-OFED driver container that gives ib_core the
# peer-memory API nvidia-peermem registers with (configs/nicclusterpolicy/base/nic.yaml: every variant of
# that repo's NicClusterPolicy carries this ofedDriver). With addons.gpuOperator instead (driver mode
# None), the operator's driver loads nvidia-peermem (driver.rdma.enabled, configs/values/gpu-operator/
# values.yaml) against the same DOCA container, so useHostMofed stays false (the chart default).
# `fabric.docaDriverVersion: host` = the node image brings MLNX_OFED/DOCA: no ofedDriver, useHostMofed true.
HOST_DRIVERS = "host"
# configs/nicclusterpolicy/base/nic.yaml ofedDriver.version (the operator appends -<os><ver>-<arch>)
# issue 30, explained, not changed: this is the DOCA 3.2.0 driver Azure's repository pins (its operator values
# follow Network Operator 25.10 / 26.1, whose images-sha256 pages list doca_telemetry 1.23.4-doca3.2.0-host); our
# pinned operator v26.4.1 ships DOCA 3.4.0 components (docs.nvidia.com/networking/display/kubernetes2641/advanced/
# images-sha256.html: doca_telemetry 1.25.5-doca3.4.0-host). The 26.4.1 page's doca-driver tag was not read here,
# so the tag Azure runs stays the default; set fabric.docaDriverVersion to that page's tag to follow the operator.
DOCA_DRIVER_VERSION = "doca3.2.0-25.10-1.2.8.0-2"
# same file: OFED_BLACKLIST_MODULES_FILE works around a module-load race (Mellanox/doca-driver-build#52);
# forcePrecompiled false (compile on the node when no precompiled image matches the AKS kernel).
DOCA_DRIVER_ENV = [{"name": "OFED_BLACKLIST_MODULES_FILE", "value": "/host/etc/modprobe.d/blacklist-ofed-modules.conf"}]
# The peermem loader (configs/nvidia-peermem-reloader/ds.yaml): image, command and probes as upstream.
# The liveness probe runs `modprobe nvidia-peermem` every 30 s: when the DOCA container reloads ib_core
# (first start, upgrade), nvidia-peermem is unloaded with it and the probe's modprobe loads it again (a
# failing modprobe restarts the container, as the GPU Operator's own driver DaemonSet does).
PEERMEM_LOADER_NAME = "nvidia-peermem-reloader"
PEERMEM_LOADER_IMAGE = "mcr.microsoft.com/mirror/docker/library/ubuntu:24.04"
PEERMEM_LOADER_COMMAND = ["/bin/bash", "-xc",
                          'apt update && apt install -y kmod && modprobe nvidia-peermem && echo "sleeping" '
                          '&& sleep inf']


def ofed_driver_version(cfg: Any) -> str | None:
    """The DOCA-OFED driver container version the NicClusterPolicy installs, or None (node image has it)."""
    v = cfg.fabric.doca_driver_version
    if v == HOST_DRIVERS:
        return None
    return v or DOCA_DRIVER_VERSION


def loads_peermem_with_daemonset(cfg: Any) -> bool:
    """AKS-managed driver (no GPU Operator) on InfiniBand pools: our DaemonSet loads nvidia-peermem."""
    return (cfg.fabric.enabled and cfg.fabric_kind() == "infiniband" and bool(cfg.node_pools)
            and gpu_driver(cfg) == "Install")


# ---------------------------------------------------------------- node bootstrap
# (read by components/clouds/azure.py: agent pools, storage account names)
def agent_pool_name(pool_name: str, suffix: str = "") -> str:
    """AKS Linux pool names: lowercase letters and digits, at most 12, starting with a letter. `suffix`: a
    blue-green pool's machine digest (multinode/upgrades.physical_suffix), kept whole at the end."""
    name = re.sub(r"[^a-z0-9]", "", pool_name.lower())
    if not name or not name[0].isalpha():
        name = "gpu" + name
    return name[:12 - len(suffix)] + suffix


def storage_account_name(name: str) -> str:
    """Logical name for an account (Pulumi appends a random suffix): lowercase letters and digits."""
    return (re.sub(r"[^a-z0-9]", "", name.lower()) or "ckpt")[:16]


def aks_taints(cfg: Any) -> list[str]:
    return [f"{t['key']}={t['value']}:{t['effect']}" for t in node_taints(cfg)]


def gpu_driver(cfg: Any) -> str:
    """AKS installs the NVIDIA driver unless the GPU Operator owns it (then two drivers would fight)."""
    return "None" if cfg.addons.gpu_operator.enabled else "Install"


# ---------------------------------------------------------------- fabric profile
# Kubernetes extended resources of InfiniBand (hardware.md section 2).
IB_SHARED_RESOURCE = "rdma/shared_ib"      # Mellanox shared RDMA device plugin, resourceName shared_ib
IB_SRIOV_RESOURCE = "rdma/ib"              # SR-IOV device plugin
# The shared RDMA device plugin's `rdmaHcaMax`: how many pods share a node's HCAs, i.e. how many of the shared
# resource a node advertises (hardware.md section 2, Z3/Z5). The NicClusterPolicy and placement both read it.
SHARED_IB_HCA_MAX = 63

# --- issue 18: the RDMA resource name is the stack's (fabric.rdmaResourceName) -----------------------------
# The Network Operator's shared RDMA device plugin names its resource in its config (`resourceName`, with
# `resourcePrefix` defaulting to "rdma": Mellanox/k8s-rdma-shared-dev-plugin README, config.json; the Network
# Operator's NicClusterPolicy example uses resourceName hca_shared_devices_a -> rdma/hca_shared_devices_a, and
# NeMo's multinode networking docs request that name). Every user of the name (device plugin config, fabric
# profile and so the Kyverno MutatingPolicy, the policy pack, placement) calls rdma_resource(cfg).
RDMA_DEFAULT_PREFIX = "rdma"


def rdma_resource(cfg: Any) -> str:
    """The InfiniBand device resource pods request: fabric.rdmaResourceName ([prefix/]name, prefix defaults to
    rdma), else rdma/shared_ib (shared mode) or rdma/ib (sriov mode)."""
    name = getattr(cfg.fabric, "rdma_resource_name", None)
    if name:
        return name if "/" in name else f"{RDMA_DEFAULT_PREFIX}/{name}"
    return IB_SHARED_RESOURCE if cfg.fabric.rdma_mode == "shared" else IB_SRIOV_RESOURCE


# A Kubernetes extended resource name: a DNS-subdomain prefix that is not kubernetes.io / k8s.io, then a
# qualified name (k8s.io/apimachinery validation IsQualifiedName; API server IsExtendedResourceName).
_QUALIFIED_NAME = re.compile(r"^[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?\Z")
_DNS_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*\Z")


def rdma_resource_problem(value: str) -> str | None:
    """Why `value` cannot be fabric.rdmaResourceName, or None."""
    prefix, _, name = value.rpartition("/") if "/" in value else (RDMA_DEFAULT_PREFIX, "/", value)
    if (not _QUALIFIED_NAME.match(name) or not prefix or len(prefix) > 253 or not _DNS_SUBDOMAIN.match(prefix)
            or prefix.endswith(("kubernetes.io", "k8s.io")) or value.count("/") > 1):
        return (f"{value!r} is not an extended resource name; write [prefix/]name with a DNS-subdomain prefix other "
                f"than kubernetes.io and a name of letters, digits, '-', '_', '.' (e.g. hca_shared_devices_a, which "
                f"becomes rdma/hca_shared_devices_a)")
    return None
FABRICS = ("infiniband",)
# NCCL's built-in InfiniBand verbs transport is named "IB" (NVIDIA/nccl src/transport/net_ib.cc).
NCCL_NET = {"infiniband": "IB"}

# NCCL topology files per ND generation. Which file a VM size uses is a machine fact
# (catalog.Machine.nccl_topology, source Z4: Azure/azhpc-images topology/). The files themselves are
# copied under multinode/data/nccl-topology/ (PROVENANCE.md there); the stack renders each as a ConfigMap
# named after the file in every workload namespace (multinode/manifests/azure_fabric.py) and the pod
# mounts the one of its pool's VM size at the path Azure/aks-rdma-infiniband's NCCL test mounts it
# (tests/scenarios/k8s/templates/mpi-job.yaml: /opt/nvidia-topology). The volume stays optional: a
# labelled pod in a namespace the stack does not manage still starts, and NCCL warns that it cannot open
# NCCL_TOPO_FILE and detects the topology itself.
AZURE_TOPOLOGY_MOUNT = "/opt/nvidia-topology"
TOPOLOGY_DATA_DIR = Path(__file__).resolve().parent.parent / "data" / "nccl-topology"


def topology_config_map_name(topology_file: str) -> str:
    """ndv5-topo.xml -> nccl-topology-ndv5 (one ConfigMap per ND generation, key = the file name)."""
    return "nccl-topology-" + topology_file.split("-")[0]


def topology_file_text(topology_file: str) -> str:
    return (TOPOLOGY_DATA_DIR / topology_file).read_text(encoding="utf-8")


def fabric_settings(kind: str, cfg: Any, pool: Any, machine: Machine,
                    count: int) -> tuple[str, int, dict[str, Any]]:
    """(device resource, devices per node, what the pod gets) for an InfiniBand pool (multinode/fabric.py)."""
    extra = _infiniband(machine)
    if cfg.fabric.rdma_mode == "shared":
        # a node advertises SHARED_IB_HCA_MAX of the shared resource, a pod requests 1 (placement reads this)
        extra["node_capacity"] = SHARED_IB_HCA_MAX
        return rdma_resource(cfg), 1, extra
    return rdma_resource(cfg), count, extra


def _infiniband(machine: Machine) -> dict[str, Any]:
    # hardware.md section 2 "Azure AKS (IB)", sources Z3 (Azure/aks-rdma-infiniband), Z4 (azhpc-images).
    env = {
        "NCCL_IB_DISABLE": "0",
        "NCCL_NET_GDR_LEVEL": "SYS",
        "CUDA_DEVICE_ORDER": "PCI_BUS_ID",
        "NCCL_IB_PCI_RELAXED_ORDERING": "1",
    }
    # No UCX_* here (issue 18b, decided): UCX is not on NCCL's path. NCCL's collectives use its own IB verbs
    # transport (NCCL_NET=IB, pinned above); UCX serves UCX-based MPI (Open MPI `pml ucx`, HPC-X) point-to-point
    # and NIXL (Dynamo's KV transfer). Azure HPC scripts set UCX_TLS=rc and UCX_NET_DEVICES=mlx5_ib0:1,...
    # (JonShelley/azure benchmarking/NDv4 nccl.sh) on HPC images whose udev rules name the HCAs mlx5_ib*;
    # Microsoft's Azure Compute blog "Accelerated Networking on HB, HC, HBv2, HBv3 and NDv2" (2021-02-11) says the
    # InfiniBand device names differ from VM to VM (mlx5_0 or mlx5_1, assigned asynchronously) unless such a
    # rule renames them, and that UCX command lines must follow. AKS node images carry no such rule, so a fixed
    # UCX_NET_DEVICES could name an HCA the pod does not have, and UCX_TLS=rc on every fabric pod would cut NIXL
    # off its cuda_copy / cuda_ipc transports. A launcher that uses UCX sets them itself (workloads[].env or
    # its mpirun -x; mpijob.py forwards UCX_* to every rank).
    out: dict[str, Any] = {"env": env, "capabilities": ["IPC_LOCK"]}
    topo = machine.nccl_topology                       # catalog, source Z4
    if topo:
        # issue 30: Azure/azhpc-images@8e9d055f components/customizations/ndv4.sh:14 and ndv5.sh:14 write
        # NCCL_IGNORE_CPU_AFFINITY=1 into /etc/nccl.conf beside the topology file on ND A100 v4 / H100 v5 / H200 v5
        # (the VM's virtual NUMA layout misleads NCCL's CPU pinning); ndv6.sh (GB200) writes no nccl.conf, so the
        # machines without a topology file get neither. A container does not read the host's /etc/nccl.conf.
        env["NCCL_IGNORE_CPU_AFFINITY"] = "1"
        env["NCCL_TOPO_FILE"] = f"{AZURE_TOPOLOGY_MOUNT}/{topo}"
        cm = topology_config_map_name(topo)                  # nccl-topology-ndv4 / nccl-topology-ndv5
        out["volumes"] = [{"name": "fabric-nccl-topology",
                           "configMap": {"name": cm, "optional": True}}]
        out["volume_mounts"] = [{"name": "fabric-nccl-topology", "mountPath": AZURE_TOPOLOGY_MOUNT,
                                 "readOnly": True}]
        out["topology_file"] = topo
    return out


# ---------------------------------------------------------------- mock data for plan
# Canned Azure answers for offline runs (plan, tests): an AKS managed cluster, its user kubeconfig,
# and the computed outputs our Azure resources need. multinode/recording.py registers MOCK_CALLS /
# MOCK_OUTPUTS for stacks of this cloud only.
SUBSCRIPTION = "00000000-0000-0000-0000-000000000000"
NODE_SUBNET = (f"/subscriptions/{SUBSCRIPTION}/resourceGroups/rg-net/providers/Microsoft.Network/"
               f"virtualNetworks/vnet-aks/subnets/nodes")


def managed_cluster(args: dict[str, Any]) -> dict[str, Any]:
    rg, name = args.get("resourceGroupName", "rg"), args.get("resourceName", "aks")
    return {
        "id": f"/subscriptions/{SUBSCRIPTION}/resourceGroups/{rg}/providers/Microsoft.ContainerService/"
              f"managedClusters/{name}",
        "name": name, "location": "eastus", "kubernetesVersion": "1.33", "currentKubernetesVersion": "1.33.2",
        "fqdn": f"{name}-dns-0a1b2c3d.hcp.eastus.azmk8s.io", "provisioningState": "Succeeded",
        "nodeResourceGroup": f"MC_{rg}_{name}_eastus", "type": "Microsoft.ContainerService/ManagedClusters",
        "agentPoolProfiles": [{"name": "system", "mode": "System", "vmSize": "Standard_D8ds_v5", "count": 3,
                               "osType": "Linux", "vnetSubnetID": NODE_SUBNET}],
    }


def user_credentials(args: dict[str, Any]) -> dict[str, Any]:
    name = args.get("resourceName", "aks")
    kubeconfig = (f"apiVersion: v1\nkind: Config\nclusters:\n- name: {name}\n  cluster:\n"
                  f"    server: https://{name}-dns-0a1b2c3d.hcp.eastus.azmk8s.io:443\n"
                  f"contexts:\n- name: {name}\n  context: {{cluster: {name}, user: offline}}\n"
                  f"current-context: {name}\nusers:\n- name: offline\n  user: {{token: offline-plan}}\n")
    return {"kubeconfigs": [{"name": "clusterUser", "value": base64.b64encode(kubeconfig.encode()).decode()}]}


MOCK_CALLS: dict[str, Callable[[dict[str, Any]], dict[str, Any]]] = {
    "azure-native:containerservice:getManagedCluster": managed_cluster,
    "azure-native:containerservice:listManagedClusterUserCredentials": user_credentials,
}
MOCK_OUTPUTS: dict[str, Callable[[str, dict[str, Any]], dict[str, Any]]] = {}

MOCK_OUTPUTS["azure-native:storagecache:AmlFilesystem"] = lambda name, inputs: {
    "clientInfo": {"mgsAddress": "10.20.0.4",
                   "mountCommand": "mount -t lustre -o noatime,flock 10.20.0.4@tcp:/lustrefs",
                   "lustreVersion": "2.15", "containerStorageInterface": {}}}
# azure-native auto-names these from the logical name plus a random suffix; mimic it.
MOCK_OUTPUTS["azure-native:storage:StorageAccount"] = lambda name, inputs: {
    "name": inputs.get("accountName") or f"{name}0a1b2c"}
MOCK_OUTPUTS["azure-native:storage:FileShare"] = lambda name, inputs: {"name": inputs.get("shareName") or name}
