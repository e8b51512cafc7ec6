"""cloud: oci, in the pure core (no Pulumi, no SDK): the same sections as every multinode/clouds module.

OKE facts and rules the OCI components and the config checks share:
- config rules: `CLUSTER_KEYS`, `STORAGE_KINDS`, `REQUIRED_FABRIC`, `CAPACITY_BLOCKS`, `CREATES_POOLS`
  (read by multinode/checks.py) and `config_problems(cfg)`;
- fabric profile: `FABRICS`, `NCCL_NET`, `fabric_settings` (RDMA over SR-IOV VFs; assembled by
  multinode/fabric.py);
- node bootstrap: the cloud-init of self-managed OKE workers;
- mock data for `plan`: `MOCK_CALLS`, `MOCK_OUTPUTS` (registered by multinode/recording.py).

Sources:
  O1  oracle-quickstart/oci-hpc-oke docs + terraform (via hardware.md): GPU pools in "cluster-network"
      mode with a custom GPU image and the Oracle Cloud Agent plugins for RDMA enabled; RDMA VFs per
      shape (nvidia.com/rdma-vf: 16 on GPU4.8 / A100-v2.8 / H100.8, 8 on H200.8 / B200.8).
  O3  OKE self-managed nodes: cloud-init runs /etc/oke/oke-install.sh with --apiserver-endpoint (IP only)
      and --kubelet-ca-cert (base64 CA); --kubelet-extra-args carries --node-labels / --register-with-taints.
  O5  oracle-quickstart/oci-hpc-oke (commit 61d210ac, 2026-08-20): docs/worker-node-images.md lists the
      GPU images for the RDMA shapes, all Canonical Ubuntu 22.04 / 24.04 with DOCA-OFED 3.4.0;
      files/oke-ubuntu-cloud-init.sh joins them: installs oci-oke-node-all-<k8s version> (apt source
      ubuntu-<codename>/kubernetes-<major.minor>, local copy under /opt/oke-node-client-packages first,
      unsigned: `Trusted: yes`) when the `oke` command is missing, then `oke bootstrap
      --kubelet-extra-args ...` retried every 15 s up to 20 times; CRI-O memlock unlimited on GPU shapes
      (RDMA pins memory); terraform/oke-workers.tf writes the API server host to /etc/oke/oke-apiserver,
      the decoded CA to /etc/kubernetes/ca.crt, and systemd-networkd ManageForeignRoutes=no /
      ManageForeignRoutingPolicyRules=no (restarted on Ubuntu).
  O6  the same script at oracle-quickstart/oci-hpc-oke@61d210ac files/oke-ubuntu-cloud-init.sh:43-55
      (configure_crio_defaults: for Kubernetes >= v1.34, /etc/crio/crio.conf.d/11-default.conf sets
      `[crio.image] short_name_mode = "disabled"`, before every `oke bootstrap`), :178 (REMOTE_REPO_URL: two
      URIs, a pre-authenticated link then the public bucket) and :201-217 (the local repository first, the
      remote one when installing from it fails).
  O7  the RDMA subsystem's netns mode: k8snetworkplumbingwg/rdma-cni@449bfbc7 cmd/rdma/main.go:71-82
      (ensureRdmaSystemMode: the `rdma` CNI fails ADD unless `rdma system show` says exclusive) and README.md:
      76-89 (`rdma system set netns exclusive` at runtime, `options ib_core netns_mode=0` in
      /etc/modprobe.d/ib_core.conf for boot; the kernel refuses the change while other network namespaces
      exist). oci-hpc-oke sets it on its VF path in manifests/vf-config/vf-config.go setRDMANetnsExclusive (branch
      `vf`@ba88f766, commit 55d979a "Change RDMA ns if needed": runtime, modprobe.d, update-initramfs -u); its
      main branch@61d210ac no longer carries that DaemonSet and sets netns mode nowhere. We set it in cloud-init,
      before `oke bootstrap` starts the kubelet (so no pod network namespace exists yet).
  O4  OCI File Storage CSI (fss.csi.oraclecloud.com): static PV volumeHandle "<fs_ocid>:<mount_target_ip>:<export_path>"
      (hardware.md section 4). File systems grow on demand: there is no size to provision.
"""
from __future__ import annotations

import base64
import re
import shlex
from collections.abc import Callable
from typing import Any

import yaml

from .. import catalog
from ..catalog import Machine
from ..config import NodePool, StackConfig
from ..errors import Problem

