"""cloud gcp under mocks: GPU networks, firewall, node pool, GKE Network objects, storage, refusals."""
from __future__ import annotations

import ipaddress

import pulumi
import pytest

from multinode import checks, fabric, pools
from multinode.clouds import gcp as gke
from multinode.recording import CALLS
from multinode.schema_check import validate_object

from .cloudrun import by_urn, of_type, one, problems, refused, run
from .conftest import example_raw

NET = "gcp:compute/network:Network"
SUBNET = "gcp:compute/subnetwork:Subnetwork"
FW = "gcp:compute/firewall:Firewall"
POOL = "gcp:container/nodePool:NodePool"
PARAMS = "kubernetes:networking.gke.io/v1:GKENetworkParamSet"
NETWORK = "kubernetes:networking.gke.io/v1:Network"
PV = "kubernetes:core/v1:PersistentVolume"
PVC = "kubernetes:core/v1:PersistentVolumeClaim"


def _raw(machine=None, **storage):
    raw, secrets = example_raw("gcp-dev")
    if machine:
        raw["nodePools"][0]["machine"] = machine
    if storage:
        raw["storage"] = storage
    return raw, secrets


@pytest.fixture(scope="module")
def mega():
    raw, secrets = _raw()
    return run(raw, secrets, "gcp-dev")


def test_a3_mega_gets_eight_gpu_vpcs_at_mtu_8244_with_a_subnet_each(mega):
    nets = of_type(mega, NET)
    subnets = of_type(mega, SUBNET)
    assert len(nets) == 8 and len(subnets) == 8
    assert {n.inputs["mtu"] for n in nets} == {8244}
    assert all(n.inputs["autoCreateSubnetworks"] is False and "networkProfile" not in n.inputs for n in nets)
    cidrs = [ipaddress.ip_network(s.inputs["ipCidrRange"]) for s in subnets]
    assert len(set(cidrs)) == 8 and all(c.prefixlen == 24 for c in cidrs)
    assert all(c.subnet_of(ipaddress.ip_network(gke.default_cidr(0))) for c in cidrs)
    assert {s.inputs["region"] for s in subnets} == {"us-central1"}
    # each subnet sits in its own VPC (the dependency on the VPC is recorded)
    net_urns = {n.urn for n in nets}
    assert len({d for s in subnets for d in s.dependencies if d in net_urns}) == 8


def test_firewall_lets_the_nodes_talk_on_every_gpu_vpc(mega):
    fws = of_type(mega, FW)
    subnets = {s.inputs["name"]: s.inputs["ipCidrRange"] for s in of_type(mega, SUBNET)}
    assert len(fws) == 8
    for fw in fws:
        assert fw.inputs["direction"] == "INGRESS"
        assert {a["protocol"] for a in fw.inputs["allows"]} == {"tcp", "udp", "icmp"}
        vpc = fw.inputs["name"].removesuffix("-internal")
        assert fw.inputs["sourceRanges"] == [subnets[f"{vpc}-sub"]]


def test_node_pool_accelerator_gvnic_networks_compact_placement_labels_taints(mega):
    cfg = checks.load(*example_raw("gcp-dev"))
    pool = cfg.node_pools[0]
    np_ = one(mega, POOL)
    nc = np_.inputs["nodeConfig"]
    assert nc["machineType"] == "a3-megagpu-8g"
    assert nc["guestAccelerators"] == [{"type": "nvidia-h100-mega-80gb", "count": 8,
                                        "gpuDriverInstallationConfig": {"gpuDriverVersion": "LATEST"}}]
    assert nc["gvnic"] == {"enabled": True}
    assert nc["labels"] == pools.node_labels(cfg, pool, cfg.machine(pool))
    assert nc["taints"] == [{"key": "nvidia.com/gpu", "value": "present", "effect": "NO_SCHEDULE"}]
    # release-channel clusters refuse auto-upgrade off
    assert np_.inputs["management"] == {"autoRepair": True, "autoUpgrade": True}
    assert "reservationAffinity" not in nc
    assert np_.inputs["placementPolicy"] == {"type": "COMPACT"}
    assert np_.inputs["nodeLocations"] == ["us-central1-c"] and np_.inputs["nodeCount"] == 6
    assert np_.inputs["cluster"] == "projects/my-gpu-project/locations/us-central1/clusters/dev-gke"
    extra = np_.inputs["networkConfig"]["additionalNodeNetworkConfigs"]
    plan = gke.network_plan(cfg, pool)
    assert [(e["network"], e["subnetwork"]) for e in extra] == [(n.vpc, n.subnet) for n in plan]
    assert len(extra) == 8
    # the pool waits for its subnets and firewall rules
    deps = set(np_.dependencies)
    assert {r.urn for r in of_type(mega, SUBNET) + of_type(mega, FW)} <= deps


