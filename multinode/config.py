"""Typed stack configuration (pydantic v2) for the `multinode` config namespace.

Keys are camelCase, as Pulumi users write them in `stacks/Pulumi.<stack>.yaml`:

    config:
      multinode:cloud: aws
      multinode:nodePools: [...]

`load(raw)` turns the mapping of keys (without the `multinode:` prefix) into a `StackConfig`, or
raises one `ConfigError` listing every problem with its key path, the bad value and the fix.
Unknown keys are errors. Nothing here imports Pulumi or registers a resource.

Config knows no cloud's rules: it checks the shape and the cloud-independent contract. What a cloud
refuses (its cluster keys, storage kinds and limits, fabric networks) is asked of the stack's cloud
module by multinode/checks.py, whose `checks.load(raw)` is what the program and `plan` call: it runs
this load with the cloud checks added, so a stack still gets one error listing every problem.
"""
from __future__ import annotations

import difflib
import json
import re
from collections.abc import Callable, Iterable, Mapping
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError
from pydantic.alias_generators import to_camel
from pydantic_core import ErrorDetails

from . import catalog, credentials, limits, models, topology
from .errors import ConfigError, Problem
from .manifests import CORE_API_GROUPS
from .resolved import ResolvedWorkload, nccl_test_nodes, resolve_workload

NAMESPACE = "multinode"
SECRET_PLACEHOLDER = "[secret]"

# Provider namespaces a stack file may also carry (read by the provider SDKs, not by us).
PROVIDER_NAMESPACES = {"aws", "azure-native", "gcp", "oci", "kubernetes", "pulumi"}

# Upstream releases the add-ons are pinned to; a stack may override (addons.<name>.version). Each pin
# names its release and date; the schemas/ files we validate against are listed in schemas/PROVENANCE.md
# and the evidence in docs/addons-fabric.md ("Versions"). Rule: the newest release whose chart values
# (and, for add-ons whose CRDs we apply, CRD files: manifests/crds.py) are stored in schemas/, except
# where a security fix wins (Volcano) or no values file exists at all (the NVIDIA device plugin).
ADDON_VERSIONS = {
    # v1.15.2 (GitHub release 2026-08-29): fixes GHSA-j38h-7pfq-cxmw, a scheduler denial of service
    # (DRA capacity accounting, CVSS 6.5) in v1.15.0-v1.15.1. No v1.15.2 files are stored: values and
    # CRDs are validated against v1.15.1 (schemas/volcano/). The chart renders its CRDs as templates,
    # so Helm upgrades them with the release (manifests/crds.py).
    "volcano": "1.15.2",
    # v0.10.0 (2026-08-11). v0.11.0 (2026-09-23: groupIdentity, scheduling) is released but no v0.11
    # CRD/values is stored, and we apply LWS's CRD from the stored file, so the pin stays at v0.10.0.
    "lws": "0.10.0",
    # v0.1.0-alpha.13, the floor Dynamo 1.5 documents (ai-dynamo/dynamo PR #14553 "bump dependency to
    # v0.1.0-alpha.13": "document the Dynamo 1.5 compatibility floor as KAI Scheduler v0.17.0 and Grove
    # v0.1.0-alpha.13"; docs/kubernetes/installation-guide.md compatibility matrix: dynamo-platform 1.5.x, kai-scheduler
    # >= v0.17.0, Grove >= v0.1.0-alpha.13). NOT what our checks read: the Grove CRDs and values.yaml stored in
    # schemas/grove/ are alpha.11's (tag 2026-07-03; alpha.12/alpha.13 are not in ../shared/schemas), so the CRD set
    # applied and validated against records `read_at` alpha.11 and Grove's own CRD installer brings alpha.13's
    # (manifests/crds.py); the plan says so on every Grove stack. Upgrading from alpha.11: docs/dynamo.md.
    "grove": "0.1.0-alpha.13",
    # v0.17.0 (tag 2026-08-03), chart now at oci://ghcr.io/kai-scheduler/kai-scheduler/kai-scheduler;
    # Grove needs >= 0.15.2 for topology-aware scheduling (its README "Supported Schedulers").
    "kai": "0.17.0",
    # chart 3.9.1 = Kyverno v1.19.1 (security fixes over v1.19.0): kyverno/kyverno@v1.19.1 charts/kyverno/Chart.yaml
    # `version: 3.9.1`, `appVersion: v1.19.1` (read from the module zip the Go proxy serves). Values are checked against
    # 3.9.0's values.yaml (schemas/kyverno, = the stored chart ../shared/charts/kyverno-3.9.0): 3.9.1's differs from
    # it in comment lines only (diff of the two files, non-comment lines: none). The MutatingPolicy and
    # ValidatingPolicy CRDs we validate against (schemas/kyverno, v1.19.0) are byte-identical to v1.19.1's
    # config/crds/policies.kyverno.io files; v1.19.1's ClusterPolicy CRD differs (it marks kyverno.io/v1 deprecated).
    "kyverno": "3.9.1",
    "networkOperator": "26.4.1",   # v26.4.1 (tag 2026-07-24); v26.7.0 is only at rc in the stored snapshot
    "gpuOperator": "v26.7.0",      # v26.7.0 (tag 2026-08-20)
    "efaDevicePlugin": "v0.5.30",  # chart version in aws/eks-charts v0.0.242 (2026-08-03; appVersion v0.5.20)
    # v1.5.0 (GitHub release 2026-09-21). Chart values validated against ai-dynamo/dynamo main at
    # 2a6da14 (2026-08-21, Chart.yaml version 1.5.0 before the tag), not the v1.5.0 tag itself.
    "dynamo": "1.5.0",
    # Kubeflow Trainer v2.3.0 (tag 2026-08-06): chart oci://ghcr.io/kubeflow/charts/kubeflow-trainer (chart
    # versions carry no "v"; its install docs: `--version ${VERSION#v}`); CRDs in schemas/training-operator/v2.3.0/.
    "trainer": "2.3.0",
    # NVIDIA/k8s-device-plugin chart nvidia-device-plugin (repo https://nvidia.github.io/k8s-device-plugin);
    # release v0.19.3 (2026-06-22) reverts the default enablement of gds, gdrcopy and mofed that v0.19.0
    # turned on (#1837). Chart versions carry no "v". No values.yaml of it is stored (not checked here).
    "nvidiaDevicePlugin": "0.19.3",
    # NVIDIA/NVSentinel v1.19.0 (registered in its docs 2026-08-17, commit e002c5dc), chart
    # oci://ghcr.io/nvidia/nvsentinel (tags carry a leading "v"). Values checked against schemas/nvsentinel/
    # (main at that commit; see schemas/PROVENANCE.md). v1.20+ are released but not stored.
    "nvsentinel": "1.19.0",
}

# Keys whose values are credentials: they must be Pulumi secrets and never appear in output.
SECRET_KEYS = ("kubeconfig", "hfToken", "ngcApiKey", "imagePullSecret")

_DNS_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?\Z")


def _is_dns_label(name: str) -> bool:
    """RFC 1123 label as the API server checks it (k8s.io/apimachinery pkg/util/validation IsDNS1123Label): at most
    63 characters, whole text (\\Z: a trailing newline is not allowed, as `$` would let it pass)."""
    return len(name) <= limits.DNS_LABEL_CHARS and bool(_DNS_LABEL.match(name))

CloudName = Literal["aws", "azure", "gcp", "oci", "existing"]
WorkloadKind = Literal["lws-inference", "grove-inference", "volcano-training", "indexed-job", "mpijob",
                       "trainjob", "dynamo", "nccl-test"]
Engine = Literal["vllm", "sglang", "nim", "trtllm", "torchrun", "deepspeed", "mpirun"]
Precision = Literal["fp32", "bf16", "fp16", "fp8", "int8", "fp4", "int4"]
StorageKind = Literal["fsx-lustre", "efs", "azure-files", "azure-lustre", "filestore", "gcp-lustre",
                      "oci-fss", "existing"]

INFERENCE_KINDS = ("lws-inference", "grove-inference", "dynamo")
TRAINING_KINDS = ("volcano-training", "indexed-job", "mpijob", "trainjob")

ENGINES_BY_KIND = {
    "lws-inference": ("vllm", "sglang", "nim"),
    "grove-inference": ("vllm", "sglang", "trtllm"),
    "dynamo": ("vllm", "sglang", "trtllm"),
    "volcano-training": ("torchrun", "deepspeed"),
    "indexed-job": ("torchrun", "deepspeed"),
    "trainjob": ("torchrun", "deepspeed"),
    "mpijob": ("mpirun", "nim"),    # nim: the NIM guide's MPIJob fallback (manifests/workloads/mpijob.py)
    "nccl-test": ("mpirun",),
}

# Issue 32: every count and amount has an upper bound (hostile input: `gpus: 9223372036854775808`), far above
# any real value: a bound below what the engines take (Volcano's int32 priority, Kubernetes' 2^63-1 quantities).
INT32_MAX = 2 ** 31 - 1
MAX_NODES = 512                        # = nodeCount's and nodes' bound
MAX_GPUS_PER_GANG = MAX_NODES * 64     # nodes x GPUs per node
MAX_QUEUE_GPUS = 10 ** 6
MAX_GPU_MEMORY_GB = 10 ** 5
MAX_NICS = 1024
MAX_GBPS = 10 ** 6
MAX_VCPUS = 10 ** 5
MAX_MEMORY_GIB = 10 ** 7
MAX_STORAGE_GIB = 10 ** 8              # 100 PiB
MAX_THROUGHPUT = 10 ** 6
MAX_PARAMS_B = 10 ** 6                 # a million billion parameters


class _Model(BaseModel):
    # issue 48: every text value is bounded (limits.TEXT_CHARS: Linux's MAX_ARG_STRLEN, the longest legitimate
    # text being an env value or an argument); lists and maps carry their own bound below (limits.py: the sources)
    model_config = ConfigDict(extra="forbid", alias_generator=to_camel, populate_by_name=True, allow_inf_nan=False,
                              validate_default=True, str_max_length=limits.TEXT_CHARS)


class ClusterRef(_Model):
    """The existing cluster to attach to (creating clusters is out of scope)."""
    name: str | None = None              # EKS / AKS / GKE / OKE cluster name
    region: str | None = None            # aws, oci
    location: str | None = None          # azure (region), gcp (region or zone)
    resource_group: str | None = None    # azure
    project: str | None = None           # gcp
    compartment_id: str | None = None    # oci
    cluster_id: str | None = None        # oci: the OKE cluster OCID
    vpc_id: str | None = None            # aws: defaults to the cluster's VPC
    network: str | None = None           # gcp: primary VPC name
    gke_version: str | None = None       # gcp: the cluster's GKE version (1.X.Y-gke.Z), gated for GPUDirect
    # issue 34: the cloud's own node repair on the pools we create (aws: managed node group nodeRepairConfig +
    # the eks-node-monitoring-agent add-on; gcp: node pool auto_repair). AKS repairs always; OKE has no automatic
    # repair (docs/node-health.md).
    node_repair: bool = True


class MachineSpec(_Model):
    """A machine described explicitly instead of by catalog name."""
    name: str
    gpus: int = Field(ge=1, le=64)
    gpu_model: str = "unknown"
    gpu_memory_gb: int | None = Field(default=None, ge=1, le=MAX_GPU_MEMORY_GB)
    fabric: Literal["efa", "infiniband", "tcpx", "tcpxo", "gcp-rdma", "roce", "none"] = "none"
    fabric_nics: int | None = Field(default=None, ge=0, le=MAX_NICS)
    bandwidth_gbps: int | None = Field(default=None, ge=0, le=MAX_GBPS)
    vcpus: int | None = Field(default=None, ge=1, le=MAX_VCPUS)   # node resources for the placement check
    memory_gib: int | None = Field(default=None, ge=1, le=MAX_MEMORY_GIB)