# ---------------------------------------------------------------- config rules
CLUSTER_KEYS = ("clusterId", "compartmentId", "region")
STORAGE_KINDS = ("oci-fss",)
REQUIRED_FABRIC = None         # BM.GPU shapes bring RoCE; the shape check below refuses VM shapes
CAPACITY_BLOCKS = False
CREATES_POOLS = True

FSS_CSI = "fss.csi.oraclecloud.com"

# Oracle Cloud Agent plugins a bare-metal GPU node needs for RDMA in a cluster network (O1).
RDMA_PLUGINS = ("Compute HPC RDMA Authentication", "Compute HPC RDMA Auto-Configuration",
                "Compute RDMA GPU Monitoring")

_AD = re.compile(r"^[A-Za-z0-9]{4}:[A-Z0-9-]+-AD-[1-3]\Z")


def api_host(endpoint: str) -> str:
    """oke-install.sh wants the API server IP only: it appends the ports itself (O3)."""
    host = (endpoint or "").strip()
    host = re.sub(r"^https?://", "", host)
    return host.rsplit(":", 1)[0] if host.count(":") == 1 else host


def ca_from_kubeconfig(content: str) -> str:
    doc = yaml.safe_load(content or "") or {}
    for c in doc.get("clusters") or []:
        ca = (c.get("cluster") or {}).get("certificate-authority-data")
        if ca:
            return str(ca)
    return ""


def kubelet_extra_args(labels: dict[str, str], taints: list[dict[str, str]]) -> str:
    args = ["--node-labels=" + ",".join(f"{k}={v}" for k, v in sorted(labels.items()))]
    if taints:
        args.append("--register-with-taints=" + ",".join(f"{t['key']}={t['value']}:{t['effect']}" for t in taints))
    return " ".join(args)


# How a node joins (nodePools[].bootstrap). The default is what the documented RDMA GPU images need (O5:
# Ubuntu + DOCA-OFED, joined with the OKE node package); "oke-install" is the OKE Oracle Linux images' script
# (O3), kept for pools whose image carries /etc/oke/oke-install.sh.
BOOTSTRAP_PATHS = ("oke-package", "oke-install")
DEFAULT_BOOTSTRAP = "oke-package"
OKE_PACKAGE = "oci-oke-node-all"
# O6: the package's two mirrors, in upstream's order (apt tries the URIs of one deb822 source in turn): a
# pre-authenticated link to the private bucket, then the public bucket.
OKE_PACKAGE_REPOS = (
    "https://objectstorage.us-sanjose-1.oraclecloud.com/p/_Zaa2khW3lPESEbqZ2JB3FijAd0HeKmiP-KA2eOMuWwro85dcG2WAqua2o"
    "_a-PlZ/n/odx-oke/b/okn-repositories-private/o/prod",
    "https://odx-oke.objectstorage.us-sanjose-1.oci.customer-oci.com/n/odx-oke/b/okn-repositories/o/prod",
)
OKE_LOCAL_REPO = "/opt/oke-node-client-packages"
BOOTSTRAP_ATTEMPTS, BOOTSTRAP_INTERVAL_S = 20, 15       # O5 run_with_retry


def bootstrap_path(pool: NodePool) -> str:
    return pool.bootstrap or DEFAULT_BOOTSTRAP


def _package_version(kubernetes_version: str) -> str:
    """'v1.33.1' -> '1.33.1' (the package is named oci-oke-node-all-<this>, O5)."""
    v = (kubernetes_version or "").strip().lstrip("v")
    if not re.fullmatch(r"\d+\.\d+\.\d+", v):
        raise ValueError(f"OKE Kubernetes version {kubernetes_version!r} is not vMAJOR.MINOR.PATCH")
    return v


# RDMA pins memory (ibv_reg_mr); CRI-O's default locked-memory limit (8 MB) makes that fail in pods (O5).
_MEMLOCK = ["mkdir -p /etc/crio/crio.conf.d",
            "cat > /etc/crio/crio.conf.d/12-memlock.conf <<'EOF'",
            "[crio.runtime]", "default_ulimits = [", '    "memlock=-1:-1"', "]", "EOF"]


# O6: CRI-O 1.34 (OKE >= v1.34) enforces short-name mode: a pod naming `vllm/vllm-openai:tag` is refused unless
# the node relaxes it. Our default images are fully qualified (multinode/images.py); a user's image may not be.
SHORT_NAME_MODE_FROM = (1, 34)
_SHORT_NAME_MODE = ["mkdir -p /etc/crio/crio.conf.d",
                    "cat > /etc/crio/crio.conf.d/11-default.conf <<'EOF'",
                    "[crio.image]", 'short_name_mode = "disabled"', "EOF"]

