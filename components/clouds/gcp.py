"""cloud: gcp — GPU node pools with their GPU networks on an existing GKE cluster, and checkpoint storage.

- ClusterAccess looks the cluster up (`gcp.container.get_cluster`), builds a kubeconfig that
  authenticates with gke-gcloud-auth-plugin (kept secret) and the Kubernetes provider, and warns at
  deploy time when the cluster lacks multi-networking, Dataplane V2 or the storage CSI add-on.
- GpuNodePool creates the extra VPCs/subnets the machine's fabric needs (TCPXO: 8 at MTU 8244, TCPX: 4,
  RDMA: a gVNIC VPC + a RoCE VPC with 8 subnets), firewall rules between the nodes on them, the node
  pool (accelerator with driver install, gVNIC, additional node networks, COMPACT placement,
  reservation affinity, labels, taints) and the GKE Network / GKENetworkParamSet objects.
- CheckpointStorage: Filestore (ZONAL / ENTERPRISE) or Managed Lustre as a protected instance and a
  static PV (Retain) + PVC, ReadWriteMany.
Network names come from multinode.clouds.gcp.network_plan (built on pools.gcp_network_names), the same
names the fabric profile gives pods.
"""
from __future__ import annotations

import re
from typing import Any

import pulumi
import pulumi_gcp as gcp

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
from multinode import pools, upgrades
from multinode.clouds import gcp as gke

RESERVATION_KEY = "compute.googleapis.com/reservation-name"


def _last(path: str | None) -> str:
    return (path or "").rsplit("/", 1)[-1]


def _first(seq, attr: str):
    """`seq[0].attr` for the list-shaped blocks of data-source results (None when absent)."""
    if not seq:
        return None
    item = seq[0]
    return item.get(attr) if isinstance(item, dict) and not hasattr(item, attr) else getattr(item, attr, None)


class ClusterAccess(pulumi.ComponentResource):
    """The existing GKE cluster: kubeconfig (secret), Kubernetes provider, readiness warnings."""

    def __init__(self, name: str, args: ClusterAccessArgs, opts: pulumi.ResourceOptions | None = None):
        super().__init__(TYPE_PREFIX + "ClusterAccess", name, None, opts)
        cfg = args.config
        c = cfg.cluster
        self.project = c.project
        self.location = c.location
        self.gke = gcp.container.get_cluster_output(name=c.name, location=c.location, project=c.project,
                                                    opts=pulumi.InvokeOutputOptions(parent=self))
        self.cluster_name = pulumi.Output.from_input(c.name)
        self.cluster_id = self.gke.id
        # the primary VPC: the stack's cluster.network, else the cluster's own network
        self.network = (pulumi.Output.from_input(c.network) if c.network
                        else self.gke.network.apply(_last))
        self.kubeconfig = pulumi.Output.secret(pulumi.Output.all(self.gke.endpoint, self.gke.master_auths).apply(
            lambda a: gke.kubeconfig(c.name, a[0], _first(a[1], "cluster_ca_certificate") or "")))
        self.provider = connect(self, name, self.kubeconfig)
        needs_networks = any(gke.network_plan(cfg, p) for p in cfg.node_pools)
        storage_kind = cfg.storage.kind if cfg.storage is not None else None

        def check(r) -> list[str]:
            # Only logs: a deploy-time check of the looked-up values, never a resource.
            # The GPUDirect minimum GKE version (cluster.gkeVersion is checked at load; this checks the cluster
            # itself): an error, so `pulumi preview` / `up` fails with the message instead of pods without TCPXO.
            too_old = gke.cluster_version_problems(cfg, r.master_version)
            for m in too_old:
                pulumi.log.error(f"GKE cluster {c.name}: {m}", resource=self)
            msgs = gke.cluster_readiness(r.enable_multi_networking, r.datapath_provider, needs_networks)
            if storage_kind in ("filestore", "gcp-lustre") and not (cfg.storage and cfg.storage.existing_claim):
                addons = r.addons_configs or []
                block = ("gcp_filestore_csi_driver_configs" if storage_kind == "filestore"
                         else "lustre_csi_driver_configs")
                msgs += gke.csi_readiness(storage_kind, _first(_first(addons, block), "enabled"))
            for m in msgs:
                pulumi.log.warn(f"GKE cluster {c.name}: {m}", resource=self)
            return too_old + msgs

        self.readiness_warnings = self.gke.apply(check)
        self.register_outputs({"clusterName": self.cluster_name, "kubeconfig": self.kubeconfig,
                               "readinessWarnings": self.readiness_warnings})


