"""Canned AWS answers for offline runs (plan, tests): an EKS cluster as `aws eks describe-cluster`
would describe it, and the computed outputs our AWS resources need. No SDK import here."""
from __future__ import annotations

import base64
from typing import Any, Dict

from multinode.recording import CALLS, OUTPUTS

FAKE_CA = base64.b64encode(b"-----BEGIN CERTIFICATE-----\nMIIB-offline-plan\n-----END CERTIFICATE-----\n").decode()


def eks_cluster(args: Dict[str, Any]) -> Dict[str, Any]:
    name = args.get("name") or "cluster"
    region = args.get("region") or "us-east-1"
    return {
        "id": name, "name": name, "region": region, "status": "ACTIVE", "version": "1.33",
        "arn": f"arn:aws:eks:{region}:123456789012:cluster/{name}",
        "endpoint": f"https://0123456789ABCDEF0123456789ABCDEF.gr7.{region}.eks.amazonaws.com",
        "roleArn": "arn:aws:iam::123456789012:role/eks-cluster",
        "platformVersion": "eks.8", "createdAt": "2026-01-01T00:00:00Z",
        "certificateAuthorities": [{"data": FAKE_CA}],
        "vpcConfig": {
            "clusterSecurityGroupId": "sg-0c1a2b3c4d5e6f708",
            "controlPlaneEgressMode": "",
            "endpointPrivateAccess": True, "endpointPublicAccess": False,
            "publicAccessCidrs": [], "securityGroupIds": [],
            "subnetIds": ["subnet-0a1b2c3d4e5f60718", "subnet-0b1c2d3e4f5a60718"],
            "vpcId": "vpc-0f1e2d3c4b5a69788",
        },
        "accessConfigs": [], "computeConfigs": [], "controlPlaneScalingConfigs": [],
        "enabledClusterLogTypes": [], "identities": [], "kubernetesNetworkConfigs": [],
        "outpostConfigs": [], "remoteNetworkConfigs": [], "storageConfigs": [], "tags": {},
        "upgradePolicies": [], "zonalShiftConfigs": [], "deletionProtection": False,
        "clusterId": "", "kubeApiServerConfigs": [], "kubeControllerManagerConfigs": [],
        "kubeSchedulerConfigs": [],
    }


CALLS["aws:eks/getCluster:getCluster"] = eks_cluster

OUTPUTS["aws:ec2/launchTemplate:LaunchTemplate"] = lambda name, inputs: {"latestVersion": 1, "defaultVersion": 1}
OUTPUTS["aws:fsx/lustreFileSystem:LustreFileSystem"] = lambda name, inputs: {
    "dnsName": "fs-0123456789abcdef0.fsx.us-east-1.amazonaws.com", "mountName": "abcdefgh"}
OUTPUTS["aws:efs/fileSystem:FileSystem"] = lambda name, inputs: {"dnsName": "fs-0123abcd.efs.us-east-1.amazonaws.com"}


def _autoname(extra=None):
    """Pulumi auto-names these (logical name + random suffix); mimic it so references resolve."""
    def fn(name: str, inputs: Dict[str, Any]) -> Dict[str, Any]:
        out = {"name": inputs.get("name") or f"{name}-0a1b2c3"}
        out.update(extra(name, inputs) if extra else {})
        return out
    return fn


OUTPUTS["aws:ec2/placementGroup:PlacementGroup"] = _autoname()
OUTPUTS["aws:ec2/securityGroup:SecurityGroup"] = _autoname()
OUTPUTS["aws:iam/role:Role"] = _autoname(lambda name, inputs: {"arn": f"arn:aws:iam::123456789012:role/{name}-0a1b2c3"})