# O7: the `rdma` CNI in the OCI VF chain (manifests/addons.rdma_vf_network) refuses to run unless the host's RDMA
# subsystem is in exclusive netns mode. Set now (the kubelet has not started: no pod namespaces yet) and for
# every boot (ib_core is in the initramfs on Ubuntu, so regenerate it). A failure is logged, not fatal: the node
# still joins (CPU pods run), and the CNI names the mode in the pod's sandbox error.
_RDMA_NETNS_EXCLUSIVE = [
    "if command -v rdma >/dev/null 2>&1; then",
    "  if ! rdma system show | grep -q 'netns exclusive'; then",
    "    rdma system set netns exclusive || echo 'warning: rdma system set netns exclusive failed' >&2",
    "  fi",
    "  echo 'options ib_core netns_mode=0' > /etc/modprobe.d/ib_core.conf",
    "  update-initramfs -u >/dev/null 2>&1 || dracut -f >/dev/null 2>&1 || true",
    "  rdma system show >&2 || true",
    "else",
    "  echo 'warning: no rdma tool (iproute2): RDMA netns mode left as is; the rdma CNI needs exclusive' >&2",
    "fi",
]


def needs_short_name_mode_off(kubernetes_version: str) -> bool:
    """O6: Kubernetes (hence CRI-O) >= 1.34. An unknown version (the oke-install path may not know it): False,
    as upstream, which writes the setting only for a version it can compare."""
    m = re.fullmatch(r"v?(\d+)\.(\d+)(?:\.\d+)?", (kubernetes_version or "").strip())
    return m is not None and (int(m.group(1)), int(m.group(2))) >= SHORT_NAME_MODE_FROM


def _oke_install_script(endpoint: str, ca_b64: str, extra: str) -> list[str]:
    return ["bash /etc/oke/oke-install.sh \\",
            f"  --apiserver-endpoint {shlex.quote(api_host(endpoint))} \\",
            f"  --kubelet-ca-cert {shlex.quote(ca_b64)} \\",
            f"  --kubelet-extra-args {shlex.quote(extra)}"]


def _oke_package_script(endpoint: str, ca_b64: str, extra: str, kubernetes_version: str) -> list[str]:
    version = _package_version(kubernetes_version)
    minor = ".".join(version.split(".")[:2])
    return [
        # what `oke bootstrap` reads: the API server host and the cluster CA (O5, terraform write_files)
        "install -d -m 0755 /etc/oke /etc/kubernetes",
        f"printf '%s' {shlex.quote(api_host(endpoint))} > /etc/oke/oke-apiserver",
        f"printf '%s' {shlex.quote(ca_b64)} | base64 --decode > /etc/kubernetes/ca.crt",
        "chmod 0644 /etc/kubernetes/ca.crt",
        # networkd must not remove routes it did not make (the RDMA interfaces' routes, O5)
        "printf '[Network]\\nManageForeignRoutes=no\\nManageForeignRoutingPolicyRules=no\\n' "
        "> /etc/systemd/networkd.conf",
        "systemctl restart systemd-networkd || true",
        "if ! command -v oke >/dev/null 2>&1; then",
        "  . /etc/os-release",
        f"  local_repo={OKE_LOCAL_REPO}/ubuntu-$VERSION_CODENAME/kubernetes-{minor}",
        '  remote="' + " ".join(f"{r}/ubuntu-$VERSION_CODENAME/kubernetes-{minor}" for r in OKE_PACKAGE_REPOS) + '"',
        "  oke_source() {",
        "    printf 'Enabled: yes\\nTypes: deb\\nURIs: %s\\nSuites: stable\\nComponents: main\\nTrusted: yes\\n' "
        '"$1" > /etc/apt/sources.list.d/oke-node-client.sources',
        "  }",
        "  oke_package() {",
        "    while fuser /var/lib/dpkg/lock /var/lib/dpkg/lock-frontend /var/lib/apt/lists/lock "
        "/var/cache/apt/archives/lock >/dev/null 2>&1; do sleep 1; done",
        "    apt-get -y update || true",
        f"    apt-get -y install {OKE_PACKAGE}-{version}",
        "  }",
        "  # the image's local copy first, both remote mirrors when it is missing or fails (O6)",
        '  if ! { [ -d "$local_repo/dists" ] && oke_source "file://$local_repo" && oke_package; }; then',
        '    oke_source "$remote"',
        "    oke_package",
        "  fi",
        "fi",
        f"for attempt in $(seq 1 {BOOTSTRAP_ATTEMPTS}); do",
        f"  if oke bootstrap --kubelet-extra-args {shlex.quote(extra)}; then exit 0; fi",
        f'  echo "oke bootstrap attempt $attempt failed" >&2; sleep {BOOTSTRAP_INTERVAL_S}',
        "done",
        f'echo "oke bootstrap failed after {BOOTSTRAP_ATTEMPTS} attempts" >&2',
        "exit 1",
    ]


