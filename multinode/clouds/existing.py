"""cloud: existing, in the pure core: a cluster this stack only attaches to (no node pools or file systems
are created). The same sections as every multinode/clouds module:

- config rules: `CLUSTER_KEYS`, `STORAGE_KINDS`, `REQUIRED_FABRIC`, `CAPACITY_BLOCKS`, `CREATES_POOLS`
  (read by multinode/checks.py) and `config_problems(cfg)`: the stack describes the nodes
  (nodePools[].nodeSelector) and the fabric they already have (fabric.kind);
- fabric profile: none of its own (`FABRICS` is empty): fabric.kind names the fabric, and
  multinode/fabric.py builds its profile with the module of the cloud that fabric belongs to;
- mock data for `plan`: nothing to look up (`MOCK_CALLS`, `MOCK_OUTPUTS` are empty).
"""
from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ..errors import Problem

# ---------------------------------------------------------------- config rules
CLUSTER_KEYS: tuple = ()
STORAGE_KINDS = ("existing",)
REQUIRED_FABRIC = None
CAPACITY_BLOCKS = False
CREATES_POOLS = False


def config_problems(cfg: Any, machines: dict[str, Any]) -> list[Problem]:
    """`machines`: pool name -> the machine of every pool whose machine resolved (checks.pool_machines)."""
    p: list[Problem] = []
    if not cfg.kubeconfig:
        p.append(Problem("kubeconfig", "cloud 'existing' needs the cluster's kubeconfig; set it with "
                                       "`pulumi config set --secret multinode:kubeconfig \"$(cat kubeconfig)\"`"))
    for i, pool in enumerate(cfg.node_pools):
        if not pool.node_selector:
            p.append(Problem(f"nodePools[{i}].nodeSelector", "on an existing cluster, say which nodes form this "
                                                             "pool, e.g. nodeSelector: "
                                                             "{node.kubernetes.io/instance-type: p5.48xlarge}"))
    if cfg.fabric.kind is None:
        p.append(Problem("fabric.kind", "on an existing cluster, state the fabric the nodes have: "
                                        "efa, infiniband, tcpx, tcpxo, gcp-rdma, roce or none"))
    else:
        for name, m in machines.items():
            if m.fabric not in (cfg.fabric.kind, "none") and cfg.fabric.kind != "none":
                p.append(Problem("fabric.kind", f"{cfg.fabric.kind!r}, but pool {name!r} runs {m.name} whose "
                                                f"fabric is {m.fabric}; use fabric.kind {m.fabric!r}"))
    return p


def storage_class_warning(storage_class: str) -> str:
    """What a claim on an existing StorageClass can promise about the data (the class's reclaimPolicy decides)."""
    return (f"storage.existingStorageClass {storage_class!r}: the claim is protected and retained, but the volume "
            f"behind it takes that StorageClass's reclaimPolicy, which this stack cannot read. The data survives "
            f"`pulumi destroy` or a deleted claim only if {storage_class!r} has reclaimPolicy: Retain (check with "
            f"`kubectl get storageclass {storage_class} -o jsonpath='{{.reclaimPolicy}}'`); otherwise use a class "
            f"that retains, or storage.existingClaim.")


def advisories(cfg: Any) -> list[Problem]:
    """Non-fatal findings of this cloud: a dynamically provisioned claim on a class whose reclaimPolicy the stack
    cannot read (issue 46: an advisory in plan's list, with an id; before, only a deploy-time warning on stderr)."""
    s = cfg.storage
    if s is not None and s.existing_storage_class and not s.existing_claim and not s.allow_delete:
        return [Problem("storage.existingStorageClass", storage_class_warning(s.existing_storage_class)
                        .removeprefix("storage.existingStorageClass "))]
    return []

# ---------------------------------------------------------------- fabric profile
FABRICS: tuple = ()
NCCL_NET: dict[str, str] = {}

# ---------------------------------------------------------------- mock data for plan
MOCK_CALLS: dict[str, Callable[[dict[str, Any]], dict[str, Any]]] = {}
MOCK_OUTPUTS: dict[str, Callable[[str, dict[str, Any]], dict[str, Any]]] = {}