def test_gke_network_objects_match_the_vpcs_and_the_fabric_names(mega):
    cfg = checks.load(*example_raw("gcp-dev"))
    pool = cfg.node_pools[0]
    params = {r.inputs["metadata"]["name"]: r for r in of_type(mega, PARAMS)}
    networks = {r.inputs["metadata"]["name"]: r for r in of_type(mega, NETWORK)}
    expected = pools.gcp_network_names(pool, 8)
    assert sorted(params) == sorted(expected) == sorted(networks)
    subnets = {s.inputs["name"]: s.inputs["network"] for s in of_type(mega, SUBNET)}
    urns = by_urn(mega)
    provider = one(mega, "pulumi:providers:kubernetes")
    for name in expected:
        spec = params[name].inputs["spec"]
        assert spec["deviceMode"] == "NetDevice" and spec["vpcSubnet"] in subnets
        assert networks[name].inputs["spec"] == {"type": "Device", "parametersRef": {
            "group": "networking.gke.io", "kind": "GKENetworkParamSet", "name": name}}
        assert params[name].urn in networks[name].dependencies
        assert urns[params[name].parent].type == "multinode:index:GpuNodePool"
        assert params[name].provider.startswith(provider.urn)


def test_capacity_reservation_becomes_specific_reservation_affinity():
    raw, secrets = _raw()
    raw["nodePools"][0]["capacityReservation"] = {"id": "a3mega-res", "nodes": 6}
    nc = one(run(raw, secrets, "gcp-dev"), POOL).inputs["nodeConfig"]
    assert nc["reservationAffinity"] == {"consumeReservationType": "SPECIFIC_RESERVATION",
                                         "key": "compute.googleapis.com/reservation-name",
                                         "values": ["a3mega-res"]}


def test_a3_high_gets_four_tcpx_networks():
    raw, secrets = _raw("a3-highgpu-8g")
    r = run(raw, secrets, "gcp-dev")
    assert len(of_type(r, NET)) == 4 and len(of_type(r, PARAMS)) == 4 and len(of_type(r, FW)) == 4
    nc = one(r, POOL).inputs["nodeConfig"]
    assert nc["guestAccelerators"][0]["type"] == "nvidia-h100-80gb"
    assert len(one(r, POOL).inputs["networkConfig"]["additionalNodeNetworkConfigs"]) == 4


@pytest.mark.parametrize("machine,accelerator", [("a3-ultragpu-8g", "nvidia-h200-141gb"),
                                                 ("a4-highgpu-8g", "nvidia-b200")])
def test_rdma_machines_get_a_gvnic_vpc_and_a_roce_vpc_with_eight_subnets(machine, accelerator):
    raw, secrets = _raw(machine)
    r = run(raw, secrets, "gcp-dev")
    nets = {n.inputs["name"]: n.inputs for n in of_type(r, NET)}
    assert sorted(nets) == ["dev-gke-gpu-gvnic", "dev-gke-gpu-rdma"]
    roce = nets["dev-gke-gpu-rdma"]
    assert roce["networkProfile"] == "projects/my-gpu-project/global/networkProfiles/us-central1-c-vpc-roce"
    assert roce["mtu"] == 8896 and "networkProfile" not in nets["dev-gke-gpu-gvnic"]
    assert len(of_type(r, SUBNET)) == 9
    # RoCE VPCs take no VPC firewall rules; the gVNIC VPC gets one
    assert [f.inputs["network"] for f in of_type(r, FW)] == ["dev-gke-gpu-gvnic-id"]
    modes = {p.inputs["metadata"]["name"]: p.inputs["spec"]["deviceMode"] for p in of_type(r, PARAMS)}
    assert modes.pop("gpu-gvnic-1") == "NetDevice"
    assert sorted(modes) == sorted(pools.gcp_network_names(raw_pool := checks.load(raw, secrets).node_pools[0], 8))
    assert set(modes.values()) == {"RDMA"} and raw_pool.name == "gpu"
    np_ = one(r, POOL).inputs
    assert np_["nodeConfig"]["guestAccelerators"][0]["type"] == accelerator
    assert np_["nodeConfig"]["diskType"] == "hyperdisk-balanced"
    extra = np_["networkConfig"]["additionalNodeNetworkConfigs"]
    assert extra[0]["network"] == "dev-gke-gpu-gvnic" and {e["network"] for e in extra[1:]} == {"dev-gke-gpu-rdma"}
    assert len(extra) == 9


