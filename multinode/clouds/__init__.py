"""One module per cloud in the pure core (no Pulumi, no cloud SDK): everything the project knows about
a cloud, in the same sections on every cloud:

- config rules: `CLUSTER_KEYS` (required cluster.* keys), `STORAGE_KINDS`, `REQUIRED_FABRIC` (the fabric
  its node pools wire up, or None), `CAPACITY_BLOCKS`, `CREATES_POOLS` (read by multinode/checks.py),
  `config_problems(cfg, machines)` for what only this cloud refuses, `advisories(cfg)` for warnings;
- fabric profile: `FABRICS` (fabric kinds it builds), `NCCL_NET`, and
  `fabric_settings(kind, cfg, pool, machine, count) -> (device resource, devices per node, pod parts)`,
  assembled into a FabricProfile by multinode/fabric.py;
- storage limits and node bootstrap facts the components read (sizes, tiers, CSI drivers, cloud-init);
- mock data for `plan`: `MOCK_CALLS` and `MOCK_OUTPUTS`, registered by multinode/recording.py.

Machine facts are not here: multinode/catalog.py is the one machine table for every cloud.
The Pulumi resources of a cloud live in components/clouds/<cloud>.py, which reads its module here.
"""
from __future__ import annotations

import importlib
from types import ModuleType

# cloud: -> its module (imported on first use: a stack reads only its own cloud's module)
MODULES = {
    "aws": "multinode.clouds.aws",
    "azure": "multinode.clouds.azure",
    "gcp": "multinode.clouds.gcp",
    "oci": "multinode.clouds.oci",
    "existing": "multinode.clouds.existing",
}


def module(cloud: str) -> ModuleType:
    """The pure module of `cloud` (KeyError for a cloud config validation would have refused)."""
    return importlib.import_module(MODULES[cloud])
