"""Azure components under Pulumi mocks: InfiniBand agent pool, Azure Files NFS / Managed Lustre storage."""
from __future__ import annotations

import hashlib

import pytest
import yaml

from components.clouds import azure as azmod
from multinode import checks, stackfile
from multinode import plan as mplan
from multinode.clouds import azure as azure_rules
from multinode.manifests import addons as am
from multinode.manifests import azure_fabric
from multinode.schema_check import validate_object
from tests.cloudstacks import (
    config_problems,
    k8s_objects,
    of_type,
    one,
    parent_of,
    run_variant,
    write_variant,
)

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
# Import isolation (no other cloud's SDK): tests/test_plan.py::test_single_cloud_stack_imports_only_its_cloud_sdk


# ---------------------------------------------------------------- GPUDirect RDMA and NCCL topology (issue 14)
DS = "kubernetes:apps/v1:DaemonSet"
CM = "kubernetes:core/v1:ConfigMap"
# sha256 of the upstream files (multinode/data/nccl-topology/PROVENANCE.md, ../shared/facts/nccl-topology/)
TOPOLOGY_SHA256 = {"ndv4-topo.xml": "c3583efb0b6e53f52410e32643b46bb6af99f5f34dcebc1868c47c233f84d2cf",
                   "ndv5-topo.xml": "c26ff47f1decf03d44ee6e90c4a8afd3bddeec334c5545008f33af2a297e2834"}


def _cfg(edit=None, tmp_path=None):
    path = write_variant(tmp_path, "azure-dev", edit) if edit else stackfile.stack_path("azure-dev")
    raw, secrets, _ = stackfile.read_stack_file(path)
    return checks.load(raw, secrets)


def test_topology_files_are_the_upstream_bytes():
    for name, digest in TOPOLOGY_SHA256.items():
        assert hashlib.sha256((azure_rules.TOPOLOGY_DATA_DIR / name).read_bytes()).hexdigest() == digest
    # every topology file the catalog names is shipped
    from multinode import catalog
    named = {m.nccl_topology for m in catalog.MACHINES.values() if m.nccl_topology}
    assert named == set(TOPOLOGY_SHA256)


