"""Azure components under Pulumi mocks: InfiniBand agent pool, Azure Files NFS / Managed Lustre storage."""
from __future__ import annotations

import pytest

from tests.cloudstacks import (config_problems, imported_modules_after_plan, k8s_objects, of_type, one, parent_of,
                         run_variant)
from components.clouds import azure as azmod
from multinode.schema_check import validate_object

AP = "azure-native:containerservice:AgentPool"
ACCOUNT = "azure-native:storage:StorageAccount"
SHARE = "azure-native:storage:FileShare"
AMLFS = "azure-native:storagecache:AmlFilesystem"
PV = "kubernetes:core/v1:PersistentVolume"
PVC = "kubernetes:core/v1:PersistentVolumeClaim"
LUSTRE_SUBNET = ("/subscriptions/00000000-0000-0000-0000-000000000000/resourceGroups/rg-net/providers/"
                 "Microsoft.Network/virtualNetworks/vnet-aks/subnets/amlfs")


@pytest.fixture(scope="module")
def dev(tmp_path_factory):
    return run_variant(tmp_path_factory.mktemp("azure"), "azure-dev")


def lustre(size=16384, throughput=None, subnet=LUSTRE_SUBNET):
    def edit(c):
        st = {"kind": "azure-lustre", "sizeGib": size}
        if throughput is not None:
            st["throughput"] = throughput
        if subnet:
            st["subnetId"] = subnet
        c["multinode:storage"] = st
    return edit


def pool_edit(**kw):
    def edit(c):
        c["multinode:nodePools"][0].update(kw)
    return edit


# ---------------------------------------------------------------- agent pool
def test_agent_pool_on_the_nd_size_with_ubuntu_labels_taint_and_count(dev):
    ap = one(dev, AP)
    i = ap.inputs
    assert i["vmSize"] == "Standard_ND96isr_H100_v5"
    assert (i["osType"], i["osSKU"], i["mode"]) == ("Linux", "Ubuntu", "User")
    assert i["count"] == 2 and i["enableAutoScaling"] is False
    assert i["nodeTaints"] == ["nvidia.com/gpu=true:NoSchedule"]
    assert i["nodeLabels"]["multinode.dev/node-pool"] == "gpu"
    assert i["nodeLabels"]["multinode.dev/fabric"] == "infiniband"
    assert (i["resourceGroupName"], i["resourceName"], i["agentPoolName"]) == ("rg-gpu-dev", "dev-aks", "gpu")
    assert i["enableNodePublicIP"] is False
    assert i["gpuProfile"] == {"driver": "Install"}
    assert "capacityReservationGroupID" not in i and "capacityReservationGroupId" not in i
    assert parent_of(dev, ap).type == "multinode:index:GpuNodePool"


def test_gpu_operator_takes_the_driver(tmp_path):
    run = run_variant(tmp_path, "azure-dev",
                      lambda c: c.update({"multinode:addons": {"gpuOperator": {"enabled": True}}}))
    assert one(run, AP).inputs["gpuProfile"] == {"driver": "None"}


def test_capacity_reservation_group_zone_and_subnet_are_wired(tmp_path):
    crg = ("/subscriptions/0/resourceGroups/rg-gpu-dev/providers/Microsoft.Compute/capacityReservationGroups/crg-nd")
    subnet = "/subscriptions/0/resourceGroups/rg-net/providers/Microsoft.Network/virtualNetworks/v/subnets/gpu"
    run = run_variant(tmp_path, "azure-dev", pool_edit(capacityReservation={"id": crg, "nodes": 2}, zone="2",
                                                       subnetId=subnet, labels={"team": "a"}))
    i = one(run, AP).inputs
    assert i["capacityReservationGroupID"] == crg
    assert i["availabilityZones"] == ["2"]
    assert i["vnetSubnetID"] == subnet
    assert i["nodeLabels"]["team"] == "a"


@pytest.mark.parametrize("given,expected", [("gpu", "gpu"), ("gpu-a", "gpua"), ("h100-pool-long-name", "h100poollong"),
                                            ("8x", "gpu8x")])
def test_agent_pool_names_follow_aks_rules(given, expected):
    assert azmod.agent_pool_name(given) == expected


def test_kubeconfig_is_a_secret_from_the_user_credentials(dev):
    assert one(dev, "pulumi:providers:kubernetes").inputs["kubeconfig"] == "[secret]"
    assert "azure-native:containerservice:listManagedClusterUserCredentials" in dev.calls
    assert "azure-native:containerservice:getManagedCluster" in dev.calls


# ---------------------------------------------------------------- Azure Files NFS
def test_premium_filestorage_account_denies_all_but_the_cluster_subnet(dev):
    acct = one(dev, ACCOUNT)
    i = acct.inputs
    assert (i["kind"], i["sku"]) == ("FileStorage", {"name": "Premium_LRS"})
    assert i["enableHttpsTrafficOnly"] is False          # NFS needs it off
    rules = i["networkRuleSet"]
    assert rules["defaultAction"] == "Deny"
    assert [r["virtualNetworkResourceId"] for r in rules["virtualNetworkRules"]] == [
        "/subscriptions/00000000-0000-0000-0000-000000000000/resourceGroups/rg-net/providers/"
        "Microsoft.Network/virtualNetworks/vnet-aks/subnets/nodes"]
    assert (acct.protect, acct.retain_on_delete) == (True, True)


