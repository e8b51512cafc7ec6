"""Fabric profile: what a multi-node pod needs to use its machine's GPU fabric.

Pure data derived from the catalog entry and the pool (and its per-pool network names). The cloud
node pools export it, the Kyverno policies are generated from it, the effective pods in `plan`
apply it, and the policy pack compares against it. Sources: ../shared/facts/hardware.md section 2.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Dict, List, Optional

from .catalog import Machine
from .config import NodePool, StackConfig

# Kubernetes extended resource per fabric (hardware.md section 2).
EFA_RESOURCE = "vpc.amazonaws.com/efa"
IB_SHARED_RESOURCE = "rdma/shared_ib"      # Mellanox shared RDMA device plugin, resourceName shared_ib
IB_SRIOV_RESOURCE = "rdma/ib"              # SR-IOV device plugin
OCI_VF_RESOURCE = "nvidia.com/rdma-vf"     # OCI SR-IOV RDMA virtual functions

# NCCL_NET pins the network plugin NCCL must load; if it cannot, NCCL fails instead of using sockets.
NCCL_NET = {
    "efa": "AWS Libfabric",   # aws-ofi-nccl registers this name
    "infiniband": "IB",
    "roce": "IB",
    "tcpx": "GPUDirectTCPX",
    "tcpxo": "FasTrak",
    "gcp-rdma": "gIB",
}


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

    def devices_for(self, gpus: int) -> int:
        """Devices a container with `gpus` GPUs requests: its share of the node, rounded up."""
        if not self.device_resource or gpus <= 0 or self.devices_per_node <= 0:
            return 0
        if self.devices_per_node == 1:
            return 1  # a shared device (e.g. rdma/shared_ib) is requested once per container
        return max(1, -(-gpus * self.devices_per_node // self.gpus_per_node))

    def describe(self) -> Dict[str, Any]:
        """The fabric description node pools export (plain JSON-able data)."""
        return {
            "kind": self.kind, "machine": self.machine, "deviceResource": self.device_resource,
            "devicesPerNode": self.devices_per_node,
            "devicesPerGpu": (self.devices_per_node / self.gpus_per_node) if self.device_resource else 0,
            "ncclNet": self.nccl_net, "networks": list(self.networks), "topologyFile": self.topology_file,
        }


def _devices_per_node(cfg: StackConfig, machine: Machine, default: Optional[int]) -> int:
    if cfg.fabric.devices_per_gpu is not None:
        return max(1, round(cfg.fabric.devices_per_gpu * machine.gpus))
    return default or 0


def profile_for(cfg: StackConfig, pool: NodePool) -> FabricProfile:
    """The fabric profile of the pool's machine on this stack's cloud."""
    machine = cfg.machine(pool)
    kind = cfg.fabric.kind if cfg.cloud == "existing" and cfg.fabric.kind else machine.fabric
    if not cfg.fabric.enabled:
        kind = "none"
    resource: Optional[str] = None
    per_node = 0
    if kind == "efa":
        resource, per_node = EFA_RESOURCE, _devices_per_node(cfg, machine, machine.fabric_nics)
    elif kind == "infiniband":
        if cfg.fabric.rdma_mode == "shared":
            resource, per_node = IB_SHARED_RESOURCE, 1
        else:
            resource, per_node = IB_SRIOV_RESOURCE, _devices_per_node(cfg, machine, machine.fabric_nics)
    elif kind == "roce":
        resource, per_node = OCI_VF_RESOURCE, _devices_per_node(cfg, machine, machine.fabric_nics)
    return FabricProfile(
        kind=kind, cloud=cfg.cloud, machine=machine.name, gpus_per_node=machine.gpus,
        device_resource=resource, devices_per_node=per_node,
        nccl_net=NCCL_NET.get(kind) if cfg.fabric.pin_transport else None,
    )
