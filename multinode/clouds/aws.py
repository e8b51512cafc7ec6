"""cloud: aws, in the pure core (no Pulumi, no SDK): the same sections as every multinode/clouds module.

- config rules: `CLUSTER_KEYS`, `STORAGE_KINDS`, `REQUIRED_FABRIC`, `CAPACITY_BLOCKS`, `CREATES_POOLS`
  (read by multinode/checks.py) and `config_problems(cfg)`;
- fabric profile: `FABRICS`, `NCCL_NET`, `fabric_settings` (EFA; assembled by multinode/fabric.py);
- storage limits: FSx for Lustre sizes and throughput tiers (components/clouds/aws.py reads the same
  constants, so the check and the resource cannot disagree);
- mock data for `plan`: `MOCK_CALLS`, `MOCK_OUTPUTS` (registered by multinode/recording.py).

Sources (checked 2026-11-22 with the docs search):
- FSX_SIZES: Amazon FSx API reference, CreateFileSystem.StorageCapacity: "For SCRATCH_2, PERSISTENT_2,
  and PERSISTENT_1 deployment types using SSD storage type, the valid values are 1200 GiB, 2400 GiB,
  and increments of 2400 GiB" (the n x 3600 steps in hardware.md are SCRATCH_1 only).
  FSx file systems with EFA enabled have other steps; we never enable EFA on FSx.
- FSX_THROUGHPUT: FSx for Lustre guide, "Managing throughput capacity": PERSISTENT_2 SSD takes
  125, 250, 500 and 1000 MB/s/TiB.
"""
from __future__ import annotations

import base64
import json
import re
from collections.abc import Callable
from typing import Any

from ..catalog import Machine, UnknownMachine, node_share_per_gpu
from ..errors import Problem
from ..pools import node_taints

# ---------------------------------------------------------------- config rules
CLUSTER_KEYS = ("name", "region")
STORAGE_KINDS = ("fsx-lustre", "efs")
REQUIRED_FABRIC = "efa"        # node pools wire up EFA: the machine must have it unless fabric.enabled is false
CAPACITY_BLOCKS = True         # EC2 Capacity Blocks for ML exist only here
CREATES_POOLS = True

FSX_DEPLOYMENT_TYPE = "PERSISTENT_2"
FSX_THROUGHPUT = (125, 250, 500, 1000)
FSX_DEFAULT_THROUGHPUT = 250
FSX_FIRST_SIZES = (1200, 2400)
FSX_STEP = 2400


def fsx_size_ok(gib: int) -> bool:
    return gib in FSX_FIRST_SIZES or (gib > 0 and gib % FSX_STEP == 0)


def fsx_nearest(gib: int) -> list[int]:
    """The allowed sizes just below and just above `gib`."""
    if gib < 1200:
        return [1200]
    if gib < 2400:
        return [1200, 2400]
    lower = gib // FSX_STEP * FSX_STEP
    return [lower, lower + FSX_STEP] if lower != gib else [gib]


def _sizes(values: list[int]) -> str:
    return " or ".join(f"{v} GiB" for v in values)


def storage_problems(storage: Any) -> list[Problem]:
    p: list[Problem] = []
    s = storage
    size: int | None = s.size_gib
    if s.kind == "fsx-lustre":
        if s.throughput is not None and s.throughput not in FSX_THROUGHPUT:
            p.append(Problem("storage.throughput", f"{s.throughput} MB/s/TiB is not a {FSX_DEPLOYMENT_TYPE} tier; "
                                                   f"use one of {', '.join(map(str, FSX_THROUGHPUT))}"))
        if size is not None and not fsx_size_ok(size):
            p.append(Problem("storage.sizeGib", f"{size} GiB is not an FSx for Lustre {FSX_DEPLOYMENT_TYPE} size "
                                                f"(1200, 2400, then multiples of 2400 GiB); "
                                                f"use {_sizes(fsx_nearest(size))}"))
    elif s.kind == "efs":
        if s.throughput is not None:
            p.append(Problem("storage.throughput", "EFS uses elastic throughput (no per-TiB tier); remove "
                                                   "storage.throughput"))
    return p