def node_user_data(endpoint: str, ca_b64: str, labels: dict[str, str], taints: list[dict[str, str]],
                   path: str = DEFAULT_BOOTSTRAP, kubernetes_version: str = "") -> str:
    """cloud-init (a shell script) for a self-managed OKE GPU node: join the cluster with our labels and
    taints, by the pool's bootstrap path: "oke-package" (O5, needs the cluster's Kubernetes version) or
    "oke-install" (O3)."""
    extra = kubelet_extra_args(labels, taints)
    crio = _SHORT_NAME_MODE if needs_short_name_mode_off(kubernetes_version) else []
    if path == "oke-package":
        body = _oke_package_script(endpoint, ca_b64, extra, kubernetes_version)
    elif path == "oke-install":
        body = _oke_install_script(endpoint, ca_b64, extra)
    else:
        raise ValueError(f"unknown OKE bootstrap path {path!r}; use one of {', '.join(BOOTSTRAP_PATHS)}")
    return "\n".join(["#!/usr/bin/env bash", "set -euo pipefail", *_MEMLOCK, *crio, *_RDMA_NETNS_EXCLUSIVE, *body, ""])


def user_data_b64(script: str) -> str:
    return base64.b64encode(script.encode()).decode()


def fss_volume_handle(fs_id: str, mount_target_ip: str, export_path: str) -> str:
    return f"{fs_id}:{mount_target_ip}:{export_path}"


# OCID region keys -> region identifiers, for OCIDs of regions older than Frankfurt, which carry the key (phx, iad)
# instead of the identifier (Oracle "Resource Identifiers": ocid1.<RESOURCE TYPE>.<REALM>.[REGION][.FUTURE USE].
# <UNIQUE ID>, region "phx, iad, eu-frankfurt-1"). The keys: oracle/oci-python-sdk src/oci/regions.py
# REGIONS_SHORT_NAMES (2020). A key not listed is not judged (never guessed).
OCID_REGION_KEYS = {
    "phx": "us-phoenix-1", "iad": "us-ashburn-1", "sjc": "us-sanjose-1", "fra": "eu-frankfurt-1",
    "zrh": "eu-zurich-1", "cwl": "uk-cardiff-1", "lhr": "uk-london-1", "yyz": "ca-toronto-1", "nrt": "ap-tokyo-1",
    "icn": "ap-seoul-1", "bom": "ap-mumbai-1", "gru": "sa-saopaulo-1", "syd": "ap-sydney-1",
    "ltn": "uk-gov-london-1", "kix": "ap-osaka-1", "mel": "ap-melbourne-1", "ams": "eu-amsterdam-1",
    "jed": "me-jeddah-1", "yul": "ca-montreal-1", "hyd": "ap-hyderabad-1", "yny": "ap-chuncheon-1",
    "brs": "uk-gov-cardiff-1", "nja": "ap-chiyoda-1", "dxb": "me-dubai-1",
}
_REGION_ID = re.compile(r"^[a-z]+(-[a-z]+)+-\d+\Z")


def ocid_region(ocid: str) -> str | None:
    """The region identifier an OCID names (its 4th dot-separated field, a region key or identifier), or None:
    a global resource (empty field), an unknown key, or not an OCID."""
    parts = ocid.split(".")
    if len(parts) < 5 or parts[0] != "ocid1" or not parts[3]:
        return None
    where = parts[3].lower()
    if _REGION_ID.match(where):
        return where
    return OCID_REGION_KEYS.get(where)


# Nodes per OKE cluster: "clusters with up to 5,000 worker nodes on enhanced clusters, whether they are managed or
# self-managed" (blogs.oracle.com/developers/oci-kubernetes-engine-now-scales-to-5000-worker-nodes; enabled by default
# with the Flannel CNI, on request from OCI with VCN-native pod networking). Our pools are self-managed nodes in
# cluster networks (components/clouds/oci.py), so they count; a stack above the limit is refused. OKE's node pools
# per cluster do not apply: this stack creates no OKE node pool (one ClusterNetwork per pool instead).
OKE_NODES_PER_CLUSTER = 5000
OKE_NODES_SOURCE = "blogs.oracle.com/developers/oci-kubernetes-engine-now-scales-to-5000-worker-nodes"

