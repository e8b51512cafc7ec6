"""Optional local NVMe per node pool (`nodePools[].localNvme`), off by default.

`localNvme: raid0` stripes the machine's local NVMe (instance store) into one RAID0 array at boot and puts
the node's kubelet and containerd directories on it, as the peers do: aws-ia/terraform-aws-eks-blueprints
patterns/nvidia-gpu-efa/eks.tf (p5 node group, nodeadm `instance.localStorage.strategy: RAID0`, "Mount
instance store volumes in RAID-0 for kubelet and containerd"). nodeadm (awslabs/amazon-eks-ami, NodeConfig
`spec.instance.localStorage.strategy`, enum RAID0 / RAID10 / Mount) builds the array and mounts it under
/mnt/k8s-disks, bind-mounting kubelet and containerd state there. Effect: image layers, container writable
layers and disk-backed `emptyDir` volumes (a model cache, scratch) live on the array, and the node's
ephemeral-storage capacity becomes the array's size. Data there is lost with the node: checkpoints stay on
the RWX claim.

AWS only in this version (the AL2023 NVIDIA AMI runs nodeadm); other clouds are refused with the reason.
Off by default because it changes the launch template's user data, which replaces the nodes of an
existing pool.
"""
from __future__ import annotations

import base64
from typing import TYPE_CHECKING

from .errors import Problem

if TYPE_CHECKING:                   # annotations only: config imports this module
    from .config import StackConfig

STRATEGIES = {"raid0": "RAID0"}        # our value -> nodeadm LocalStorageStrategy
SUPPORTED_CLOUDS = ("aws",)
BOUNDARY = "MULTINODE"


def nodeadm_user_data(strategy: str) -> str:
    """The MIME multi-part user data carrying one nodeadm NodeConfig. EKS merges it with the NodeConfig it
    generates for a managed node group (nodeadm merges every application/node.eks.aws part; awslabs/
    amazon-eks-ami nodeadm doc/examples.md "Merging multiple configuration objects")."""
    return (
        "MIME-Version: 1.0\n"
        f'Content-Type: multipart/mixed; boundary="{BOUNDARY}"\n'
        "\n"
        f"--{BOUNDARY}\n"
        "Content-Type: application/node.eks.aws\n"
        "\n"
        "---\n"
        "apiVersion: node.eks.aws/v1alpha1\n"
        "kind: NodeConfig\n"
        "spec:\n"
        "  instance:\n"
        "    localStorage:\n"
        f"      strategy: {STRATEGIES[strategy]}\n"
        "\n"
        f"--{BOUNDARY}--\n"
    )


def user_data_b64(strategy: str) -> str:
    """Launch templates take user data base64-encoded."""
    return base64.b64encode(nodeadm_user_data(strategy).encode()).decode()


def config_problems(cfg: StackConfig) -> list[Problem]:
    """localNvme on a cloud we do not bootstrap, or on a machine without (confirmed) local NVMe."""
    out: list[Problem] = []
    for i, pool in enumerate(cfg.node_pools):
        if not pool.local_nvme:
            continue
        at = f"nodePools[{i}].localNvme"
        if cfg.cloud not in SUPPORTED_CLOUDS:
            out.append(Problem(at, f"{pool.local_nvme} is implemented for {', '.join(SUPPORTED_CLOUDS)} node pools "
                                   f"only (nodeadm on the EKS AL2023 NVIDIA AMI); on {cfg.cloud} stripe the disks "
                                   f"in the node image or remove localNvme"))
            continue
        try:
            machine = cfg.machine(pool)
        except KeyError:                               # unknown machine: config reports it
            continue
        if not machine.local_nvme_gb:
            why = ("the catalog has no confirmed local NVMe for it" if "local_nvme_gb" in machine.unconfirmed
                   else "it has no local NVMe")
            out.append(Problem(at, f"{machine.name}: {why}; remove localNvme or use a machine with instance "
                                   f"store (e.g. p5.48xlarge, 8 x 3800 GB)"))
    return out