class GpuNodePool(pulumi.ComponentResource, PoolOutputsMixin):
    """A GKE node pool with the machine's GPU networks, compact placement and its GKE Network objects."""

    def __init__(self, name: str, args: GpuNodePoolArgs, opts: pulumi.ResourceOptions | None = None):
        super().__init__(TYPE_PREFIX + "GpuNodePool", name, None, opts)
        build_pool(self, name, args)


def build_pool(comp: Any, name: str, args: GpuNodePoolArgs) -> None:
    """The pool's resources under `comp` (this module's GpuNodePool, or the package's: components/package.py),
    its outputs set and registered."""
    cfg, pool, cluster = args.config, args.pool, args.cluster
    m = cfg.machine(pool)
    project = cfg.cluster.project
    region = gke.region_of(pool.zone or cfg.cluster.location or "")
    child = pulumi.ResourceOptions(parent=comp)
    comp.networks = gke.network_plan(cfg, pool)

    vpcs: dict = {}
    subnets: dict = {}
    comp.firewalls: list[gcp.compute.Firewall] = []
    for net in comp.networks:
        if net.vpc not in vpcs:
            vpcs[net.vpc] = gcp.compute.Network(
                net.vpc, name=net.vpc, project=project, auto_create_subnetworks=False, mtu=net.mtu,
                routing_mode="REGIONAL",
                network_profile=gke.roce_network_profile(project, pool.zone) if net.rdma else None,
                opts=child)
        subnets[net.name] = gcp.compute.Subnetwork(
            net.subnet, name=net.subnet, project=project, region=region, network=vpcs[net.vpc].id,
            ip_cidr_range=net.cidr, opts=child)
    # Node-to-node traffic on each GPU VPC. RoCE VPCs take no VPC firewall rules: they allow ingress
    # and egress implicitly (multinode/clouds/gcp.py G7), so none is created there.
    for vpc_name, vpc in vpcs.items():
        cidrs = [n.cidr for n in comp.networks if n.vpc == vpc_name]
        if any(n.rdma for n in comp.networks if n.vpc == vpc_name):
            continue
        comp.firewalls.append(gcp.compute.Firewall(
            gke.firewall_name(vpc_name), name=gke.firewall_name(vpc_name), project=project, network=vpc.id,
            direction="INGRESS", priority=1000, source_ranges=cidrs,
            allows=[{"protocol": "tcp"}, {"protocol": "udp"}, {"protocol": "icmp"}],
            description="GPU nodes of this pool talk to each other on every port (NCCL)", opts=child))

    labels = pools.node_labels(cfg, pool, m)
    node_config = {
        "machine_type": m.name,
        "disk_size_gb": pool.disk_size_gb,
        "image_type": "COS_CONTAINERD",
        "guest_accelerators": [{
            "type": m.accelerator, "count": m.gpus,
            "gpu_driver_installation_config": {"gpu_driver_version": "LATEST"},
        }],
        "gvnic": {"enabled": True},
        "labels": labels,
        "taints": gke.gke_taints(cfg),
        "oauth_scopes": ["https://www.googleapis.com/auth/cloud-platform"],
    }
    if m.fabric == "gcp-rdma":
        node_config["disk_type"] = "hyperdisk-balanced"   # A3 Ultra / A4 boot from Hyperdisk (G2 examples)
    cr = pool.capacity_reservation
    if cr is not None:
        node_config["reservation_affinity"] = {"consume_reservation_type": "SPECIFIC_RESERVATION",
                                               "key": RESERVATION_KEY, "values": [cr.id]}
    network_config = None
    if comp.networks:
        network_config = {"additional_node_network_configs": [
            {"network": vpcs[n.vpc].name, "subnetwork": subnets[n.name].name} for n in comp.networks]}
    plan = upgrades.plan_pool(cfg, pool)
    suffix = upgrades.physical_suffix(pool, m.name)
    comp.node_pool = gcp.container.NodePool(
        f"{name}-nodes", name=f"{pool.name}-{suffix}" if suffix else pool.name, project=project,
        location=cfg.cluster.location,
        cluster=cluster.cluster_id, node_locations=[pool.zone], node_count=pool.node_count,
        node_config=node_config, network_config=network_config,
        placement_policy={"type": "COMPACT"},
        # GKE refuses auto_upgrade False on release-channel clusters (the default); keep upgrades out of
        # training runs with a maintenance exclusion on the cluster instead (docs/clouds-gcp-oci.md).
        # auto_repair (issue 34): GKE re-creates a node that reports NotReady (or none) over ~10 min or runs out of
        # boot disk (cloud.google.com/kubernetes-engine/docs/concepts/node-auto-repair; on by default for new
        # node pools); cluster.nodeRepair false turns it off (docs/node-health.md).
        management={"auto_repair": bool(cfg.cluster.node_repair), "auto_upgrade": True},
        # gang-aware surge (or blue-green) sized to the largest gang (multinode/upgrades.py, with its sources)
        upgrade_settings=plan.settings["upgrade_settings"],
        opts=pulumi.ResourceOptions(parent=comp, depends_on=list(subnets.values()) + comp.firewalls,
                                    **upgrades.blue_green_options(pool, "gcp")))

    # The GKE objects that let pods attach the networks (one pair per network).
    kopts = pulumi.ResourceOptions(parent=comp, provider=cluster.provider)
    comp.network_objects = []
    for net in comp.networks:
        params = k8s_object(f"{net.name}-paramset", gke.network_param_set(net),
                            pulumi.ResourceOptions.merge(kopts, pulumi.ResourceOptions(
                                depends_on=[subnets[net.name]])))
        comp.network_objects.append(params)
        comp.network_objects.append(k8s_object(f"{net.name}-network", gke.network_object(net),
                                               pulumi.ResourceOptions.merge(kopts, pulumi.ResourceOptions(
                                                   depends_on=[params]))))
    out = comp._set_pool_outputs(cfg, pool)
    out["gpuNetworks"] = [n.name for n in comp.networks]
    comp.register_outputs(out)