# OCI Compute service limits (issue 47 item 3): the "Service Limits" page, "Compute Limits", table "Other Compute
# Resources" (docs.oracle.com/en-us/iaas/Content/General/Concepts/servicelimits.htm, page updated 2025-03-11; read
# 2026-11-29 in a stored copy of the page): "Instances per instance pool", scope Region, 500 for Oracle Universal
# Credits and 500 for Pay As You Go or Trial (no limit name); "Cluster networks" (cluster-network-count), scope
# Tenancy, 15 for Universal Credits, "Contact Us" for Pay As You Go or Trial. Service limits are set by Oracle per
# tenancy and raised on request (same page, "About Service Limits and Usage"), so a stack above them is advised, not
# refused. Each pool is one cluster network whose one instance pool has nodeCount instances (components/clouds/oci.py);
# cluster networks "are built on top of the instance pools feature" (docs.oracle.com/en-us/iaas/Content/Compute/
# Tasks/managingclusternetworks.htm), so the per-pool limit is taken to hold for that instance pool too.
OCI_INSTANCES_PER_POOL = 500
OCI_CLUSTER_NETWORKS = 15
OCI_LIMITS_SOURCE = "docs.oracle.com/en-us/iaas/Content/General/Concepts/servicelimits.htm"


def service_limit_advisories(cfg: Any) -> list[Problem]:
    """The OCI Compute service limits a large stack meets: instances per instance pool, cluster networks."""
    out: list[Problem] = []
    for i, pool in enumerate(cfg.node_pools):
        if pool.node_count > OCI_INSTANCES_PER_POOL:
            out.append(Problem(f"nodePools[{i}].nodeCount", (
                f"{pool.node_count} nodes in one cluster network's instance pool, above OCI's service limit "
                f"'Instances per instance pool' ({OCI_INSTANCES_PER_POOL}; {OCI_LIMITS_SOURCE}, 'Other Compute "
                f"Resources'): request a service limit increase for this region before `pulumi up`, or split the "
                f"pool into pools of at most {OCI_INSTANCES_PER_POOL} nodes")))
    if len(cfg.node_pools) > OCI_CLUSTER_NETWORKS:
        out.append(Problem("nodePools", (
            f"{len(cfg.node_pools)} pools are {len(cfg.node_pools)} cluster networks, above OCI's default service "
            f"limit 'Cluster networks' (cluster-network-count: {OCI_CLUSTER_NETWORKS} per tenancy with Universal "
            f"Credits, 'Contact Us' for Pay As You Go; {OCI_LIMITS_SOURCE}; the tenancy's other cluster networks "
            f"count too): request a service limit increase before `pulumi up`, or merge pools of the same shape")))
    return out


def config_problems(cfg: StackConfig, machines: dict[str, Any]) -> list[Problem]:
    p: list[Problem] = []
    total = sum(pool.node_count for pool in cfg.node_pools)
    if total > OKE_NODES_PER_CLUSTER:
        p.append(Problem("nodePools", f"{total} nodes over all pools (nodePools[].nodeCount), above OKE's maximum of "
                                      f"{OKE_NODES_PER_CLUSTER} worker nodes per enhanced cluster, self-managed nodes "
                                      f"included ({OKE_NODES_SOURCE}); lower the pools' nodeCount or split the stack "
                                      f"into clusters (multinode:fleet)"))
    region = (cfg.cluster.region or "").lower()
    region_key = region.rsplit("-", 1)[0].upper() if region else ""
    for i, pool in enumerate(cfg.node_pools):
        at = f"nodePools[{i}]"
        cr = pool.capacity_reservation
        held = ocid_region(cr.id) if cr is not None else None
        if cr is not None and held and region and held != region:
            # issue 31: a reservation serves instances of its own region only, as AWS's and GCP's are checked
            p.append(Problem(f"{at}.capacityReservation.id", f"{cr.id} is a reservation in {held} (the region its "
                                                             f"OCID names), but the cluster runs in {region}: the "
                                                             f"pool never consumes it; use a reservation in {region}"))
        if not pool.zone:
            p.append(Problem(f"{at}.zone", "set the availability domain, e.g. 'Uocm:US-ASHBURN-AD-1'"))
        if not pool.image_id:
            p.append(Problem(f"{at}.imageId", "a bare-metal GPU node needs an OKE GPU image with the RDMA "
                                              "drivers (OFED); set imageId to its OCID, e.g. ocid1.image.oc1..."))
        elif not pool.image_id.startswith("ocid1.image."):
            p.append(Problem(f"{at}.imageId", f"{pool.image_id!r} is not an image OCID; use ocid1.image.oc1...."))
        if not pool.subnet_id:
            p.append(Problem(f"{at}.subnetId", "the cluster network's nodes need the OKE worker subnet; set "
                                               "subnetId to its OCID, e.g. ocid1.subnet.oc1..."))
        if pool.zone and not _AD.match(pool.zone):
            p.append(Problem(f"{at}.zone", f"{pool.zone!r} is not an availability domain name; use the form "
                                           f"'Uocm:US-ASHBURN-AD-1' (`oci iam availability-domain list`)"))
        elif pool.zone and region_key and region_key not in pool.zone.upper():
            p.append(Problem(f"{at}.zone", f"{pool.zone!r} is not in the cluster's region {region!r}; use an "
                                           f"availability domain of {region}, e.g. 'xxxx:{region_key}-AD-1'"))
        # Whether the availability domain offers the shape is not checked: no source here lists it.
        try:
            m = cfg.machine(pool)
        except catalog.UnknownMachine:
            continue
        if m.cloud == "oci" and not m.name.startswith("BM."):
            p.append(Problem(f"{at}.machine", f"{m.name} is not a bare-metal shape; RDMA cluster networks take "
                                              f"BM.GPU.* shapes such as BM.GPU.H100.8"))
    return p