def test_machine_without_fabric_gets_no_extra_networks():
    raw, secrets = _raw("a2-highgpu-8g")
    raw["workloads"] = []
    r = run(raw, secrets, "gcp-dev")
    assert not of_type(r, NET) and not of_type(r, PARAMS)
    assert "networkConfig" not in one(r, POOL).inputs


def test_filestore_is_protected_and_mounted_as_a_retained_static_pv(mega):
    fs = one(mega, "gcp:filestore/instance:Instance")
    assert fs.protect and fs.retain_on_delete and fs.inputs["deletionProtectionEnabled"] is True
    assert fs.inputs["tier"] == "ZONAL" and fs.inputs["location"] == "us-central1-c"
    assert fs.inputs["fileShares"] == {"name": "checkpoints", "capacityGb": 1024}
    assert fs.inputs["networks"][0]["network"] == "dev-gke-net"   # the looked-up cluster's VPC
    pv, pvc = one(mega, PV), one(mega, PVC)
    spec = pv.inputs["spec"]
    assert spec["persistentVolumeReclaimPolicy"] == "Retain" and spec["accessModes"] == ["ReadWriteMany"]
    assert spec["csi"] == {"driver": "filestore.csi.storage.gke.io",
                           "volumeHandle": "modeInstance/us-central1-c/dev-gke-checkpoints/checkpoints",
                           "volumeAttributes": {"ip": "10.20.0.2", "volume": "checkpoints"}}
    assert pv.protect and pv.retain_on_delete and pvc.protect and pvc.retain_on_delete
    assert pvc.inputs["spec"]["volumeName"] == pv.inputs["metadata"]["name"]
    assert fs.urn in pv.dependencies and pv.urn in pvc.dependencies
    for obj in (pv.inputs, pvc.inputs, one(mega, "kubernetes:core/v1:Namespace").inputs):
        assert validate_object(obj) == []


def test_allow_delete_drops_protection_and_retain():
    raw, secrets = _raw(kind="filestore", tier="ENTERPRISE", sizeGib=2048, allowDelete=True)
    r = run(raw, secrets, "gcp-dev")
    fs = one(r, "gcp:filestore/instance:Instance")
    assert not fs.protect and not fs.retain_on_delete and fs.inputs["deletionProtectionEnabled"] is False
    assert fs.inputs["location"] == "us-central1"   # enterprise instances are regional
    assert one(r, PV).inputs["spec"]["persistentVolumeReclaimPolicy"] == "Delete"
    assert not one(r, PV).protect


def test_managed_lustre_static_pv():
    raw, secrets = _raw(kind="gcp-lustre", sizeGib=18000, throughput=500)
    r = run(raw, secrets, "gcp-dev")
    lu = one(r, "gcp:lustre/instance:Instance")
    assert lu.protect and lu.retain_on_delete
    assert lu.inputs["capacityGib"] == "18000" and lu.inputs["perUnitStorageThroughput"] == "500"
    assert lu.inputs["gkeSupportEnabled"] is True
    assert lu.inputs["network"] == "projects/my-gpu-project/global/networks/dev-gke-net"
    pv = one(r, PV).inputs
    assert pv["spec"]["csi"] == {"driver": "lustre.csi.storage.gke.io",
                                 "volumeHandle": "my-gpu-project/us-central1-c/dev-gke-checkpoints",
                                 "volumeAttributes": {"ip": "10.90.0.4", "filesystem": "checkpoi"}}
    assert validate_object(pv) == []


