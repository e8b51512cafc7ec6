"""Cloud registry: `cloud:` -> the module that builds that cloud's pieces.

Every cloud module exposes the same three components with the same args and outputs
(see `base.py`): ClusterAccess, GpuNodePool, CheckpointStorage. Modules are imported lazily so a
stack never imports another cloud's SDK (each is hundreds of MB and seconds to import).
"""
from __future__ import annotations

import importlib
from types import ModuleType

# cloud -> (module, the PyPI package its SDK comes from)
REGISTRY = {
    "existing": ("components.clouds.existing", "pulumi-kubernetes"),
    "aws": ("components.clouds.aws", "pulumi-aws"),
    "azure": ("components.clouds.azure", "pulumi-azure-native"),
}

# What a cloud cannot do, and why (shown by `plan` and the README).
CAPABILITIES = {
    "existing": "no node pools or file systems are created: the stack describes the nodes (nodeSelector) "
                "and the fabric they already have, and names an existing StorageClass or PVC",
    "aws": "attaches to an existing EKS cluster (never creates one); EFA pools need one subnet (one AZ) and "
           "get a cluster placement group unless a capacity reservation or block fixes placement; the CSI "
           "add-ons' IAM uses EKS Pod Identity, so the cluster needs the eks-pod-identity-agent add-on",
    "azure": "attaches to an existing AKS cluster (never creates one); InfiniBand on ND pools needs the "
             "AKSInfinibandSupport feature registered on the subscription; no proximity placement group is "
             "created (an agent pool is one scale set, which is what InfiniBand spans); Azure Managed Lustre "
             "needs its own subnet (storage.subnetId)",
}


class CloudNotAvailable(RuntimeError):
    pass


def load(cloud: str) -> ModuleType:
    """Import the module for `cloud`; a clear error with an install hint if its SDK is missing."""
    if cloud not in REGISTRY:
        raise CloudNotAvailable(f"cloud {cloud!r} has no components yet; known: {', '.join(sorted(REGISTRY))}")
    module, package = REGISTRY[cloud]
    try:
        return importlib.import_module(module)
    except ModuleNotFoundError as e:
        if e.name and e.name.startswith("pulumi_"):
            raise CloudNotAvailable(
                f"cloud {cloud!r} needs the {package} SDK ({e.name} is not installed); "
                f"install it with `uv pip install {package}` or run `make venv`") from None
        raise
