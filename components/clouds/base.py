"""The shared shape of every cloud module: args classes, the pure outputs every pool exports, and the
checkpoint-claim tail every CheckpointStorage ends with (one copy, so retention cannot drift per cloud)."""
from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import pulumi

from components.kubernetes.objects import k8s_object
from multinode import fabric, pools
from multinode.config import NodePool, StackConfig, Storage
from multinode.manifests import storage as sm

TYPE_PREFIX = "multinode:index:"


def connect(component: pulumi.ComponentResource, name: str, kubeconfig: pulumi.Output) -> Any:
    """The Kubernetes provider every cloud's ClusterAccess exposes, from its (secret) kubeconfig."""
    import pulumi_kubernetes as k8s
    return k8s.Provider(f"{name}-k8s", kubeconfig=kubeconfig, opts=pulumi.ResourceOptions(parent=component))


@dataclass
class ClusterAccessArgs:
    config: StackConfig


@dataclass
class GpuNodePoolArgs:
    config: StackConfig
    pool: NodePool
    cluster: Any                     # the cloud's ClusterAccess component


@dataclass
class CheckpointStorageArgs:
    config: StackConfig
    storage: Storage
    cluster: Any                     # the cloud's ClusterAccess component
    depends_on: list | None = None


def pool_outputs(cfg: StackConfig, pool: NodePool) -> dict[str, Any]:
    """Outputs every cloud's GpuNodePool exports (pure, so all clouds agree on them)."""
    machine = cfg.machine(pool)
    profile = fabric.profile_for(cfg, pool)
    return {
        "machine": machine.name,
        "nodeCount": pool.node_count,
        "gpusPerNode": machine.gpus,
        "nodeLabels": pools.node_labels(cfg, pool, machine),
        "nodeSelector": pools.node_selector(cfg, pool),
        "nodeTaints": pools.node_taints(cfg),
        "fabric": profile.describe(),
    }


class PoolOutputsMixin:
    """Sets the common outputs as attributes (snake_case) and returns them for register_outputs."""

    def _set_pool_outputs(self, cfg: StackConfig, pool: NodePool) -> dict[str, Any]:
        out = pool_outputs(cfg, pool)
        self.machine = pulumi.Output.from_input(out["machine"])
        self.node_count = pulumi.Output.from_input(out["nodeCount"])
        self.gpus_per_node = pulumi.Output.from_input(out["gpusPerNode"])
        self.node_labels = pulumi.Output.from_input(out["nodeLabels"])
        self.node_selector = pulumi.Output.from_input(out["nodeSelector"])
        self.node_taints = pulumi.Output.from_input(out["nodeTaints"])
        self.fabric = pulumi.Output.from_input(out["fabric"])
        return out


# ---------------------------------------------------------------- checkpoint storage (every cloud)
def keep_options(storage: Storage) -> pulumi.ResourceOptions:
    """What keeps checkpoint data alive through `pulumi destroy` or a replace: protect + retainOnDelete,
    unless the stack sets storage.allowDelete. Give it to the file system AND to everything the retained
    file system still uses afterwards (security groups and their rules, mount targets, exports): deleting
    those while the file system holds them fails mid-destroy (e.g. AWS DependencyViolation on a group
    whose ENIs belong to a retained FSx)."""
    keep = not storage.allow_delete
    return pulumi.ResourceOptions(protect=keep, retain_on_delete=keep)


def kept(opts: pulumi.ResourceOptions, storage: Storage) -> pulumi.ResourceOptions:
    """`opts` with the keep options of `storage` merged in."""
    return pulumi.ResourceOptions.merge(opts, keep_options(storage))


def claim_size_gib(storage: Storage) -> int:
    """Capacity written on the PV and requested by the PVC. Cloud kinds must set sizeGib (config check);
    for a claim on an existing StorageClass the request defaults to 1 GiB."""
    return storage.size_gib or 1


def static_pv_name(storage: Storage) -> str:
    """The static PV's name: <namespace>-<claim>, cut to 63 characters (a valid DNS label on every cloud)."""
    return f"{storage.namespace}-{storage.stable_name}"[:63].rstrip("-.")


def register_namespace(component: pulumi.ComponentResource, name: str, storage: Storage,
                       provider: Any) -> pulumi.Resource:
    """The claim's namespace: retained on destroy (other things may live in it), never protected. Kept as
    component.namespace_object: a workload's Secrets, ConfigMaps, RBAC and Services in that namespace wait for it
    alone, not for the whole storage (components/kubernetes/workloads.py)."""
    ns = k8s_object(f"{name}-ns", sm.namespace(storage.namespace),
                    pulumi.ResourceOptions(parent=component, provider=provider, retain_on_delete=True))
    component.namespace_object = ns  # type: ignore[attr-defined]
    return ns


def register_claim(component: pulumi.ComponentResource, name: str, storage: Storage, provider: Any, *,
                   driver: str | None = None, volume_handle: Any = None,
                   attributes: dict[str, Any] | None = None, mount_options: list[str] | None = None,
                   storage_class: str = "", storage_class_output: Any = None,
                   depends_on: Sequence[pulumi.Resource] = (),
                   outputs: dict[str, Any] | None = None) -> pulumi.Output:
    """The tail of every CheckpointStorage: the namespace (retained, never deleted with the stack), a static
    PV `Retain` on `driver`/`volume_handle` when a driver is given, a ReadWriteMany PVC bound to it (or
    provisioned from `storage_class` when no driver is given), both kept unless storage.allowDelete.
    Sets component.namespace / claim_name / storage_class_name, registers the outputs (the common three
    plus `outputs`) and returns claim_name, which resolves once the claim exists."""
    kchild = pulumi.ResourceOptions(parent=component, provider=provider)
    size = claim_size_gib(storage)
    ns = register_namespace(component, name, storage, provider)
    claim_deps: list[pulumi.Resource] = [ns]
    volume_name = None
    if driver is not None:
        volume_name = static_pv_name(storage)
        pv = sm.static_pv(volume_name, driver, volume_handle, size, storage.allow_delete, attributes=attributes,
                          mount_options=mount_options, storage_class_name=storage_class)
        claim_deps.append(k8s_object(f"{name}-pv", pv, kept(pulumi.ResourceOptions.merge(
            kchild, pulumi.ResourceOptions(depends_on=list(depends_on))), storage)))
    else:
        claim_deps += list(depends_on)
    claim = k8s_object(f"{name}-pvc", sm.pvc(storage.stable_name, storage.namespace, size, storage_class,
                                             volume_name=volume_name),
                       kept(pulumi.ResourceOptions.merge(kchild, pulumi.ResourceOptions(depends_on=claim_deps)),
                            storage))
    component.namespace = pulumi.Output.from_input(storage.namespace)
    component.claim_name = claim.id.apply(lambda _: storage.stable_name)
    component.storage_class_name = pulumi.Output.from_input(
        storage_class_output if storage_class_output is not None else storage_class)
    component.register_outputs({"claimName": component.claim_name,
                                "storageClassName": component.storage_class_name,
                                "namespace": component.namespace, **(outputs or {})})
    return component.claim_name