class CapacityReservation(_Model):
    id: str
    type: Literal["reservation", "capacityBlock"] = "reservation"
    nodes: int | None = Field(default=None, ge=1, le=100000)   # how many nodes it holds, when known
    zone: str | None = None     # where it holds them (AWS AZ, GCP zone, OCI AD), checked against the pool's


class PoolUpgrade(_Model):
    """How the cloud replaces this pool's nodes on a node-image / Kubernetes upgrade (multinode/upgrades.py)."""
    # surge: the cloud's rolling upgrade, surge sized to the largest gang, maxUnavailable 0 where allowed.
    # blueGreen (aws, azure): the pool's cloud name carries a digest of its machine, so a machine change creates the
    # new pool before the old one is deleted (docs/day-two.md). Refused where nothing renders it or the cloud
    # refuses it (gcp: COMPACT placement; oci; existing; an AWS capacity block): upgrades.config_problems.
    strategy: Literal["surge", "blueGreen"] = "surge"
    drain_timeout_minutes: int = Field(default=60, ge=1, le=1440)   # AKS: 1-1440 (AgentPoolUpgradeSettings)
    soak_minutes: int = Field(default=0, ge=0, le=30)               # AKS nodeSoakDurationInMinutes: 0-30
    surge: int | None = Field(default=None, ge=1, le=100)           # default: the largest gang on the pool


class NodePool(_Model):
    name: str
    machine: str | None = None
    machine_spec: MachineSpec | None = None
    node_count: int = Field(ge=1, le=512)
    zone: str | None = None
    subnet_id: str | None = None                   # aws: the one subnet (AZ) of the pool
    capacity_reservation: CapacityReservation | None = None
    disk_size_gb: int = Field(default=500, ge=100, le=16384)
    labels: dict[str, str] = Field(default={}, max_length=limits.LABELS)
    node_selector: dict[str, str] = Field(default={}, max_length=limits.LABELS)   # existing: labels selecting the nodes
    image_id: str | None = None                    # oci: the GPU image OCID
    bootstrap: Literal["oke-package", "oke-install"] | None = None  # oci: how a node joins (clouds/oci.py)
    gpu_network_cidr: str | None = None            # gcp: IPv4 range (/20 or larger) the GPU subnets are cut from
    local_nvme: Literal["raid0"] | None = None     # aws: RAID0 the instance store at boot (multinode/local_nvme.py)
    upgrade: PoolUpgrade = PoolUpgrade()           # issue 36: gang-aware node upgrades (multinode/upgrades.py)


class FabricConfig(_Model):
    """Overrides; every default comes from the catalog entry of the pool's machine."""
    enabled: bool = True
    kind: Literal["efa", "infiniband", "tcpx", "tcpxo", "gcp-rdma", "roce", "none"] | None = None  # existing
    devices_per_gpu: float | None = Field(default=None, gt=0, le=8)
    rdma_mode: Literal["shared", "sriov"] = "shared"   # azure InfiniBand device plugin mode
    pin_transport: bool = True                         # pin NCCL to the fabric (fail closed)
    webhook_timeout_seconds: int = Field(default=15, ge=1, le=30)
    # azure/oci: DOCA-OFED driver container version for the NicClusterPolicy (ofedDriver). Unset: azure
    # installs the pinned default (GPUDirect RDMA needs it, multinode/clouds/azure.py), oci none (its GPU
    # images bring DOCA-OFED). "host": the node image provides MLNX_OFED/DOCA, install none.
    doca_driver_version: str | None = None
    # --- issue 18b: the InfiniBand device resource, as the Network Operator / NeMo name it ([prefix/]name, prefix
    # rdma by default; e.g. hca_shared_devices_a -> rdma/hca_shared_devices_a). Unset: rdma/shared_ib (shared) or
    # rdma/ib (sriov). Read only through multinode/clouds/azure.rdma_resource.
    rdma_resource_name: str | None = None
    # --- issue 31: the bootstrap (socket) interface NCCL and GLOO use, exact Linux interface names, comma-separated
    # (e.g. "eth0"). Sets NCCL_SOCKET_IFNAME (as "=eth0", NCCL's exact match) and GLOO_SOCKET_IFNAME ("eth0") in the
    # fabric policy, so both use the same interface (multinode/fabric.py bootstrap_env).
    socket_interface: str | None = None


class Addon(_Model):
    enabled: bool = True
    # issue 29: the cluster already runs this add-on (installed by someone else): the checks treat it as
    # present (workloads, policies, queues are rendered as with `enabled`), but this stack installs nothing of
    # it: no Helm release, no CRDs (they must already be on the cluster). Only with `enabled` (the default).
    provided: bool = False
    version: str | None = None
    namespace: str | None = None
    values: dict[str, Any] = {}     # escape hatch: merged over our Helm values


# --- issue 18: Volcano's scheduler options the guides use -----------------------------------------------
class VolcanoAddon(Addon):
    """addons.volcano, plus `preemption`: add Volcano's `preempt` action to the scheduler's actions, so a
    job of a higher PriorityClass evicts lower ones in the same queue (Volcano docs: actions, preempt;
    docs/user-guide/how_to_configure_priorityclass_for_job.md)."""
    preemption: bool = False


class PriorityClassSpec(_Model):
    """A scheduling.k8s.io/v1 PriorityClass the stack creates; workloads name it in priorityClassName."""
    name: str
    value: int = Field(ge=-2147483648, le=1000000000)     # above 1e9 is reserved for system classes
    preemption_policy: Literal["PreemptLowerPriority", "Never"] = "PreemptLowerPriority"
    description: str = ""


class Addons(_Model):
    volcano: VolcanoAddon = VolcanoAddon()
    lws: Addon = Addon()
    grove: Addon = Addon(enabled=False)
    kai: Addon = Addon(enabled=False)
    kyverno: Addon = Addon()
    network_operator: Addon = Addon()      # azure, oci
    gpu_operator: Addon = Addon(enabled=False)
    efa_device_plugin: Addon = Addon()     # aws
    nvidia_device_plugin: Addon = Addon()  # aws, azure: advertises nvidia.com/gpu (skipped with gpuOperator)
    dynamo: Addon = Addon(enabled=False)
    trainer: Addon = Addon(enabled=False)  # Kubeflow Trainer v2 (TrainJob): controller + JobSet
    nvsentinel: Addon = Addon()            # issue 34: GPU/NIC health monitors on the GPU pools (docs/node-health.md)


class Storage(_Model):
    kind: StorageKind
    name: str = "checkpoints"
    # issue 32: the name every storage resource is created under (Pulumi names, the cloud's own names, the PV and
    # the claim); `name` alone changes only what is displayed (tags) once this is set. Default: `name`.
    resource_name: str | None = None
    size_gib: int | None = Field(default=None, ge=1, le=MAX_STORAGE_GIB)
    throughput: int | None = Field(default=None, ge=1, le=MAX_THROUGHPUT)   # fsx, azure-lustre: MB/s/TiB
    tier: str | None = None                              # filestore tier, azure files sku...
    allow_delete: bool = False                              # only then may destroy remove the data
    existing_claim: str | None = None
    existing_storage_class: str | None = None
    # aws: subnet of the file system / mount target (default: the first node pool's subnetId);
    # azure-lustre: the dedicated AMLFS subnet (required); azure-files: the subnet allowed to reach
    # the NFS share (default: the cluster's node subnet)
    subnet_id: str | None = None
    namespace: str = "multinode"
    mount_path: str = "/checkpoints"

    @property
    def stable_name(self) -> str:
        """What the storage's resources are named after: resourceName, else name (a rename of `name` with
        resourceName set to the old name keeps every resource and its data)."""
        return self.resource_name or self.name


class Queue(_Model):
    name: str
    weight: int = Field(default=1, ge=1, le=65535)
    gpus: int | None = Field(default=None, ge=0, le=MAX_QUEUE_GPUS)    # capability: nvidia.com/gpu
    # issue 18: Volcano Queue spec.priority ("higher values are prioritized for scheduling and considered
    # later during reclamation", scheduling.volcano.sh_queues CRD v1.15.1)
    priority: int | None = Field(default=None, ge=0, le=INT32_MAX)


class NetworkTopology(_Model):
    mode: Literal["hard", "soft"] = "hard"
    highest_tier_allowed: int = Field(default=1, ge=1, le=10)


class Role(_Model):
    """A prefill or decode role of a disaggregated Grove / Dynamo deployment."""
    nodes: int = Field(default=1, ge=1, le=64)
    gpus_per_node: int | None = Field(default=None, ge=1, le=64)
    tensor_parallel: int | None = Field(default=None, ge=1, le=MAX_GPUS_PER_GANG)
    pipeline_parallel: int = Field(default=1, ge=1, le=MAX_NODES)
    replicas: int = Field(default=1, ge=1, le=64)


class GroupPlacement(_Model):
    """issue 18, lws-inference: keep each LWS group inside one topology domain (LWS exclusive placement)."""
    topology_key: str                              # the node label naming the domain, e.g. a rack / block label
    # per subgroup of this many pods instead
    sub_group_size: int | None = Field(default=None, ge=1, le=MAX_GPUS_PER_GANG)


# --- issue 18b: options of the NVIDIA NIM Helm chart (NVIDIA/nim-deploy helm/nim-llm, commit bb84c40, values.yaml) --
class NimProbes(_Model):
    """workloads[].probes (lws-inference, engine nim): which of the chart's probes the leader gets (values.yaml
    startupProbe / readinessProbe / livenessProbe `.enabled`). Liveness is off unless asked for, as before."""
    startup: bool = True
    readiness: bool = True
    liveness: bool = False


# --- issue 31: the NIM chart's autoscaling (NVIDIA/nim-deploy helm/nim-llm values.yaml `autoscaling`,
# templates/hpa.yaml, commit bb84c40: an autoscaling/v2 HorizontalPodAutoscaler whose target is the LeaderWorkerSet)
class Autoscaling(_Model):
    """workloads[].autoscaling (lws-inference): an HPA scaling the LeaderWorkerSet's groups between minReplicas and
    maxReplicas on `metrics` (autoscaling/v2 MetricSpec objects, as the chart passes them through)."""
    min_replicas: int = Field(default=1, ge=1, le=64)
    max_replicas: int = Field(ge=1, le=64)
    metrics: list[dict[str, Any]] = Field(default=[], max_length=limits.LIST_ITEMS)
    scale_down_stabilization_secs: int | None = Field(default=None, ge=0, le=3600)


# --- issue 31: what the torchrun recipe's users look for: a dataset volume beside the checkpoint volume
class Dataset(_Model):
    """workloads[].dataset (training kinds): an existing PersistentVolumeClaim holding the training data, mounted in
    every rank beside the checkpoint volume (read-only unless readOnly false). Not created, never deleted."""
    claim: str
    mount_path: str = "/data"
    read_only: bool = True


class Disaggregated(_Model):
    prefill: Role
    decode: Role


class Preflight(_Model):
    """workloads[].preflight (issue 34): checks every pod of a multi-node gang runs before the workload starts, in
    init containers: DCGM diagnostics (dcgmi diag -r <level>) and, where the gang's rendezvous host is known to init
    containers, an NCCL all-reduce among the gang's own pods, failing below a bandwidth floor from the catalog."""
    enabled: bool = True
    # issue 40: where `dcgmi diag` runs (docs/preflight.md). auto: against the node's own privileged host engine
    # where this stack runs one (the GPU Operator's standalone DCGM Service), else no DCGM part; hostEngine: against
    # dcgmHostEngine (default the GPU Operator's Service); embedded: an unprivileged `nv-hostengine -n` started in the
    # init container (no upstream runs DCGM this way: opt-in only); off: no DCGM part.
    dcgm: Literal["auto", "hostEngine", "embedded", "off"] = "auto"
    # "<host>:<port>" of the node-local DCGM host engine; default nvidia-dcgm.<addons.gpuOperator namespace>.svc:5555
    dcgm_host_engine: str | None = Field(default=None, min_length=1, max_length=253,
                                         pattern=r"^[A-Za-z0-9.-]+(:[0-9]{1,5})?$")
    dcgm_diag_level: int = Field(default=1, ge=1, le=2)      # dcgmi diag -r 1 (quick) or 2 (medium)
    # the NCCL floor in Gbit/s (like nccl-test's minBusBandwidthGbps); default: catalog x busBandwidthEfficiency
    min_bus_bandwidth_gbps: float | None = Field(default=None, gt=0, le=MAX_GBPS)