# The launch template puts one EFA interface on each network card (network_interfaces below; "at most one EFA per
# card"). The EC2 user guide's network cards table (catalog source A10) lists the maximum network cards per instance
# type; the most of any type there is 32 (p5.48xlarge, p5e.48xlarge), so a machineSpec asking more interfaces
# cannot launch. A catalog machine renders exactly its own card count.
EC2_MAX_NETWORK_CARDS = 32
EC2_NETWORK_CARDS_SOURCE = "docs.aws.amazon.com/AWSEC2/latest/UserGuide/using-eni.html#network-cards"

_AZ_ID = re.compile(r"^[a-z]{2,4}\d+-az\d+$")      # an AZ ID (use1-az1), not a zone name


def config_problems(cfg: Any, machines: dict[str, Any]) -> list[Problem]:
    """What only aws refuses: a pool without its one subnet, storage the services do not accept."""
    p: list[Problem] = []
    region = cfg.cluster.region or ""
    for i, pool in enumerate(cfg.node_pools):
        if not pool.subnet_id:
            p.append(Problem(f"nodePools[{i}].subnetId", "an EFA node pool lives in one subnet (one AZ) of the "
                                                         "cluster's VPC; set subnetId, e.g. subnet-0abc..."))
        # an AZ name is the region code followed by a letter (us-east-1a; a Local Zone us-east-1-bos-1a):
        # docs.aws.amazon.com/AWSEC2/latest/UserGuide/using-regions-availability-zones.html. An AZ ID (use1-az1)
        # names no region: not checked here.
        if pool.zone and region and not _AZ_ID.match(pool.zone) and not pool.zone.startswith(region):
            p.append(Problem(f"nodePools[{i}].zone", f"{pool.zone!r} is not an availability zone of the cluster's "
                                                     f"region {region!r} (cluster.region); use one such as "
                                                     f"{region}a"))
        try:
            m = cfg.machine(pool)
        except UnknownMachine:
            continue                                  # reported by the generic checks
        cards = efa_interface_count(m, cfg.fabric.enabled)
        if cards > EC2_MAX_NETWORK_CARDS:
            p.append(Problem(f"nodePools[{i}].machineSpec.fabricNics", (
                f"{cards} EFA interfaces, one per network card in the launch template (network_interfaces), but "
                f"an EC2 instance has at most {EC2_MAX_NETWORK_CARDS} network cards ({EC2_NETWORK_CARDS_SOURCE}): "
                f"EC2 refuses the launch; set fabricNics to the instance type's network cards (at most "
                f"{EC2_MAX_NETWORK_CARDS})")))
    if cfg.storage is not None:
        p.extend(storage_problems(cfg.storage))
    return p


# ---------------------------------------------------------------- node repair (issue 34, docs/node-health.md)
# EKS node auto repair on managed node groups ("Automatically repair nodes in EKS clusters",
# docs.aws.amazon.com/eks/latest/userguide/node-repair.html): off by default (pulumi_aws 7.51.1
# eks.NodeGroup node_repair_config.enabled "Defaults to `false`"); it acts on the node conditions the EKS node
# monitoring agent sets (AcceleratedHardwareReady: repair after 10m, Replace or Reboot; NetworkingReady, KernelReady,
# StorageReady, ContainerRuntimeReady, Ready: 30m, Replace). The agent is the EKS add-on below (same page and
# "Detect node health issues with the EKS node monitoring agent"; it reads NVIDIA XID codes and DCGM diagnostics:
# github.com/aws/eks-node-monitoring-agent README). EKS's own defaults stay (repair stops when more than 20% of a
# group of more than five nodes is unhealthy).
NODE_MONITORING_AGENT_ADDON = "eks-node-monitoring-agent"


def node_repair_config(cfg: Any) -> dict[str, Any]:
    """The managed node group's nodeRepairConfig: enabled unless cluster.nodeRepair is false."""
    return {"enabled": bool(cfg.cluster.node_repair)}