def test_kubeconfig_is_secret_and_uses_the_gke_auth_plugin(mega):
    assert one(mega, "pulumi:providers:kubernetes").inputs["kubeconfig"] == "[secret]"
    text = gke.kubeconfig("dev-gke", "203.0.113.10", "Q0E=")
    assert "server: https://203.0.113.10" in text and "gke-gcloud-auth-plugin" in text
    assert "certificate-authority-data: Q0E=" in text and "token" not in text


def test_cluster_without_multi_networking_or_dataplane_v2_is_warned_about(monkeypatch):
    warned = []
    monkeypatch.setattr(pulumi.log, "warn", lambda msg, *a, **k: warned.append(msg))
    base = CALLS["gcp:container/getCluster:getCluster"]
    monkeypatch.setitem(CALLS, "gcp:container/getCluster:getCluster", lambda args: dict(
        base(args), enableMultiNetworking=False, datapathProvider="LEGACY_DATAPATH",
        addonsConfigs=[{"gcpFilestoreCsiDriverConfigs": [{"enabled": False}]}]))
    raw, secrets = _raw()
    r = run(raw, secrets, "gcp-dev")
    text = "\n".join(warned)
    assert "--enable-multi-networking" in text and "ADVANCED_DATAPATH" in text
    assert "GcpFilestoreCsiDriver=ENABLED" in text
    assert of_type(r, POOL)   # a warning, not a refusal: the plan still shows the pool


def test_ready_cluster_gets_no_warning(monkeypatch):
    warned = []
    monkeypatch.setattr(pulumi.log, "warn", lambda msg, *a, **k: warned.append(msg))
    raw, secrets = _raw()
    run(raw, secrets, "gcp-dev")
    assert not [w for w in warned if "GKE cluster" in w]


def test_cluster_readiness_rules():
    assert gke.cluster_readiness(True, "ADVANCED_DATAPATH", True) == []
    assert gke.cluster_readiness(False, None, False) == []      # no GPU networks: nothing needed
    msgs = gke.cluster_readiness(False, "LEGACY_DATAPATH", True)
    assert len(msgs) == 2 and "create a new cluster" in msgs[1]


# ---------------------------------------------------------------- refusals
def test_a3_mega_with_fewer_than_8_networks_is_refused_machine_spec():
    raw, secrets = _raw()
    raw["nodePools"][0].pop("machine")
    raw["nodePools"][0]["machineSpec"] = {"name": "a3-megagpu-8g", "gpus": 8, "fabric": "tcpxo", "fabricNics": 4}
    refused(raw, secrets, "nodePools[0].machineSpec.fabricNics", "needs 8 GPU networks, but this gives 4")


def test_a3_mega_with_fewer_than_8_networks_is_refused_devices_per_gpu():
    raw, secrets = _raw()
    raw["fabric"] = {"devicesPerGpu": 0.5}
    refused(raw, secrets, "fabric.devicesPerGpu", "a3-megagpu-8g (tcpxo) needs 8 GPU networks, but this gives 4")


@pytest.mark.parametrize("tier,size,text", [
    ("ZONAL", 1000, "1000 GiB is not a size Filestore ZONAL allows (1024-9984 GiB in steps of 256 GiB; "
                    "10240-102400 GiB in steps of 2560 GiB); use 1024"),
    ("ZONAL", 1100, "use 1024 or 1280"),
    ("ZONAL", 10000, "use 9984 or 10240"),
    ("ZONAL", 11000, "use 10240 or 12800"),
    ("ENTERPRISE", 20000, "use 10240"),
])
def test_filestore_sizes_the_service_does_not_allow(tier, size, text):
    raw, secrets = _raw(kind="filestore", tier=tier, sizeGib=size)
    refused(raw, secrets, "storage.sizeGib", text)


