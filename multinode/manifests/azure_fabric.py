"""Azure InfiniBand objects besides the Network Operator: the nvidia-peermem loader and the NCCL topology.

- `peermem_loader(cfg)`: the DaemonSet that loads nvidia-peermem on the InfiniBand GPU nodes when AKS
  installs the GPU driver (the default; see "GPUDirect RDMA" in multinode/clouds/azure.py).
- `topology_config_maps(cfg)`: one ConfigMap per NCCL topology file the stack's pools use, in every
  namespace a workload runs in; the fabric policy mounts it (multinode/clouds/azure.py `_infiniband`).
Both are [] on other clouds. components/kubernetes registers them (fabric.py, workloads.py).
"""
from __future__ import annotations

from typing import Any

from .. import pools
from ..clouds import azure
from ..config import StackConfig
from . import storage as sm


def _ib_pools(cfg: StackConfig) -> list[Any]:
    return [p for p in cfg.node_pools if cfg.machine(p).fabric == "infiniband"]


def peermem_loader(cfg: StackConfig) -> list[dict[str, Any]]:
    """[DaemonSet] loading nvidia-peermem on this stack's InfiniBand pools, or [] when nothing needs it.

    Compared with Azure/aks-rdma-infiniband configs/nvidia-peermem-reloader/ds.yaml (commit 700dabb4fe04):
    container, image, command, probes, privileged, the /lib/modules mount, priorityClassName and the
    RollingUpdate strategy are as upstream. Differences, each on purpose:
    - namespace kube-system, not gpu-resources: that namespace is not one this stack creates; kube-system
      always exists and admits system-node-critical pods.
    - node affinity on our pool label (the InfiniBand pools of this stack) instead of
      kubernetes.azure.com/accelerator=nvidia: only these nodes have the HCAs and the DOCA driver.
    - tolerations: the GPU taint our pools carry (pools.tolerations) instead of sku=gpu, which they do not.
    """
    if cfg.cloud != "azure" or not azure.loads_peermem_with_daemonset(cfg):
        return []
    names = [p.name for p in _ib_pools(cfg)]
    if not names:
        return []
    labels = {"name": azure.PEERMEM_LOADER_NAME}
    probe = ["/bin/bash", "-c", "modprobe nvidia-peermem"]
    container = {
        "name": "nvidia-peermem-reloader-ctr",
        "image": azure.PEERMEM_LOADER_IMAGE,
        "command": list(azure.PEERMEM_LOADER_COMMAND),
        # Upstream: the startup probe allows 10 s + 120 x 10 s for the driver (and DOCA) to come up.
        "startupProbe": {"exec": {"command": probe}, "initialDelaySeconds": 10, "failureThreshold": 120,
                         "successThreshold": 1, "periodSeconds": 10, "timeoutSeconds": 10},
        "livenessProbe": {"exec": {"command": probe}, "periodSeconds": 30, "initialDelaySeconds": 30,
                          "failureThreshold": 1, "successThreshold": 1, "timeoutSeconds": 10},
        "securityContext": {"privileged": True},
        "volumeMounts": [{"name": "lib-modules", "mountPath": "/lib/modules", "readOnly": True}],
    }
    affinity = {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
        {"matchExpressions": [{"key": pools.POOL_LABEL, "operator": "In", "values": names}]}]}}}
    return [{
        "apiVersion": "apps/v1", "kind": "DaemonSet",
        "metadata": {"name": azure.PEERMEM_LOADER_NAME, "namespace": "kube-system",
                     "labels": {**labels, **sm.MANAGED_BY}},
        "spec": {
            "selector": {"matchLabels": labels},
            "updateStrategy": {"type": "RollingUpdate"},
            "template": {"metadata": {"labels": labels}, "spec": {
                "tolerations": pools.tolerations(),
                "affinity": affinity,
                "priorityClassName": "system-node-critical",
                "containers": [container],
                "volumes": [{"name": "lib-modules", "hostPath": {"path": "/lib/modules", "type": "Directory"}}],
            }},
        },
    }]


def topology_files(cfg: StackConfig) -> list[str]:
    """The NCCL topology files of the stack's InfiniBand pools (catalog.Machine.nccl_topology), sorted."""
    if cfg.cloud != "azure" or not cfg.fabric.enabled:
        return []
    return sorted({m.nccl_topology for m in (cfg.machine(p) for p in _ib_pools(cfg)) if m.nccl_topology})


def workload_namespaces(cfg: StackConfig) -> list[str]:
    return sorted({w.namespace for w in cfg.workloads})


def topology_config_maps(cfg: StackConfig) -> list[dict[str, Any]]:
    """A ConfigMap per (workload namespace, topology file): key = the file name, value = its text
    (multinode/data/nccl-topology/, copied byte for byte from Azure/azhpc-images topology/)."""
    files = topology_files(cfg)
    return [{"apiVersion": "v1", "kind": "ConfigMap",
             "metadata": {"name": azure.topology_config_map_name(f), "namespace": ns, "labels": dict(sm.MANAGED_BY)},
             "data": {f: azure.topology_file_text(f)}}
            for ns in workload_namespaces(cfg) for f in files]
