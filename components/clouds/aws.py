"""cloud: aws — EFA GPU node pools and checkpoint storage on an existing EKS cluster.

ClusterAccess   looks the cluster up (aws.eks.get_cluster) and builds a kubeconfig (a secret) that
                gets its token from `aws eks get-token`, and the Kubernetes provider from it.
GpuNodePool     a security group that lets the nodes talk to each other on every protocol (EFA needs
                it), a `cluster` placement group, a launch template with one EFA interface per
                network card and no public IPs, a node IAM role and an EKS managed node group
                (NVIDIA AL2023 AMI) in the pool's one subnet with our labels and the GPU taint.
CheckpointStorage  FSx for Lustre PERSISTENT_2 + the FSx CSI add-on + a static PV/PVC, or EFS
                (encrypted, elastic throughput) + the EFS CSI add-on + mount targets, an access point,
                a StorageClass and a static PV/PVC. The file system, its security group and rules, the
                mount targets and access point are protected and retained, PVs `Retain`, unless
                storage.allowDelete (the group would otherwise fail to delete: the retained file
                system's interfaces are still in it).

Facts and their sources: multinode/catalog.py (network cards, EFA count), multinode/clouds/aws.py
(FSx sizes and throughput), ../shared/facts/hardware.md section 3.
"""
from __future__ import annotations

import json
from typing import Any

import pulumi
import pulumi_aws as aws

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
from components.kubernetes.objects import k8s_object
from multinode import local_nvme, upgrades
from multinode.clouds import aws as limits

# node bootstrap facts and helpers of the pure cloud module (tests read them through this module too)
from multinode.clouds.aws import (  # noqa: F401
    EFS_CSI,
    FSX_CSI,
    LUSTRE_PORTS,
    NFS_PORT,
    NODE_POLICIES,
    ami_type,
    efa_interface_count,
    eks_taints,
    kubeconfig_for,
    network_interfaces,
    node_trust,
    pod_identity_trust,
)
from multinode.manifests import storage as sm
from multinode.pools import node_labels


def _field(obj: Any, key: str) -> Any:
    """A field of an invoke result: typed output objects (dict subclasses) or plain dicts."""
    return obj.get(key) if isinstance(obj, dict) else getattr(obj, key)


# ---------------------------------------------------------------- components
class ClusterAccess(pulumi.ComponentResource):
    """The EKS cluster named in the stack, looked up (never created), and a provider for it."""

    def __init__(self, name: str, args: ClusterAccessArgs, opts: pulumi.ResourceOptions | None = None):
        super().__init__(TYPE_PREFIX + "ClusterAccess", name, None, opts)
        cfg = args.config
        cname, region = cfg.cluster.name or "", cfg.cluster.region or ""
        eks = aws.eks.get_cluster_output(name=cname, region=region, opts=pulumi.InvokeOptions(parent=self))
        self.eks = eks
        self.cluster_name = eks.name
        self.vpc_id = pulumi.Output.from_input(cfg.cluster.vpc_id) if cfg.cluster.vpc_id else \
            eks.vpc_config.vpc_id
        # Nodes carry the cluster security group too: a launch template with its own interfaces
        # replaces the groups EKS would attach, and the control plane talks to nodes through it.
        self.cluster_security_group_id = eks.vpc_config.cluster_security_group_id
        self.kubeconfig = pulumi.Output.secret(
            pulumi.Output.all(eks.name, eks.endpoint, eks.certificate_authorities)
            .apply(lambda a: kubeconfig_for(a[0], region, a[1], _field(a[2][0], "data"))))
        self.provider = connect(self, name, self.kubeconfig)
        # issue 34: the agent that sets the node conditions EKS node auto repair acts on (multinode/clouds/aws.py)
        self.node_monitoring_addon = aws.eks.Addon(
            f"{name}-{limits.NODE_MONITORING_AGENT_ADDON}", cluster_name=self.cluster_name,
            addon_name=limits.NODE_MONITORING_AGENT_ADDON, resolve_conflicts_on_create="OVERWRITE",
            resolve_conflicts_on_update="PRESERVE",
            # issue 40: its DCGM server tolerates our GPU taint (multinode/clouds/aws.py)
            configuration_values=json.dumps(limits.node_monitoring_agent_configuration(cfg), sort_keys=True),
            opts=pulumi.ResourceOptions(parent=self)) \
            if limits.node_monitoring_agent(cfg) else None
        self.register_outputs({"clusterName": self.cluster_name, "kubeconfig": self.kubeconfig})