# Node repair (issue 34, docs/node-health.md): OKE has no automatic node repair. It offers operator-triggered repair
# actions (reboot, or boot volume replacement, of a managed or self-managed node through the OKE API or the
# Kubernetes API, cordoning and draining first:
# blogs.oracle.com/cloud-infrastructure/post/kubernetes-worker-node-repair) and node pool cycling.
# cluster.nodeRepair has no effect here.


def advisories(cfg: Any) -> list[Problem]:
    """Non-fatal findings of this cloud: a RoCE pool whose shape has no known fabric ports, so the SR-IOV
    device plugin cannot be limited to them; a fabric pod that takes part of a node (its VFs are not aligned
    with its GPUs); the Compute service limits a large stack meets."""
    out: list[Problem] = _partial_node_problems(cfg) + service_limit_advisories(cfg)
    for i, pool in enumerate(cfg.node_pools):
        try:
            m = cfg.machine(pool)
        except (catalog.UnknownMachine, KeyError):
            continue
        if m.fabric == "roce" and m.name not in FABRIC_ROOT_DEVICES:
            out.append(Problem(f"nodePools[{i}].machine",
                               f"{m.name}: its RDMA fabric ports (PCI addresses) are not in multinode/clouds/oci.py "
                               f"FABRIC_ROOT_DEVICES, so the device plugin offers VFs of every Mellanox RDMA port, "
                               f"the front-end NIC included; add the shape's rootDevices from oci-hpc-oke's "
                               f"sriov-network-node-policy.yaml"))
    return out

def _partial_node_problems(cfg: Any) -> list[Problem]:
    """issue 30, explained: the device plugin hands a pod any free VFs of the node, not the VFs beside its GPUs:
    nothing aligns them (the kubelet's Topology Manager would need a NUMA policy OKE nodes do not set, and the
    RDMA shapes have 2 NICs per GPU on the GPU's own PCIe switch; oci-hpc-oke's VF examples take whole nodes).
    A pod with every GPU of the node gets every VF, so it is aligned by construction; a pod with fewer may send
    its GPU's traffic through another switch's NIC (slower, not broken)."""
    out: list[Problem] = []
    for i, w in enumerate(cfg.workloads):
        try:
            m = cfg.machine(cfg.pool(w.node_pool))
        except (catalog.UnknownMachine, KeyError):
            continue
        if m.fabric != "roce" or not cfg.fabric.enabled:
            continue
        gpus = cfg.gpus_per_node(w)
        if 0 < gpus < m.gpus:
            out.append(Problem(f"workloads[{i}].gpusPerNode",
                               f"{gpus} of {m.name}'s {m.gpus} GPUs: its pods get {OCI_VF_RESOURCE} VFs the device "
                               f"plugin picks, not the ones beside their GPUs (no topology alignment on OKE), so "
                               f"NCCL may cross PCIe switches; take whole nodes ({m.gpus} GPUs) for full bandwidth"))
    return out


