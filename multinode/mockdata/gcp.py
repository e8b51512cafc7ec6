"""Canned GCP lookups for offline runs (imported by recording.run_program for cloud gcp only).

The GKE cluster looks like one made for GPU networks: multi-networking on Dataplane V2, the Filestore
and Lustre CSI add-ons enabled. Results use the provider's wire names (camelCase). Created Filestore
and Lustre instances get the addresses the service would assign.
"""
from __future__ import annotations

from typing import Any, Dict

from multinode.recording import CALLS, OUTPUTS

# A syntactically valid, made-up CA (base64 of a PEM header): never a real credential.
FAKE_CA = "LS0tLS1CRUdJTiBDRVJUSUZJQ0FURS0tLS0tCk1JSUMtbW9jay1jYQotLS0tLUVORCBDRVJUSUZJQ0FURS0tLS0tCg=="


def gke_cluster(args: Dict[str, Any]) -> Dict[str, Any]:
    name = args.get("name", "cluster")
    project = args.get("project", "my-project")
    location = args.get("location", "us-central1")
    return {
        "id": f"projects/{project}/locations/{location}/clusters/{name}",
        "name": name, "project": project, "location": location,
        "endpoint": "203.0.113.10",
        "masterAuths": [{"clusterCaCertificate": FAKE_CA, "clientCertificate": "", "clientKey": "",
                         "clientCertificateConfigs": [{"issueClientCertificate": False}]}],
        "network": f"projects/{project}/global/networks/{name}-net",
        "subnetwork": f"projects/{project}/regions/{location}/subnetworks/{name}-subnet",
        "enableMultiNetworking": True,
        "datapathProvider": "ADVANCED_DATAPATH",
        "masterVersion": "1.33.5-gke.1000000",
        "addonsConfigs": [{"gcpFilestoreCsiDriverConfigs": [{"enabled": True}],
                           "lustreCsiDriverConfigs": [{"enabled": True, "enableLegacyLustrePort": False}]}],
    }


CALLS["gcp:container/getCluster:getCluster"] = gke_cluster

OUTPUTS["gcp:filestore/instance:Instance"] = lambda name, inputs: {
    "networks": [dict(n, ipAddresses=["10.20.0.2"]) for n in inputs.get("networks", [])],
}
OUTPUTS["gcp:lustre/instance:Instance"] = lambda name, inputs: {
    "mountPoint": f"10.90.0.4@tcp:/{inputs.get('filesystem', 'lustre')}",
}