def test_filestore_allowed_sizes_pass():
    for tier, size in (("ZONAL", 1024), ("ZONAL", 1280), ("ZONAL", 12800), ("ENTERPRISE", 10240)):
        raw, secrets = _raw(kind="filestore", tier=tier, sizeGib=size)
        assert problems(raw, secrets) == []


def test_filestore_basic_tier_is_refused():
    raw, secrets = _raw(kind="filestore", tier="BASIC_HDD", sizeGib=1024)
    refused(raw, secrets, "storage.tier", "use ZONAL")


def test_lustre_sizes_and_tiers():
    raw, secrets = _raw(kind="gcp-lustre", sizeGib=10000)
    refused(raw, secrets, "storage.sizeGib", "at 1000 MB/s per TiB")
    refused(raw, secrets, "storage.sizeGib", "use 9000 or 18000")
    raw, secrets = _raw(kind="gcp-lustre", sizeGib=36000, throughput=300)
    refused(raw, secrets, "storage.throughput", "300 MB/s per TiB is not a Managed Lustre tier")
    raw, secrets = _raw(kind="gcp-lustre", sizeGib=1530000 + 72000)
    assert problems(raw, secrets) == []


def test_zone_outside_the_cluster_region_is_refused():
    raw, secrets = _raw()
    raw["nodePools"][0]["zone"] = "europe-west4-b"
    refused(raw, secrets, "nodePools[0].zone", "not in the cluster's region 'us-central1'")


def test_gpu_network_cidr_must_be_large_and_not_overlap():
    raw, secrets = _raw()
    raw["nodePools"][0]["gpuNetworkCidr"] = "10.9.0.0/24"
    refused(raw, secrets, "nodePools[0].gpuNetworkCidr", "must be an IPv4 /20 or larger")
    raw, secrets = _raw()
    second = dict(raw["nodePools"][0], name="gpu-b", gpuNetworkCidr="10.8.0.0/16")
    raw["nodePools"][0]["gpuNetworkCidr"] = "10.8.16.0/20"
    raw["nodePools"].append(second)
    refused(raw, secrets, "nodePools[1].gpuNetworkCidr", "overlaps nodePools[0]")


def test_gpu_network_cidr_is_used():
    raw, secrets = _raw()
    raw["nodePools"][0]["gpuNetworkCidr"] = "10.50.0.0/20"
    r = run(raw, secrets, "gcp-dev")
    assert all(ipaddress.ip_network(s.inputs["ipCidrRange"]).subnet_of(ipaddress.ip_network("10.50.0.0/20"))
               for s in of_type(r, SUBNET))


# Import isolation (no other cloud's SDK): tests/test_plan.py::test_single_cloud_stack_imports_only_its_cloud_sdk


# ---------------------------------------------------------------- minimum GKE version for GPUDirect
# Boundaries from cluster-toolkit modules/compute/gke-node-pool/gpu_direct.tf (major_minor_version_acceptable_map).
@pytest.mark.parametrize("fabric,version,ok", [
    # issue 30: the minimums of cluster-toolkit@10470803 (all raised since 03c47e74)
    ("tcpxo", "1.32.11-gke.1174000", True), ("tcpxo", "1.32.11-gke.1173999", False),
    ("tcpxo", "1.32.2-gke.1489001", False),                                     # the old 1.32 minimum: now refused
    ("tcpxo", "1.31.14-gke.1243000", True), ("tcpxo", "1.31.1-gke.2008000", False),
    ("tcpxo", "1.30.14-gke.1922000", True), ("tcpxo", "1.30.5-gke.1", False),
    ("tcpxo", "1.28.15-gke.3163000", True), ("tcpxo", "1.27.16-gke.1", False),  # older than the table: refused
    ("tcpxo", "1.33.5-gke.1000000", True),                                      # newer minor: accepted
    ("tcpx", "1.27.16-gke.2874000", True), ("tcpx", "1.27.7-gke.1121000", False),
    ("tcpx", "1.29.15-gke.2467000", True), ("tcpx", "1.29.3-gke.1093000", False),
    ("tcpx", "1.26.15-gke.1", False), ("tcpx", "1.30.2-gke.1023000", True),     # 1.30: upstream dropped the row
    ("gcp-rdma", "1.20.0-gke.1", True),                                         # not gated: no upstream table
])
def test_gke_version_gate(fabric, version, ok):
    msg = gke.gke_version_problem(fabric, "m", version)
    assert (msg is None) == ok, msg
    if not ok:
        assert "gpu_direct.tf" in msg and "or later" in msg