def node_monitoring_agent(cfg: Any) -> bool:
    """True when this stack installs the EKS node monitoring agent add-on (with node repair, on pools it creates)."""
    return bool(cfg.cluster.node_repair and cfg.node_pools)


# issue 40: the add-on's bundled `dcgm-server` DaemonSet (the nv-hostengine the agent reads GPU health from) ships with
# no tolerations, so it never runs on a tainted GPU node; the agent then reports DCGMError, fatal for
# AcceleratedHardwareReady, and node repair reboots/replaces the node about every 10 minutes
# (aws/containers-roadmap#2567 "Add default toleration for dcgm-server daemonset", #2555). The add-on's configuration
# schema takes `dcgmAgent.tolerations` (aws/eks-node-monitoring-agent charts/configuration.schema.json, read at
# 0b5f05cd: DCGMAgent.tolerations, a list of objects; "The EKS add-on accepts the subset of chart values in its
# configuration schema and rejects any others": docs.aws.amazon.com/eks/latest/userguide/
# node-monitoring-agent-configure.html). One toleration per taint our pools carry (pools.node_taints), scoped to
# those keys rather than `operator: Exists` on everything. The agent DaemonSet itself already tolerates every taint.
def node_monitoring_agent_configuration(cfg: Any) -> dict[str, Any]:
    """The add-on's configurationValues (sent as JSON)."""
    return {"dcgmAgent": {"tolerations": [{"key": t["key"], "operator": "Exists", "effect": t["effect"]}
                                          for t in node_taints(cfg)]}}


# EKS service quotas (docs.aws.amazon.com/eks/latest/userguide/service-quotas.html, "Service quotas" table): "Nodes
# per managed node group" 450 and "Managed node groups per cluster" 30, both "Adjustable: Yes" in Service Quotas, so
# soft: a stack above them is advised to raise the quota before `pulumi up`, not refused. Every pool of an aws stack
# is one managed node group (components/clouds/aws.py GpuNodePool); node groups the cluster already has count too.
EKS_NODES_PER_NODE_GROUP = 450
EKS_NODE_GROUPS_PER_CLUSTER = 30
EKS_QUOTAS_SOURCE = "docs.aws.amazon.com/eks/latest/userguide/service-quotas.html"


def quota_advisories(cfg: Any) -> list[Problem]:
    """The EKS quotas a large stack meets (issue 47): nodes per managed node group, node groups per cluster."""
    out: list[Problem] = []
    for i, pool in enumerate(cfg.node_pools):
        if pool.node_count > EKS_NODES_PER_NODE_GROUP:
            out.append(Problem(f"nodePools[{i}].nodeCount", (
                f"{pool.node_count} nodes in one EKS managed node group, above the default quota 'Nodes per "
                f"managed node group' ({EKS_NODES_PER_NODE_GROUP}, adjustable; {EKS_QUOTAS_SOURCE}): raise it in "
                f"Service Quotas (Amazon EKS) for this region before `pulumi up`, or split the pool into pools of at "
                f"most {EKS_NODES_PER_NODE_GROUP} nodes")))
    if len(cfg.node_pools) > EKS_NODE_GROUPS_PER_CLUSTER:
        out.append(Problem("nodePools", (
            f"{len(cfg.node_pools)} pools are {len(cfg.node_pools)} EKS managed node groups, above the default quota "
            f"'Managed node groups per cluster' ({EKS_NODE_GROUPS_PER_CLUSTER}, adjustable; {EKS_QUOTAS_SOURCE}; "
            f"node groups the cluster already has count too): raise it in Service Quotas (Amazon EKS) before "
            f"`pulumi up`, or merge pools of the same machine")))
    return out


def advisories(cfg: Any) -> list[Problem]:
    """Non-fatal findings of this cloud: the EKS quotas a large stack meets."""
    return quota_advisories(cfg)

