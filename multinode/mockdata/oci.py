"""Canned OCI lookups for offline runs (imported by recording.run_program for cloud oci only).

An enhanced OKE cluster with a private API endpoint; its kubeconfig has the shape OKE generates
(token via `oci ce cluster generate-token`). Created mount targets get the address and export set the
service would assign. Results use the provider's wire names (camelCase).
"""
from __future__ import annotations

from typing import Any, Dict

import yaml

from multinode.recording import CALLS, OUTPUTS

FAKE_CA = "LS0tLS1CRUdJTiBDRVJUSUZJQ0FURS0tLS0tCk1JSUMtbW9jay1jYQotLS0tLUVORCBDRVJUSUZJQ0FURS0tLS0tCg=="
PRIVATE_ENDPOINT = "10.0.0.5:6443"


def kube_config(args: Dict[str, Any]) -> Dict[str, Any]:
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


def cluster(args: Dict[str, Any]) -> Dict[str, Any]:
    cid = args.get("clusterId", "ocid1.cluster.oc1..mock")
    return {"id": cid, "clusterId": cid, "name": "dev-oke", "type": "ENHANCED_CLUSTER",
            "kubernetesVersion": "v1.33.1", "state": "ACTIVE",
            "vcnId": "ocid1.vcn.oc1.iad.aaaaaaaaexamplevcn",
            "endpoints": [{"kubernetes": "", "privateEndpoint": PRIVATE_ENDPOINT, "publicEndpoint": "",
                           "vcnHostnameEndpoint": "", "ipv6endpoint": ""}]}


CALLS["oci:ContainerEngine/getClusterKubeConfig:getClusterKubeConfig"] = kube_config
CALLS["oci:ContainerEngine/getCluster:getCluster"] = cluster

OUTPUTS["oci:FileStorage/mountTarget:MountTarget"] = lambda name, inputs: {
    "ipAddress": "10.0.10.20", "exportSetId": f"ocid1.exportset.oc1.iad.{name}",
}
OUTPUTS["oci:FileStorage/fileSystem:FileSystem"] = lambda name, inputs: {}