def test_gke_version_must_be_a_gke_version():
    assert "1.X.Y-gke.Z" in gke.gke_version_problem("tcpxo", "a3-megagpu-8g", "1.32")
    assert gke.parse_gke_version("v1.32.2-gke.1489001") == (1, 32, 2, 1489001)


def test_stated_gke_version_below_the_tcpxo_minimum_is_refused():
    raw, secrets = _raw()
    raw["cluster"] = dict(raw["cluster"], gkeVersion="1.31.1-gke.1000000")
    refused(raw, secrets, "cluster.gkeVersion", "older than 1.31.14-gke.1243000")
    assert any("a3-megagpu-8g" in m for p, m in problems(raw, secrets) if p == "cluster.gkeVersion")
    raw["cluster"]["gkeVersion"] = "1.31.14-gke.1243000"
    checks.load(raw, secrets)                       # the minimum itself loads


def test_looked_up_cluster_older_than_the_tcpxo_minimum_is_an_error(monkeypatch):
    errors = []
    monkeypatch.setattr(pulumi.log, "error", lambda msg, *a, **k: errors.append(msg))
    base = CALLS["gcp:container/getCluster:getCluster"]
    monkeypatch.setitem(CALLS, "gcp:container/getCluster:getCluster",
                        lambda args: dict(base(args), masterVersion="1.30.3-gke.1000000"))
    raw, secrets = _raw()
    run(raw, secrets, "gcp-dev")
    assert len(errors) == 1 and "1.30.14-gke.1922000" in errors[0] and "GKE cluster" in errors[0]


def test_looked_up_cluster_at_a_supported_version_gets_no_error(monkeypatch):
    errors = []
    monkeypatch.setattr(pulumi.log, "error", lambda msg, *a, **k: errors.append(msg))
    raw, secrets = _raw()
    run(raw, secrets, "gcp-dev")                    # mock masterVersion 1.33.5-gke.1000000
    assert not [e for e in errors if "GKE cluster" in e]



# ---------------------------------------------------------------- issue 30: TCPX / TCPXO as upstream runs them
def test_tcpxo_daemon_runs_with_the_flags_its_repository_uses():
    cfg = checks.load(*_raw())
    sidecar = fabric.profile_for(cfg, cfg.node_pools[0]).init_containers[0]
    (script,) = sidecar["args"]
    assert script.endswith("/fts/entrypoint_rxdm_container.sh --num_hops=2")
    assert "--num_nics" not in script and "--uid" not in script


def test_tcpx_gets_upstreams_bindings_and_socket_settings():
    raw, secrets = _raw()
    raw["nodePools"][0]["machine"] = "a3-highgpu-8g"
    cfg = checks.load(raw, secrets)
    env = fabric.profile_for(cfg, cfg.node_pools[0]).env
    assert env["NCCL_GPUDIRECTTCPX_TX_BINDINGS"].startswith("eth1:8-21,112-125;")
    assert env["NCCL_GPUDIRECTTCPX_RX_BINDINGS"].endswith("eth4:74-87,178-191")
    assert (env["NCCL_NSOCKS_PERTHREAD"], env["NCCL_SOCKET_NTHREADS"]) == ("4", "1")
    assert env["NCCL_GPUDIRECTTCPX_PROGRAM_FLOW_STEERING_WAIT_MICROS"] == "500000"
    assert env["NCCL_PROTO"] == "Simple" and env["NCCL_NET"] == "GPUDirectTCPX_v7"


def test_node_repair_off_turns_gke_auto_repair_off():
    # issue 34: cluster.nodeRepair (default true, asserted above) reaches the node pool's management
    raw, secrets = _raw()
    raw["cluster"] = {**raw["cluster"], "nodeRepair": False}
    assert one(run(raw, secrets, "gcp-dev"), POOL).inputs["management"] == {"autoRepair": False, "autoUpgrade": True}
