"""Machine catalog: the one table of GPU machine facts.

Every other layer (node pools, fabric profiles, manifests, the policy pack) reads machine facts
from here; there is no second table. Values come from ../shared/facts/hardware.md (collected
2026-11-22); each entry names its source keys, expanded in SOURCES below. A value that no source
confirms is stored as given (or None when the source has none) and its field name is listed in
``unconfirmed``: it is never guessed.
"""
from __future__ import annotations

import difflib
from collections.abc import Iterable
from dataclasses import dataclass
from fractions import Fraction

CLOUDS = ("aws", "azure", "gcp", "oci")

# Fabric kinds. Each names the transport NCCL must use between nodes on that machine.
EFA = "efa"                    # AWS Elastic Fabric Adapter (libfabric + aws-ofi-nccl)
INFINIBAND = "infiniband"      # Azure ND-series InfiniBand (NCCL IB verbs)
TCPX = "tcpx"                  # GCP A3 High GPUDirect-TCPX
TCPXO = "tcpxo"                # GCP A3 Mega GPUDirect-TCPXO
GCP_RDMA = "gcp-rdma"          # GCP A3 Ultra / A4 GPUDirect RDMA over RoCE (NCCL gIB plugin)
ROCE = "roce"                  # OCI RDMA over Converged Ethernet, SR-IOV VFs
NONE = "none"                  # no GPU fabric: NCCL over the primary network
FABRICS = (EFA, INFINIBAND, TCPX, TCPXO, GCP_RDMA, ROCE, NONE)

FABRIC_CLOUD = {EFA: "aws", INFINIBAND: "azure", TCPX: "gcp", TCPXO: "gcp", GCP_RDMA: "gcp", ROCE: "oci"}

SOURCES: dict[str, str] = {
    "A1": "docs.aws.amazon.com/ec2/latest/instancetypes/ac.html",
    "A2": "docs.aws.amazon.com/AWSEC2/latest/UserGuide/efa-acc-inst-types.html",
    "A4": "aws-samples/awsome-distributed-training micro-benchmarks/nccl-tests/kubernetes/*.yaml",
    "A9": "meta-pytorch/torchx named_resources_aws.py",
    "A10": "docs.aws.amazon.com/AWSEC2/latest/UserGuide/using-eni.html#network-cards (network cards per type; "
           "at most one EFA per card, see efa-acc-inst-types.html)",
    "A11": "docs.aws.amazon.com/ec2/latest/instancetypes/ac.html 'Performance specifications' (Memory GiB, vCPUs) and "
           "'Instance store specifications' (volumes x GB, NVMe SSD)",
    "Z1": "MicrosoftDocs/azure-compute-docs gpu-accelerated sizes",
    "Z2": "MicrosoftDocs/azure-compute-docs ND A100 v4 series",
    "Z5": "MicrosoftDocs/azure-compute-docs articles/virtual-machines/sizes/gpu-accelerated/<series>.md 'Basics' "
          "(vCPUs, memory) and 'Local storage' tabs (ndasra100v4, ndma100v4, ndh100v5, nd-h200-v5, nd-gb200-v6)",
    "Z4": "Microsoft github.com/Azure/azhpc-images topology/ (ndv4-topo.xml: ND A100 v4; "
          "ndv5-topo.xml: ND H100 v5 / ND H200 v5)",
    "G1": "cloud.google.com/compute/docs/gpus/gpu-network-bandwidth",
    "G2": "GoogleCloudPlatform/cluster-toolkit modules/compute/gke-node-pool, examples/gke-a3-*",
    "G3": "GoogleCloudPlatform/container-engine-accelerators gpudirect-tcpxo",
    "G4": "cloud.google.com/compute/docs/accelerator-optimized-machines (A3 High: 'available in a standard machine "
          "type and has 208 vCPUs, and up to 1872 GB of memory'; Google's GB for machine memory are binary GB)",
    "O1": "oracle-quickstart/oci-hpc-oke docs + terraform",
    "O2": "ai2-compute-gpu/oci-dr-hpc-v2 shapes.json (third party)",
    "O3": "docs.oracle.com/en-us/iaas/Content/Compute/References/computeshapes.htm 'GPU Shapes' table (OCPU, CPU "
          "memory GB, local disk), read through the crawl jacklty/oci_doc_crawler iaas/Content/Compute/References/"
          "computeshapes.md (page updated 2025-02-13); 1 OCPU = 2 vCPUs on x86 (same page)",
}