class CheckpointStorage(pulumi.ComponentResource):
    """Filestore or Managed Lustre, protected, as a static ReadWriteMany PV (Retain) and its claim."""

    def __init__(self, name: str, args: CheckpointStorageArgs, opts: pulumi.ResourceOptions | None = None):
        super().__init__(TYPE_PREFIX + "CheckpointStorage", name, None, opts)
        cfg, s, cluster = args.config, args.storage, args.cluster
        project = cfg.cluster.project
        zone = cfg.node_pools[0].zone or ""
        # Only the instance is created here: it joins the cluster's existing VPC (no subnet, firewall or
        # peering of ours that a retained instance would still need).
        keep = kept(pulumi.ResourceOptions(parent=self), s)
        base = re.sub(r"[^a-z0-9-]", "-", f"{cfg.cluster.name}-{s.stable_name}".lower())[:60].strip("-")
        size = claim_size_gib(s)
        if s.kind == "filestore":
            tier = gke.filestore_tier(s.tier)
            location = zone if tier == "ZONAL" else gke.region_of(zone)
            share = re.sub(r"[^a-z0-9_]", "_", s.stable_name.lower())[:16]
            self.file_system = gcp.filestore.Instance(
                f"{name}-filestore", name=base, project=project, location=location, tier=tier,
                file_shares={"name": share, "capacity_gb": size},
                networks=[{"network": cluster.network, "modes": ["MODE_IPV4"], "connect_mode": "DIRECT_PEERING"}],
                deletion_protection_enabled=not s.allow_delete,
                opts=keep)
            ip = self.file_system.networks.apply(lambda n: n[0].ip_addresses[0])
            driver, handle = gke.FILESTORE_CSI, f"modeInstance/{location}/{base}/{share}"
            attributes = {"ip": ip, "volume": share}
        else:  # gcp-lustre
            throughput = s.throughput or gke.DEFAULT_LUSTRE_THROUGHPUT
            fs_name = (re.sub(r"[^a-z0-9]", "", s.stable_name.lower()) or "ckpt")[:8]
            self.file_system = gcp.lustre.Instance(
                f"{name}-lustre", instance_id=base, project=project, location=zone, filesystem=fs_name,
                capacity_gib=str(size), per_unit_storage_throughput=str(throughput), gke_support_enabled=True,
                network=cluster.network.apply(lambda n: f"projects/{project}/global/networks/{n}"),
                opts=keep)
            ip = self.file_system.mount_point.apply(lambda mp: (mp or "").split("@", 1)[0])
            driver, handle = gke.LUSTRE_CSI, f"{project}/{zone}/{base}"
            attributes = {"ip": ip, "filesystem": fs_name}
        register_claim(self, name, s, cluster.provider, driver=driver, volume_handle=handle, attributes=attributes,
                       depends_on=[self.file_system])