def test_nfs_share_and_static_pv_pvc(dev):
    share = one(dev, SHARE)
    assert share.inputs["enabledProtocols"] == "NFS" and share.inputs["shareQuota"] == 1024
    assert (share.protect, share.retain_on_delete) == (True, True)
    pv, pvc = one(dev, PV), one(dev, PVC)
    csi = pv.inputs["spec"]["csi"]
    assert csi["driver"] == "file.csi.azure.com"
    assert csi["volumeAttributes"]["protocol"] == "nfs"
    assert csi["volumeAttributes"]["shareName"] == "checkpoints"
    assert csi["volumeHandle"] == f"rg-gpu-dev#{csi['volumeAttributes']['storageAccount']}#checkpoints"
    assert pv.inputs["spec"]["persistentVolumeReclaimPolicy"] == "Retain"
    assert pvc.inputs["spec"]["volumeName"] == pv.inputs["metadata"]["name"]
    assert pvc.inputs["spec"]["accessModes"] == ["ReadWriteMany"]
    for reg in (pv, pvc):
        assert (reg.protect, reg.retain_on_delete) == (True, True)


def test_allow_delete_drops_protection(tmp_path):
    run = run_variant(tmp_path, "azure-dev", lambda c: c["multinode:storage"].update(allowDelete=True))
    for typ in (ACCOUNT, SHARE, PV):
        reg = one(run, typ)
        assert (reg.protect, reg.retain_on_delete) == (False, False), typ
    assert one(run, PV).inputs["spec"]["persistentVolumeReclaimPolicy"] == "Delete"


# ---------------------------------------------------------------- Azure Managed Lustre
def test_managed_lustre_sku_size_subnet_and_pv(tmp_path):
    run = run_variant(tmp_path, "azure-dev", lustre(size=16384, throughput=250))
    fs = one(run, AMLFS)
    assert fs.inputs["sku"] == {"name": "AMLFS-Durable-Premium-250"}
    assert fs.inputs["storageCapacityTiB"] == 16
    assert fs.inputs["filesystemSubnet"] == LUSTRE_SUBNET
    assert (fs.protect, fs.retain_on_delete) == (True, True)
    csi = one(run, PV).inputs["spec"]["csi"]
    assert csi["driver"] == "azurelustre.csi.azure.com"
    assert csi["volumeAttributes"] == {"mgs-ip-address": "10.20.0.4", "fs-name": "lustrefs"}
    assert of_type(run, ACCOUNT) == []


def test_every_kubernetes_object_validates(dev, tmp_path):
    objs = k8s_objects(dev) + k8s_objects(run_variant(tmp_path, "azure-dev", lustre()))
    assert {o["kind"] for o in objs} >= {"Namespace", "PersistentVolume", "PersistentVolumeClaim"}
    for obj in objs:
        assert validate_object(obj, "1.33") == [], obj


# ---------------------------------------------------------------- refused at config time
def _problem(problems, path):
    hits = [p for p in problems if p.path == path]
    assert hits, f"no problem at {path}: {problems}"
    return hits[0].message


@pytest.mark.parametrize("size,fix", [(50, "use 100 GiB"), (200000, "use 102400 GiB")])
def test_azure_files_size_limits(tmp_path, size, fix):
    msg = _problem(config_problems(tmp_path, "azure-dev", lambda c: c["multinode:storage"].update(sizeGib=size)),
                   "storage.sizeGib")
    assert str(size) in msg and fix in msg


@pytest.mark.parametrize("size,tput,nearest", [(10240, 125, "16384 GiB"), (20480, 125, "16384 GiB or 32768 GiB"),
                                               (9000, 250, "8192 GiB or 16384 GiB")])
def test_lustre_sizes_outside_the_tier_steps_are_refused(tmp_path, size, tput, nearest):
    msg = _problem(config_problems(tmp_path, "azure-dev", lustre(size, tput)), "storage.sizeGib")
    assert str(size) in msg and nearest in msg and f"AMLFS-Durable-Premium-{tput}" in msg


def test_lustre_throughput_tier_and_subnet_are_required(tmp_path):
    problems = config_problems(tmp_path, "azure-dev", lustre(16384, 300, subnet=None))
    assert "40, 125, 250, 500" in _problem(problems, "storage.throughput")
    assert "own subnet" in _problem(problems, "storage.subnetId")


def test_infiniband_pool_on_a_machine_without_it_is_refused(tmp_path):
    def edit(c):
        pool = c["multinode:nodePools"][0]
        pool.pop("machine")
        pool["machineSpec"] = {"name": "Standard_NC96ads_A100_v4", "gpus": 4, "fabric": "none"}
        c.pop("multinode:workloads")
    msg = _problem(config_problems(tmp_path, "azure-dev", edit), "nodePools[0].machineSpec.fabric")
    assert "Standard_NC96ads_A100_v4 has no infiniband" in msg


def test_capacity_blocks_are_aws_only(tmp_path):
    problems = config_problems(tmp_path, "azure-dev",
                               pool_edit(capacityReservation={"id": "x", "type": "capacityBlock"}))
    assert "only on aws" in _problem(problems, "nodePools[0].capacityReservation.type")


# ---------------------------------------------------------------- lazy imports
def test_planning_azure_imports_no_other_cloud_sdk():
    mods = imported_modules_after_plan("azure-dev")
    assert "pulumi_azure_native" in mods
    assert not {"pulumi_aws", "pulumi_gcp", "pulumi_oci"} & set(mods)
