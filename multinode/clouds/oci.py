"""OKE facts and rules the OCI components and the config checks share (pure: no Pulumi, no SDK).

Sources:
  O1  oracle-quickstart/oci-hpc-oke docs + terraform (via hardware.md): GPU pools in "cluster-network"
      mode with a custom GPU image and the Oracle Cloud Agent plugins for RDMA enabled; RDMA VFs per
      shape (nvidia.com/rdma-vf: 16 on GPU4.8 / A100-v2.8 / H100.8, 8 on H200.8 / B200.8).
  O3  OKE self-managed nodes: cloud-init runs /etc/oke/oke-install.sh with --apiserver-endpoint (IP only)
      and --kubelet-ca-cert (base64 CA); --kubelet-extra-args carries --node-labels / --register-with-taints.
  O4  OCI File Storage CSI (fss.csi.oraclecloud.com): static PV volumeHandle "<fs_ocid>:<mount_target_ip>:<export_path>"
      (hardware.md section 4). File systems grow on demand: there is no size to provision.
"""
from __future__ import annotations

import base64
import re
import shlex
from typing import Dict, List, Optional

import yaml

from .. import catalog, fabric, pools
from ..config import NodePool, StackConfig
from ..errors import Problem

FSS_CSI = "fss.csi.oraclecloud.com"

# Oracle Cloud Agent plugins a bare-metal GPU node needs for RDMA in a cluster network (O1).
RDMA_PLUGINS = ("Compute HPC RDMA Authentication", "Compute HPC RDMA Auto-Configuration",
                "Compute RDMA GPU Monitoring")

_AD = re.compile(r"^[A-Za-z0-9]{4}:[A-Z0-9-]+-AD-[1-3]$")


def rdma_vfs_per_node(cfg: StackConfig, pool: NodePool) -> int:
    """RDMA virtual functions a full node offers (the fabric profile's count, from the catalog)."""
    return fabric.profile_for(cfg, pool).devices_per_node


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
            return ca
    return ""


def kubelet_extra_args(labels: Dict[str, str], taints: List[Dict[str, str]]) -> str:
    args = ["--node-labels=" + ",".join(f"{k}={v}" for k, v in sorted(labels.items()))]
    if taints:
        args.append("--register-with-taints=" + ",".join(f"{t['key']}={t['value']}:{t['effect']}" for t in taints))
    return " ".join(args)


def node_user_data(endpoint: str, ca_b64: str, labels: Dict[str, str], taints: List[Dict[str, str]]) -> str:
    """cloud-init for a self-managed OKE GPU node: join the cluster with our labels and taints (O3)."""
    script = "\n".join([
        "#!/usr/bin/env bash",
        "set -euo pipefail",
        "bash /etc/oke/oke-install.sh \\",
        f"  --apiserver-endpoint {shlex.quote(api_host(endpoint))} \\",
        f"  --kubelet-ca-cert {shlex.quote(ca_b64)} \\",
        f"  --kubelet-extra-args {shlex.quote(kubelet_extra_args(labels, taints))}",
        "",
    ])
    return script


def user_data_b64(script: str) -> str:
    return base64.b64encode(script.encode()).decode()


def fss_volume_handle(fs_id: str, mount_target_ip: str, export_path: str) -> str:
    return f"{fs_id}:{mount_target_ip}:{export_path}"


def config_problems(cfg: StackConfig) -> List[Problem]:
    p: List[Problem] = []
    region = (cfg.cluster.region or "").lower()
    region_key = region.rsplit("-", 1)[0].upper() if region else ""
    for i, pool in enumerate(cfg.node_pools):
        at = f"nodePools[{i}]"
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