class GpuNodePool(pulumi.ComponentResource, PoolOutputsMixin):
    """An EKS managed node group of EFA GPU instances in one subnet and placement group."""

    def __init__(self, name: str, args: GpuNodePoolArgs, opts: pulumi.ResourceOptions | None = None):
        super().__init__(TYPE_PREFIX + "GpuNodePool", name, None, opts)
        build_pool(self, name, args)


def build_pool(comp: Any, name: str, args: GpuNodePoolArgs) -> None:
    """The pool's resources under `comp` (this module's GpuNodePool, or the package's: components/package.py),
    its outputs set and registered."""
    cfg, pool, cluster = args.config, args.pool, args.cluster
    machine = cfg.machine(pool)
    child = pulumi.ResourceOptions(parent=comp)
    tags = {"multinode/pool": pool.name, "multinode/stack": pulumi.get_stack()}

    # EFA traffic must be allowed to and from the nodes' own security group, every protocol.
    comp.security_group = aws.ec2.SecurityGroup(
        f"{name}-efa", vpc_id=cluster.vpc_id, description=f"EFA: all traffic among nodes of pool {pool.name}",
        tags=tags, opts=child)
    comp.efa_ingress = aws.vpc.SecurityGroupIngressRule(
        f"{name}-efa-in", security_group_id=comp.security_group.id, ip_protocol="-1",
        referenced_security_group_id=comp.security_group.id, description="EFA: from the pool itself", opts=child)
    comp.efa_egress = aws.vpc.SecurityGroupEgressRule(
        f"{name}-efa-out", security_group_id=comp.security_group.id, ip_protocol="-1",
        referenced_security_group_id=comp.security_group.id, description="EFA: to the pool itself", opts=child)
    # Nodes also need to reach the rest of the VPC and the internet (images, models) over ENA.
    comp.egress_all = aws.vpc.SecurityGroupEgressRule(
        f"{name}-egress", security_group_id=comp.security_group.id, ip_protocol="-1", cidr_ipv4="0.0.0.0/0",
        description="node egress", opts=child)

    cr = pool.capacity_reservation
    # A capacity reservation fixes placement itself: an existing reservation only serves a
    # placement group it was created in, and capacity blocks come colocated. Without one, a
    # cluster placement group packs the nodes close together.
    comp.placement_group = None
    if cr is None:
        comp.placement_group = aws.ec2.PlacementGroup(f"{name}-pg", strategy="cluster", tags=tags, opts=child)

    comp.node_role = aws.iam.Role(f"{name}-node", assume_role_policy=node_trust(), tags=tags, opts=child)
    attachments = [aws.iam.RolePolicyAttachment(f"{name}-node-{i}", role=comp.node_role.name, policy_arn=arn,
                                                opts=child) for i, arn in enumerate(NODE_POLICIES)]

    groups = [comp.security_group.id, cluster.cluster_security_group_id]
    lt_args: dict[str, Any] = dict(
        description=f"multinode pool {pool.name}: {machine.name} with EFA",
        network_interfaces=network_interfaces(machine, cfg.fabric.enabled, groups),
        block_device_mappings=[{"device_name": "/dev/xvda", "ebs": {
            "volume_size": pool.disk_size_gb, "volume_type": "gp3", "encrypted": "true",
            "delete_on_termination": "true"}}],
        metadata_options={"http_tokens": "required", "http_put_response_hop_limit": 2,
                          "http_endpoint": "enabled"},
        tag_specifications=[{"resource_type": "instance", "tags": tags}],
        tags=tags,
    )
    if pool.local_nvme:   # off by default: new user data replaces the pool's nodes (multinode/local_nvme.py)
        lt_args["user_data"] = local_nvme.user_data_b64(pool.local_nvme)
    if comp.placement_group is not None:
        lt_args["placement"] = {"group_name": comp.placement_group.name}
    if cr is not None:
        lt_args["capacity_reservation_specification"] = {
            "capacity_reservation_target": {"capacity_reservation_id": cr.id}}
        if cr.type == "capacityBlock":
            lt_args["instance_market_options"] = {"market_type": "capacity-block"}
    comp.launch_template = aws.ec2.LaunchTemplate(f"{name}-lt", opts=child, **lt_args)

    labels = node_labels(cfg, pool, machine)
    comp.node_group = aws.eks.NodeGroup(
        f"{name}-ng",
        cluster_name=cluster.cluster_name,
        node_role_arn=comp.node_role.arn,
        subnet_ids=[pool.subnet_id],
        ami_type=ami_type(machine),
        instance_types=[machine.name],
        capacity_type="CAPACITY_BLOCK" if cr is not None and cr.type == "capacityBlock" else "ON_DEMAND",
        scaling_config={"desired_size": pool.node_count, "min_size": pool.node_count,
                        "max_size": pool.node_count},
        # gang-aware: EKS surges at least the largest gang and drains that many old nodes at once
        # (multinode/upgrades.py, with its sources)
        # a Capacity Block node group has none (it is upgraded at desired size 0: upgrades.plan_pool)
        update_config=upgrades.plan_pool(cfg, pool).settings.get("update_config"),
        # EKS node auto repair (issue 34; settings and sources in multinode/clouds/aws.py)
        node_repair_config=limits.node_repair_config(cfg),
        labels=labels,
        taints=eks_taints(cfg),
        launch_template={"id": comp.launch_template.id,
                         "version": comp.launch_template.latest_version.apply(str)},
        tags=tags,
        opts=pulumi.ResourceOptions(parent=comp, depends_on=attachments + [comp.efa_ingress, comp.efa_egress],
                                    **upgrades.blue_green_options(pool, "aws")),
    )
    if machine.network_cards is None and efa_interface_count(machine, cfg.fabric.enabled) > 1:
        pulumi.log.warn(f"pool {pool.name}: the network-card layout of {machine.name} is unconfirmed; the launch "
                        f"template puts one EFA on each of cards 0..{machine.fabric_nics - 1}. Check it against "
                        f"`aws ec2 describe-instance-types --instance-types {machine.name}`.", resource=comp)
    out = comp._set_pool_outputs(cfg, pool)
    comp.register_outputs(out)


