"""Pure facts about a node pool that several layers must agree on: labels, taints, selectors,
names of the per-pool networks. The cloud components create nodes with these; the workloads,
fabric policies and policy pack select nodes by them."""
from __future__ import annotations

from . import nvsentinel
from .catalog import Machine
from .config import NodePool, StackConfig

POOL_LABEL = "multinode.dev/node-pool"
MACHINE_LABEL = "multinode.dev/machine"
FABRIC_NODE_LABEL = "multinode.dev/fabric"
# Pods that span nodes carry this label; the Kyverno policies inject the fabric into them.
FABRIC_POD_LABEL = "multinode.dev/fabric"
FABRIC_POD_LABEL_VALUE = "enabled"
# A GPU pod on a fabric pool that deliberately runs on one node (no NCCL across nodes) says so with this
# label; the Kyverno rule `require-fabric-label-on-fabric-pool` refuses a GPU pod there that has neither.
SINGLE_NODE_POD_LABEL = "multinode.dev/single-node"
SINGLE_NODE_POD_LABEL_VALUE = "true"
# NeMo-launched pods are marked this way; the fabric policies match them too.
NEMO_ANNOTATION = "nmp.nvidia.com/enable-multi-node-networking"
NEMO_ANNOTATION_VALUE = "true"


def asks_for_fabric(labels: object, annotations: object) -> bool:
    """A pod asks for the fabric with our label or with NeMo's annotation (the Kyverno fabric policies
    match either); the policy pack, plan and placement must accept the same two triggers."""
    lab = labels if isinstance(labels, dict) else {}
    ann = annotations if isinstance(annotations, dict) else {}
    return (lab.get(FABRIC_POD_LABEL) == FABRIC_POD_LABEL_VALUE
            or ann.get(NEMO_ANNOTATION) == NEMO_ANNOTATION_VALUE)

GPU_TAINT = {"key": "nvidia.com/gpu", "value": "true", "effect": "NoSchedule"}
EFA_PRESENT_LABEL = "vpc.amazonaws.com/efa.present"


def node_labels(cfg: StackConfig, pool: NodePool, machine: Machine) -> dict[str, str]:
    """Labels every node of a created pool carries (existing pools: their nodeSelector)."""
    if cfg.cloud == "existing":
        return dict(pool.node_selector)
    labels = {
        POOL_LABEL: pool.name,
        MACHINE_LABEL: machine.name.replace("_", "-").replace(".", "-").lower()[:63].strip("-"),
        FABRIC_NODE_LABEL: machine.fabric,
        "nvidia.com/gpu.present": "true",
    }
    if machine.fabric == "efa":
        labels[EFA_PRESENT_LABEL] = "true"
    # issue 40: the DCGM major version NVSentinel's GPU health monitor is selected by in embedded-mode (nothing
    # else writes it there: multinode/nvsentinel.py)
    labels.update(nvsentinel.node_labels(cfg))
    labels.update(pool.labels)
    return labels


def node_selector(cfg: StackConfig, pool: NodePool) -> dict[str, str]:
    """What a pod uses to land on this pool."""
    if cfg.cloud == "existing":
        return dict(pool.node_selector)
    return {POOL_LABEL: pool.name}


def node_taints(cfg: StackConfig) -> list[dict[str, str]]:
    return [] if cfg.cloud == "existing" else [dict(GPU_TAINT)]


def tolerations() -> list[dict[str, str]]:
    """Tolerate the GPU taint (harmless where it is absent)."""
    return [{"key": GPU_TAINT["key"], "operator": "Exists", "effect": GPU_TAINT["effect"]}]


def gcp_network_names(pool: NodePool, count: int) -> list[str]:
    """Names of the extra GPU VPCs / GKE Network objects of a GCP pool (vpc1..vpcN per pool)."""
    return [f"{pool.name}-gpu-{i}" for i in range(1, count + 1)]