# ---------------------------------------------------------------- fabric profile
OCI_VF_RESOURCE = "nvidia.com/rdma-vf"     # OCI SR-IOV RDMA virtual functions (hardware.md section 2)
# The Multus network (NetworkAttachmentDefinition, manifests/addons.rdma_vf_network) that attaches one
# OCI VF. A NAD is namespaced; ours lives in `default` and pods name it `default/rdma-vf`, so pods in
# any namespace can use it (Multus reads `<namespace>/<name>`; with Multus namespaceIsolation on,
# `default` stays reachable). oracle-quickstart/oci-hpc-oke docs/using-rdma-network-interfaces-in-
# manifests.md uses the same namespace and `default/rdma-vf` form for pods outside `default`.
OCI_VF_NETWORK = "rdma-vf"
OCI_VF_NETWORK_NAMESPACE = "default"
# PCI addresses of the RDMA fabric ports (the physical functions whose VF the device plugin advertises)
# per shape: oracle-quickstart/oci-hpc-oke terraform/files/nvidia-network-operator/sriov-network-node-
# policy.yaml (commit 61d210ac, 2026-08-20), `nicSelector.rootDevices` of each shape's policy (with
# vendor 15b3, isRdma, numVfs 1, mtu 4220). Selecting these ports, not every Mellanox RDMA port, keeps
# the host's front-end NIC (also a ConnectX with RDMA on these shapes) out of the VF pool.
FABRIC_ROOT_DEVICES: dict[str, tuple] = {
    "BM.GPU4.8": tuple(f"0000:{b}:00.{f}" for b in ("0c", "16", "48", "4c", "8a", "94", "c3", "d1") for f in (0, 1)),
    "BM.GPU.A100-v2.8": tuple(f"0000:{b}:00.{f}" for b in ("0c", "16", "47", "4b", "89", "93", "c3", "d1")
                              for f in (0, 1)),
    "BM.GPU.H100.8": tuple(f"0000:{b}:00.{f}" for b in ("0c", "2a", "41", "58", "86", "a5", "bd", "d5")
                           for f in (0, 1)),
    "BM.GPU.H200.8": tuple(f"0000:{b}:00.0" for b in ("0c", "2a", "41", "58", "86", "a5", "bd", "d5")),
    "BM.GPU.B200.8": tuple(f"0000:{b}:00.0" for b in ("0c", "2a", "41", "58", "86", "a5", "bd", "d5")),
}
# MTU of the VF (same file: `mtu: 4220` on every shape; terraform/files/nvidia-network-operator/
# sriov-network.yaml sets it again in the tuning plugin of the attachment).
VF_MTU = 4220


def fabric_root_devices(shapes: list[str]) -> list[str] | None:
    """The fabric ports of these shapes (sorted union), or None when one shape is not in the table (the
    device plugin then falls back to every Mellanox RDMA port; advisories() says so)."""
    if any(s not in FABRIC_ROOT_DEVICES for s in shapes):
        return None
    return sorted({d for s in shapes for d in FABRIC_ROOT_DEVICES[s]})


FABRICS = ("roce",)
# NCCL's built-in InfiniBand verbs transport is named "IB" (NVIDIA/nccl src/transport/net_ib.cc);
# it also drives RoCE.
NCCL_NET = {"roce": "IB"}


def fabric_settings(kind: str, cfg: Any, pool: Any, machine: Machine,
                    count: int) -> tuple[str, int, dict[str, Any]]:
    """(device resource, devices per node, what the pod gets) for an RDMA pool (multinode/fabric.py)."""
    return OCI_VF_RESOURCE, count, _roce(machine)


