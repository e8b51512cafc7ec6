"""cloud: existing — attach to a cluster you already run, given its kubeconfig (a secret).

Nothing cloud-side is created. The stack describes the pools (machine + nodeSelector) and the
fabric the nodes already have; storage is an existing PVC, or a new ReadWriteMany PVC on an
existing StorageClass (protected and retained unless storage.allowDelete; the volume behind it follows
that class's reclaimPolicy, which is warned about at deploy time: see docs/clouds-aws-azure.md, "Retention").
"""
from __future__ import annotations

from typing import Any

import pulumi

from components.clouds.base import (
    TYPE_PREFIX,
    CheckpointStorageArgs,
    ClusterAccessArgs,
    GpuNodePoolArgs,
    PoolOutputsMixin,
    connect,
    register_claim,
    register_namespace,
)
from multinode.clouds.existing import storage_class_warning
from multinode.stackfile import under_plan


class ClusterAccess(pulumi.ComponentResource):
    """The Kubernetes provider for the cluster; the kubeconfig stays a secret end to end."""

    def __init__(self, name: str, args: ClusterAccessArgs, opts: pulumi.ResourceOptions | None = None):
        super().__init__(TYPE_PREFIX + "ClusterAccess", name, None, opts)
        cfg = args.config
        self.cluster_name = pulumi.Output.from_input(cfg.cluster.name or "existing")
        self.kubeconfig = pulumi.Output.secret(cfg.kubeconfig or "")
        self.provider = connect(self, name, self.kubeconfig)
        self.register_outputs({"clusterName": self.cluster_name, "kubeconfig": self.kubeconfig})


class GpuNodePool(pulumi.ComponentResource, PoolOutputsMixin):
    """Describes nodes that already exist (selected by nodeSelector); creates nothing."""

    def __init__(self, name: str, args: GpuNodePoolArgs, opts: pulumi.ResourceOptions | None = None):
        super().__init__(TYPE_PREFIX + "GpuNodePool", name, None, opts)
        build_pool(self, name, args)


def build_pool(comp: Any, name: str, args: GpuNodePoolArgs) -> None:
    """The pool's resources under `comp` (this module's GpuNodePool, or the package's: components/package.py),
    its outputs set and registered."""
    out = comp._set_pool_outputs(args.config, args.pool)
    comp.register_outputs(out)


class CheckpointStorage(pulumi.ComponentResource):
    """An existing RWX claim, or a new RWX claim on an existing StorageClass."""

    def __init__(self, name: str, args: CheckpointStorageArgs, opts: pulumi.ResourceOptions | None = None):
        super().__init__(TYPE_PREFIX + "CheckpointStorage", name, None, opts)
        s = args.storage
        provider = args.cluster.provider
        if s.existing_claim:
            # Nothing of ours holds the data: only the namespace is declared (retained), and the claim is
            # the stack's own; what happens to it is the cluster owner's business.
            register_namespace(self, name, s, provider)
            self.namespace = pulumi.Output.from_input(s.namespace)
            self.claim_name = pulumi.Output.from_input(s.existing_claim)
            self.storage_class_name = pulumi.Output.from_input(s.existing_storage_class or "")
            self.register_outputs({"claimName": self.claim_name, "storageClassName": self.storage_class_name,
                                   "namespace": self.namespace})
            return
        # A dynamically provisioned claim: the PV gets the class's reclaimPolicy, which may be Delete.
        # Looking the class up (StorageClass.get) would make the deploy fail when the class is created
        # later and shows nothing offline, so the limit is said plainly instead.
        if not s.allow_delete and not under_plan():      # plan lists it with the advisories (clouds/existing.py)
            pulumi.log.warn(storage_class_warning(s.existing_storage_class or ""), resource=self)
        register_claim(self, name, s, provider, storage_class=s.existing_storage_class or "")