# ---------------------------------------------------------------- node bootstrap
# (read by components/clouds/aws.py: launch template, node group, IAM, CSI add-ons)
# AMI types of EKS managed node groups with the NVIDIA driver (hardware.md section 3).
AMI_X86 = "AL2023_x86_64_NVIDIA"
AMI_ARM = "AL2023_ARM_64_NVIDIA"      # Grace-based GB200 instances are arm64
NODE_POLICIES = (
    "arn:aws:iam::aws:policy/AmazonEKSWorkerNodePolicy",
    "arn:aws:iam::aws:policy/AmazonEKS_CNI_Policy",
    "arn:aws:iam::aws:policy/AmazonEC2ContainerRegistryReadOnly",
)
FSX_CSI = {"addon": "aws-fsx-csi-driver", "driver": "fsx.csi.aws.com", "service_account": "fsx-csi-controller-sa",
           "policy": "arn:aws:iam::aws:policy/AmazonFSxFullAccess"}
EFS_CSI = {"addon": "aws-efs-csi-driver", "driver": "efs.csi.aws.com", "service_account": "efs-csi-controller-sa",
           "policy": "arn:aws:iam::aws:policy/service-role/AmazonEFSCSIDriverPolicy"}
# Lustre client ports (FSx for Lustre guide, "File system access control with Amazon VPC").
LUSTRE_PORTS = ((988, 988), (1018, 1023))
NFS_PORT = 2049
TAINT_EFFECT = {"NoSchedule": "NO_SCHEDULE", "NoExecute": "NO_EXECUTE", "PreferNoSchedule": "PREFER_NO_SCHEDULE"}


def ami_type(machine: Machine) -> str:
    return AMI_ARM if machine.gpu_model.upper().startswith("GB") else AMI_X86


def efa_interface_count(machine: Machine, fabric_enabled: bool) -> int:
    """One EFA interface per network card (at most one EFA per card); the catalog's EFA count when
    the card layout is unconfirmed. 0 = no EFA (a single ENA primary interface)."""
    if not fabric_enabled or machine.fabric != "efa":
        return 0
    return machine.network_cards or machine.fabric_nics or 0


def network_interfaces(machine: Machine, fabric_enabled: bool, security_groups: list[Any]) -> list[dict[str, Any]]:
    """Launch template interfaces: card 0 device 0 is EFA with ENA (the primary interface cannot be
    EFA-only); every further card gets one EFA-only interface at device index 1 (EC2 user guide,
    efa-acc-inst-types: "use the next unused network card index, device index 1, and either EFA or
    EFA-only"). EFA-only interfaces take no IP address, so the pool does not drain the subnet.
    No public IPs: one interface is set to associate none; EC2 never auto-assigns a public IPv4
    address when an instance launches with several interfaces (and refuses the flag then)."""
    n = efa_interface_count(machine, fabric_enabled)
    base = {"security_groups": security_groups, "delete_on_termination": "true"}
    if n <= 1:
        primary = {"network_card_index": 0, "device_index": 0, "associate_public_ip_address": "false", **base}
        if n == 1:
            primary["interface_type"] = "efa"
        return [primary]
    out = [{"network_card_index": 0, "device_index": 0, "interface_type": "efa", **base}]
    out += [{"network_card_index": card, "device_index": 1, "interface_type": "efa-only", **base}
            for card in range(1, n)]
    return out


def eks_taints(cfg: Any) -> list[dict[str, str]]:
    return [{"key": t["key"], "value": t["value"], "effect": TAINT_EFFECT[t["effect"]]} for t in node_taints(cfg)]


def kubeconfig_for(name: str, region: str, endpoint: str, ca_data: str) -> str:
    """A kubeconfig that asks `aws eks get-token` for a short-lived token (no token in the state)."""
    return json.dumps({
        "apiVersion": "v1", "kind": "Config", "current-context": name, "preferences": {},
        "clusters": [{"name": name, "cluster": {"server": endpoint, "certificate-authority-data": ca_data}}],
        "contexts": [{"name": name, "context": {"cluster": name, "user": name}}],
        "users": [{"name": name, "user": {"exec": {
            "apiVersion": "client.authentication.k8s.io/v1beta1", "command": "aws",
            "args": ["eks", "get-token", "--cluster-name", name, "--region", region, "--output", "json"],
            "interactiveMode": "Never"}}}],
    })