class KeyRef(_Model):
    """One key of an existing Secret or ConfigMap (core/v1 SecretKeySelector / ConfigMapKeySelector)."""
    name: str
    key: str
    optional: bool | None = None


class FieldRef(_Model):
    """A field of the pod itself through the downward API (core/v1 ObjectFieldSelector)."""
    field_path: str
    api_version: str | None = None


class ValueFrom(_Model):
    """Where an env value comes from instead of a literal: exactly one of the three (core/v1 EnvVarSource; the
    API server refuses none or more than one: k8s.io/kubernetes pkg/apis/core/validation validateEnvVarValueFrom)."""
    secret_key_ref: KeyRef | None = None
    config_map_key_ref: KeyRef | None = None
    field_ref: FieldRef | None = None


class EnvValue(_Model):
    """`env: {NAME: {valueFrom: {...}}}`: a value read at pod start, so no credential is written in the stack."""
    value_from: ValueFrom


class NameRef(_Model):
    name: str
    optional: bool | None = None


class EnvFromSource(_Model):
    """Every key of an existing Secret or ConfigMap as env (core/v1 EnvFromSource): exactly one of the two."""
    secret_ref: NameRef | None = None
    config_map_ref: NameRef | None = None
    prefix: str | None = None


class Workload(_Model):
    name: str
    kind: WorkloadKind
    node_pool: str
    engine: Engine | None = None
    model: str | None = None
    model_params_b: float | None = Field(default=None, gt=0, le=MAX_PARAMS_B)
    precision: Precision = "bf16"
    image: str | None = None
    namespace: str = "multinode"
    nodes: int = Field(default=1, ge=1, le=512)
    gpus_per_node: int | None = Field(default=None, ge=1, le=64)
    tensor_parallel: int | None = Field(default=None, ge=1, le=MAX_GPUS_PER_GANG)
    pipeline_parallel: int = Field(default=1, ge=1, le=MAX_NODES)
    replicas: int = Field(default=1, ge=1, le=64)
    port: int = Field(default=8000, ge=1, le=65535)
    startup_timeout_minutes: int = Field(default=60, ge=1, le=1440)
    shm_size_gi: int = Field(default=64, ge=1, le=1024)
    queue: str | None = None
    # a literal (never a credential: credentials.literal_findings) or {valueFrom: {secretKeyRef | configMapKeyRef |
    # fieldRef}}; envFrom: whole Secrets / ConfigMaps as env. Rendered into every pod template of the workload.
    env: dict[str, str | EnvValue] = Field(default={}, max_length=limits.ENV_ENTRIES)
    env_from: list[EnvFromSource] = Field(default=[], max_length=limits.LIST_ITEMS)
    extra_args: list[str] = Field(default=[], max_length=limits.ARGS)
    disaggregated: Disaggregated | None = None           # grove-inference, dynamo
    # training
    script: str | None = None
    script_args: list[str] = Field(default=[], max_length=limits.ARGS)
    max_retry: int = Field(default=3, ge=0, le=100)
    network_topology: NetworkTopology | None = None
    deepspeed_config: dict[str, Any] | None = None
    checkpoint_dir: str | None = None
    # --- issue 31 (training kinds): the recipe's container requests and a dataset volume
    cpu: float | None = Field(default=None, gt=0, le=1024)          # cores requested per rank pod
    memory_gi: int | None = Field(default=None, ge=1, le=65536)     # memory requested per rank pod, GiB
    dataset: Dataset | None = None
    # --- issue 18 (volcano-training): Volcano Job options from Volcano's LLM training features
    recovery_timeout: str | None = None        # Go duration, e.g. "10m": the grace period of the restart policies
    priority_class_name: str | None = None     # job priority: one of the stack's priorityClasses
    # --- issue 18 (lws-inference): each group (or subgroup) inside one topology domain
    group_placement: GroupPlacement | None = None
    # --- issue 18b: the NIM chart's options (NVIDIA/nim-deploy helm/nim-llm values.yaml, commit bb84c40)
    probes: NimProbes | None = None             # lws-inference nim: the leader's probes, each may be turned off
    ngc_api_secret: str | None = None           # engine nim: existing Secret, key NGC_API_KEY (model.ngcAPISecret)
    # existing pull Secrets by name (imagePullSecrets), none created
    image_pull_secrets: list[str] = Field(default=[], max_length=limits.LIST_ITEMS)
    # lws-inference nim: the worker pods' command (leader unchanged)
    worker_command: list[str] | None = Field(default=None, max_length=limits.ARGS)
    autoscaling: Autoscaling | None = None      # issue 31, lws-inference: the chart's HPA on the LeaderWorkerSet
    # nccl-test: threshold = minBusBandwidthGbps / 8 GB/s, else catalog Gbit/s / 8 x busBandwidthEfficiency
    min_bus_bandwidth_gbps: float | None = Field(default=None, gt=0, le=MAX_GBPS)
    bus_bandwidth_efficiency: float = Field(default=0.6, gt=0, le=1)
    # issue 34: preflight checks in every pod of a multi-node gang (multinode/manifests/workloads/preflight.py)
    preflight: Preflight = Preflight()


class StackConfig(_Model):
    cloud: CloudName
    cluster: ClusterRef = ClusterRef()
    kubeconfig: str | None = None           # secret; required for `existing`
    hf_token: str | None = None             # secret: Hugging Face token for model downloads
    ngc_api_key: str | None = None          # secret: NGC key for NIM images and models
    image_pull_secret: str | None = None    # secret: a .dockerconfigjson document
    node_pools: list[NodePool] = Field(min_length=1, max_length=limits.NODE_POOLS)
    fabric: FabricConfig = FabricConfig()
    addons: Addons = Addons()
    storage: Storage | None = None
    queues: list[Queue] = Field(default=[], max_length=limits.QUEUES)
    # issue 18: rendered as PriorityClass objects
    priority_classes: list[PriorityClassSpec] = Field(default=[], max_length=limits.PRIORITY_CLASSES)
    workloads: list[Workload] = Field(default=[], max_length=limits.WORKLOADS)
    # Bring your own objects: raw Kubernetes objects applied as-is under the cluster provider (the policy
    # pack checks them like ours).
    manifests: list[dict[str, Any]] = Field(default=[], max_length=limits.MANIFESTS)

    # --- resolved facts, filled by load() ---
    def machine(self, pool: NodePool) -> catalog.Machine:
        return resolve_machine(pool, self.cloud)

    def pool(self, name: str) -> NodePool:
        for p in self.node_pools:
            if p.name == name:
                return p
        raise KeyError(name)

    def resolved(self, workload: Workload) -> ResolvedWorkload:
        """The workload with every default applied (multinode/resolved.py), on its pool's machine."""
        return resolve_workload(workload, self.machine(self.pool(workload.node_pool)).gpus)

    def gpus_per_node(self, workload: Workload) -> int:
        return self.resolved(workload).gpus_per_node

    def tensor_parallel(self, workload: Workload) -> int:
        return self.resolved(workload).tensor_parallel

    def fabric_kind(self) -> str:
        if self.cloud == "existing":
            return self.fabric.kind or "none"
        kinds = {self.machine(p).fabric for p in self.node_pools}
        kinds.discard("none")
        return next(iter(kinds)) if kinds else "none"


# ---------------------------------------------------------------- machine resolution
def resolve_machine(pool: NodePool, cloud: str) -> catalog.Machine:
    if pool.machine_spec is not None:
        s = pool.machine_spec
        return catalog.Machine(s.name, cloud, s.gpu_model, s.gpus, s.gpu_memory_gb, s.fabric, s.fabric_nics,
                               s.bandwidth_gbps, "described in the stack (machineSpec)", vcpus=s.vcpus,
                               memory_gib=s.memory_gib)
    return catalog.lookup(pool.machine or "", cloud)


def pool_machines(cfg: StackConfig) -> dict[str, catalog.Machine]:
    """Pool name -> machine, for every pool whose machine resolves and belongs to the stack's cloud (the
    same pools semantic_problems accepts; it reports the others)."""
    out: dict[str, catalog.Machine] = {}
    for pool in cfg.node_pools:
        if (pool.machine is None) == (pool.machine_spec is None):
            continue
        try:
            m = resolve_machine(pool, cfg.cloud)
        except catalog.UnknownMachine:
            continue
        if pool.machine and cfg.cloud != "existing" and m.cloud != cfg.cloud:
            continue
        out[pool.name] = m
    return out


# ---------------------------------------------------------------- loading raw config
def _path(loc: Iterable[Any]) -> str:
    out = ""
    for part in loc:
        if isinstance(part, int):
            out += f"[{part}]"
        else:
            out += ("." if out else "") + str(part)
    return out


def _show(value: Any, secret: bool) -> str:
    if secret:
        return SECRET_PLACEHOLDER
    text = json.dumps(value, default=str) if not isinstance(value, str) else repr(value)
    return text if len(text) <= 80 else text[:77] + "..."


def _model_at(loc: tuple[Any, ...], root: type[BaseModel] | None = None) -> type[BaseModel] | None:
    """The pydantic model class that owns the last key of `loc` (for did-you-mean hints); `root`: the model
    `loc` starts at (default StackConfig; the fleet stack's model reuses this)."""
    model: type[BaseModel] = root or StackConfig
    for part in loc[:-1]:
        if isinstance(part, int):
            continue
        fields = {f.alias or n: f for n, f in model.model_fields.items()}
        f = fields.get(part)
        if f is None:
            return None
        ann = f.annotation
        candidates = [ann] + list(getattr(ann, "__args__", ()) or ())
        nxt = None
        for c in candidates:
            for cc in [c] + list(getattr(c, "__args__", ()) or ()):
                if isinstance(cc, type) and issubclass(cc, BaseModel):
                    nxt = cc
        if nxt is None:
            return None
        model = nxt
    return model


def _known_keys(model: type[BaseModel]) -> list[str]:
    return [f.alias or n for n, f in model.model_fields.items()]