class CheckpointStorage(pulumi.ComponentResource):
    """FSx for Lustre or EFS for checkpoints, exposed as a ReadWriteMany claim."""

    def __init__(self, name: str, args: CheckpointStorageArgs, opts: pulumi.ResourceOptions | None = None):
        super().__init__(TYPE_PREFIX + "CheckpointStorage", name, None, opts)
        cfg, s, cluster = args.config, args.storage, args.cluster
        child = pulumi.ResourceOptions(parent=self)
        # The file system and what it keeps using after a destroy that retains it: its security group
        # and rules (FSx ENIs / EFS mount targets sit in the group; deleting it would fail with
        # DependencyViolation mid-destroy), the mount targets and the access point.
        keep = kept(child, s)
        tags = {"multinode/storage": s.name, "multinode/stack": pulumi.get_stack()}
        subnets = [s.subnet_id] if s.subnet_id else list(dict.fromkeys(p.subnet_id for p in cfg.node_pools))
        csi = FSX_CSI if s.kind == "fsx-lustre" else EFS_CSI

        # Storage security group: the file protocol from the nodes (they carry the cluster SG).
        self.security_group = aws.ec2.SecurityGroup(f"{name}-sg", vpc_id=cluster.vpc_id,
                                                    description=f"{s.kind} {s.stable_name}: clients in the cluster",
                                                    tags=tags, opts=keep)
        self.security_group_rules: list[pulumi.CustomResource] = []
        ports = LUSTRE_PORTS if s.kind == "fsx-lustre" else ((NFS_PORT, NFS_PORT),)
        for lo, hi in ports:
            self.security_group_rules.append(aws.vpc.SecurityGroupIngressRule(
                f"{name}-in-{lo}", security_group_id=self.security_group.id, ip_protocol="tcp", from_port=lo,
                to_port=hi, referenced_security_group_id=cluster.cluster_security_group_id,
                description=f"{s.kind} from cluster nodes", opts=keep))
            if s.kind == "fsx-lustre":   # Lustre servers also talk to each other on these ports
                self.security_group_rules.append(aws.vpc.SecurityGroupIngressRule(
                    f"{name}-self-{lo}", security_group_id=self.security_group.id, ip_protocol="tcp",
                    from_port=lo, to_port=hi, referenced_security_group_id=self.security_group.id,
                    description="Lustre servers among themselves", opts=keep))
        self.security_group_rules.append(aws.vpc.SecurityGroupEgressRule(
            f"{name}-out", security_group_id=self.security_group.id, ip_protocol="-1", cidr_ipv4="0.0.0.0/0",
            opts=keep))

        # CSI driver add-on with its IAM role (EKS Pod Identity; needs the eks-pod-identity-agent add-on).
        self.csi_role = aws.iam.Role(f"{name}-csi", assume_role_policy=pod_identity_trust(), tags=tags, opts=child)
        policy = aws.iam.RolePolicyAttachment(f"{name}-csi", role=self.csi_role.name, policy_arn=csi["policy"],
                                              opts=child)
        self.csi_addon = aws.eks.Addon(
            f"{name}-{csi['addon']}", cluster_name=cluster.cluster_name, addon_name=csi["addon"],
            pod_identity_associations=[{"role_arn": self.csi_role.arn, "service_account": csi["service_account"]}],
            resolve_conflicts_on_create="OVERWRITE", resolve_conflicts_on_update="PRESERVE", tags=tags,
            opts=pulumi.ResourceOptions(parent=self, depends_on=[policy]))

        size = claim_size_gib(s)
        if s.kind == "fsx-lustre":
            throughput = s.throughput or limits.FSX_DEFAULT_THROUGHPUT
            self.file_system = aws.fsx.LustreFileSystem(
                f"{name}-fsx", deployment_type=limits.FSX_DEPLOYMENT_TYPE, storage_type="SSD",
                # one subnet (the SDK takes a string)
                storage_capacity=size, per_unit_storage_throughput=throughput, subnet_ids=subnets[0],
                security_group_ids=[self.security_group.id], data_compression_type="LZ4",
                file_system_type_version="2.15", automatic_backup_retention_days=7, copy_tags_to_backups=True,
                skip_final_backup=s.allow_delete, tags=tags,
                opts=pulumi.ResourceOptions.merge(keep, pulumi.ResourceOptions(depends_on=self.security_group_rules)))
            self.mount_targets: list[aws.efs.MountTarget] = []
            sc_name, sc_output = "", None
            volume = dict(driver=csi["driver"], volume_handle=self.file_system.id, mount_options=["flock"],
                          attributes={"dnsname": self.file_system.dns_name,
                                      "mountname": self.file_system.mount_name})
        else:
            self.file_system = aws.efs.FileSystem(
                f"{name}-efs", encrypted=True, throughput_mode="elastic", performance_mode="generalPurpose",
                tags=tags, opts=keep)
            self.mount_targets = [aws.efs.MountTarget(
                f"{name}-mt-{i}", file_system_id=self.file_system.id, subnet_id=sub,
                security_groups=[self.security_group.id],
                opts=pulumi.ResourceOptions.merge(keep, pulumi.ResourceOptions(depends_on=self.security_group_rules)))
                for i, sub in enumerate(subnets)]
            self.access_point = aws.efs.AccessPoint(
                f"{name}-ap", file_system_id=self.file_system.id,
                posix_user={"uid": 1000, "gid": 1000},
                root_directory={"path": f"/{s.stable_name}", "creation_info": {
                    "owner_uid": 1000, "owner_gid": 1000, "permissions": "0775"}},
                tags=tags, opts=keep)
            sc_name = f"{s.stable_name}-efs"[:63]
            sc = sm.storage_class(sc_name, csi["driver"], {
                "provisioningMode": "efs-ap", "fileSystemId": self.file_system.id, "directoryPerms": "0775",
                "basePath": "/dynamic", "uid": "1000", "gid": "1000"}, s.allow_delete)
            sc_res = k8s_object(f"{name}-sc", sc, pulumi.ResourceOptions(
                parent=self, provider=cluster.provider, depends_on=[self.csi_addon]))
            sc_output = sc_res.id.apply(lambda _: sc_name)  # known once the class exists
            handle = pulumi.Output.all(self.file_system.id, self.access_point.id).apply(lambda a: f"{a[0]}::{a[1]}")
            volume = dict(driver=csi["driver"], volume_handle=handle, mount_options=["tls"],
                          attributes={"encryptInTransit": "true"})
        register_claim(self, name, s, cluster.provider, **volume, storage_class=sc_name,
                       storage_class_output=sc_output, depends_on=[self.csi_addon] + self.mount_targets,
                       outputs={"fileSystemId": self.file_system.id})
