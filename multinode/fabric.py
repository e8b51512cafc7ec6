"""Fabric profile: what a multi-node pod needs to use its machine's GPU fabric.

Pure data derived from the catalog entry and the pool (and its per-pool network names). The cloud
node pools export it, the Kyverno policies are generated from it, the effective pods in `plan`
apply it, and the policy pack compares against it. Sources: ../shared/facts/hardware.md section 2.
"""
from __future__ import annotations

import json
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any, Dict, List, Optional, Tuple

from .catalog import Machine, device_share
from . import pools
from .config import NodePool, StackConfig
from .errors import Problem

# Kubernetes extended resource per fabric (hardware.md section 2).
EFA_RESOURCE = "vpc.amazonaws.com/efa"
IB_SHARED_RESOURCE = "rdma/shared_ib"      # Mellanox shared RDMA device plugin, resourceName shared_ib
IB_SRIOV_RESOURCE = "rdma/ib"              # SR-IOV device plugin
OCI_VF_RESOURCE = "nvidia.com/rdma-vf"     # OCI SR-IOV RDMA virtual functions
# The Multus network (NetworkAttachmentDefinition, manifests/addons.rdma_vf_network) that attaches one
# OCI VF. A NAD is namespaced; ours lives in `default` and pods name it `default/rdma-vf`, so pods in
# any namespace can use it (Multus reads `<namespace>/<name>`; with Multus namespaceIsolation on,
# `default` stays reachable). oracle-quickstart/oci-hpc-oke docs/using-rdma-network-interfaces-in-
# manifests.md uses the same namespace and `default/rdma-vf` form for pods outside `default`.
OCI_VF_NETWORK = "rdma-vf"
OCI_VF_NETWORK_NAMESPACE = "default"

