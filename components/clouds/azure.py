"""cloud: azure — InfiniBand GPU agent pools and checkpoint storage on an existing AKS cluster.

ClusterAccess   looks the cluster up (containerservice.get_managed_cluster) and reads its user
                kubeconfig (list_managed_cluster_user_credentials) as a secret; the provider uses it.
GpuNodePool     an AKS agent pool (one VM scale set, which is what InfiniBand spans) on the ND size,
                Ubuntu, our labels and the GPU taint, GPU driver installed by AKS (or left to the GPU
                Operator), in a capacity reservation group when given. Prerequisite (not something a
                stack can do): the subscription has the `Microsoft.ContainerService/AKSInfinibandSupport`
                feature registered, see docs/clouds-aws-azure.md.
CheckpointStorage  Azure Files NFS (a FileStorage Premium_LRS account reachable only from the cluster
                subnet, an NFS share, a static PV/PVC on file.csi.azure.com), or Azure Managed Lustre
                (AMLFS in its own subnet, a static PV/PVC on azurelustre.csi.azure.com). Accounts, shares
                and file systems are protected and retained, PVs `Retain`, unless storage.allowDelete.

Facts and their sources: multinode/catalog.py, multinode/clouds/azure.py, ../shared/facts/hardware.md
sections 3 and 4.
"""
from __future__ import annotations

import base64
from typing import Any

import pulumi
import pulumi_azure_native as azure_native

from components.clouds.base import (
    TYPE_PREFIX,
    CheckpointStorageArgs,
    ClusterAccessArgs,
    GpuNodePoolArgs,
    PoolOutputsMixin,
    claim_size_gib,
    connect,
    kept,
    register_claim,
)
from multinode import upgrades
from multinode.clouds import azure as limits

# node bootstrap facts and helpers of the pure cloud module (tests read them through this module too)
from multinode.clouds.azure import agent_pool_name, aks_taints, gpu_driver, storage_account_name  # noqa: F401
from multinode.pools import node_labels

AZURE_FILES_DRIVER = "file.csi.azure.com"
AZURE_LUSTRE_DRIVER = "azurelustre.csi.azure.com"
AMLFS_FS_NAME = "lustrefs"          # the Lustre file system name AMLFS always serves
# NFS client options the Azure Files docs recommend for throughput (nconnect) and failover (noresvport).
NFS_MOUNT_OPTIONS = ["nconnect=4", "noresvport", "actimeo=30"]
LUSTRE_MOUNT_OPTIONS = ["noatime", "flock"]


def _field(obj: Any, key: str, wire: str) -> Any:
    """A field of an invoke result or output: typed objects (property getters) or plain dicts."""
    if hasattr(type(obj), key):
        return getattr(obj, key)
    if isinstance(obj, dict):
        return obj[key] if key in obj else obj.get(wire)
    return getattr(obj, key, None)


# ---------------------------------------------------------------- components
class ClusterAccess(pulumi.ComponentResource):
    """The AKS cluster named in the stack, looked up (never created), and a provider for it."""

    def __init__(self, name: str, args: ClusterAccessArgs, opts: pulumi.ResourceOptions | None = None):
        super().__init__(TYPE_PREFIX + "ClusterAccess", name, None, opts)
        cfg = args.config
        invoke = pulumi.InvokeOptions(parent=self)
        rg, cname = cfg.cluster.resource_group or "", cfg.cluster.name or ""
        self.resource_group = rg
        self.location = cfg.cluster.location or ""
        self.aks = azure_native.containerservice.get_managed_cluster_output(
            resource_group_name=rg, resource_name=cname, opts=invoke)
        self.cluster_name = self.aks.name
        creds = azure_native.containerservice.list_managed_cluster_user_credentials_output(
            resource_group_name=rg, resource_name=cname, opts=invoke)
        self.kubeconfig = pulumi.Output.secret(creds.kubeconfigs.apply(
            lambda ks: base64.b64decode(_field(ks[0], "value", "value")).decode()))
        self.provider = connect(self, name, self.kubeconfig)
        self.register_outputs({"clusterName": self.cluster_name, "kubeconfig": self.kubeconfig})


class GpuNodePool(pulumi.ComponentResource, PoolOutputsMixin):
    """An AKS agent pool of ND-series InfiniBand VMs."""

    def __init__(self, name: str, args: GpuNodePoolArgs, opts: pulumi.ResourceOptions | None = None):
        super().__init__(TYPE_PREFIX + "GpuNodePool", name, None, opts)
        build_pool(self, name, args)