def pod_identity_trust() -> str:
    """Trust policy for an EKS Pod Identity role (EKS user guide, pod-id-role)."""
    return json.dumps({"Version": "2012-10-17", "Statement": [{
        "Effect": "Allow", "Principal": {"Service": "pods.eks.amazonaws.com"},
        "Action": ["sts:AssumeRole", "sts:TagSession"]}]})


def node_trust() -> str:
    return json.dumps({"Version": "2012-10-17", "Statement": [{
        "Effect": "Allow", "Principal": {"Service": "ec2.amazonaws.com"}, "Action": "sts:AssumeRole"}]})


# ---------------------------------------------------------------- fabric profile
# Kubernetes extended resource of EFA (hardware.md section 2).
EFA_RESOURCE = "vpc.amazonaws.com/efa"
FABRICS = ("efa",)
# NCCL_NET pins the network plugin NCCL must load (see multinode/fabric.py):
# aws/aws-ofi-nccl src/nccl_ofi_interface_nvidia.cpp: `.name = "AWS Libfabric"` (every ncclNet_vN).
NCCL_NET = {"efa": "AWS Libfabric"}


def fabric_settings(kind: str, cfg: Any, pool: Any, machine: Machine,
                    count: int) -> tuple[str, int, dict[str, Any]]:
    """(device resource, devices per node, what the pod gets) for an EFA pool (multinode/fabric.py)."""
    return EFA_RESOURCE, count, _efa(machine)


def _efa(machine: Machine) -> dict[str, Any]:
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
    #   nccl-tests-gb200.yaml requests no hugepages. We follow the no-hugepages shape for every EFA machine,
    #   the bandwidth check (kind nccl-test) included (issue 30, decided): the check gates a release of the
    #   workloads, so it measures the memory setup they run with; a hugepages-2Mi request would also leave the
    #   check Pending on nodes without pre-allocated 2 MiB pages. What huge pages on would add on p5 is for a
    #   real cluster to measure (docs/clouds-aws-azure.md).
    #
    # No NCCL_TUNER_PLUGIN (issue 30). The upstream sources disagree on where the tuner lives, because the EFA
    # installer moved it: aws/deep-learning-containers@e0ecedea scripts/docker/common/install_efa.sh:19-31 (EFA
    # >= 1.44.0: /opt/amazon/ofi-nccl/lib/libnccl-net-ofi.so, no <arch> folder; older: lib/<arch>-linux-gnu/);
    # awsome-distributed-training@7217859f names three paths (kubernetes/nccl-tests.yaml:50
    # lib/x86_64-linux-gnu/, slurm/nccl-tests-ami.sbatch:42 lib/, nccl-tests-gb200.yaml:68
    # /opt/aws-ofi-nccl/install/lib/). A fixed path is wrong for some image, and on arm64 (p6e-gb200) always.
    # NCCL >= 2.21 looks for the tuner in the net plugin itself when NCCL_TUNER_PLUGIN is unset, and aws-ofi-nccl
    # builds the tuner into the net plugin (aws/aws-ofi-nccl PR #922, "Enable the AWS tuner by default on AWS
    # platforms", merged 2025-06-09; the libnccl-ofi-tuner.so names are symlinks to libnccl-net-ofi.so,
    # awsome-distributed-training PR #936). NCCL_NET pins that plugin, so it is the one loaded.
    env = {
        "FI_PROVIDER": "efa",
        "FI_EFA_FORK_SAFE": "1",
        "FI_EFA_USE_HUGE_PAGE": "0",
        "NCCL_BUFFSIZE": "8388608",
        "NCCL_P2P_NET_CHUNKSIZE": "524288",
    }
    if machine.gpu_model.startswith("GB"):
        # GB200 NVL domains (hardware.md section 2: NCCL_NVLS_ENABLE=1, NCCL_MNNVL_ENABLE=1).
        env.update({"NCCL_NVLS_ENABLE": "1", "NCCL_MNNVL_ENABLE": "1"})
    return {"env": env, "requests_per_gpu": node_share_per_gpu(machine)}