# NCCL_NET pins the network plugin NCCL must load: NCCL compares it (case-insensitively) with the
# name each net plugin registers, and aborts when none matches, instead of falling back to sockets.
NCCL_NET = {
    # aws/aws-ofi-nccl src/nccl_ofi_interface_nvidia.cpp: `.name = "AWS Libfabric"` (every ncclNet_vN).
    "efa": "AWS Libfabric",
    # NCCL's built-in InfiniBand verbs transport is named "IB" (NVIDIA/nccl src/transport/net_ib.cc);
    # it also drives RoCE (OCI).
    "infiniband": "IB",
    "roce": "IB",
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

# Azure: NCCL topology files per ND generation. Which file a VM size uses is a machine fact
# (catalog.Machine.nccl_topology, source Z4: Azure/azhpc-images topology/). We do not copy the XML: the
# pod mounts a ConfigMap named after the file (see docs/addons-fabric.md), optional so NCCL falls back
# to auto-detection if it is absent.
AZURE_TOPOLOGY_MOUNT = "/opt/nvidia-topology"

# Fabrics whose profile needs a per-node count (device resource count, or one GPU network per NIC).
# Azure InfiniBand in shared mode requests rdma/shared_ib once per container and needs none.
_COUNTED = {"efa", "roce", "tcpx", "tcpxo", "gcp-rdma"}


class FabricError(ValueError):
    """A fabric fact the profile needs is unknown (config validation refuses such a stack first)."""


@dataclass(frozen=True)
class FabricProfile:
    kind: str                                  # catalog fabric kind
    cloud: str
    machine: str
    gpus_per_node: int
    device_resource: Optional[str]             # extended resource a GPU container requests
    devices_per_node: int                      # that resource's count for a full node
    nccl_net: Optional[str]                    # transport pin (None: no fabric, nothing to pin)
    env: Dict[str, str] = field(default_factory=dict)
    volumes: List[Dict[str, Any]] = field(default_factory=list)
    volume_mounts: List[Dict[str, Any]] = field(default_factory=list)
    annotations: Dict[str, str] = field(default_factory=dict)
    capabilities: List[str] = field(default_factory=list)
    init_containers: List[Dict[str, Any]] = field(default_factory=list)   # native sidecars included
    extra_resources: Dict[str, str] = field(default_factory=dict)        # e.g. hugepages-2Mi per container
    networks: List[str] = field(default_factory=list)                    # per-pool network names
    topology_file: Optional[str] = None                                  # NCCL_TOPO_FILE contents' name
    source: str = "../shared/facts/hardware.md section 2"
    pool: str = ""                                                       # node pool this profile is for
    node_selector: Dict[str, str] = field(default_factory=dict)          # how a pod lands on that pool
    pod_volume_names: List[str] = field(default_factory=list)            # volumes only sidecars use
    # cpu / memory a GPU container requests per GPU it has: {"cpu": (18, ""), "memory": (192, "Gi")}; the policy
    # multiplies by the container's GPUs and adds each only where the container states none (node_share_per_gpu).
    requests_per_gpu: Dict[str, Tuple[int, str]] = field(default_factory=dict)

    @property
    def enabled(self) -> bool:
        """True when pods on this pool need something injected (a fabric with a transport)."""
        return self.kind != "none"

    def devices_for(self, gpus: int) -> int:
        """Devices a container with `gpus` GPUs requests: its share of the node, rounded up."""
        if not self.device_resource:
            return 0
        if self.devices_per_node == 1 and gpus > 0:
            return 1  # a shared device (e.g. rdma/shared_ib) is requested once per container
        return device_share(gpus, self.devices_per_node, self.gpus_per_node)

    def describe(self) -> Dict[str, Any]:
        """The fabric description node pools export (plain JSON-able data)."""
        return {
            "kind": self.kind, "machine": self.machine, "deviceResource": self.device_resource,
            "devicesPerNode": self.devices_per_node,
            "devicesPerGpu": (self.devices_per_node / self.gpus_per_node) if self.device_resource else 0,
            "ncclNet": self.nccl_net, "networks": list(self.networks), "topologyFile": self.topology_file,
        }


def effective_kind(cfg: StackConfig, machine: Machine) -> str:
    """The fabric kind a pool's pods use: fabric.kind on an existing cluster, else the machine's ('none' when
    fabric.enabled is false)."""
    if not cfg.fabric.enabled:
        return "none"
    return cfg.fabric.kind if cfg.cloud == "existing" and cfg.fabric.kind else machine.fabric


def needs_count(cfg: StackConfig, kind: str) -> bool:
    """Does this fabric's profile need a per-node device / NIC count?"""
    return kind in _COUNTED or (kind == "infiniband" and cfg.fabric.rdma_mode == "sriov")


def fabric_count(cfg: StackConfig, machine: Machine) -> Optional[int]:
    """Fabric devices (or GPU NICs) per node: fabric.devicesPerGpu x GPUs when set, else the catalog /
    machineSpec fabricNics; None when neither says (never guessed)."""
    if cfg.fabric.devices_per_gpu is not None:
        return max(1, round(cfg.fabric.devices_per_gpu * machine.gpus))
    return machine.fabric_nics or None


def _count(cfg: StackConfig, pool: NodePool, machine: Machine, kind: str) -> int:
    n = fabric_count(cfg, machine)
    if not n:
        raise FabricError(f"node pool {pool.name!r}: {machine.name} has fabric {kind}, but its fabric NIC count is "
                          f"unknown; set nodePools[].machineSpec.fabricNics or fabric.devicesPerGpu")
    return n


def config_problems(cfg: StackConfig) -> List[Problem]:
    """Config-time fabric checks (called from config.semantic_problems).

    - a pool whose fabric needs a count (EFA / RDMA VFs / SR-IOV IB devices, GCP GPU networks) but whose
      machine gives none and fabric.devicesPerGpu is unset: the profile would have to guess it;
    - a multi-node workload on a pool without a fabric while other pools have one: the stack-wide Kyverno
      rule `require-fabric-pool` refuses its pods (they carry the fabric label but select no fabric pool)."""
    out: List[Problem] = []
    kinds: Dict[str, str] = {}
    for i, pool in enumerate(cfg.node_pools):
        if (pool.machine is None) == (pool.machine_spec is None):
            continue                                   # config reports it
        try:
            machine = cfg.machine(pool)
        except KeyError:                               # catalog.UnknownMachine: config reports it
            continue
        kind = effective_kind(cfg, machine)
        kinds[pool.name] = kind
        if needs_count(cfg, kind) and fabric_count(cfg, machine) is None:
            what = {"efa": "EFA interfaces", "roce": "RDMA virtual functions", "infiniband": "InfiniBand HCAs"
                    }.get(kind, "GPU NICs (one extra network each)")
            if pool.machine_spec is not None:
                out.append(Problem(f"nodePools[{i}].machineSpec.fabricNics",
                                   f"{machine.name} has fabric {kind!r} but no fabricNics: the number of {what} "
                                   f"per node is not guessed; set fabricNics to that number (from the provider's "
                                   f"documentation of {machine.name}) or set fabric.devicesPerGpu"))
            else:
                out.append(Problem(f"nodePools[{i}].machine",
                                   f"{machine.name}: the catalog has no confirmed count of {what} for fabric "
                                   f"{kind!r}; set fabric.devicesPerGpu, or describe the machine with "
                                   f"machineSpec.fabricNics"))
    fabric_pools = sorted(n for n, k in kinds.items() if k != "none")
    if fabric_pools:
        for i, w in enumerate(cfg.workloads):
            roles = [w.disaggregated.prefill, w.disaggregated.decode] if w.disaggregated else []
            spans = w.nodes > 1 or any(r.nodes > 1 for r in roles)
            if spans and kinds.get(w.node_pool) == "none":
                out.append(Problem(f"workloads[{i}].nodePool",
                                   f"{w.node_pool!r} has no GPU fabric, but this multi-node workload's pods carry "
                                   f"{pools.FABRIC_POD_LABEL}={pools.FABRIC_POD_LABEL_VALUE} and the fabric policy "
                                   f"refuses such pods outside the fabric pools; use one of "
                                   f"{', '.join(fabric_pools)} (or nodes: 1)"))
    return out


# The share of a node's CPUs and memory a GPU container requests, in proportion to its GPUs: 3/4 of the per-GPU
# share (vCPUs / GPUs, memory / GPUs from the catalog), rounded down. Why request it at all: a Burstable pod that
# uses far more than it requested is the kubelet's first eviction candidate under node memory pressure, and an
# NCCL rank dying takes the whole gang with it; a GPU pod loads weights, pins host buffers and runs data loaders,
# so it should be guaranteed most of its share of the host. Why not all of it: the remaining quarter covers the
# kubelet's system/kube reserve and eviction threshold, the node's DaemonSets (device plugins, CNI, monitoring)
# and small non-GPU pods. Requests only, no cpu/memory limits: no CFS throttling of NCCL proxy threads, no OOM
# kill at an arbitrary line. Allocatable itself is computed by the placement check, not here.
NODE_SHARE_REQUESTED = Fraction(3, 4)


def node_share_per_gpu(machine: Machine) -> Dict[str, Tuple[int, str]]:
    """cpu and memory a container requests per GPU (NODE_SHARE_REQUESTED of the per-GPU share of the node); {}
    when the catalog has no confirmed vCPU / memory figure for the machine (nothing is guessed)."""
    if not machine.vcpus or not machine.memory_gib or machine.gpus <= 0:
        return {}
    cpu = int(Fraction(machine.vcpus, machine.gpus) * NODE_SHARE_REQUESTED)
    mem = int(Fraction(machine.memory_gib, machine.gpus) * NODE_SHARE_REQUESTED)
    return {"cpu": (cpu, ""), "memory": (mem, "Gi")} if cpu > 0 and mem > 0 else {}


def _efa(machine: Machine) -> Dict[str, Any]:
    # hardware.md section 2 "AWS EKS (EFA)", sources A3/A4 (awsome-distributed-training nccl-tests
    # manifests). LD_LIBRARY_PATH from the same anchor is NOT injected: it would replace the image's
    # own library path (vLLM, NeMo images), and the OFI plugin location is the image's business.
    #
    # EFA memory setup: libfabric's huge pages OFF (FI_EFA_USE_HUGE_PAGE=0) and NO hugepages-2Mi request.
    # - aws-samples/awsome-distributed-training 1.architectures/efa-cheatsheet.md: set FI_EFA_USE_HUGE_PAGE=0 when
    #   os.fork() fails with "Cannot allocate memory" (multi-process PyTorch data loaders); it costs a minor
    #   performance hit. Our trainers are torchrun jobs with data loaders and vLLM forks workers, so we take it.
    # - With huge pages off, libfabric allocates no hugetlbfs bounce buffers, so a hugepages-2Mi request would
    #   reserve memory nothing uses (and would need nodes with 2 MiB pages pre-allocated: a pod requesting them on a
    #   node without them never schedules).
    # - The anchors differ on this: micro-benchmarks/nccl-tests/kubernetes/nccl-tests.yaml (p5) and
    #   aws-ia/terraform-aws-eks-blueprints patterns/nvidia-gpu-efa/generate-efa-nccl-test.sh request
    #   hugepages-2Mi: 5120Mi + memory: 32000Mi and leave huge pages on (nccl-tests does not fork);
    #   nccl-tests-gb200.yaml requests no hugepages. We follow the no-hugepages shape for every EFA machine.
    env = {
        "FI_PROVIDER": "efa",
        "FI_EFA_FORK_SAFE": "1",
        "FI_EFA_USE_HUGE_PAGE": "0",
        "NCCL_BUFFSIZE": "8388608",
        "NCCL_P2P_NET_CHUNKSIZE": "524288",
        "NCCL_TUNER_PLUGIN": "/opt/amazon/ofi-nccl/lib/x86_64-linux-gnu/libnccl-ofi-tuner.so",
    }
    if machine.gpu_model.startswith("GB"):
        # GB200 NVL domains (hardware.md section 2: NCCL_NVLS_ENABLE=1, NCCL_MNNVL_ENABLE=1).
        env.update({"NCCL_NVLS_ENABLE": "1", "NCCL_MNNVL_ENABLE": "1"})
    return {"env": env, "requests_per_gpu": node_share_per_gpu(machine)}


def _infiniband(machine: Machine) -> Dict[str, Any]:
    # hardware.md section 2 "Azure AKS (IB)", sources Z3 (Azure/aks-rdma-infiniband), Z4 (azhpc-images).
    env = {
        "NCCL_IB_DISABLE": "0",
        "NCCL_NET_GDR_LEVEL": "SYS",
        "CUDA_DEVICE_ORDER": "PCI_BUS_ID",
        "NCCL_IB_PCI_RELAXED_ORDERING": "1",
    }
    out: Dict[str, Any] = {"env": env, "capabilities": ["IPC_LOCK"]}
    topo = machine.nccl_topology                       # catalog, source Z4
    if topo:
        env["NCCL_TOPO_FILE"] = f"{AZURE_TOPOLOGY_MOUNT}/{topo}"
        cm = "nccl-topology-" + topo.split("-")[0]            # nccl-topology-ndv4 / nccl-topology-ndv5
        out["volumes"] = [{"name": "fabric-nccl-topology",
                           "configMap": {"name": cm, "optional": True}}]
        out["volume_mounts"] = [{"name": "fabric-nccl-topology", "mountPath": AZURE_TOPOLOGY_MOUNT,
                                 "readOnly": True}]
        out["topology_file"] = topo
    return out


def _roce(machine: Machine, vfs: int) -> Dict[str, Any]:
    # hardware.md section 2 "OCI OKE" option B (SR-IOV VFs via the Network Operator), source O1.
    env = {
        "NCCL_IB_GID_INDEX": "3",
        "NCCL_IB_TC": "41",
        "NCCL_IB_SL": "0",
        "NCCL_IB_TIMEOUT": "22",
        "NCCL_IB_SPLIT_DATA_ON_QPS": "0",
        "NCCL_CUMEM_ENABLE": "0",
        "NCCL_SOCKET_IFNAME": "eth0",
        "NCCL_IB_HCA": "mlx5",
    }
    if machine.gpu_model.startswith("A100"):
        env["NCCL_IB_QPS_PER_CONNECTION"] = "4"        # hardware.md: (A100)
    else:
        env["NCCL_IGNORE_CPU_AFFINITY"] = "1"          # hardware.md: (H100/H200/B200)
    # Multus attaches one rdma-vf network per VF the pod requests (whole-node pods: all of them),
    # named with its namespace so a pod in any namespace finds the one NAD in `default`.
    net = f"{OCI_VF_NETWORK_NAMESPACE}/{OCI_VF_NETWORK}"
    return {"env": env, "capabilities": ["IPC_LOCK"],
            "annotations": {"k8s.v1.cni.cncf.io/networks": ",".join([net] * vfs)},
            "networks": [net]}


def _gke_interfaces(first_eth: int, networks: List[str]) -> str:
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


def _tcpxo(pool: NodePool, machine: Machine, nics: int) -> Dict[str, Any]:
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
        "args": [f"set -ex; chmod 755 /fts/entrypoint_rxdm_container.sh; "
                 f"/fts/entrypoint_rxdm_container.sh --num_hops=2 --num_nics={nics} --uid= --alsologtostderr"],
        "securityContext": {"capabilities": {"add": ["NET_ADMIN", "NET_BIND_SERVICE"]}},
        "env": [{"name": "LD_LIBRARY_PATH", "value": lib}],
        "volumeMounts": [{"name": "fabric-nvidia-lib", "mountPath": lib},
                         {"name": "fabric-sys", "mountPath": "/hostsysfs"},
                         {"name": "fabric-proc-sys", "mountPath": "/hostprocsysfs"}],
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


def _tcpx(pool: NodePool, machine: Machine, nics: int) -> Dict[str, Any]:
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
    }
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


