"""Platform: the whole stack as one component tree.

cluster access -> GPU node pools -> checkpoint storage -> (add-ons, fabric policies, workloads)
Each piece is its own component, parented here; the cloud's module is chosen by the registry.
"""
from __future__ import annotations

import pulumi

from components import clouds
from components.clouds.base import TYPE_PREFIX, CheckpointStorageArgs, ClusterAccessArgs, GpuNodePoolArgs
from components.kubernetes.addons import ClusterAddons
from components.kubernetes.fabric import FabricPolicies
from components.kubernetes.objects import k8s_object, makes_pods
from components.kubernetes.workloads import WorkloadNeeds, create_workloads
from multinode.config import StackConfig


class Platform(pulumi.ComponentResource):
    def __init__(self, name: str, config: StackConfig, opts: pulumi.ResourceOptions | None = None):
        super().__init__(TYPE_PREFIX + "Platform", name, None, opts)
        self.config = config
        child = pulumi.ResourceOptions(parent=self)
        self.cloud_module = clouds.load(config.cloud)
        cm = self.cloud_module

        self.cluster = cm.ClusterAccess("cluster", ClusterAccessArgs(config), child)
        self.node_pools: dict[str, pulumi.ComponentResource] = {
            pool.name: cm.GpuNodePool(pool.name, GpuNodePoolArgs(config, pool, self.cluster), child)
            for pool in config.node_pools
        }
        self.storage = None
        if config.storage is not None:
            self.storage = cm.CheckpointStorage(
                config.storage.stable_name, CheckpointStorageArgs(config, config.storage, self.cluster), child)

        # Add-ons (schedulers, Kyverno), then the cloud's fabric operator + Kyverno fabric policies +
        # Volcano queues/topology, each custom resource after the release that installs its CRD.
        self.addons = ClusterAddons("addons", config, provider=self.cluster.provider, opts=child)
        self.fabric = FabricPolicies("fabric", config, self.addons, provider=self.cluster.provider, opts=child)

        # workloads last, each after what it needs only: its own pool, the checkpoint claim it mounts, the
        # add-ons of its kinds (CRDs, scheduler, device plugin) and its pool's Kyverno fabric policy (a
        # multi-node pod admitted before it would miss its fabric); see workloads.workload_needs
        self.workloads = create_workloads(self, config, self.cluster.provider, WorkloadNeeds(
            pools=dict(self.node_pools), storage=self.storage, addons=self.addons, fabric=self.fabric))

        # Bring your own objects (multinode:manifests): applied as-is; claims and volumes kept like ours.
        self.manifests = []
        for obj in config.manifests:
            meta = obj["metadata"]
            logical = "-".join(x for x in ("manifest", obj["kind"].lower(), meta.get("namespace"), meta["name"]) if x)
            keep = obj["kind"] in ("PersistentVolumeClaim", "PersistentVolume") and not (
                config.storage is not None and config.storage.allow_delete)
            # after the add-ons install their CRDs; an object that makes pods also after the fabric policies, like
            # the stack's own workloads (issue 32: a hand-written GPU gang admitted before its pool's Kyverno
            # policy is Ready would run without its fabric). Objects without pods (Secrets, ConfigMaps, Services)
            # get no such dependency.
            deps: list[pulumi.Resource] = [self.addons]
            if makes_pods(obj):
                deps.append(self.fabric)
            self.manifests.append(k8s_object(logical, obj, pulumi.ResourceOptions(
                parent=self, provider=self.cluster.provider, retain_on_delete=keep or None, depends_on=deps)))

        self.register_outputs({
            "kubeconfig": self.cluster.kubeconfig,
            "nodePools": {n: {"machine": p.machine, "nodeCount": p.node_count, "fabric": p.fabric}
                          for n, p in self.node_pools.items()},
            "checkpointClaim": self.storage.claim_name if self.storage else None,
            "workloads": {n: {"kind": wl.kind, "objects": wl.objects} for n, wl in self.workloads.items()},
        })
