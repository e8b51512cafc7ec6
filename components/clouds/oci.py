"""cloud: oci — bare-metal GPU nodes in an RDMA cluster network joined to an existing OKE cluster.

Why a cluster network and not `containerengine.NodePool`: RDMA between bare-metal GPU shapes needs the
nodes in one cluster network (or compute cluster) and the Oracle Cloud Agent RDMA plugins enabled on
each instance. pulumi-oci 5.5 lets an OKE NodePool name a compute cluster, but its node config has no
agent-plugin settings, so the plugins could not be switched on. The documented OKE route for RDMA
(oracle-quickstart/oci-hpc-oke, "cluster-network" worker mode) is self-managed nodes: an
InstanceConfiguration (shape, GPU image, worker subnet, RDMA plugins, cloud-init that joins the node with
our labels and taints: `oke bootstrap` from the OKE node package, or oke-install.sh; nodePools[].bootstrap)
and a ClusterNetwork whose instance pool has nodeCount nodes.

- ClusterAccess: `containerengine.get_cluster_kube_config` (kubeconfig, secret) + `get_cluster` (private
  API endpoint for the nodes' bootstrap) and the Kubernetes provider.
- GpuNodePool: InstanceConfiguration + ClusterNetwork; RDMA VFs per node come from the catalog via the
  fabric profile (nvidia.com/rdma-vf: 16 on H100.8, 8 on H200.8 / B200.8).
- CheckpointStorage: File Storage file system, mount target and export (all protected and retained
  unless storage.allowDelete), and a static PV
  (fss.csi.oraclecloud.com, Retain) + PVC, ReadWriteMany.
"""
from __future__ import annotations

from typing import Any

import pulumi
import pulumi_oci as oci

from components.clouds.base import (
    TYPE_PREFIX,
    CheckpointStorageArgs,
    ClusterAccessArgs,
    GpuNodePoolArgs,
    PoolOutputsMixin,
    connect,
    kept,
    register_claim,
)
from multinode import fabric, pools
from multinode.clouds import oci as oke


def _private_endpoint(endpoints) -> str:
    if not endpoints:
        return ""
    e = endpoints[0]
    return (e.get("private_endpoint") if isinstance(e, dict) and not hasattr(e, "private_endpoint")
            else getattr(e, "private_endpoint", "")) or ""


class ClusterAccess(pulumi.ComponentResource):
    """The existing OKE cluster: kubeconfig (secret), private API endpoint, Kubernetes provider."""

    def __init__(self, name: str, args: ClusterAccessArgs, opts: pulumi.ResourceOptions | None = None):
        super().__init__(TYPE_PREFIX + "ClusterAccess", name, None, opts)
        c = args.config.cluster
        invoke = pulumi.InvokeOutputOptions(parent=self)
        self.compartment_id = c.compartment_id
        kc = oci.containerengine.get_cluster_kube_config_output(cluster_id=c.cluster_id, token_version="2.0.0",
                                                                opts=invoke)
        self.oke = oci.containerengine.get_cluster_output(cluster_id=c.cluster_id, opts=invoke)
        self.cluster_name = pulumi.Output.from_input(c.name or c.cluster_id)
        self.kubeconfig = pulumi.Output.secret(kc.content)
        self.api_endpoint = self.oke.endpoints.apply(_private_endpoint)
        self.provider = connect(self, name, self.kubeconfig)
        self.register_outputs({"clusterName": self.cluster_name, "kubeconfig": self.kubeconfig})


class GpuNodePool(pulumi.ComponentResource, PoolOutputsMixin):
    """Bare-metal GPU nodes in one RDMA cluster network, joined to OKE with our labels and taints."""

    def __init__(self, name: str, args: GpuNodePoolArgs, opts: pulumi.ResourceOptions | None = None):
        super().__init__(TYPE_PREFIX + "GpuNodePool", name, None, opts)
        build_pool(self, name, args)