@dataclass(frozen=True)
class Machine:
    """Facts about one GPU machine (instance type, VM size, machine type or shape)."""

    name: str
    cloud: str                       # aws | azure | gcp | oci | existing (user-described)
    gpu_model: str
    gpus: int                        # GPUs per node
    gpu_memory_gb: int | None     # per GPU; None = no source gives it
    fabric: str                      # one of FABRICS
    fabric_nics: int | None       # fast fabric NICs (EFA interfaces, IB HCAs, RDMA VFs, GPU VPC NICs)
    bandwidth_gbps: int | None    # aggregate fabric bandwidth per node; None = unconfirmed
    source: str                      # source keys, see SOURCES
    unconfirmed: tuple[str, ...] = ()
    note: str = ""
    # AWS: network cards of the instance type; the launch template puts one EFA interface on each
    # (at most one EFA per card). None = no source confirms the card layout (listed in unconfirmed).
    network_cards: int | None = None
    accelerator: str | None = None  # gcp: the GKE guest accelerator type of the machine's GPUs (G2)
    # azure: the NCCL topology file published for this VM size (source Z4), e.g. "ndv5-topo.xml"; NCCL reads
    # it through NCCL_TOPO_FILE because the VM's PCI topology is virtualized. None = no published file.
    nccl_topology: str | None = None
    # Node resources (cpu, memory, local NVMe) for sizing fabric pods and for the placement check.
    # None = no source gives it yet; a value carries its source key in `source`.
    # Units as the sources print them: vcpus = hardware threads the node exposes; memory_gib = the provider's
    # memory figure (AWS GiB, Azure GiB/GB as printed, GCP binary GB, OCI GB); local_nvme_gb = decimal GB, converted
    # where the source gives GiB/TiB (Azure). These are capacities: the system reserve is the reader's business.
    vcpus: int | None = None
    memory_gib: int | None = None
    local_nvme_gb: int | None = None  # total local NVMe (instance store / local SSD), GB; 0 = none

    @property
    def devices_per_gpu(self) -> Fraction | None:
        """Fabric NICs per GPU (may be fractional: p4d has 4 EFA for 8 GPUs)."""
        if not self.fabric_nics:
            return None
        return Fraction(self.fabric_nics, self.gpus)

    def devices_for(self, gpus: int, per_node: int | None = None) -> int:
        """Fabric devices a container with `gpus` GPUs needs: its share of the node, rounded up."""
        total = per_node if per_node is not None else (self.fabric_nics or 0)
        return device_share(gpus, total, self.gpus)

    @property
    def sources(self) -> list[str]:
        return [SOURCES.get(k.strip(), k.strip()) for k in self.source.split(",")]


