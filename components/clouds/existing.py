"""cloud: existing — attach to a cluster you already run, given its kubeconfig (a secret).

Nothing cloud-side is created. The stack describes the pools (machine + nodeSelector) and the
fabric the nodes already have; storage is an existing PVC, or a new ReadWriteMany PVC on an
existing StorageClass (retained on destroy unless storage.allowDelete).
"""
from __future__ import annotations

from typing import Optional

import pulumi
import pulumi_kubernetes as k8s

from components.clouds.base import (TYPE_PREFIX, CheckpointStorageArgs, ClusterAccessArgs, GpuNodePoolArgs,
                                    PoolOutputsMixin)
from components.kubernetes.objects import k8s_object
from multinode.manifests import storage as sm


class ClusterAccess(pulumi.ComponentResource):
    """The Kubernetes provider for the cluster; the kubeconfig stays a secret end to end."""

    def __init__(self, name: str, args: ClusterAccessArgs, opts: Optional[pulumi.ResourceOptions] = None):
        super().__init__(TYPE_PREFIX + "ClusterAccess", name, None, opts)
        cfg = args.config
        self.cluster_name = pulumi.Output.from_input(cfg.cluster.name or "existing")
        self.kubeconfig = pulumi.Output.secret(cfg.kubeconfig or "")
        self.provider = k8s.Provider(f"{name}-k8s", kubeconfig=self.kubeconfig,
                                     opts=pulumi.ResourceOptions(parent=self))
        self.register_outputs({"clusterName": self.cluster_name, "kubeconfig": self.kubeconfig})


class GpuNodePool(pulumi.ComponentResource, PoolOutputsMixin):
    """Describes nodes that already exist (selected by nodeSelector); creates nothing."""

    def __init__(self, name: str, args: GpuNodePoolArgs, opts: Optional[pulumi.ResourceOptions] = None):
        super().__init__(TYPE_PREFIX + "GpuNodePool", name, None, opts)
        out = self._set_pool_outputs(args.config, args.pool)
        self.register_outputs(out)


class CheckpointStorage(pulumi.ComponentResource):
    """An existing RWX claim, or a new RWX claim on an existing StorageClass."""

    def __init__(self, name: str, args: CheckpointStorageArgs, opts: Optional[pulumi.ResourceOptions] = None):
        super().__init__(TYPE_PREFIX + "CheckpointStorage", name, None, opts)
        s = args.storage
        provider = args.cluster.provider
        child = pulumi.ResourceOptions(parent=self, provider=provider)
        keep = pulumi.ResourceOptions(protect=not s.allow_delete, retain_on_delete=not s.allow_delete)
        self.namespace = pulumi.Output.from_input(s.namespace)
        ns = k8s_object(f"{name}-ns", sm.namespace(s.namespace),
                        pulumi.ResourceOptions.merge(child, pulumi.ResourceOptions(retain_on_delete=True)))
        if s.existing_claim:
            self.claim_name = pulumi.Output.from_input(s.existing_claim)
            self.storage_class_name = pulumi.Output.from_input(s.existing_storage_class or "")
        else:
            claim = k8s_object(f"{name}-pvc", sm.pvc(s.name, s.namespace, s.size_gib or 1,
                                                     s.existing_storage_class or ""),
                               pulumi.ResourceOptions.merge(child, pulumi.ResourceOptions.merge(
                                   keep, pulumi.ResourceOptions(depends_on=[ns]))))
            self.claim_name = claim.id.apply(lambda _: s.name)  # resolves once the claim exists
            self.storage_class_name = pulumi.Output.from_input(s.existing_storage_class or "")
        self.register_outputs({"claimName": self.claim_name, "storageClassName": self.storage_class_name,
                               "namespace": self.namespace})