def _gcp_rdma(pool: NodePool, machine: Machine, nics: int) -> Dict[str, Any]:
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


def profile_for(cfg: StackConfig, pool: NodePool) -> FabricProfile:
    """The fabric profile of the pool's machine on this stack's cloud (pure: catalog + pool facts)."""
    machine = cfg.machine(pool)
    kind = effective_kind(cfg, machine)
    count = _count(cfg, pool, machine, kind) if needs_count(cfg, kind) else 0
    resource: Optional[str] = None
    per_node = 0
    extra: Dict[str, Any] = {}
    if kind == "efa":
        resource, per_node = EFA_RESOURCE, count
        extra = _efa(machine)
    elif kind == "infiniband":
        if cfg.fabric.rdma_mode == "shared":
            resource, per_node = IB_SHARED_RESOURCE, 1
        else:
            resource, per_node = IB_SRIOV_RESOURCE, count
        extra = _infiniband(machine)
    elif kind == "roce":
        resource, per_node = OCI_VF_RESOURCE, count
        extra = _roce(machine, per_node)
    elif kind == "tcpxo":
        extra = _tcpxo(pool, machine, count)
    elif kind == "tcpx":
        extra = _tcpx(pool, machine, count)
    elif kind == "gcp-rdma":
        extra = _gcp_rdma(pool, machine, count)
    nccl_net = NCCL_NET.get(kind) if cfg.fabric.pin_transport else None
    env = dict(extra.get("env", {}))
    if nccl_net:
        env["NCCL_NET"] = nccl_net
    return FabricProfile(
        kind=kind, cloud=cfg.cloud, machine=machine.name, gpus_per_node=machine.gpus,
        device_resource=resource, devices_per_node=per_node, nccl_net=nccl_net, env=env,
        volumes=extra.get("volumes", []), volume_mounts=extra.get("volume_mounts", []),
        annotations=extra.get("annotations", {}), capabilities=extra.get("capabilities", []),
        init_containers=extra.get("init_containers", []), extra_resources=extra.get("extra_resources", {}),
        networks=extra.get("networks", []), topology_file=extra.get("topology_file"),
        pool=pool.name, node_selector=pools.node_selector(cfg, pool),
        pod_volume_names=extra.get("pod_volume_names", []),
        requests_per_gpu=extra.get("requests_per_gpu", {}),
    )