def device_share(gpus: int, per_node: int, node_gpus: int) -> int:
    """A container's share of a node's `per_node` fabric devices for `gpus` of `node_gpus` GPUs, rounded up
    (at least 1 when it has GPUs and the node has devices)."""
    if gpus <= 0 or per_node <= 0:
        return 0
    return max(1, -(-gpus * per_node // node_gpus))


_NODE_FIELDS = ("vcpus", "memory_gib", "local_nvme_gb")


# The share of a node's CPUs and memory a GPU container requests, in proportion to its GPUs: 3/4 of the per-GPU
# share (vCPUs / GPUs, memory / GPUs from the catalog), rounded down. Why request it at all: a Burstable pod that
# uses far more than it requested is the kubelet's first eviction candidate under node memory pressure, and an
# NCCL rank dying takes the whole gang with it; a GPU pod loads weights, pins host buffers and runs data loaders,
# so it should be guaranteed most of its share of the host. Why not all of it: the remaining quarter covers the
# kubelet's system/kube reserve and eviction threshold, the node's DaemonSets (device plugins, CNI, monitoring)
# and small non-GPU pods. Requests only, no cpu/memory limits: no CFS throttling of NCCL proxy threads, no OOM
# kill at an arbitrary line. Allocatable itself is computed by the placement check, not here.
NODE_SHARE_REQUESTED = Fraction(3, 4)


def node_share_per_gpu(machine: Machine) -> dict[str, tuple[int, str]]:
    """cpu and memory a container requests per GPU (NODE_SHARE_REQUESTED of the per-GPU share of the node); {}
    when the catalog has no confirmed vCPU / memory figure for the machine (nothing is guessed)."""
    if not machine.vcpus or not machine.memory_gib or machine.gpus <= 0:
        return {}
    cpu = int(Fraction(machine.vcpus, machine.gpus) * NODE_SHARE_REQUESTED)
    mem = int(Fraction(machine.memory_gib, machine.gpus) * NODE_SHARE_REQUESTED)
    return {"cpu": (cpu, ""), "memory": (mem, "Gi")} if cpu > 0 and mem > 0 else {}


def _m(name: str, cloud: str, gpu: str, gpus: int, mem: int | None, fabric: str, nics: int | None,
       gbps: int | None, source: str, unconfirmed: tuple[str, ...] = (), note: str = "",
       cards: int | None = None, accelerator: str | None = None, topology: str | None = None,
       node: tuple[int | None, int | None, int | None] = (None, None, None)) -> Machine:
    """`node` = (vcpus, memory_gib, local_nvme_gb); a None there is listed in `unconfirmed` automatically."""
    missing = tuple(f for f, v in zip(_NODE_FIELDS, node) if v is None and f not in unconfirmed)
    return Machine(name, cloud, gpu, gpus, mem, fabric, nics, gbps, source, tuple(unconfirmed) + missing, note,
                   cards, accelerator, topology, *node)


def _gib_to_gb(gib: float) -> int:
    """GiB (1024^3 bytes) -> decimal GB, rounded down (Azure prints local disks in GiB/TiB)."""
    return int(gib * 1024 ** 3 // 10 ** 9)


_MACHINES: tuple[Machine, ...] = (
    # AWS (EFA). fabric_nics = EFA interfaces a pod requests as vpc.amazonaws.com/efa on a full node.
    # node = (vCPUs, memory GiB, instance store volumes x GB), all from A11.
    _m("p4d.24xlarge", "aws", "A100", 8, 40, EFA, 4, 400, "A1,A10,A11", cards=4, node=(96, 1152, 8 * 1000)),
    _m("p4de.24xlarge", "aws", "A100", 8, 80, EFA, 4, 400, "A1,A10,A11", cards=4, node=(96, 1152, 8 * 1000)),
    _m("p5.48xlarge", "aws", "H100", 8, 80, EFA, 32, 3200, "A1,A2,A4,A10,A11", cards=32,
       node=(192, 2048, 8 * 3800)),
    _m("p5e.48xlarge", "aws", "H200", 8, 141, EFA, 32, 3200, "A1,A2,A9,A10,A11", cards=32,
       node=(192, 2048, 8 * 3800)),
    _m("p5en.48xlarge", "aws", "H200", 8, 141, EFA, 16, 3200, "A1,A9,A10,A11", note="Nitro v5", cards=16,
       node=(192, 2048, 8 * 3800)),
    _m("p6-b200.48xlarge", "aws", "B200", 8, 179, EFA, 8, 3200, "A1,A2,A10,A11", cards=8,
       node=(192, 2048, 8 * 3800)),
    _m("p6e-gb200.36xlarge", "aws", "GB200", 4, 185, EFA, 4, None, "A1,A2,A4,A11",
       unconfirmed=("bandwidth_gbps", "network_cards"),
       note="17 network card interfaces / 8 NICs; sources give 1600-3200 Gbps; the anchor pod requests efa: 4; "
            "Grace CPU: 144 vCPUs at 1 thread per core (arm64)", node=(144, 960, 3 * 7500)),
    _m("p6-b300.48xlarge", "aws", "B300", 8, 268, EFA, 16, 6400, "A1,A2,A11", unconfirmed=("network_cards",),
       note="16 EFA-capable interfaces; which network cards carry them is unconfirmed (A11 lists 17 network "
            "cards)", node=(192, 4096, 8 * 3800)),
    _m("g6e.48xlarge", "aws", "L40S", 8, 44, EFA, 4, 400, "A1,A10,A11", cards=4, node=(192, 1536, 4 * 1900)),
    _m("g5.48xlarge", "aws", "A10G", 8, 22, EFA, 1, 100, "A1,A10,A11", cards=1, node=(192, 768, 2 * 3800)),
    # Azure (InfiniBand). fabric_nics = IB HCAs (one per GPU). topology = NCCL topology file (Z4).
    # node from Z5: vCPUs, memory as the page prints it, local disk converted to GB. A100 v4: the page lists one
    # local temp disk (6,000 / 6,400 GiB) without saying NVMe; v5: 8 NVMe disks, 28 TiB (the 1,024 GiB temp disk
    # is left out); GB200 v6: 4 temp disks, 16 TB as printed.
    _m("Standard_ND96asr_v4", "azure", "A100", 8, 40, INFINIBAND, 8, 1600, "Z1,Z2,Z4,Z5", note="HDR InfiniBand",
       topology="ndv4-topo.xml", node=(96, 900, _gib_to_gb(6000))),
    _m("Standard_ND96amsr_A100_v4", "azure", "A100", 8, 80, INFINIBAND, 8, 1600, "Z1,Z2,Z4,Z5", note="HDR InfiniBand",
       topology="ndv4-topo.xml", node=(96, 1900, _gib_to_gb(6400))),
    _m("Standard_ND96isr_H100_v5", "azure", "H100", 8, 80, INFINIBAND, 8, 3200, "Z1,Z4,Z5", note="NDR InfiniBand",
       topology="ndv5-topo.xml", node=(96, 1900, _gib_to_gb(28 * 1024))),
    _m("Standard_ND96isr_H200_v5", "azure", "H200", 8, 141, INFINIBAND, 8, 3200, "Z1,Z4,Z5", note="NDR InfiniBand",
       topology="ndv5-topo.xml", node=(96, 1850, _gib_to_gb(28 * 1024))),
    _m("Standard_ND128isr_NDR_GB200_v6", "azure", "GB200", 4, 192, INFINIBAND, 4, 1600, "Z1,Z5",
       note="NDR InfiniBand", node=(128, 900, 16000)),
    # GCP. fabric_nics = GPU NICs beside the primary gVNIC (one extra VPC each for TCPX/TCPXO).
    # node: only A3 High is confirmed (G4); the other machine types' vCPUs, memory and bundled Local SSD are not
    # confirmed by a source read here and stay None (listed in unconfirmed).
    _m("a2-highgpu-8g", "gcp", "A100", 8, 40, NONE, None, 100, "G1,G2", accelerator="nvidia-tesla-a100"),
    _m("a2-ultragpu-8g", "gcp", "A100", 8, 80, NONE, None, 100, "G1,G2", accelerator="nvidia-a100-80gb"),
    _m("a3-highgpu-8g", "gcp", "H100", 8, 80, TCPX, 4, 1000, "G1,G2,G3,G4", note="4 extra VPCs",
       accelerator="nvidia-h100-80gb", node=(208, 1872, None)),
    _m("a3-megagpu-8g", "gcp", "H100 Mega", 8, 80, TCPXO, 8, 1600, "G1,G2,G3",
       unconfirmed=("bandwidth_gbps",),
       note="8 extra VPCs at MTU 8244; Google's page gives 1,800 Gbps in one copy and 1,600 in another: "
            "the lower is kept", accelerator="nvidia-h100-mega-80gb"),
    _m("a3-ultragpu-8g", "gcp", "H200", 8, 141, GCP_RDMA, 8, 3600, "G1,G2",
       note="8 ConnectX-7 on the RDMA VPC + 2 gVNIC", accelerator="nvidia-h200-141gb"),
    _m("a4-highgpu-8g", "gcp", "B200", 8, 180, GCP_RDMA, 8, 3600, "G1,G2",
       unconfirmed=("gpu_memory_gb",), note="8 ConnectX-7 on the RDMA VPC + 2 gVNIC; GPU memory marked '?'",
       accelerator="nvidia-b200"),
    # OCI (RoCE over SR-IOV). fabric_nics = RDMA VFs a pod requests as nvidia.com/rdma-vf on a full node.
    # node from O3: vCPUs = 2 x OCPUs (x86), CPU memory GB, local NVMe (27.2 TB; 16 or 8 x 3.84 TB). The crawled
    # page predates BM.GPU.B200.8: its node resources stay None (unconfirmed).
    _m("BM.GPU4.8", "oci", "A100", 8, 40, ROCE, 16, None, "O1,O2,O3", unconfirmed=("bandwidth_gbps",),
       note="ConnectX-5", node=(2 * 64, 2048, 27200)),
    _m("BM.GPU.A100-v2.8", "oci", "A100", 8, 80, ROCE, 16, None, "O1,O2,O3", unconfirmed=("bandwidth_gbps",),
       note="ConnectX-5", node=(2 * 128, 2048, 27200)),
    _m("BM.GPU.H100.8", "oci", "H100", 8, 80, ROCE, 16, None, "O1,O2,O3", unconfirmed=("bandwidth_gbps",),
       note="ConnectX-7", node=(2 * 112, 2048, 16 * 3840)),
    _m("BM.GPU.H200.8", "oci", "H200", 8, 141, ROCE, 8, None, "O1,O2,O3", unconfirmed=("bandwidth_gbps",),
       note="ConnectX-7", node=(2 * 112, 3072, 8 * 3840)),
    _m("BM.GPU.B200.8", "oci", "B200", 8, None, ROCE, 8, None, "O1,O2",
       unconfirmed=("gpu_memory_gb", "bandwidth_gbps"), note="ConnectX-7"),
)

MACHINES: dict[str, Machine] = {m.name: m for m in _MACHINES}


class UnknownMachine(KeyError):
    def __init__(self, name: str, suggestions: list[str]):
        self.name = name
        self.suggestions = suggestions
        super().__init__(name)

    def __str__(self) -> str:
        hint = f"did you mean {', '.join(self.suggestions)}?" if self.suggestions else \
            "see the machine catalog in the README"
        return f"unknown machine {self.name!r}: {hint} (or describe it with machineSpec)"


def suggest(name: str, cloud: str | None = None, n: int = 3) -> list[str]:
    """Closest known machine names, preferring the given cloud."""
    pool: Iterable[str] = [m.name for m in _MACHINES if cloud in (None, "existing", m.cloud)]
    lowered = {p.lower(): p for p in pool}
    hits = difflib.get_close_matches(name.lower(), list(lowered), n=n, cutoff=0.5)
    if not hits:  # substring fallback: "h100" -> every H100 machine of that cloud
        hits = [k for k in lowered if name.lower() in k][:n]
    return [lowered[h] for h in hits]


def lookup(name: str, cloud: str | None = None) -> Machine:
    """The catalog entry for `name`; UnknownMachine (with suggestions) otherwise."""
    m = MACHINES.get(name)
    if m is None:
        raise UnknownMachine(name, suggest(name, cloud))
    return m


def machines_for(cloud: str) -> list[Machine]:
    return [m for m in _MACHINES if m.cloud == cloud]