def test_default_loads_peermem_with_aks_driver_and_doca_container(dev):
    """Default: AKS-managed driver (gpuProfile Install), the peermem loader DaemonSet on the IB pool, and the
    NicClusterPolicy's DOCA driver container nvidia-peermem needs (Azure/aks-rdma-infiniband)."""
    assert one(dev, AP).inputs["gpuProfile"] == {"driver": "Install"}
    ds = one(dev, DS).inputs
    assert ds["metadata"] == {"name": "nvidia-peermem-reloader", "namespace": "kube-system",
                              "labels": {"name": "nvidia-peermem-reloader",
                                         "app.kubernetes.io/managed-by": "multinode"}}
    pod = ds["spec"]["template"]["spec"]
    (c,) = pod["containers"]
    assert "modprobe nvidia-peermem" in c["command"][-1] and c["securityContext"] == {"privileged": True}
    assert c["livenessProbe"]["exec"]["command"][-1] == "modprobe nvidia-peermem"
    assert c["image"] == "mcr.microsoft.com/mirror/docker/library/ubuntu:24.04"
    assert pod["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"][
        "nodeSelectorTerms"][0]["matchExpressions"] == [{"key": "multinode.dev/node-pool", "operator": "In",
                                                          "values": ["gpu"]}]
    assert {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"} in pod["tolerations"]
    assert validate_object(ds) == []
    nic = next(o for o in k8s_objects(dev) if o.get("kind") == "NicClusterPolicy")
    assert nic["spec"]["ofedDriver"]["version"] == azure_rules.DOCA_DRIVER_VERSION == "doca3.2.0-25.10-1.2.8.0-2"
    assert nic["spec"]["ofedDriver"]["env"] == [{"name": "OFED_BLACKLIST_MODULES_FILE",
                                                 "value": "/host/etc/modprobe.d/blacklist-ofed-modules.conf"}]
    assert validate_object(nic) == []


def test_gpu_operator_path_loads_peermem_itself(tmp_path):
    run = run_variant(tmp_path, "azure-dev",
                      lambda c: c.update({"multinode:addons": {"gpuOperator": {"enabled": True}}}))
    assert one(run, AP).inputs["gpuProfile"] == {"driver": "None"}
    assert of_type(run, DS) == []          # the operator's driver loads nvidia-peermem (driver.rdma.enabled)
    cfg = _cfg(lambda c: c.update({"multinode:addons": {"gpuOperator": {"enabled": True}}}), tmp_path)
    gpu_op = {s.key: s for s in am.fabric_releases(cfg)}["gpuOperator"]
    nic = am.nic_cluster_policy(cfg)
    # consistent: DOCA comes from the Network Operator's container, so the operator must not expect host MOFED
    assert gpu_op.values["driver"]["rdma"] == {"enabled": True, "useHostMofed": "ofedDriver" not in nic["spec"]}
    assert gpu_op.values["driver"]["rdma"]["useHostMofed"] is False


def test_no_peermem_loader_without_infiniband(tmp_path):
    cfg = _cfg(lambda c: c.update({"multinode:fabric": {"enabled": False}}), tmp_path)
    assert azure_fabric.peermem_loader(cfg) == [] and azure_fabric.topology_config_maps(cfg) == []


def _two_generations(c):
    c["multinode:nodePools"].append({"name": "a100", "machine": "Standard_ND96amsr_A100_v4", "nodeCount": 2})
    c["multinode:workloads"].append({"name": "nccl-a100", "kind": "nccl-test", "nodePool": "a100", "nodes": 2,
                                     "namespace": "bench",
                                     "image": "ghcr.io/azure/aks-rdma-infiniband/nccl-tests:latest"})


def test_topology_config_map_per_vm_size_in_every_workload_namespace(tmp_path):
    out = tmp_path / "build"
    res = mplan.plan("azure-dev", out, path=write_variant(tmp_path, "azure-dev", _two_generations))
    assert res.exit_code == 0, res.error
    regs = res.registrations
    maps = {(r.inputs["metadata"]["namespace"], r.inputs["metadata"]["name"]): r
            for r in regs if r.type == CM and r.inputs["metadata"]["name"].startswith("nccl-topology-")}
    assert set(maps) == {(ns, f"nccl-topology-{g}") for ns in ("multinode", "bench") for g in ("ndv4", "ndv5")}
    for (ns, name), r in maps.items():
        (key, text), = r.inputs["data"].items()
        assert name == "nccl-topology-" + key.split("-")[0]
        assert hashlib.sha256(text.encode()).hexdigest() == TOPOLOGY_SHA256[key]
        assert validate_object(r.inputs) == []
    # rendered before the workloads: every workload object depends on its own pool's ConfigMap in its
    # namespace (the one its fabric policy mounts), and on no other
    gangs = [r for r in regs if r.type in ("kubernetes:leaderworkerset.x-k8s.io/v1:LeaderWorkerSet",
                                           "kubernetes:batch.volcano.sh/v1alpha1:Job")]
    assert sorted(r.inputs["metadata"]["namespace"] for r in gangs) == ["bench", "multinode"]
    for r in gangs:
        ns = r.inputs["metadata"]["namespace"]
        deps = {maps_key for maps_key, cm in maps.items() if cm.urn in r.dependencies}
        want = "ndv4" if ns == "bench" else "ndv5"      # nccl-a100 (bench) runs on the A100 pool
        assert deps == {(ns, f"nccl-topology-{want}")}, r.name
    # the namespace exists before its ConfigMap
    ns_reg = next(r for r in regs
                  if r.type == "kubernetes:core/v1:Namespace" and r.inputs["metadata"]["name"] == "bench")
    assert ns_reg.urn in maps[("bench", "nccl-topology-ndv4")].dependencies
    # the effective pods (after the rendered Kyverno policy) mount their pool's file
    effective = sorted((out / "azure-dev" / "effective").glob("*.yaml"))
    assert effective
    seen = set()
    for p in effective:
        spec = yaml.safe_load(p.read_text())["spec"]
        want = "ndv4" if p.name.startswith("nccl-a100") else "ndv5"
        vols = {v["name"]: v for v in spec["volumes"]}
        assert vols["fabric-nccl-topology"]["configMap"]["name"] == f"nccl-topology-{want}"
        for c in spec["containers"]:
            env = {e["name"]: e.get("value") for e in c.get("env", [])}
            if "NCCL_TOPO_FILE" not in env:
                continue
            assert env["NCCL_TOPO_FILE"] == f"/opt/nvidia-topology/{want}-topo.xml"
            assert {"name": "fabric-nccl-topology", "mountPath": "/opt/nvidia-topology",
                    "readOnly": True} in c["volumeMounts"]
            seen.add(want)
    assert seen == {"ndv4", "ndv5"}


def test_peermem_advisory_only_for_configs_without_the_peer_memory_stack(tmp_path):
    assert azure_rules.advisories(_cfg()) == []
    host = _cfg(lambda c: c.update({"multinode:fabric": {"docaDriverVersion": "host"}}), tmp_path)
    assert [p.path for p in azure_rules.advisories(host)] == ["fabric.docaDriverVersion"]
    assert "ofedDriver" not in am.nic_cluster_policy(host)["spec"]
    off = _cfg(lambda c: c.update({"multinode:addons": {"networkOperator": {"enabled": False}}}), tmp_path)
    assert [p.path for p in azure_rules.advisories(off)] == ["addons.networkOperator.enabled"]