def build_pool(comp: Any, name: str, args: GpuNodePoolArgs) -> None:
    """The pool's resources under `comp` (this module's GpuNodePool, or the package's: components/package.py),
    its outputs set and registered."""
    cfg, pool, cluster = args.config, args.pool, args.cluster
    m = cfg.machine(pool)
    compartment = cfg.cluster.compartment_id
    child = pulumi.ResourceOptions(parent=comp)
    labels = pools.node_labels(cfg, pool, m)
    taints = pools.node_taints(cfg)
    # RDMA virtual functions a full node offers: the fabric profile's count, from the catalog
    comp.rdma_vfs_per_node = fabric.profile_for(cfg, pool).devices_per_node
    # The bootstrap script carries the cluster CA: keep it secret like the kubeconfig it comes from.
    # The "oke-package" path installs the OKE node package of the cluster's Kubernetes version (get_cluster).
    path = oke.bootstrap_path(pool)
    user_data = pulumi.Output.secret(pulumi.Output.all(
        cluster.api_endpoint, cluster.kubeconfig, cluster.oke.kubernetes_version).apply(
        lambda a: oke.user_data_b64(oke.node_user_data(a[0], oke.ca_from_kubeconfig(a[1]), labels, taints,
                                                       path=path, kubernetes_version=a[2] or ""))))
    launch = {
        "availability_domain": pool.zone,
        "compartment_id": compartment,
        "shape": m.name,
        "display_name": f"{cfg.cluster.name}-{pool.name}",
        "source_details": {"source_type": "image", "image_id": pool.image_id,
                           "boot_volume_size_in_gbs": str(pool.disk_size_gb)},
        "create_vnic_details": {"subnet_id": pool.subnet_id, "assign_public_ip": False},
        "metadata": {"user_data": user_data},
        "agent_config": {
            "are_all_plugins_disabled": False, "is_management_disabled": False,
            "is_monitoring_disabled": False,
            "plugins_configs": [{"name": n, "desired_state": "ENABLED"} for n in oke.RDMA_PLUGINS],
        },
        "freeform_tags": {"multinode-node-pool": pool.name},
    }
    if pool.capacity_reservation is not None:
        launch["capacity_reservation_id"] = pool.capacity_reservation.id
    comp.instance_configuration = oci.core.InstanceConfiguration(
        f"{name}-instance-config", compartment_id=compartment, display_name=f"{cfg.cluster.name}-{pool.name}",
        instance_details={"instance_type": "compute", "launch_details": launch}, opts=child)
    # one instance pool per cluster network: the most a cluster network takes ("Each cluster network can have one
    # instance pool": docs.oracle.com/en-us/iaas/tools/typescript/2.0.0/modules/_core_lib_model_cluster_network_.
    # clusternetwork.html); how many instances that pool may hold is not published in a source read here.
    comp.cluster_network = oci.core.ClusterNetwork(
        f"{name}-cluster-network", compartment_id=compartment, display_name=f"{cfg.cluster.name}-{pool.name}",
        instance_pools=[{"instance_configuration_id": comp.instance_configuration.id, "size": pool.node_count,
                         "display_name": f"{cfg.cluster.name}-{pool.name}"}],
        placement_configuration={"availability_domain": pool.zone,
                                 "primary_vnic_subnets": {"subnet_id": pool.subnet_id}},
        freeform_tags={"multinode-node-pool": pool.name}, opts=child)
    out = comp._set_pool_outputs(cfg, pool)
    out["rdmaVfsPerNode"] = comp.rdma_vfs_per_node
    comp.register_outputs(out)


class CheckpointStorage(pulumi.ComponentResource):
    """OCI File Storage (file system + mount target + export) as a static RWX PV (Retain) and its claim."""

    def __init__(self, name: str, args: CheckpointStorageArgs, opts: pulumi.ResourceOptions | None = None):
        super().__init__(TYPE_PREFIX + "CheckpointStorage", name, None, opts)
        cfg, s, cluster = args.config, args.storage, args.cluster
        compartment = cfg.cluster.compartment_id
        first = cfg.node_pools[0]   # the file system and mount target live beside the GPU nodes
        # The file system and what a retained file system is reached through: the mount target (its VNIC
        # is in the stack's subnet) and the export. Kept alike, so destroy leaves a working share.
        keep = kept(pulumi.ResourceOptions(parent=self), s)
        display = f"{cfg.cluster.name}-{s.name}"
        self.file_system = oci.filestorage.FileSystem(
            f"{name}-fs", availability_domain=first.zone, compartment_id=compartment, display_name=display,
            opts=keep)
        self.mount_target = oci.filestorage.MountTarget(
            f"{name}-mount-target", availability_domain=first.zone, compartment_id=compartment,
            subnet_id=first.subnet_id, display_name=display, opts=keep)
        path = f"/{s.stable_name}"
        self.export = oci.filestorage.Export(
            f"{name}-export", export_set_id=self.mount_target.export_set_id, file_system_id=self.file_system.id,
            path=path, opts=keep)
        handle = pulumi.Output.all(self.file_system.id, self.mount_target.ip_address).apply(
            lambda a: oke.fss_volume_handle(a[0], a[1], path))
        # FSS grows on demand; the PV capacity is what the claim asks for.
        register_claim(self, name, s, cluster.provider, driver=oke.FSS_CSI, volume_handle=handle,
                       depends_on=[self.export])