def build_pool(comp: Any, name: str, args: GpuNodePoolArgs) -> None:
    """The pool's resources under `comp` (this module's GpuNodePool, or the package's: components/package.py),
    its outputs set and registered."""
    cfg, pool, cluster = args.config, args.pool, args.cluster
    machine = cfg.machine(pool)
    cr = pool.capacity_reservation
    pool_args = dict(
        resource_group_name=cluster.resource_group,
        resource_name_=cluster.cluster_name,      # the cluster (SDK renames it: `resource_name` is taken)
        agent_pool_name=agent_pool_name(pool.name, upgrades.physical_suffix(pool, machine.name)),
        mode="User",
        vm_size=machine.name,
        count=pool.node_count,
        enable_auto_scaling=False,
        os_type="Linux",
        os_sku="Ubuntu",
        os_disk_size_gb=pool.disk_size_gb,
        enable_node_public_ip=False,
        node_labels=node_labels(cfg, pool, machine),
        node_taints=aks_taints(cfg),
        gpu_profile={"driver": gpu_driver(cfg)},
        # gang-aware: surge the largest gang, nothing unavailable, drain timeout and soak per pool
        # (multinode/upgrades.py, with its sources)
        upgrade_settings=upgrades.plan_pool(cfg, pool).settings["upgrade_settings"],
        tags={"multinode-pool": pool.name, "multinode-stack": pulumi.get_stack()},
    )
    if pool.zone:
        pool_args["availability_zones"] = [pool.zone]
    if pool.subnet_id:
        pool_args["vnet_subnet_id"] = pool.subnet_id
    if cr is not None:
        pool_args["capacity_reservation_group_id"] = cr.id
    comp.agent_pool = azure_native.containerservice.AgentPool(
        f"{name}-pool", opts=pulumi.ResourceOptions(parent=comp, **upgrades.blue_green_options(pool, "azure")),
        **pool_args)
    out = comp._set_pool_outputs(cfg, pool)
    comp.register_outputs(out)


class CheckpointStorage(pulumi.ComponentResource):
    """Azure Files NFS or Azure Managed Lustre for checkpoints, exposed as a ReadWriteMany claim."""

    def __init__(self, name: str, args: CheckpointStorageArgs, opts: pulumi.ResourceOptions | None = None):
        super().__init__(TYPE_PREFIX + "CheckpointStorage", name, None, opts)
        cfg, s, cluster = args.config, args.storage, args.cluster
        rg, location = cluster.resource_group, cluster.location
        # The account (its network rules are inline, so they stay with it), the share and the AMLFS.
        # Nothing else here is created for the file system: subnets are the stack's own.
        keep = kept(pulumi.ResourceOptions(parent=self), s)
        tags = {"multinode-storage": s.name, "multinode-stack": pulumi.get_stack()}
        size = claim_size_gib(s)

        if s.kind == "azure-files":
            pool_subnets = [p.subnet_id for p in cfg.node_pools if p.subnet_id]
            subnets: list[Any] = [s.subnet_id] if s.subnet_id else pool_subnets   # config requires one
            # NFS shares are reachable only from trusted networks: deny everything but the cluster
            # subnet(s) (a service endpoint for Microsoft.Storage must be enabled on them).
            self.account = azure_native.storage.StorageAccount(
                storage_account_name(f"{s.stable_name}nfs"), resource_group_name=rg, location=location,
                kind="FileStorage", sku={"name": "Premium_LRS"},
                enable_https_traffic_only=False,            # NFS 4.1 does not run over TLS; required off
                minimum_tls_version="TLS1_2", allow_blob_public_access=False,
                network_rule_set={"default_action": "Deny", "bypass": "AzureServices",
                                  "virtual_network_rules": [{"virtual_network_resource_id": sub,
                                                             "action": "Allow"} for sub in subnets]},
                tags=tags, opts=keep)
            self.share = azure_native.storage.FileShare(
                f"{name}-share", resource_group_name=rg, account_name=self.account.name, share_name=s.stable_name,
                enabled_protocols="NFS", root_squash="NoRootSquash", share_quota=size,
                opts=pulumi.ResourceOptions.merge(keep, pulumi.ResourceOptions(depends_on=[self.account])))
            self.file_system = self.share
            handle = pulumi.Output.all(self.account.name, self.share.name).apply(
                lambda a: f"{rg}#{a[0]}#{a[1]}")
            volume = dict(driver=AZURE_FILES_DRIVER, volume_handle=handle, mount_options=NFS_MOUNT_OPTIONS,
                          attributes={"resourceGroup": rg, "storageAccount": self.account.name,
                                      "shareName": s.stable_name, "protocol": "nfs"})
        else:
            throughput = s.throughput or limits.AMLFS_DEFAULT_THROUGHPUT
            zones = [p.zone for p in cfg.node_pools if p.zone][:1]
            amlfs_args = dict(
                resource_group_name=rg, location=location, sku={"name": limits.amlfs_sku(throughput)},
                storage_capacity_ti_b=size / limits.GIB_PER_TIB, filesystem_subnet=s.subnet_id,
                maintenance_window={"day_of_week": "Sunday", "time_of_day_utc": "02:00"}, tags=tags)
            if zones:
                amlfs_args["zones"] = zones
            self.file_system = azure_native.storagecache.AmlFilesystem(f"{name}-amlfs", opts=keep, **amlfs_args)
            mgs = self.file_system.client_info.apply(lambda c: _field(c, "mgs_address", "mgsAddress"))
            handle = mgs.apply(lambda ip: f"{s.stable_name}#{AMLFS_FS_NAME}#{ip}")
            volume = dict(driver=AZURE_LUSTRE_DRIVER, volume_handle=handle, mount_options=LUSTRE_MOUNT_OPTIONS,
                          attributes={"mgs-ip-address": mgs, "fs-name": AMLFS_FS_NAME})
        register_claim(self, name, s, cluster.provider, **volume, depends_on=[self.file_system],
                       outputs={"fileSystemId": self.file_system.id})
