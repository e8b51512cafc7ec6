"""Data survives `pulumi destroy`: on every cloud the file system AND the network objects it keeps using
(security groups and rules, mount targets, exports) plus the PV/PVC carry protect + retainOnDelete, and
with storage.allowDelete none of them do. One shared helper builds the claim (components/clouds/base.py);
these tests hold every cloud to it."""
from __future__ import annotations

import pytest

from components.clouds import base
from multinode.config import Storage
from multinode.recording import ProgramRun, Registration

from .cloudrun import run
from .conftest import example_raw

STORAGE = "multinode:index:CheckpointStorage"
PV = "kubernetes:core/v1:PersistentVolume"
PVC = "kubernetes:core/v1:PersistentVolumeClaim"
NS = "kubernetes:core/v1:Namespace"
SC = "kubernetes:storage.k8s.io/v1:StorageClass"
SG = "aws:ec2/securityGroup:SecurityGroup"
INGRESS = "aws:vpc/securityGroupIngressRule:SecurityGroupIngressRule"
EGRESS = "aws:vpc/securityGroupEgressRule:SecurityGroupEgressRule"
LUSTRE_SUBNET = ("/subscriptions/00000000-0000-0000-0000-000000000000/resourceGroups/rg-net/providers/"
                 "Microsoft.Network/virtualNetworks/vnet-aks/subnets/amlfs")

# case -> (stack, storage override or None for the stack's own, types that must be kept, types that may
# go with the stack: IAM, the CSI add-on, a StorageClass (its reclaimPolicy says Retain) and the namespace
# (retained, never protected)). Anything else the storage component creates must be kept: a new network
# object added without the keep options fails here.
CASES: dict[str, tuple] = {
    "aws-fsx": ("aws-dev", None,
                {"aws:fsx/lustreFileSystem:LustreFileSystem", SG, INGRESS, EGRESS, PV, PVC},
                {"aws:iam/role:Role", "aws:iam/rolePolicyAttachment:RolePolicyAttachment", "aws:eks/addon:Addon"}),
    "aws-efs": ("aws-dev", {"kind": "efs", "sizeGib": 1024},
                {"aws:efs/fileSystem:FileSystem", "aws:efs/mountTarget:MountTarget", "aws:efs/accessPoint:AccessPoint",
                 SG, INGRESS, EGRESS, PV, PVC},
                {"aws:iam/role:Role", "aws:iam/rolePolicyAttachment:RolePolicyAttachment", "aws:eks/addon:Addon", SC}),
    "azure-files": ("azure-dev", None,
                    {"azure-native:storage:StorageAccount", "azure-native:storage:FileShare", PV, PVC}, set()),
    "azure-lustre": ("azure-dev", {"kind": "azure-lustre", "sizeGib": 16384, "subnetId": LUSTRE_SUBNET},
                     {"azure-native:storagecache:AmlFilesystem", PV, PVC}, set()),
    "gcp-filestore": ("gcp-dev", {"kind": "filestore", "tier": "ENTERPRISE", "sizeGib": 2048},
                      {"gcp:filestore/instance:Instance", PV, PVC}, set()),
    "gcp-lustre": ("gcp-dev", {"kind": "gcp-lustre", "sizeGib": 18000, "throughput": 500},
                   {"gcp:lustre/instance:Instance", PV, PVC}, set()),
    "oci-fss": ("oci-dev", None,
                {"oci:FileStorage/fileSystem:FileSystem", "oci:FileStorage/mountTarget:MountTarget",
                 "oci:FileStorage/export:Export", PV, PVC}, set()),
    "existing-class": ("existing-dev", None, {PVC}, set()),
}


def _run(case: str, allow_delete: bool) -> ProgramRun:
    stack, storage, _, _ = CASES[case]
    raw, secrets = example_raw(stack)
    raw["storage"] = dict(storage if storage is not None else raw["storage"], allowDelete=allow_delete)
    return run(raw, secrets, stack)


def storage_children(r: ProgramRun) -> list[Registration]:
    """Every custom resource below the CheckpointStorage component (at any depth)."""
    (comp,) = [x for x in r.registrations if x.type == STORAGE]
    inside: set[str] = {comp.urn}
    out = []
    for reg in r.registrations:          # registration order: a parent is always registered first
        if reg.parent in inside:
            inside.add(reg.urn)
            if reg.custom:
                out.append(reg)
    return out


@pytest.mark.parametrize("case", sorted(CASES))
def test_file_system_and_its_network_objects_are_protected_and_retained(case):
    _, _, must_keep, may_go = CASES[case]
    regs = storage_children(_run(case, allow_delete=False))
    types = {r.type for r in regs}
    assert must_keep <= types, f"missing: {must_keep - types}"
    unkept = [(r.type, r.name, r.protect, r.retain_on_delete) for r in regs
              if r.type not in may_go | {NS} and not (r.protect and r.retain_on_delete)]
    assert unkept == []
    for r in regs:
        if r.type == PV:
            assert r.inputs["spec"]["persistentVolumeReclaimPolicy"] == "Retain"
        if r.type == NS:     # the namespace may hold other things: retained, but never blocks a destroy
            assert r.retain_on_delete and not r.protect


@pytest.mark.parametrize("case", sorted(CASES))
def test_allow_delete_keeps_nothing(case):
    regs = storage_children(_run(case, allow_delete=True))
    kept = [(r.type, r.name) for r in regs if r.type != NS and (r.protect or r.retain_on_delete)]
    assert kept == []
    assert all(r.inputs["spec"]["persistentVolumeReclaimPolicy"] == "Delete" for r in regs if r.type == PV)


def test_aws_file_system_waits_for_its_security_group_rules():
    """FSx checks the group's Lustre rules when it is created: the rules come first."""
    r = _run("aws-fsx", allow_delete=False)
    regs = storage_children(r)
    (fsx,) = [x for x in regs if x.type == "aws:fsx/lustreFileSystem:LustreFileSystem"]
    rules = {x.urn for x in regs if x.type in (INGRESS, EGRESS)}
    assert rules and rules <= set(fsx.dependencies)


def test_keep_options_follow_allow_delete():
    kept = base.keep_options(Storage(kind="efs", sizeGib=10))
    gone = base.keep_options(Storage(kind="efs", sizeGib=10, allowDelete=True))
    assert (kept.protect, kept.retain_on_delete) == (True, True)
    assert (gone.protect, gone.retain_on_delete) == (False, False)


def test_static_pv_name_is_a_dns_label_on_every_cloud():
    s = Storage(kind="efs", sizeGib=10, name="c" * 70, namespace="team-a")
    name = base.static_pv_name(s)
    assert len(name) == 63 and name.startswith("team-a-")
    assert base.static_pv_name(Storage(kind="efs", sizeGib=10, name="x" * 55 + "-y", namespace="team-a"))[-1] != "-"
    assert base.claim_size_gib(Storage(kind="existing", existingStorageClass="sc")) == 1
