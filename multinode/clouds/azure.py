"""Canned Azure answers for offline runs (plan, tests): an AKS managed cluster, its user kubeconfig,
and the computed outputs our Azure resources need. No SDK import here."""
from __future__ import annotations

import base64
from typing import Any, Dict

from multinode.recording import CALLS, OUTPUTS

SUBSCRIPTION = "00000000-0000-0000-0000-000000000000"
NODE_SUBNET = (f"/subscriptions/{SUBSCRIPTION}/resourceGroups/rg-net/providers/Microsoft.Network/"
               f"virtualNetworks/vnet-aks/subnets/nodes")


def managed_cluster(args: Dict[str, Any]) -> Dict[str, Any]:
    rg, name = args.get("resourceGroupName", "rg"), args.get("resourceName", "aks")
    return {
        "id": f"/subscriptions/{SUBSCRIPTION}/resourceGroups/{rg}/providers/Microsoft.ContainerService/"
              f"managedClusters/{name}",
        "name": name, "location": "eastus", "kubernetesVersion": "1.33", "currentKubernetesVersion": "1.33.2",
        "fqdn": f"{name}-dns-0a1b2c3d.hcp.eastus.azmk8s.io", "provisioningState": "Succeeded",
        "nodeResourceGroup": f"MC_{rg}_{name}_eastus", "type": "Microsoft.ContainerService/ManagedClusters",
        "agentPoolProfiles": [{"name": "system", "mode": "System", "vmSize": "Standard_D8ds_v5", "count": 3,
                               "osType": "Linux", "vnetSubnetID": NODE_SUBNET}],
    }


def user_credentials(args: Dict[str, Any]) -> Dict[str, Any]:
    name = args.get("resourceName", "aks")
    kubeconfig = (f"apiVersion: v1\nkind: Config\nclusters:\n- name: {name}\n  cluster:\n"
                  f"    server: https://{name}-dns-0a1b2c3d.hcp.eastus.azmk8s.io:443\n"
                  f"contexts:\n- name: {name}\n  context: {{cluster: {name}, user: offline}}\n"
                  f"current-context: {name}\nusers:\n- name: offline\n  user: {{token: offline-plan}}\n")
    return {"kubeconfigs": [{"name": "clusterUser", "value": base64.b64encode(kubeconfig.encode()).decode()}]}


CALLS["azure-native:containerservice:getManagedCluster"] = managed_cluster
CALLS["azure-native:containerservice:listManagedClusterUserCredentials"] = user_credentials

OUTPUTS["azure-native:storagecache:AmlFilesystem"] = lambda name, inputs: {
    "clientInfo": {"mgsAddress": "10.20.0.4", "mountCommand": "mount -t lustre -o noatime,flock 10.20.0.4@tcp:/lustrefs",
                   "lustreVersion": "2.15", "containerStorageInterface": {}}}
# azure-native auto-names these from the logical name plus a random suffix; mimic it.
OUTPUTS["azure-native:storage:StorageAccount"] = lambda name, inputs: {"name": inputs.get("accountName") or f"{name}0a1b2c"}
OUTPUTS["azure-native:storage:FileShare"] = lambda name, inputs: {"name": inputs.get("shareName") or name}