# ---------------------------------------------------------------- mock data for plan
# Canned AWS answers for offline runs (plan, tests): an EKS cluster as `aws eks describe-cluster`
# would describe it, and the computed outputs our AWS resources need. multinode/recording.py registers
# MOCK_CALLS / MOCK_OUTPUTS for stacks of this cloud only.
FAKE_CA = base64.b64encode(b"-----BEGIN CERTIFICATE-----\nMIIB-offline-plan\n-----END CERTIFICATE-----\n").decode()


def eks_cluster(args: dict[str, Any]) -> dict[str, Any]:
    name = args.get("name") or "cluster"
    region = args.get("region") or "us-east-1"
    return {
        "id": name, "name": name, "region": region, "status": "ACTIVE", "version": "1.33",
        "arn": f"arn:aws:eks:{region}:123456789012:cluster/{name}",
        "endpoint": f"https://0123456789ABCDEF0123456789ABCDEF.gr7.{region}.eks.amazonaws.com",
        "roleArn": "arn:aws:iam::123456789012:role/eks-cluster",
        "platformVersion": "eks.8", "createdAt": "2026-01-01T00:00:00Z",
        "certificateAuthorities": [{"data": FAKE_CA}],
        "vpcConfig": {
            "clusterSecurityGroupId": "sg-0c1a2b3c4d5e6f708",
            "controlPlaneEgressMode": "",
            "endpointPrivateAccess": True, "endpointPublicAccess": False,
            "publicAccessCidrs": [], "securityGroupIds": [],
            "subnetIds": ["subnet-0a1b2c3d4e5f60718", "subnet-0b1c2d3e4f5a60718"],
            "vpcId": "vpc-0f1e2d3c4b5a69788",
        },
        "accessConfigs": [], "computeConfigs": [], "controlPlaneScalingConfigs": [],
        "enabledClusterLogTypes": [], "identities": [], "kubernetesNetworkConfigs": [],
        "outpostConfigs": [], "remoteNetworkConfigs": [], "storageConfigs": [], "tags": {},
        "upgradePolicies": [], "zonalShiftConfigs": [], "deletionProtection": False,
        "clusterId": "", "kubeApiServerConfigs": [], "kubeControllerManagerConfigs": [],
        "kubeSchedulerConfigs": [],
    }


MOCK_CALLS: dict[str, Callable[[dict[str, Any]], dict[str, Any]]] = {"aws:eks/getCluster:getCluster": eks_cluster}
MOCK_OUTPUTS: dict[str, Callable[[str, dict[str, Any]], dict[str, Any]]] = {}

MOCK_OUTPUTS["aws:ec2/launchTemplate:LaunchTemplate"] = lambda name, inputs: {"latestVersion": 1, "defaultVersion": 1}
MOCK_OUTPUTS["aws:fsx/lustreFileSystem:LustreFileSystem"] = lambda name, inputs: {
    "dnsName": "fs-0123456789abcdef0.fsx.us-east-1.amazonaws.com", "mountName": "abcdefgh"}
MOCK_OUTPUTS["aws:efs/fileSystem:FileSystem"] = lambda name, inputs: {
    "dnsName": "fs-0123abcd.efs.us-east-1.amazonaws.com"}


def _autoname(extra: Callable[[str, dict[str, Any]], dict[str, Any]] | None = None,
              ) -> Callable[[str, dict[str, Any]], dict[str, Any]]:
    """Pulumi auto-names these (logical name + random suffix); mimic it so references resolve."""
    def fn(name: str, inputs: dict[str, Any]) -> dict[str, Any]:
        out = {"name": inputs.get("name") or f"{name}-0a1b2c3"}
        out.update(extra(name, inputs) if extra else {})
        return out
    return fn


MOCK_OUTPUTS["aws:ec2/placementGroup:PlacementGroup"] = _autoname()
MOCK_OUTPUTS["aws:ec2/securityGroup:SecurityGroup"] = _autoname()
MOCK_OUTPUTS["aws:iam/role:Role"] = _autoname(
    lambda name, inputs: {"arn": f"arn:aws:iam::123456789012:role/{name}-0a1b2c3"})