def _problem_from_pydantic(err: ErrorDetails, secrets: set[str], root: type[BaseModel] | None = None,
                           prefix: tuple[Any, ...] = ()) -> Problem:
    """`root`/`prefix`: the model the error's location starts at and the key path above it (fleet stacks)."""
    loc = prefix + tuple(err["loc"])
    path = _path(loc)
    top = str(loc[0]) if loc else ""
    # a secret key's value is never repeated, even when it was given in plain text or with the wrong type; nor is
    # a value under a key named like a credential (workloads[].env.DB_PASSWORD: {value: ...}), whatever its type
    secret = (top in secrets or top in SECRET_KEYS
              or any(isinstance(part, str) and credentials.looks_secret(part) for part in loc[1:])
              or (isinstance(err.get("input"), str) and credentials.token_format(err["input"]) is not None))
    typ = err["type"]
    if typ == "extra_forbidden":
        model = _model_at(loc[len(prefix):], root)
        known = _known_keys(model) if model else []
        close = difflib.get_close_matches(str(loc[-1]), known, n=1)
        hint = f"did you mean {close[0]!r}?" if close else f"known keys here: {', '.join(known)}"
        return Problem(path, f"unknown key {str(loc[-1])!r}; {hint}")
    if typ == "missing":
        return Problem(path, "required key is missing; add it")
    if typ in ("too_long", "string_too_long"):
        # issue 48: a bound of multinode/limits.py; the value itself (100,000 entries, a megabyte) is not repeated
        most = err.get("ctx", {}).get("max_length")
        size = len(err["input"]) if isinstance(err["input"], (str, list, dict)) else "?"
        what = "characters" if typ == "string_too_long" else "entries"
        return Problem(path, f"{size} {what}, over the {most} a stack may give here (multinode/limits.py says "
                             f"why: Kubernetes' or the cloud's own limit, or the size plan is built for); "
                             f"shorten it")
    if typ == "literal_error":
        allowed = err.get("ctx", {}).get("expected", "")
        return Problem(path, f"{_show(err['input'], secret)} is not allowed; use one of {allowed}")
    if typ in ("greater_than_equal", "less_than_equal", "greater_than", "less_than"):
        return Problem(path, f"{_show(err['input'], secret)}: {err['msg'].lower()}; change the value")
    return Problem(path, f"{_show(err['input'], secret)}: {err['msg']}")


ENV_SHAPE = ("a text value, or {valueFrom: {secretKeyRef: {name: <secret>, key: <key>}}} (or configMapKeyRef "
             "{name, key}, or fieldRef {fieldPath: metadata.name ...})")


_ENV_UNION_TAGS = ("str", "constrained-str", "EnvValue")     # pydantic's names of `str | EnvValue`'s members


def _pydantic_problems(errors: list[ErrorDetails], secrets: set[str]) -> list[Problem]:
    """Pydantic's errors as problems: an env entry that is neither text nor a valueFrom gets one message naming
    both shapes (pydantic reports each member of the union apart, under the union's own names); a mapping is
    checked as a valueFrom, with the key path the user wrote."""
    out: list[Problem] = []
    seen: set[str] = set()
    for err in errors:
        loc = tuple(err["loc"])
        if len(loc) >= 5 and loc[0] == "workloads" and loc[2] == "env" and loc[4] in _ENV_UNION_TAGS:
            entry, text = loc[:4], loc[4] != "EnvValue"
            if text and isinstance(err.get("input"), dict):
                continue                      # a mapping: the EnvValue member's errors say what is wrong with it
            if text or err["type"] == "model_type":
                p = Problem(_path(entry), f"must be {ENV_SHAPE}")
            else:
                p = _problem_from_pydantic({**err, "loc": loc[5:]}, secrets, root=EnvValue, prefix=entry)
        else:
            p = _problem_from_pydantic(err, secrets)
        if str(p) not in seen:
            seen.add(str(p))
            out.append(p)
    return out


def top_level_keys() -> list[str]:
    """Every key a stack may set under `multinode:` (camelCase, as written in the stack file)."""
    return _known_keys(StackConfig)


def parse_raw_value(value: Any) -> Any:
    """Pulumi passes structured config as JSON text; scalars as plain strings."""
    if isinstance(value, str) and value[:1] in "[{":
        try:
            return json.loads(value)
        except (ValueError, RecursionError):     # issue 48: nesting deep enough to exhaust the parser's stack
            return value
    return value


def load(raw: Mapping[str, Any], secret_keys: Iterable[str] = (), source: str = "stack config",
         more_checks: Callable[[StackConfig], list[Problem]] | None = None,
         final_checks: Callable[[StackConfig], list[Problem]] | None = None) -> StackConfig:
    """Validate a mapping of config keys (no namespace prefix). Raises ConfigError.

    `more_checks(cfg)`: problems a layer above config adds (multinode/checks.py: the cloud's rules),
    reported in the same one error. `final_checks(cfg)`: checks that need an otherwise valid config
    (they run the builders), run only when nothing else was found."""
    secrets = set(secret_keys)
    # secrets are opaque strings (an imagePullSecret is a JSON document, and must stay text)
    data = {k: (v if k in SECRET_KEYS else parse_raw_value(v)) for k, v in raw.items()}
    plain_secrets = [Problem(k, f"is a secret but is stored in plain text; store it with "
                                f"`pulumi config set --secret {NAMESPACE}:{k} ...`")
                     for k in SECRET_KEYS if k in data and k not in secrets]
    # issue 46: a literal credential anywhere else (env of any name, args, labels, add-on values...) is refused
    # here, before the program runs and before plan writes anything (credentials.stack_literal_findings)
    plain_secrets += [Problem(path, msg) for path, msg in credentials.stack_literal_findings(data, SECRET_KEYS)]
    try:
        cfg = StackConfig.model_validate(data)
    except ValidationError as e:
        raise ConfigError(plain_secrets + _pydantic_problems(e.errors(), secrets), source) from None
    problems = plain_secrets + semantic_problems(cfg)
    if more_checks is not None:
        problems += more_checks(cfg)
    if not problems and final_checks is not None:
        problems += final_checks(cfg)
    if problems:
        raise ConfigError(problems, source)
    return cfg


def installs(addon: Addon) -> bool:
    """True when this stack installs the add-on itself (enabled and not provided by the cluster)."""
    return addon.enabled and not addon.provided


def lws_install(cfg: StackConfig) -> tuple[bool, str]:
    """Whether this stack installs LeaderWorkerSet, and why (issue 46: not on a training-only stack). LWS is
    cluster-wide (a controller, a webhook and a CRD for every namespace), so it comes when something uses it: an
    lws-inference workload, the Dynamo operator without Grove (its LWS + Volcano backend), a stack with no workload
    (a platform others deploy on), or any addons.lws key the stack sets (enabled, version, values...)."""
    a = cfg.addons.lws
    if not a.enabled:
        return False, "addons.lws.enabled is false"
    if a.provided:
        return False, "provided by the cluster (addons.lws.provided)"
    if a.model_fields_set:
        return True, "addons.lws is set in the stack"
    users = [w.name for w in cfg.workloads if w.kind == "lws-inference"]
    if users:
        return True, f"used by {', '.join(users)}"
    if cfg.addons.dynamo.enabled and not cfg.addons.grove.enabled:
        return True, "the Dynamo operator's LWS + Volcano backend (addons.grove is off)"
    if not cfg.workloads:
        return True, "the stack has no workload: installed for the workloads deployed on this platform"
    return False, ("no workload of this stack uses it (no lws-inference); set addons.lws.enabled true to install it "
                   "anyway")


def provided_addon_problems(cfg: StackConfig) -> list[Problem]:
    """issue 29: `addons.<name>.provided` says the cluster runs the add-on already. It means nothing for an
    add-on the stack turns off, and `values` configure an install this stack then never does."""
    out: list[Problem] = []
    for field, info in Addons.model_fields.items():
        addon = getattr(cfg.addons, field)
        if not addon.provided:
            continue
        key = f"addons.{info.alias or field}"
        if not addon.enabled:
            out.append(Problem(f"{key}.provided", f"is true but {key}.enabled is false: `provided` says the "
                                                  f"cluster already runs the add-on, so the checks treat it as "
                                                  f"present; set {key}.enabled true (the default) to use the "
                                                  f"cluster's add-on, or remove {key}.provided to go without it"))
        if addon.values:
            out.append(Problem(f"{key}.values", f"{key}.provided is true, so this stack installs no Helm release "
                                                f"of it and its values would be ignored; remove {key}.values "
                                                f"(configure the cluster's own install) or set {key}.provided "
                                                f"false to install it here"))
    return out


def grove_without_kai(cfg: StackConfig) -> list[Problem]:
    """issue 18. Grove's docs (ai-dynamo/grove docs/installation.md "Supported Schedulers", 2026-08) name
    KAI-Scheduler as the only scheduler that gang-schedules Grove's PodGangs; Grove's default-scheduler
    backend is always available (docs/proposals/375-scheduler-backend-framework) but the Kubernetes
    default scheduler places pods one by one. So Grove runs without KAI, with no gang: an advisory."""
    if not (cfg.addons.grove.enabled and not cfg.addons.kai.enabled):
        return []
    multi = [w.name for w in cfg.workloads if w.kind in ("grove-inference", "dynamo")
             and (w.nodes > 1 or (w.disaggregated is not None and
                                  max(w.disaggregated.prefill.nodes, w.disaggregated.decode.nodes) > 1))]
    what = (f"multi-node workloads ({', '.join(multi)}) can start half-placed and hold GPUs while they wait"
            if multi else "a multi-node role could start half-placed")
    return [Problem("addons.kai.enabled", f"Grove without KAI-Scheduler: its pods use the Kubernetes default "
                                          f"scheduler, which does not gang-schedule Grove's PodGangs (Grove docs: "
                                          f"KAI is the scheduler that does), so {what}; set addons.kai.enabled "
                                          f"true for all-or-nothing placement")]


def ignored_settings(cfg: StackConfig) -> list[Problem]:
    """issue 48: a setting another key makes meaningless or partly meaningless, named with that key (an advisory:
    the cloud or the program accepts it, but the stack does not do what the setting says)."""
    out: list[Problem] = []
    for i, pool in enumerate(cfg.node_pools):
        up, at = pool.upgrade, f"nodePools[{i}]"
        if up.surge is not None and up.surge > pool.node_count:
            # AWS takes surge as the node group's maxUnavailable (multinode/upgrades.py): every node may go down at
            # once; AKS and GKE are asked for more new nodes than the pool has. The clouds accept it (EKS caps
            # maxUnavailable at 100, tests/test_upgrade_limits.py), so an advisory, not a refusal.
            out.append(Problem(f"{at}.upgrade.surge", f"{up.surge} is larger than the pool ({at}.nodeCount "
                                                      f"{pool.node_count}): an upgrade replaces each node once, so "
                                                      f"the surge beyond {pool.node_count} buys nothing, and on AWS "
                                                      f"(maxUnavailable) every node may be drained at once; set "
                                                      f"upgrade.surge to at most {pool.node_count}, or remove it (the "
                                                      f"default is the largest gang on the pool)"))
    for i, w in enumerate(cfg.workloads):
        at = f"workloads[{i}]"
        set_here = [k for k in ("min_bus_bandwidth_gbps", "dcgm_diag_level") if k in w.preflight.model_fields_set]
        if not w.preflight.enabled and set_here:
            keys = ", ".join(f"{at}.preflight.{to_camel(k)}" for k in set_here)
            out.append(Problem(f"{at}.preflight.enabled", f"false, so {keys} is ignored: no preflight runs; remove "
                                                          f"it or turn preflight on"))
        floor_key = "minBusBandwidthGbps" if w.kind == "nccl-test" else "preflight.minBusBandwidthGbps"
        floor = w.min_bus_bandwidth_gbps if w.kind == "nccl-test" else w.preflight.min_bus_bandwidth_gbps
        if "bus_bandwidth_efficiency" in w.model_fields_set and floor is not None:
            out.append(Problem(f"{at}.busBandwidthEfficiency", f"is ignored: {at}.{floor_key} gives the floor "
                                                               f"itself (the efficiency only scales the catalog's "
                                                               f"bandwidth when no floor is given); remove one"))
    return out