def _roce(machine: Machine) -> dict[str, Any]:
    # hardware.md section 2 "OCI OKE" option B (SR-IOV VFs via the Network Operator), source O1.
    env = {
        "NCCL_IB_GID_INDEX": "3",
        "NCCL_IB_TC": "41",
        "NCCL_IB_SL": "0",
        "NCCL_IB_TIMEOUT": "22",
        "NCCL_IB_SPLIT_DATA_ON_QPS": "0",
        "NCCL_CUMEM_ENABLE": "0",
        "NCCL_SOCKET_IFNAME": "eth0",
        "NCCL_IB_HCA": "mlx5",
    }
    if machine.gpu_model.startswith("A100"):
        env["NCCL_IB_QPS_PER_CONNECTION"] = "4"        # hardware.md: (A100)
    else:
        env["NCCL_IGNORE_CPU_AFFINITY"] = "1"          # hardware.md: (H100/H200/B200)
    # Multus attaches one rdma-vf network per VF the pod requests, named with its namespace so a pod in
    # any namespace finds the one NAD in `default`. oci-hpc-oke docs/using-rdma-network-interfaces-in-
    # manifests.md: "one `rdma-vf` entry per requested VF". The count follows the pod's GPU containers
    # (the policy computes it, manifests/kyverno.device_networks_expr): a fixed list of 16 on a pod that
    # requests fewer VFs leaves Multus without a device for the extra entries and sandbox creation fails.
    net = f"{OCI_VF_NETWORK_NAMESPACE}/{OCI_VF_NETWORK}"
    # issue 30, verified and decided: no /dev/infiniband hostPath and no privileged container. oci-hpc-oke's
    # docs/using-rdma-network-interfaces-in-manifests.md:77 asks for "the /dev/infiniband and /dev/shm mounts and
    # the IPC_LOCK capability, the same as with hostNetwork" on its VF path too (its examples run privileged).
    # The SR-IOV device plugin with isRdma (our NicClusterPolicy selector) already hands each allocated VF's RDMA
    # character devices to the container, host path = container path, "rwm"
    # (k8snetworkplumbingwg/sriov-network-device-plugin pkg/devices/rdma.go newRdmaSpec: GetRdmaCharDevices of
    # the VF), and the rdma CNI moves the VF's RDMA device into the pod's netns. Mounting the host's whole
    # /dev/infiniband privileged would hand every pod every HCA of the node (the other pods' VFs and the PFs),
    # which is what the VF path exists to avoid. IPC_LOCK stays (plus memlock unlimited from our CRI-O config).
    return {"env": env, "capabilities": ["IPC_LOCK"], "device_network": net, "networks": [net]}


# ---------------------------------------------------------------- mock data for plan
# Canned OCI lookups for offline runs (registered by multinode/recording.py for cloud oci only).
# An enhanced OKE cluster with a private API endpoint; its kubeconfig has the shape OKE generates
# (token via `oci ce cluster generate-token`). Created mount targets get the address and export set the
# service would assign. Results use the provider's wire names (camelCase).
FAKE_CA = "LS0tLS1CRUdJTiBDRVJUSUZJQ0FURS0tLS0tCk1JSUMtbW9jay1jYQotLS0tLUVORCBDRVJUSUZJQ0FURS0tLS0tCg=="
PRIVATE_ENDPOINT = "10.0.0.5:6443"


def kube_config(args: dict[str, Any]) -> dict[str, Any]:
    cid = args.get("clusterId", "ocid1.cluster.oc1..mock")
    content = yaml.safe_dump({
        "apiVersion": "v1", "kind": "Config", "current-context": "context-oke",
        "clusters": [{"name": "cluster-oke", "cluster": {"server": f"https://{PRIVATE_ENDPOINT}",
                                                         "certificate-authority-data": FAKE_CA}}],
        "contexts": [{"name": "context-oke", "context": {"cluster": "cluster-oke", "user": "user-oke"}}],
        "users": [{"name": "user-oke", "user": {"exec": {
            "apiVersion": "client.authentication.k8s.io/v1beta1", "command": "oci",
            "args": ["ce", "cluster", "generate-token", "--cluster-id", cid, "--region", "us-ashburn-1"]}}}],
    }, sort_keys=False)
    return {"id": cid, "clusterId": cid, "content": content, "tokenVersion": args.get("tokenVersion", "2.0.0")}


def cluster(args: dict[str, Any]) -> dict[str, Any]:
    cid = args.get("clusterId", "ocid1.cluster.oc1..mock")
    return {"id": cid, "clusterId": cid, "name": "dev-oke", "type": "ENHANCED_CLUSTER",
            "kubernetesVersion": "v1.33.1", "state": "ACTIVE",
            "vcnId": "ocid1.vcn.oc1.iad.aaaaaaaaexamplevcn",
            "endpoints": [{"kubernetes": "", "privateEndpoint": PRIVATE_ENDPOINT, "publicEndpoint": "",
                           "vcnHostnameEndpoint": "", "ipv6endpoint": ""}]}


MOCK_CALLS: dict[str, Callable[[dict[str, Any]], dict[str, Any]]] = {
    "oci:ContainerEngine/getClusterKubeConfig:getClusterKubeConfig": kube_config,
    "oci:ContainerEngine/getCluster:getCluster": cluster,
}
MOCK_OUTPUTS: dict[str, Callable[[str, dict[str, Any]], dict[str, Any]]] = {}

MOCK_OUTPUTS["oci:FileStorage/mountTarget:MountTarget"] = lambda name, inputs: {
    "ipAddress": "10.0.10.20", "exportSetId": f"ocid1.exportset.oc1.iad.{name}",
}
MOCK_OUTPUTS["oci:FileStorage/fileSystem:FileSystem"] = lambda name, inputs: {}
