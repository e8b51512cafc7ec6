"""Fabric profile: what a multi-node pod needs to use its machine's GPU fabric.

Pure data derived from the catalog entry and the pool (and its per-pool network names). The cloud
node pools export it, the Kyverno policies are generated from it, the effective pods in `plan`
apply it, and the policy pack compares against it. Sources: ../shared/facts/hardware.md section 2.

This module holds what every fabric shares (the profile, the per-node count, the transport pin);
what one fabric injects comes from the cloud module that owns it (multinode/clouds/<cloud>.py
`fabric_settings`): EFA from aws, InfiniBand from azure, GPUDirect-TCPX/TCPXO/RDMA from gcp, RoCE
from oci. On cloud `existing` the fabric named by fabric.kind picks its owner the same way.
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from . import pools
from .catalog import Machine, device_share, node_share_per_gpu  # noqa: F401 - re-exported
from .clouds import aws, azure, gcp, oci
from .config import NodePool, StackConfig
from .errors import Problem

# The names other layers use for each fabric (Kyverno policies, add-ons, the policy pack), defined
# by the cloud module that owns the fabric.
EFA_RESOURCE = aws.EFA_RESOURCE
IB_SHARED_RESOURCE = azure.IB_SHARED_RESOURCE
IB_SRIOV_RESOURCE = azure.IB_SRIOV_RESOURCE
rdma_resource = azure.rdma_resource     # the stack's InfiniBand device resource (fabric.rdmaResourceName)
OCI_VF_RESOURCE = oci.OCI_VF_RESOURCE
OCI_VF_NETWORK = oci.OCI_VF_NETWORK
OCI_VF_NETWORK_NAMESPACE = oci.OCI_VF_NETWORK_NAMESPACE
TCPXO_DAEMON_IMAGE = gcp.TCPXO_DAEMON_IMAGE
TCPX_DAEMON_IMAGE = gcp.TCPX_DAEMON_IMAGE
AZURE_TOPOLOGY_MOUNT = azure.AZURE_TOPOLOGY_MOUNT

# fabric kind -> the cloud module that builds its profile
_OWNER = {kind: mod for mod in (aws, azure, gcp, oci) for kind in mod.FABRICS}

# NCCL_NET pins the network plugin NCCL must load: NCCL compares it (case-insensitively) with the
# name each net plugin registers, and aborts when none matches, instead of falling back to sockets.
# Each cloud module names its fabrics' plugins, with sources.
NCCL_NET = {kind: name for mod in (aws, azure, gcp, oci) for kind, name in mod.NCCL_NET.items()}

# Fabrics whose profile needs a per-node count (device resource count, or one GPU network per NIC).
# Azure InfiniBand in shared mode requests its shared resource (rdma/shared_ib unless fabric.rdmaResourceName
# names another) once per container and needs none.
_COUNTED = {"efa", "roce", "tcpx", "tcpxo", "gcp-rdma"}


class FabricError(ValueError):
    """A fabric fact the profile needs is unknown (config validation refuses such a stack first)."""


@dataclass(frozen=True)
class FabricProfile:
    kind: str                                  # catalog fabric kind
    cloud: str
    machine: str
    gpus_per_node: int
    device_resource: str | None             # extended resource a GPU container requests
    devices_per_node: int                      # that resource's count for a full node
    nccl_net: str | None                    # transport pin (None: no fabric, nothing to pin)
    env: dict[str, str] = field(default_factory=dict)
    volumes: list[dict[str, Any]] = field(default_factory=list)
    volume_mounts: list[dict[str, Any]] = field(default_factory=list)
    annotations: dict[str, str] = field(default_factory=dict)
    capabilities: list[str] = field(default_factory=list)
    init_containers: list[dict[str, Any]] = field(default_factory=list)   # native sidecars included
    extra_resources: dict[str, str] = field(default_factory=dict)        # e.g. hugepages-2Mi per container
    networks: list[str] = field(default_factory=list)                    # per-pool network names
    topology_file: str | None = None                                  # NCCL_TOPO_FILE contents' name
    source: str = "../shared/facts/hardware.md section 2"
    pool: str = ""                                                       # node pool this profile is for
    node_selector: dict[str, str] = field(default_factory=dict)          # how a pod lands on that pool
    pod_volume_names: list[str] = field(default_factory=list)            # volumes only sidecars use
    # cpu / memory a GPU container requests per GPU it has: {"cpu": (18, ""), "memory": (192, "Gi")}; the policy
    # multiplies by the container's GPUs and adds each only where the container states none (node_share_per_gpu).
    requests_per_gpu: dict[str, tuple[int, str]] = field(default_factory=dict)
    # Multus network attached once per fabric device the pod requests (OCI: `default/rdma-vf`): the policy
    # writes k8s.v1.cni.cncf.io/networks with as many entries as the pod's GPU containers request devices
    # (kyverno.device_networks_expr), so a pod with fewer GPUs lists fewer attachments.
    device_network: str | None = None
    # how many of device_resource a node advertises when that is not devices_per_node: the shared RDMA device
    # plugin's rdmaHcaMax (azure shared mode); placement reads it
    node_capacity: int | None = None

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

    def describe(self) -> dict[str, Any]:
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


def fabric_count(cfg: StackConfig, machine: Machine) -> int | None:
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


def config_problems(cfg: StackConfig) -> list[Problem]:
    """Config-time fabric checks (called from multinode/checks.py).

    - a pool whose fabric needs a count (EFA / RDMA VFs / SR-IOV IB devices, GCP GPU networks) but whose
      machine gives none and fabric.devicesPerGpu is unset: the profile would have to guess it;
    - a multi-node workload on a pool without a fabric while other pools have one: the stack-wide Kyverno
      rule `require-fabric-pool` refuses its pods (they carry the fabric label but select no fabric pool)."""
    out: list[Problem] = _rdma_resource_problems(cfg)
    if cfg.fabric.socket_interface is not None and socket_interfaces(cfg.fabric.socket_interface) is None:
        out.append(Problem("fabric.socketInterface",
                           f"{cfg.fabric.socket_interface!r} is not a list of interface names; give exact Linux "
                           f"interface names (at most 15 characters each), comma-separated, e.g. eth0 or eth0,eth1"))
    kinds: dict[str, str] = {}
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


def _rdma_resource_problems(cfg: StackConfig) -> list[Problem]:
    """issue 18b: fabric.rdmaResourceName is an extended resource name, used only by an InfiniBand fabric, and
    never another resource pods already request (the GPUs, another fabric's devices)."""
    name = cfg.fabric.rdma_resource_name
    if name is None:
        return []
    bad = azure.rdma_resource_problem(name)
    if bad:
        return [Problem("fabric.rdmaResourceName", bad)]
    full = azure.rdma_resource(cfg)
    taken = {"nvidia.com/gpu": "the GPUs", EFA_RESOURCE: "AWS EFA", OCI_VF_RESOURCE: "OCI RDMA VFs"}
    if full in taken:
        return [Problem("fabric.rdmaResourceName", f"{full} is the resource of {taken[full]}; name the RDMA device "
                                                   f"plugin's own resource, e.g. hca_shared_devices_a")]
    ib = [p.name for p in cfg.node_pools if cfg.fabric.enabled and _pool_kind(cfg, p) == "infiniband"]
    if not ib:
        return [Problem("fabric.rdmaResourceName", "only an InfiniBand fabric (azure ND pools, or an existing "
                                                   "cluster with fabric.kind infiniband) has an RDMA device resource; "
                                                   "remove it")]
    return []


def _pool_kind(cfg: StackConfig, pool: NodePool) -> str | None:
    try:
        return effective_kind(cfg, cfg.machine(pool)) if (pool.machine is None) != (pool.machine_spec is None) else None
    except KeyError:
        return None


# Linux interface names: at most 15 characters (IFNAMSIZ 16 with the NUL), no '/', ',' or whitespace.
_IFNAME = re.compile(r"^[A-Za-z0-9_.:@-]{1,15}\Z")


def socket_interfaces(value: str | None) -> list[str] | None:
    """fabric.socketInterface as a list of interface names, or None when unset or malformed (config_problems)."""
    if value is None:
        return None
    names = [n.strip() for n in value.split(",")]
    return names if names and all(_IFNAME.match(n) for n in names) else None


def bootstrap_env(cfg: StackConfig, kind: str, env: dict[str, Any]) -> dict[str, str]:
    """NCCL's and GLOO's bootstrap interface, the same one (issue 31). NCCL_SOCKET_IFNAME takes prefixes, '=' for an
    exact name and '^' to exclude (NCCL's environment variables, "NCCL_SOCKET_IFNAME"); GLOO_SOCKET_IFNAME takes
    exact names, comma-separated (PyTorch torch.distributed, "Choosing the network interface to use").
    With fabric.socketInterface both are set from it. Without it, on RoCE, where the fabric pins NCCL's socket
    interface (eth0, clouds/oci.py), GLOO follows NCCL's value: otherwise torch's gloo (CPU collectives, the
    rendezvous store's peers) may pick another interface and the two disagree with no warning."""
    names = socket_interfaces(cfg.fabric.socket_interface)
    if names:
        return {"NCCL_SOCKET_IFNAME": "=" + ",".join(names), "GLOO_SOCKET_IFNAME": ",".join(names)}
    nccl = env.get("NCCL_SOCKET_IFNAME")
    if kind == "roce" and isinstance(nccl, str) and _IFNAME.match(nccl) and "GLOO_SOCKET_IFNAME" not in env:
        return {"GLOO_SOCKET_IFNAME": nccl}
    return {}


def profile_for(cfg: StackConfig, pool: NodePool) -> FabricProfile:
    """The fabric profile of the pool's machine on this stack's cloud (pure: catalog + pool facts)."""
    machine = cfg.machine(pool)
    kind = effective_kind(cfg, machine)
    count = _count(cfg, pool, machine, kind) if needs_count(cfg, kind) else 0
    resource: str | None = None
    per_node = 0
    extra: dict[str, Any] = {}
    if kind in _OWNER:
        resource, per_node, extra = _OWNER[kind].fabric_settings(kind, cfg, pool, machine, count)
    nccl_net = NCCL_NET.get(kind) if cfg.fabric.pin_transport else None
    env = dict(extra.get("env", {}))
    if nccl_net:
        env["NCCL_NET"] = nccl_net
    env.update(bootstrap_env(cfg, kind, env))
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
        device_network=extra.get("device_network"), node_capacity=extra.get("node_capacity"),
    )