def advisories(cfg: StackConfig) -> list[Problem]:
    """Non-fatal findings of the cloud-independent contract (checks.advisories adds the cloud's)."""
    out: list[Problem] = grove_without_kai(cfg) + ignored_settings(cfg)
    for i, w in enumerate(cfg.workloads):
        try:
            m = cfg.machine(cfg.pool(w.node_pool))
        except (KeyError, catalog.UnknownMachine):
            continue
        for f in topology.check_tensor_parallel_span(cfg.tensor_parallel(w), cfg.gpus_per_node(w),
                                                     cfg.fabric_kind(), m.name):
            out.append(Problem(f"workloads[{i}].{f.field}", f.message))
        if w.nodes > 1 and (cfg.fabric_kind() == "none" or not cfg.fabric.enabled):
            why = "fabric.enabled is false" if not cfg.fabric.enabled else m.name + " has none"
            out.append(Problem(f"workloads[{i}].nodes", f"{w.nodes} nodes with no GPU fabric ({why}): "
                                                        f"NCCL will run over the primary network (TCP sockets)"))
        a = w.autoscaling
        if a is not None and w.kind == "lws-inference":
            pool = cfg.pool(w.node_pool)
            per_node = max(1, m.gpus // max(1, cfg.gpus_per_node(w)))
            need = a.max_replicas * -(-w.nodes // per_node)
            if need > pool.node_count:
                out.append(Problem(f"workloads[{i}].autoscaling.maxReplicas", (
                    f"{a.max_replicas} groups of {w.nodes} pods need {need} nodes of {m.name}, but pool "
                    f"{pool.name!r} has {pool.node_count} (beside everything else on it): the groups the HPA adds "
                    f"beyond what fits stay Pending; lower maxReplicas or let the pool grow to {need} nodes")))
            if not a.metrics:
                out.append(Problem(f"workloads[{i}].autoscaling.metrics", (
                    "none given: an autoscaling/v2 HPA without metrics scales on 80% average CPU utilization, of "
                    "little use for GPU inference (the NIM chart's values note it); give a Pods or External metric, "
                    "e.g. from prometheus-adapter")))
    return out


# ---------------------------------------------------------------- semantic checks
def semantic_problems(cfg: StackConfig) -> list[Problem]:  # noqa: C901 - a flat list of checks
    p: list[Problem] = []
    cloud = cfg.cloud

    if cfg.image_pull_secret and cfg.image_pull_secret != SECRET_PLACEHOLDER:
        try:
            doc = json.loads(cfg.image_pull_secret)
            ok = isinstance(doc, dict) and isinstance(doc.get("auths"), dict)
        except ValueError:
            ok = False
        if not ok:
            p.append(Problem("imagePullSecret", "[secret] is not a .dockerconfigjson document ({\"auths\": {...}}); "
                                                "set it from `kubectl create secret docker-registry --dry-run=client "
                                                "-o jsonpath='{.data.\\.dockerconfigjson}' | base64 -d`"))

    # node pools
    names: dict[str, int] = {}
    machines: dict[str, catalog.Machine] = {}
    for i, pool in enumerate(cfg.node_pools):
        at = f"nodePools[{i}]"
        if not _is_dns_label(pool.name) or len(pool.name) > 40:
            p.append(Problem(f"{at}.name", f"{pool.name!r} must be lowercase letters, digits and '-' "
                                           f"(at most 40 characters), e.g. 'gpu-a'"))
        if pool.name in names:
            p.append(Problem(f"{at}.name", f"{pool.name!r} is already used by nodePools[{names[pool.name]}]; "
                                           f"give each pool its own name"))
        names.setdefault(pool.name, i)
        if (pool.machine is None) == (pool.machine_spec is None):
            p.append(Problem(f"{at}.machine", "set exactly one of machine (a catalog name) or machineSpec "
                                              "(gpus, gpuMemoryGb, fabric, fabricNics)"))
            continue
        try:
            m = resolve_machine(pool, cloud)
        except catalog.UnknownMachine as e:
            p.append(Problem(f"{at}.machine", str(e)))
            continue
        if pool.machine and cloud != "existing" and m.cloud != cloud:
            others = ", ".join(x.name for x in catalog.machines_for(cloud)[:4])
            p.append(Problem(f"{at}.machine", f"{m.name} is a {m.cloud} machine, but cloud is {cloud!r}; "
                                              f"use a {cloud} machine such as {others}"))
            continue
        machines[pool.name] = m
        cr = pool.capacity_reservation
        if cr and cr.nodes is not None and pool.node_count > cr.nodes:
            p.append(Problem(f"{at}.nodeCount", f"{pool.node_count} nodes, but capacity reservation {cr.id} "
                                                f"holds {cr.nodes}; use nodeCount {cr.nodes} or a larger reservation"))
        for key_name, mapping in (("labels", pool.labels), ("nodeSelector", pool.node_selector)):
            for k, v in mapping.items():
                bad = _label_problem(k, v)
                if bad:
                    p.append(Problem(f"{at}.{key_name}", bad))

    # fabric: exactly one per stack
    fabrics = sorted({m.fabric for m in machines.values()} - {"none"})
    if len(fabrics) > 1:
        p.append(Problem("nodePools", f"pools use {len(fabrics)} fabrics ({', '.join(fabrics)}); a stack drives "
                                      f"exactly one cloud fabric, so put these pools in separate stacks"))

    # add-ons
    p += provided_addon_problems(cfg)
    # Grove without KAI is allowed (issue 18: the Dynamo guide lists KAI as optional); grove_without_kai()
    # says what it costs, as an advisory.
    if cfg.addons.dynamo.enabled and not (cfg.addons.grove.enabled or
                                          (cfg.addons.lws.enabled and cfg.addons.volcano.enabled)):
        p.append(Problem("addons.dynamo.enabled", "the Dynamo operator needs Grove (with KAI for gang scheduling) "
                                                  "or LWS + Volcano; enable addons.grove (and addons.kai)"))

    # storage
    if cfg.storage is not None:
        s = cfg.storage
        if s.kind == "existing" and not (s.existing_claim or s.existing_storage_class):
            p.append(Problem("storage.existingClaim", "set existingClaim (a ReadWriteMany PVC) or "
                                                      "existingStorageClass for kind 'existing'"))
        if s.kind != "existing" and s.size_gib is None:
            p.append(Problem("storage.sizeGib", f"set the size of the {s.kind} file system in GiB"))
        if not _is_dns_label(s.namespace):
            p.append(Problem("storage.namespace", f"{s.namespace!r} is not a valid namespace name"))
        if not s.mount_path.startswith("/"):
            p.append(Problem("storage.mountPath", f"{s.mount_path!r} must be an absolute path like /checkpoints"))
        if not _DNS_SUBDOMAIN.match(s.name) or len(s.name) > 253:
            # the claim's name (and every storage resource's, unless resourceName): the API server refuses a claim
            # named otherwise, and an empty name cannot name a Pulumi resource (issue 32's rename family found it)
            p.append(Problem("storage.name", f"{s.name[:80]!r} must be a DNS subdomain (lower-case letters, digits, "
                                             f"'-', '.'), e.g. 'checkpoints'"))
        if s.resource_name is not None and (not _is_dns_label(s.resource_name) or len(s.resource_name) > 63):
            p.append(Problem("storage.resourceName", f"{s.resource_name!r} must be a DNS label (lower-case letters, "
                                                     f"digits, '-', at most 63), e.g. the storage's previous name"))

    # queues
    qnames = set()
    for i, q in enumerate(cfg.queues):
        if not _is_dns_label(q.name):
            p.append(Problem(f"queues[{i}].name", f"{q.name!r} must be a DNS label, e.g. 'research'"))
        if q.name in qnames:
            p.append(Problem(f"queues[{i}].name", f"queue {q.name!r} is defined twice"))
        qnames.add(q.name)

    # issue 18: priority classes (DNS subdomain names; system- is reserved by Kubernetes)
    pcnames: set[str] = set()
    for i, pc in enumerate(cfg.priority_classes):
        if not _is_dns_label(pc.name) or pc.name.startswith("system-"):
            p.append(Problem(f"priorityClasses[{i}].name", f"{pc.name!r} must be a DNS label not starting with "
                                                           f"'system-' (reserved), e.g. 'training-high'"))
        if pc.name in pcnames:
            p.append(Problem(f"priorityClasses[{i}].name", f"PriorityClass {pc.name!r} is defined twice"))
        pcnames.add(pc.name)

    # manifests (bring your own objects)
    seen_objects: dict[tuple[str, str, str], int] = {}
    for i, obj in enumerate(cfg.manifests):
        missing = [k for k in ("apiVersion", "kind") if not isinstance(obj.get(k), str) or not obj.get(k)]
        raw_name = obj["metadata"].get("name") if isinstance(obj.get("metadata"), dict) else None
        name = raw_name if isinstance(raw_name, str) else ""
        if not name:
            missing.append("metadata.name")
        namespace = obj["metadata"].get("namespace") if isinstance(obj.get("metadata"), dict) else None
        if namespace is not None and (not isinstance(namespace, str) or not _is_dns_label(namespace)):
            p.append(Problem(f"manifests[{i}].metadata.namespace", "a namespace is a DNS label (text), e.g. "
                                                                   "'default' or 'inference'"))
            continue
        p.extend(Problem(f"manifests[{i}].{where}", msg) for where, msg in credentials.manifest_credentials(obj))
        p.extend(Problem(f"manifests[{i}].{where}", msg) for where, msg in _manifest_quantity_problems(obj))
        p.extend(Problem(f"manifests[{i}].{where}", msg) for where, msg in _manifest_meta_problems(obj))
        if missing:
            p.append(Problem(f"manifests[{i}]", f"a Kubernetes object needs {', '.join(missing)}; e.g. "
                                                f"{{apiVersion: v1, kind: ConfigMap, metadata: {{name: x}}}}"))
            continue
        group, _, version = obj["apiVersion"].rpartition("/")
        if not version or (group in CORE_API_GROUPS and not _core_version_exists(group, version)):
            p.append(Problem(f"manifests[{i}].apiVersion", f"{obj['apiVersion']!r} is not a Kubernetes API version; "
                                                           f"use e.g. v1, apps/v1, batch/v1 or <group>/<version>"))
            continue
        if group in CORE_API_GROUPS:
            # Pulumi's typed core-kind args assert every field's type while registering (a PVC `spec` given as
            # text ends the program with an AssertionError): check the shape first against the strict
            # Kubernetes schema (kubernetes-validate), as the API server would. Custom resources are
            # registered untyped; the policy pack reads them whatever their shape.
            from . import schema_check as validation
            try:
                errors = validation.validate_object(obj)
                if not errors and obj.get("spec") is None:      # absent, or null (which the schema drops)
                    # the schema leaves `spec` optional, but a kind whose spec has required fields (a Deployment)
                    # is refused by the API server without it, and by Pulumi's typed args ("Missing required
                    # property 'spec'"): probe with an empty spec and keep only what it says about spec
                    errors = [f"spec is missing ({e})" for e in validation.validate_object({**obj, "spec": {}})
                              if e.startswith("spec")]
            except validation.UnknownKindError:
                errors = [f"Kubernetes has no kind {obj['kind']} in {obj['apiVersion']}; check apiVersion and kind"]
            if errors:
                p.extend(Problem(f"manifests[{i}]", f"not a valid {obj['kind']}: "
                                                    f"{credentials.redacted_schema_error(obj, e)[:200]}; fix the "
                                                    f"object against the Kubernetes API reference")
                         for e in errors[:5])
                continue
        ident = (obj["kind"], str((obj.get("metadata") or {}).get("namespace") or ""), name)
        if ident in seen_objects:
            p.append(Problem(f"manifests[{i}]", f"{obj['kind']} {name!r} is already manifests[{seen_objects[ident]}]; "
                                                f"give each object its own name"))
        seen_objects.setdefault(ident, i)

    # workloads
    wnames: dict[str, int] = {}
    for i, w in enumerate(cfg.workloads):
        p.extend(_workload_problems(cfg, i, w, machines, qnames))
        p.extend(_env_reference_problems(cfg, f"workloads[{i}]", w))
        if w.name in wnames:
            p.append(Problem(f"workloads[{i}].name", f"{w.name!r} is already used by workloads[{wnames[w.name]}]"))
        wnames.setdefault(w.name, i)
    return p


_DNS_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*\Z")
_DNS_1035_LABEL = re.compile(r"^[a-z]([-a-z0-9]*[a-z0-9])?\Z")
# metadata.name rules of the API server (k8s.io/kubernetes@v1.33.13): Service NameIsDNS1035Label (pkg/apis/core/
# validation ValidateServiceName), Namespace and StatefulSet NameIsDNSLabel (ValidateNamespaceName, apps/validation
# ValidateStatefulSetName), everything else NameIsDNSSubdomain, custom resources included (k8s.io/
# apiextensions-apiserver pkg/registry/customresource/validator.go).
_NAME_RULES = {"Service": ("DNS-1035 label", _DNS_1035_LABEL, 63), "Namespace": ("DNS label", _DNS_LABEL, 63),
               "StatefulSet": ("DNS label", _DNS_LABEL, 63)}


def _manifest_meta_problems(obj: dict[str, Any]) -> list[tuple[str, str]]:
    """metadata.name (per kind, as the API server checks it) and labels / annotations (text, label syntax) of a
    hand-written object: custom resources are registered untyped, so nothing else checks them before the API
    server refuses them on `pulumi up`."""
    out: list[tuple[str, str]] = []
    meta = obj.get("metadata")
    if not isinstance(meta, dict):
        return out
    name, kind = meta.get("name"), str(obj.get("kind") or "")
    if isinstance(name, str) and name:
        what, rule, most = _NAME_RULES.get(kind, ("DNS subdomain", _DNS_SUBDOMAIN, 253))
        if len(name) > most or not rule.match(name):
            fixed = re.sub(r"[^a-z0-9-]+", "-", name.lower()).strip("-")[:63]
            fixed = fixed if rule.match(fixed) else "my-object"
            out.append(("metadata.name", f"{name[:80]!r} is not a valid {kind} name: a {what} (lower-case letters, "
                                         f"digits, '-'{', ' + repr('.') if most == 253 else ''}; at most {most}"
                                         f"{', starting with a letter' if rule is _DNS_1035_LABEL else ''}), e.g. "
                                         f"{fixed!r}"))
    elif name is not None and not isinstance(name, str):
        out.append(("metadata.name", "a name is text, e.g. 'my-object'"))
    for field in ("labels", "annotations"):
        block = meta.get(field)
        if block is None:
            continue
        if not isinstance(block, dict):
            out.append((f"metadata.{field}", f"{field} are a map of text to text, e.g. {{team: research}}"))
            continue
        for k, v in block.items():
            if not isinstance(v, str):
                out.append((f"metadata.{field}.{k}", f"a {field[:-1]} value is text: quote it "
                                                     f"(e.g. '{str(v).lower() if isinstance(v, bool) else 'x'}')"))
            elif field == "labels":
                msg = _label_problem(str(k), v)
                if msg:
                    out.append((f"metadata.labels.{k}", msg))
    return out


def _manifest_quantity_problems(obj: dict[str, Any]) -> list[tuple[str, str]]:
    """Every quantity in the object's pod specs, parsed as Kubernetes parses it (multinode/quantity.py): a value
    it refuses or one out of range ("1e309", "1e999999999") is a config error naming the key, before placement,
    admission or the pack read it."""
    from . import podspecs, quantity
    out: list[tuple[str, str]] = []
    for ref in podspecs.pod_specs(obj):
        base = ("spec" if ref.where == "(object)" else ref.where
                if ref.where.endswith((".spec.podSpec", ".extraPodSpec")) else f"{ref.where}.spec")
        out.extend((f"{base}.{where}", msg) for where, msg in quantity.pod_spec_problems(ref.spec))
        # issue 40: memory / ephemeral-storage the API server admits only with a warning (quantity.py)
        out.extend((f"{base}.{where}", msg) for where, msg in quantity.fractional_byte_problems(ref.spec))
    return out


_LABEL_NAME = re.compile(r"^([A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?)?\Z")


def _label_problem(key: str, value: str) -> str | None:
    """Kubernetes label syntax: [prefix/]name, name and value <= 63 chars of [A-Za-z0-9-_.]."""
    prefix, _, name = key.rpartition("/")
    if (not name or len(name) > 63 or not _LABEL_NAME.match(name)
            or (prefix and (len(prefix) > 253 or not re.fullmatch(r"[a-z0-9]([-a-z0-9.]*[a-z0-9])?", prefix)))):
        return (f"{key!r} is not a valid label key; use [prefix/]name with letters, digits, '-', '_', '.' "
                f"(e.g. team or example.com/team)")
    if len(value) > 63 or not _LABEL_NAME.match(value):
        return f"label {key}={value!r}: a value is at most 63 letters, digits, '-', '_', '.'"
    return None


def _core_version_exists(group: str, version: str) -> bool:
    """Whether pulumi_kubernetes has typed resources for this built-in group/version (found, not imported)."""
    import importlib.util
    if not re.fullmatch(r"v\d+((alpha|beta)\d+)?", version):
        return False
    try:
        return importlib.util.find_spec(f"pulumi_kubernetes.{CORE_API_GROUPS[group]}.{version}") is not None
    except ModuleNotFoundError:
        return False


def to_snake(camel: str) -> str:
    return re.sub(r"(?<!^)([A-Z])", r"_\1", camel).lower()


def _workload_problems(cfg: StackConfig, i: int, w: Workload, machines: dict[str, catalog.Machine],
                       queues: set[str]) -> list[Problem]:
    at = f"workloads[{i}]"
    p: list[Problem] = []
    if not _is_dns_label(w.name) or len(w.name) > 40:
        p.append(Problem(f"{at}.name", f"{w.name!r} must be lowercase letters, digits and '-' (at most 40 "
                                       f"characters), e.g. 'llama-405b'"))
    if not _is_dns_label(w.namespace):
        p.append(Problem(f"{at}.namespace", f"{w.namespace!r} is not a valid namespace name"))
    if w.image is not None and image_has_credentials(w.image):
        # never repeated: the part before '@' is a registry user and password (or token)
        p.append(Problem(f"{at}.image", "holds registry credentials (user:password@registry/...), which would be "
                                        "written into every pod and the stack's state, and is no image reference "
                                        "Kubernetes pulls; give the plain reference (registry/repository:tag) and "
                                        "the credentials as a pull Secret (imagePullSecret, or imagePullSecrets "
                                        "naming an existing one)"))
    if w.preflight.dcgm_host_engine and w.preflight.dcgm in ("embedded", "off"):
        # issue 40: the address is read only where dcgmi diag runs against a host engine (preflight.py dcgm_setting)
        p.append(Problem(f"{at}.preflight.dcgmHostEngine", f"is not used with preflight.dcgm {w.preflight.dcgm}; "
                                                          f"remove it or set preflight.dcgm hostEngine"))
    if w.node_pool not in {pl.name for pl in cfg.node_pools}:
        known = ", ".join(pl.name for pl in cfg.node_pools)
        p.append(Problem(f"{at}.nodePool", f"no node pool named {w.node_pool!r}; use one of: {known}"))
        return p
    m = machines.get(w.node_pool)
    if m is None:
        return p  # the pool itself is already reported
    pool = cfg.pool(w.node_pool)
    engines = ENGINES_BY_KIND[w.kind]
    if w.engine is not None and w.engine not in engines:
        p.append(Problem(f"{at}.engine", f"{w.engine!r} does not run as {w.kind}; use one of {', '.join(engines)}"))
    serving = w.kind in INFERENCE_KINDS or w.engine == "nim"   # NIM serves on LWS or on an MPIJob
    if serving and not w.model:
        p.append(Problem(f"{at}.model", f"{w.kind} needs the model to serve, e.g. meta-llama/Llama-3.1-405B-Instruct"))
    if w.kind in TRAINING_KINDS and not serving and not w.script:
        starter = "mpirun" if w.kind == "mpijob" else "torchrun"
        p.append(Problem(f"{at}.script", f"{w.kind} needs the training script {starter} starts, e.g. "
                                         f"/workspace/train.py"))
    p.extend(_workload_runtime_problems(cfg, at, w, m, pool))
    p.extend(_contradictions(cfg, at, w, m, pool))
    if w.queue and cfg.queues and w.queue not in queues and w.queue != "default":
        p.append(Problem(f"{at}.queue", f"no queue named {w.queue!r}; define it under queues or use one of "
                                        f"{', '.join(sorted(queues))}"))
    if w.disaggregated and w.kind not in ("grove-inference", "dynamo"):
        p.append(Problem(f"{at}.disaggregated", "only grove-inference and dynamo split prefill/decode; "
                                                "remove it or use kind grove-inference"))
    if w.network_topology and w.kind != "volcano-training":
        p.append(Problem(f"{at}.networkTopology", "only volcano-training places by network topology"))
    if w.kind in ("volcano-training",) and not cfg.addons.volcano.enabled:
        p.append(Problem(f"{at}.kind", "volcano-training needs addons.volcano.enabled true"))
    if w.kind == "indexed-job" and w.nodes > 1 and not (cfg.addons.volcano.enabled or cfg.addons.kai.enabled):
        p.append(Problem(f"{at}.kind", f"indexed-job over {w.nodes} nodes needs a gang scheduler (one rank would hold "
                                       f"{cfg.gpus_per_node(w)} GPUs while the others wait); "
                                       f"set addons.volcano.enabled or addons.kai.enabled true"))
    if w.kind == "trainjob" and not cfg.addons.trainer.enabled:
        p.append(Problem(f"{at}.kind", "trainjob needs addons.trainer.enabled true (the Kubeflow Trainer controller)"))
    if w.kind == "trainjob" and w.nodes > 1 and not cfg.addons.volcano.enabled:
        p.append(Problem(f"{at}.kind", f"trainjob over {w.nodes} nodes needs Volcano for its gang (the runtime's "
                                       f"podGroupPolicy; one rank would hold {cfg.gpus_per_node(w)} GPUs while the "
                                       f"others wait); set addons.volcano.enabled true"))
    if w.kind == "lws-inference" and not cfg.addons.lws.enabled:
        p.append(Problem(f"{at}.kind", "lws-inference needs addons.lws.enabled true"))
    if w.kind == "grove-inference" and not cfg.addons.grove.enabled:
        p.append(Problem(f"{at}.kind", "grove-inference needs addons.grove.enabled true (and addons.kai for gang "
                                       "scheduling)"))
    if w.kind == "dynamo" and not cfg.addons.dynamo.enabled:
        p.append(Problem(f"{at}.kind", "dynamo needs addons.dynamo.enabled true"))
    if w.kind in ("dynamo", "grove-inference", "lws-inference") and w.engine is None:
        p.append(Problem(f"{at}.engine", f"choose the inference engine: {', '.join(engines)}"))

    rw = resolve_workload(w, m.gpus)
    gpn = rw.gpus_per_node
    for f in topology.check_gpus_per_pod(gpn, m.gpus, m.name):
        p.append(Problem(f"{at}.{f.field}", f.message))
    if w.nodes > pool.node_count and w.kind != "nccl-test":
        p.append(Problem(f"{at}.nodes", f"{w.nodes} nodes, but node pool {pool.name!r} has {pool.node_count}; "
                                        f"use nodes {pool.node_count} or raise nodePools nodeCount"))
    if serving and not w.disaggregated:
        for f in topology.check_parallelism(rw.tensor_parallel, w.pipeline_parallel, w.nodes, gpn, m.name):
            p.append(Problem(f"{at}.{f.field}", f.message))
        if w.model:
            for f in topology.check_model_fit(models.params_b(w.model, w.model_params_b), w.precision,
                                              w.nodes, gpn, m.gpu_memory_gb, m.name, w.model):
                p.append(Problem(f"{at}.{f.field}", f.message))
    if w.disaggregated:
        for role_name in ("prefill", "decode"):
            role: Role = getattr(w.disaggregated, role_name)
            rgpn = rw.roles[role_name].gpus_per_node
            rat = f"{at}.disaggregated.{role_name}"
            for f in topology.check_gpus_per_pod(rgpn, m.gpus, m.name):
                p.append(Problem(f"{rat}.{f.field}", f.message))
            for f in topology.check_parallelism(rw.roles[role_name].tensor_parallel, role.pipeline_parallel,
                                                role.nodes, rgpn, m.name):
                p.append(Problem(f"{rat}.{f.field}", f.message))
            if w.model:  # each role holds a whole copy of the weights
                for f in topology.check_model_fit(models.params_b(w.model, w.model_params_b), w.precision,
                                                  role.nodes, rgpn, m.gpu_memory_gb, m.name,
                                                  f"{w.model} ({role_name})"):
                    p.append(Problem(f"{rat}.{f.field}", f.message))
            if role.nodes > pool.node_count:
                p.append(Problem(f"{rat}.nodes", f"{role.nodes} nodes, but node pool {pool.name!r} has "
                                                 f"{pool.node_count}; use at most {pool.node_count}"))
    if w.kind in TRAINING_KINDS and not serving:
        tp = w.tensor_parallel or 1
        for f in topology.check_training(w.nodes, gpn, w.nodes, gpn, tp, w.pipeline_parallel):
            p.append(Problem(f"{at}.{f.field}", f.message))
    return p


# --- issue 18: Volcano Job options ---------------------------------------------------------------------
# Go's time.ParseDuration units (metav1.Duration); Volcano's policy `timeout` is one.
_GO_DURATION = re.compile(r"^([0-9]+(\.[0-9]+)?(ns|us|µs|ms|s|m|h))+\Z")


def _volcano_job_option_problems(cfg: StackConfig, at: str, w: Workload) -> list[Problem]:
    p: list[Problem] = []
    if w.recovery_timeout is not None:
        if w.kind != "volcano-training":
            p.append(Problem(f"{at}.recoveryTimeout", "only volcano-training has Volcano restart policies; remove "
                                                      "it or use kind volcano-training"))
        elif not _GO_DURATION.match(w.recovery_timeout):
            p.append(Problem(f"{at}.recoveryTimeout", f"{w.recovery_timeout!r} is not a duration; write it like "
                                                      f"'10m', '90s' or '1h30m'"))
    if w.priority_class_name is not None:
        names = [pc.name for pc in cfg.priority_classes]
        if w.kind != "volcano-training":
            p.append(Problem(f"{at}.priorityClassName", "only volcano-training takes a job priority here; remove "
                                                        "it or use kind volcano-training"))
        elif w.priority_class_name not in names:
            known = f"one of {', '.join(names)}" if names else "none is defined"
            p.append(Problem(f"{at}.priorityClassName", f"no PriorityClass named {w.priority_class_name!r} in "
                                                        f"priorityClasses ({known}); define it under "
                                                        f"priorityClasses with a value"))
    p += _training_resource_problems(cfg, at, w)
    p += _autoscaling_problems(at, w)
    gp = w.group_placement
    if gp is not None:
        if w.kind != "lws-inference":
            p.append(Problem(f"{at}.groupPlacement", "only lws-inference places its groups by topology here; "
                                                     "remove it (volcano-training: use networkTopology)"))
        bad = _label_problem(gp.topology_key, "x")
        if bad:
            p.append(Problem(f"{at}.groupPlacement.topologyKey", bad))
        # LWS's own webhook rule, no stricter (issue 31): size or size - 1 divisible by subGroupSize, and
        # subGroupSize <= size (sigs.k8s.io/lws@v0.9.0 pkg/webhooks/leaderworkerset_webhook.go:237-255,
        # validateUpdateSubGroupPolicy; the project pins v0.10.0, whose module zip the proxy does not serve here).
        # We render the default subgroup type (LeaderWorker), so the LeaderExcluded rule does not apply.
        s = gp.sub_group_size
        if s is not None and (s > w.nodes or (w.nodes % s and (w.nodes - 1) % s)):
            fits = [d for d in range(1, w.nodes + 1) if w.nodes % d == 0 or (w.nodes - 1) % d == 0]
            p.append(Problem(f"{at}.groupPlacement.subGroupSize",
                             f"{s}, but LWS's webhook accepts a subGroupSize of at most the group's {w.nodes} pods "
                             f"that divides {w.nodes} or {w.nodes - 1} (size or size - 1, the leader's subgroup "
                             f"may be one larger); use one of {', '.join(map(str, fits))}, or remove it to keep "
                             f"the whole group in one domain"))
    return p


def image_has_credentials(image: str) -> bool:
    """`user:pass@registry/repo:tag` (userinfo before the registry). A digest (`repo@sha256:...`,
    `registry/repo@sha256:...`) has its '@' after the last '/', or no '/' at all."""
    head, slash, _ = image.partition("/")
    return bool(slash) and "@" in head


def _pool_key(cfg: StackConfig, pool: NodePool, field: str) -> str:
    i = next(i for i, p in enumerate(cfg.node_pools) if p is pool)
    return f"nodePools[{i}].{field}"


def _contradictions(cfg: StackConfig, at: str, w: Workload, m: catalog.Machine, pool: NodePool) -> list[Problem]:
    """issue 48: keys that cannot hold together, refused with both keys named (docs/stack-files.md lists what was
    checked): a bandwidth floor above the machine's fabric bandwidth (preflight and nccl-test), and the total of a
    workload's env and arguments above Linux's ARG_MAX (the container's exec fails with E2BIG). Advised instead
    (ignored_settings): a surge above the pool. /dev/shm above the node's memory is advised by the shm check (the
    kubelet caps the volume)."""
    p: list[Problem] = []
    where = _pool_key(cfg, pool, "machineSpec.bandwidthGbps" if pool.machine_spec else "machine")
    ceiling = m.bandwidth_gbps
    for key, floor in ((f"{at}.preflight.minBusBandwidthGbps", w.preflight.min_bus_bandwidth_gbps),
                       (f"{at}.minBusBandwidthGbps", w.min_bus_bandwidth_gbps)):
        if floor is not None and ceiling and floor > ceiling:
            p.append(Problem(key, f"{floor:g} Gbit/s, above the {ceiling} Gbit/s of fabric bandwidth a {m.name} node "
                                  f"has ({where}; multinode/catalog.py): the check could never pass; set it at or "
                                  f"below {ceiling} (the default is {ceiling} x busBandwidthEfficiency)"))
    size = (sum(len(k) + len(v) + 2 for k, v in w.env.items() if isinstance(v, str))
            + sum(len(a) + 1 for a in [*w.extra_args, *w.script_args, *(w.worker_command or [])]))
    if size > limits.ARG_MAX_BYTES:
        p.append(Problem(f"{at}.env", f"env, extraArgs and scriptArgs add up to {size} bytes, over Linux's ARG_MAX "
                                      f"({limits.ARG_MAX_BYTES} bytes for every argument and env string of one "
                                      f"exec): the container would fail to start (E2BIG); move data to a "
                                      f"ConfigMap or a file"))
    return p


def _autoscaling_problems(at: str, w: Workload) -> list[Problem]:
    a = w.autoscaling
    if a is None:
        return []
    if w.kind != "lws-inference":
        return [Problem(f"{at}.autoscaling", "only lws-inference groups are scaled by an HPA here; remove it")]
    p: list[Problem] = []
    if a.min_replicas > a.max_replicas:
        p.append(Problem(f"{at}.autoscaling.maxReplicas", f"{a.max_replicas} is below minReplicas {a.min_replicas}; "
                                                          f"set maxReplicas {a.min_replicas} or more"))
    elif not a.min_replicas <= w.replicas <= a.max_replicas:
        p.append(Problem(f"{at}.replicas", f"{w.replicas} is outside autoscaling's {a.min_replicas}..{a.max_replicas}; "
                                           f"the HPA would rescale it at once: set replicas {a.min_replicas}"))
    for j, m in enumerate(a.metrics):
        if not isinstance(m.get("type"), str):
            p.append(Problem(f"{at}.autoscaling.metrics[{j}].type", "each metric is an autoscaling/v2 MetricSpec "
                                                                    "with a type (Pods, Object, External, Resource)"))
    return p


def _training_resource_problems(cfg: StackConfig, at: str, w: Workload) -> list[Problem]:
    """issue 31: cpu / memoryGi / dataset belong to the training kinds' rank pods; the dataset's claim must be a
    claim name and its mount path must not hide /dev/shm or the checkpoint volume."""
    p: list[Problem] = []
    for key, value in (("cpu", w.cpu), ("memoryGi", w.memory_gi), ("dataset", w.dataset)):
        if value is not None and w.kind not in TRAINING_KINDS:
            p.append(Problem(f"{at}.{key}", f"only for the training kinds ({', '.join(TRAINING_KINDS)}); remove it"))
    d = w.dataset
    if d is None:
        return p
    if len(d.claim) > 253 or not _DNS_SUBDOMAIN.match(d.claim):
        p.append(Problem(f"{at}.dataset.claim", f"{d.claim!r} is not a PersistentVolumeClaim name (lowercase "
                                                f"letters, digits, '-' and '.'); give the existing claim's name"))
    path = d.mount_path.rstrip("/") or "/"
    checkpoints = (cfg.storage.mount_path if cfg.storage else "/checkpoints").rstrip("/")
    if not path.startswith("/") or path == "/":
        p.append(Problem(f"{at}.dataset.mountPath", f"{d.mount_path!r} must be an absolute path below /, e.g. /data"))
    else:
        for other, what in ((checkpoints, "the checkpoint volume (storage.mountPath)"), ("/dev/shm", "/dev/shm")):
            if path == other or path.startswith(other + "/") or other.startswith(path + "/"):
                p.append(Problem(f"{at}.dataset.mountPath", f"{d.mount_path!r} overlaps {what} at {other}; mount "
                                                            f"the dataset elsewhere, e.g. /data"))
    return p


# --- issue 18b: the NIM chart's options ------------------------------------------------------------------


def _secret_name_problem(name: str) -> str | None:
    if len(name) > 253 or not _DNS_SUBDOMAIN.match(name):
        return f"{name!r} is not a Secret name; use lowercase letters, digits, '-' and '.', e.g. 'ngc-api'"
    return None


def _nim_option_problems(cfg: StackConfig, at: str, w: Workload) -> list[Problem]:  # noqa: C901 - flat checks
    """The NIM chart's probes, existing Secrets and worker command: where they apply and what they contradict."""
    p: list[Problem] = []
    lws_nim = w.kind == "lws-inference" and w.engine == "nim"
    if w.probes is not None:
        pr = w.probes
        if w.kind == "mpijob" and w.engine == "nim":
            p.append(Problem(f"{at}.probes", "an MPIJob renders no probes (nor does the chart's MPIJob branch): the "
                                             "launcher is created only after every worker is Ready "
                                             "(WaitForWorkersReady) and NIM serves only under its mpirun, so an HTTP "
                                             "probe on the workers could never pass; remove probes"))
        elif not lws_nim:
            p.append(Problem(f"{at}.probes", "only NIM on lws-inference takes the NIM chart's probe switches; remove "
                                             "probes"))
        else:
            if not pr.readiness and w.nodes > 1:
                # NIM LLM docs, Multi-Node Deployment: readiness of a multi-node NIM is its leader's /v1/health/ready
                p.append(Problem(f"{at}.probes.readiness", f"false on a {w.nodes}-node group: the leader's "
                                                           f"/v1/health/ready is the only sign that every worker "
                                                           f"joined (NIM's multi-node readiness check); without it "
                                                           f"LWS counts a half-formed group Ready and the Service "
                                                           f"sends it traffic; keep readiness true"))
            if pr.liveness and not pr.startup:
                p.append(Problem(f"{at}.probes.liveness", "true with startup false: the liveness probe would kill "
                                                          "the leader during its first model download, and LWS "
                                                          "(RecreateGroupOnPodRestart) would recreate the whole group "
                                                          "every time; keep startup true or liveness false"))
            if not pr.startup and "startup_timeout_minutes" in w.model_fields_set:
                p.append(Problem(f"{at}.startupTimeoutMinutes", "is the startup probe's window, but probes.startup "
                                                                "is false; remove startupTimeoutMinutes or turn the "
                                                                "startup probe on"))
    if w.ngc_api_secret is not None:
        bad = _secret_name_problem(w.ngc_api_secret)
        if w.engine != "nim":
            p.append(Problem(f"{at}.ngcApiSecret", "only NIM reads an NGC key; remove ngcApiSecret"))
        elif bad:
            p.append(Problem(f"{at}.ngcApiSecret", bad))
        elif cfg.ngc_api_key:
            p.append(Problem(f"{at}.ngcApiSecret", f"names an existing NGC Secret, and the stack's ngcApiKey would "
                                                   f"make another: choose one (remove ngcApiSecret, or "
                                                   f"`pulumi config rm {NAMESPACE}:ngcApiKey`)"))
    if w.image_pull_secrets:
        for j, name in enumerate(w.image_pull_secrets):
            bad = _secret_name_problem(name)
            if bad:
                p.append(Problem(f"{at}.imagePullSecrets[{j}]", bad))
            elif name in w.image_pull_secrets[:j]:
                p.append(Problem(f"{at}.imagePullSecrets[{j}]", f"{name!r} is listed twice; list it once"))
        if cfg.image_pull_secret:
            p.append(Problem(f"{at}.imagePullSecrets", f"names existing pull Secrets, and the stack's imagePullSecret "
                                                       f"would create another for this workload: choose one (remove "
                                                       f"imagePullSecrets, or `pulumi config rm "
                                                       f"{NAMESPACE}:imagePullSecret`)"))
    if w.worker_command is not None:
        if w.kind == "mpijob" and w.engine == "nim":
            p.append(Problem(f"{at}.workerCommand", "MPIJob workers must run sshd for the launcher's mpirun (the "
                                                    "chart's worker command); remove workerCommand (mpirun options "
                                                    "go in extraArgs)"))
        elif not lws_nim:
            p.append(Problem(f"{at}.workerCommand", "only NIM on lws-inference takes a worker command; remove it"))
        elif not w.worker_command or not all(a.strip() for a in w.worker_command):
            p.append(Problem(f"{at}.workerCommand", "an empty command; give the program and its arguments, e.g. "
                                                    "['/bin/bash', '-c', '<your script>'], or remove it to keep the "
                                                    "image's entrypoint"))
        elif w.nodes == 1:
            p.append(Problem(f"{at}.workerCommand", "a 1-node group has no worker pods; remove workerCommand"))
    return p


# The downward API fields an env var may read (k8s.io/kubernetes v1.34 pkg/apis/core/validation/validation.go
# validEnvDownwardAPIFieldPathExpressions; labels and annotations by key through validateDownwardAPIFieldPath).
ENV_FIELD_PATHS = ("metadata.name", "metadata.namespace", "metadata.uid", "spec.nodeName", "spec.serviceAccountName",
                   "status.hostIP", "status.hostIPs", "status.podIP", "status.podIPs")
_LABEL_FIELD_PATH = re.compile(r"^metadata\.(labels|annotations)\['[^'\]]+'\]\Z")
# A Secret / ConfigMap key (k8s.io/apimachinery pkg/util/validation IsConfigMapKey: [-._a-zA-Z0-9]+, at most 253)
_CONFIG_KEY = re.compile(r"^[-._a-zA-Z0-9]{1,253}\Z")


def _env_reference_problems(cfg: StackConfig, at: str, w: Workload) -> list[Problem]:
    """workloads[].env valueFrom and envFrom: exactly one source each, names and keys the API server takes."""
    p: list[Problem] = []
    for name, value in w.env.items():
        if isinstance(value, str):
            continue
        where = f"{at}.env.{name}.valueFrom"
        vf = value.value_from
        given = [k for k, v in (("secretKeyRef", vf.secret_key_ref), ("configMapKeyRef", vf.config_map_key_ref),
                                ("fieldRef", vf.field_ref)) if v is not None]
        if len(given) != 1:
            p.append(Problem(where, f"{'sets ' + ' and '.join(given) if given else 'is empty'}; set exactly one of "
                                    f"secretKeyRef {{name, key}}, configMapKeyRef {{name, key}} or fieldRef "
                                    f"{{fieldPath}}"))
            continue
        ref = vf.secret_key_ref or vf.config_map_key_ref
        if ref is not None:
            bad = _secret_name_problem(ref.name)
            if bad:
                p.append(Problem(f"{where}.{given[0]}.name", bad))
            if not _CONFIG_KEY.match(ref.key):
                p.append(Problem(f"{where}.{given[0]}.key", f"{ref.key!r} is not a Secret / ConfigMap key; use "
                                                            f"letters, digits, '-', '_' and '.', e.g. 'api-key'"))
        elif vf.field_ref is not None:
            fp = vf.field_ref.field_path
            if fp not in ENV_FIELD_PATHS and not _LABEL_FIELD_PATH.match(fp):
                p.append(Problem(f"{where}.fieldRef.fieldPath", f"{fp!r} is not a field the downward API gives env; "
                                                                f"use one of {', '.join(ENV_FIELD_PATHS)}, or "
                                                                f"metadata.labels['<key>']"))
        top = SECRET_ENV_NAMES.get(name.upper())
        if top is not None and getattr(cfg, "hf_token" if top == "hfToken" else "ngc_api_key"):
            p.append(Problem(f"{at}.env.{name}", f"{name} is already set from the stack's {top}; choose one (remove "
                                                 f"this entry, or `pulumi config rm {NAMESPACE}:{top}`)"))
    for j, src in enumerate(w.env_from):
        where = f"{at}.envFrom[{j}]"
        refs = [r for r in (src.secret_ref, src.config_map_ref) if r is not None]
        if len(refs) != 1:
            p.append(Problem(where, "set exactly one of secretRef {name} or configMapRef {name}"))
            continue
        bad = _secret_name_problem(refs[0].name)
        if bad:
            p.append(Problem(f"{where}.{'secretRef' if src.secret_ref else 'configMapRef'}.name", bad))
        if src.prefix is not None and not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", src.prefix):
            p.append(Problem(f"{where}.prefix", f"{src.prefix!r} would not start a valid env name; use letters, "
                                                f"digits and '_', e.g. 'WANDB_'"))
    return p


# Env names that carry credentials: they come from the top-level secrets, never from workloads[].env.
SECRET_ENV_NAMES = {"HF_TOKEN": "hfToken", "HUGGING_FACE_HUB_TOKEN": "hfToken", "NGC_API_KEY": "ngcApiKey"}
IMAGE_REQUIRED = {"nim": "an NGC NIM image, e.g. nvcr.io/nim/meta/llama-3.1-405b-instruct:<tag>",
                  "mpijob": "an image with Open MPI, sshd and your training code",
                  "nccl-test": "an image with Open MPI, sshd and nccl-tests built for this fabric"}


def _workload_runtime_problems(cfg: StackConfig, at: str, w: Workload, m: catalog.Machine,
                               pool: NodePool) -> list[Problem]:
    """Checks the workload builders rely on (multinode/manifests/workloads)."""
    p: list[Problem] = []
    for name, value in w.env.items():
        if name.upper() in SECRET_ENV_NAMES and isinstance(value, str):
            key = SECRET_ENV_NAMES[name.upper()]
            p.append(Problem(f"{at}.env.{name}", f"credentials never go in env; remove it and set the secret "
                                                 f"`pulumi config set --secret {NAMESPACE}:{key} ...`"))
    need_storage = w.kind != "nccl-test"
    if need_storage and cfg.storage is None:
        p.append(Problem(f"{at}.kind", f"{w.kind} keeps its model cache and checkpoints on the ReadWriteMany "
                                       f"volume; configure storage"))
    if need_storage and cfg.storage is not None and w.namespace != cfg.storage.namespace:
        p.append(Problem(f"{at}.namespace", f"{w.namespace!r}, but the checkpoint claim lives in namespace "
                                            f"{cfg.storage.namespace!r}; use namespace {cfg.storage.namespace!r}"))
    image_key = "nccl-test" if w.kind == "nccl-test" else (
        "mpijob" if w.kind == "mpijob" and w.engine != "nim" else w.engine)
    if image_key in IMAGE_REQUIRED and not w.image:
        p.append(Problem(f"{at}.image", f"{w.kind} {w.engine or ''} has no default image; set image to "
                                        f"{IMAGE_REQUIRED[image_key]}".replace("  ", " ")))
    if w.kind in ("volcano-training", "indexed-job", "trainjob") and w.engine is None and not w.image:
        # the builders pick their default image by engine (multinode/images.py DEFAULT_IMAGES)
        p.append(Problem(f"{at}.engine", f"{w.kind} without an engine has no default image; set engine "
                                         f"(torchrun or deepspeed) or image"))
    # --- issue 18: torchrun's rendezvous comes from the rendered flags (c10d at the rank-0 pod); MASTER_ADDR /
    # MASTER_PORT in env would name another one and silently disagree with them.
    if w.kind in ("volcano-training", "indexed-job"):
        for name in w.env:
            if name.upper() in ("MASTER_ADDR", "MASTER_PORT"):
                p.append(Problem(f"{at}.env.{name}", f"the rendezvous is set by the rendered torchrun flags "
                                                     f"(--rdzv_endpoint at the rank-0 pod); remove {name}"))
    p.extend(_volcano_job_option_problems(cfg, at, w))
    p.extend(_nim_option_problems(cfg, at, w))
    if w.engine == "nim" and not cfg.ngc_api_key and not w.ngc_api_secret:
        p.append(Problem("ngcApiKey", f"{at} runs NIM, which downloads its model from NGC; set "
                                      f"`pulumi config set --secret {NAMESPACE}:ngcApiKey ...`, or name an existing "
                                      f"Secret with key NGC_API_KEY in {at}.ngcApiSecret"))
    if w.kind == "grove-inference" and w.engine == "trtllm":
        roles = [w.disaggregated.prefill, w.disaggregated.decode] if w.disaggregated else []
        if any(r.nodes > 1 for r in roles) or (not w.disaggregated and w.nodes > 1):
            p.append(Problem(f"{at}.engine", "trtllm roles spanning nodes need an MPI launcher this project does "
                                             "not render; use vllm or sglang, or one node per role"))
    if w.kind == "nccl-test" and not cfg.addons.volcano.enabled:
        p.append(Problem(f"{at}.kind", "nccl-test runs as a Volcano Job (mpi plugin); set addons.volcano.enabled true"))
    if w.kind == "nccl-test":
        n = nccl_test_nodes(w.nodes, pool.node_count)
        if n < 2:
            p.append(Problem(f"{at}.nodes", f"a bandwidth check across nodes needs 2 or more; node pool "
                                            f"{pool.name!r} has {pool.node_count}"))
        if n > pool.node_count:
            p.append(Problem(f"{at}.nodes", f"{n} nodes, but node pool {pool.name!r} has {pool.node_count}; "
                                            f"use at most {pool.node_count}"))
        confirmed = m.bandwidth_gbps is not None and "bandwidth_gbps" not in m.unconfirmed
        if w.min_bus_bandwidth_gbps is None and not confirmed:
            p.append(Problem(f"{at}.minBusBandwidthGbps",
                             f"the catalog has no confirmed fabric bandwidth for {m.name}, so the check has no "
                             f"threshold; set minBusBandwidthGbps (Gbit/s of bus bandwidth the check must reach, "
                             f"e.g. 1200 for 150 GB/s)"))
    return p
