"""AWS components under Pulumi mocks: EFA node pool and FSx / EFS checkpoint storage."""
from __future__ import annotations

import pytest

from components.clouds import aws as awsmod
from multinode import catalog
from multinode.schema_check import validate_object
from tests.cloudstacks import (
    config_problems,
    k8s_objects,
    of_type,
    one,
    parent_of,
    run_variant,
)

LT = "aws:ec2/launchTemplate:LaunchTemplate"
NG = "aws:eks/nodeGroup:NodeGroup"
PG = "aws:ec2/placementGroup:PlacementGroup"
SG = "aws:ec2/securityGroup:SecurityGroup"
INGRESS = "aws:vpc/securityGroupIngressRule:SecurityGroupIngressRule"
EGRESS = "aws:vpc/securityGroupEgressRule:SecurityGroupEgressRule"
FSX = "aws:fsx/lustreFileSystem:LustreFileSystem"
EFS = "aws:efs/fileSystem:FileSystem"
PV = "kubernetes:core/v1:PersistentVolume"
PVC = "kubernetes:core/v1:PersistentVolumeClaim"
SC = "kubernetes:storage.k8s.io/v1:StorageClass"
ADDON = "aws:eks/addon:Addon"


@pytest.fixture(scope="module")
def dev(tmp_path_factory):
    return run_variant(tmp_path_factory.mktemp("aws"), "aws-dev")


def pool_edit(**kw):
    def edit(c):
        c["multinode:nodePools"][0].update(kw)
    return edit


# ---------------------------------------------------------------- launch template: one EFA per card
def test_p5_launch_template_has_one_efa_interface_per_network_card(dev):
    nics = one(dev, LT).inputs["networkInterfaces"]
    assert len(nics) == 32 == catalog.lookup("p5.48xlarge").network_cards
    assert sorted(n["networkCardIndex"] for n in nics) == list(range(32))
    first = next(n for n in nics if n["networkCardIndex"] == 0)
    assert (first["deviceIndex"], first["interfaceType"]) == (0, "efa")
    rest = [n for n in nics if n["networkCardIndex"] != 0]
    assert {(n["deviceIndex"], n["interfaceType"]) for n in rest} == {(1, "efa-only")}
    # no public IPs: nothing asks for one (EC2 assigns none with several interfaces)
    assert all(n.get("associatePublicIpAddress") in (None, "false") for n in nics)


def test_every_interface_carries_the_efa_and_cluster_security_groups(dev):
    efa_sg = next(r for r in of_type(dev, SG) if r.name == "gpu-efa")
    for nic in one(dev, LT).inputs["networkInterfaces"]:
        assert nic["securityGroups"] == [f"{efa_sg.name}-id", "sg-0c1a2b3c4d5e6f708"]


@pytest.mark.parametrize("machine,cards", [("p5en.48xlarge", 16), ("p4d.24xlarge", 4), ("p6-b200.48xlarge", 8),
                                           ("g6e.48xlarge", 4)])
def test_interface_count_follows_the_catalog(tmp_path, machine, cards):
    def edit(c):   # the 405B model does not fit every machine: this test is about the pool only
        c["multinode:nodePools"][0]["machine"] = machine
        c.pop("multinode:workloads")
    run = run_variant(tmp_path, "aws-dev", edit)
    nics = one(run, LT).inputs["networkInterfaces"]
    assert len(nics) == cards
    assert [n["interfaceType"] for n in nics].count("efa") == 1


def test_single_card_machine_gets_one_efa_primary_without_public_ip():
    nics = awsmod.network_interfaces(catalog.lookup("g5.48xlarge"), True, ["sg"])
    assert nics == [{"network_card_index": 0, "device_index": 0, "associate_public_ip_address": "false",
                     "interface_type": "efa", "security_groups": ["sg"], "delete_on_termination": "true"}]


def test_fabric_disabled_means_a_plain_primary_interface():
    nics = awsmod.network_interfaces(catalog.lookup("p5.48xlarge"), False, ["sg"])
    assert len(nics) == 1 and "interface_type" not in nics[0]


def test_unconfirmed_card_layout_falls_back_to_the_efa_count():
    m = catalog.lookup("p6-b300.48xlarge")
    assert m.network_cards is None and "network_cards" in m.unconfirmed
    assert awsmod.efa_interface_count(m, True) == m.fabric_nics == 16


# ---------------------------------------------------------------- placement, security group, node group
def test_cluster_placement_group_is_wired_into_the_launch_template(dev):
    pg = one(dev, PG)
    assert pg.inputs["strategy"] == "cluster"
    assert one(dev, LT).inputs["placement"]["groupName"] == f"{pg.name}-0a1b2c3"


def test_efa_security_group_allows_all_traffic_to_and_from_itself(dev):
    sg = next(r for r in of_type(dev, SG) if r.name == "gpu-efa")
    sg_id = f"{sg.name}-id"
    self_in = [r for r in of_type(dev, INGRESS) if r.inputs["securityGroupId"] == sg_id]
    self_out = [r for r in of_type(dev, EGRESS) if r.inputs["securityGroupId"] == sg_id
                and r.inputs.get("referencedSecurityGroupId")]
    assert [(r.inputs["ipProtocol"], r.inputs["referencedSecurityGroupId"]) for r in self_in] == [("-1", sg_id)]
    assert [(r.inputs["ipProtocol"], r.inputs["referencedSecurityGroupId"]) for r in self_out] == [("-1", sg_id)]


def test_node_group_ami_subnet_size_labels_and_taint(dev):
    ng = one(dev, NG).inputs
    assert ng["amiType"] == "AL2023_x86_64_NVIDIA"
    assert ng["subnetIds"] == ["subnet-0a1b2c3d4e5f60718"]
    assert ng["instanceTypes"] == ["p5.48xlarge"]
    assert ng["scalingConfig"] == {"desiredSize": 4, "minSize": 4, "maxSize": 4}
    assert ng["labels"]["vpc.amazonaws.com/efa.present"] == "true"
    assert ng["labels"]["multinode.dev/node-pool"] == "gpu"
    assert ng["taints"] == [{"key": "nvidia.com/gpu", "value": "true", "effect": "NO_SCHEDULE"}]
    assert ng["capacityType"] == "ON_DEMAND"
    assert ng["launchTemplate"] == {"id": "gpu-lt-id", "version": "1"}
    assert ng["clusterName"] == "dev-eks"


def test_extra_pool_labels_reach_the_nodes(tmp_path):
    run = run_variant(tmp_path, "aws-dev", pool_edit(labels={"team": "research"}, nodeCount=3))
    ng = one(run, NG).inputs
    assert ng["labels"]["team"] == "research" and ng["scalingConfig"]["desiredSize"] == 3


def test_pool_resources_are_children_of_the_pool_component(dev):
    for typ in (LT, NG, PG):
        assert parent_of(dev, one(dev, typ)).type == "multinode:index:GpuNodePool"


def test_capacity_reservation_is_targeted_and_replaces_the_placement_group(tmp_path):
    run = run_variant(tmp_path, "aws-dev", pool_edit(capacityReservation={"id": "cr-0123456789abcdef0", "nodes": 4}))
    lt = one(run, LT).inputs
    assert lt["capacityReservationSpecification"] == {
        "capacityReservationTarget": {"capacityReservationId": "cr-0123456789abcdef0"}}
    assert "instanceMarketOptions" not in lt and "placement" not in lt
    assert of_type(run, PG) == []
    assert one(run, NG).inputs["capacityType"] == "ON_DEMAND"


def test_capacity_block_sets_market_type_and_node_group_capacity_type(tmp_path):
    run = run_variant(tmp_path, "aws-dev", pool_edit(
        capacityReservation={"id": "cr-0fedcba9876543210", "type": "capacityBlock"}))
    lt = one(run, LT).inputs
    assert lt["instanceMarketOptions"] == {"marketType": "capacity-block"}
    assert lt["capacityReservationSpecification"]["capacityReservationTarget"]["capacityReservationId"] == \
        "cr-0fedcba9876543210"
    assert one(run, NG).inputs["capacityType"] == "CAPACITY_BLOCK"


# ---------------------------------------------------------------- cluster access
def test_kubeconfig_is_secret_and_provider_is_used_for_kubernetes_objects(dev):
    provider = one(dev, "pulumi:providers:kubernetes")
    assert provider.inputs["kubeconfig"] == "[secret]"
    assert dev.stack_outputs  # the program exported outputs
    assert "aws:eks/getCluster:getCluster" in dev.calls
    for reg in of_type(dev, PV) + of_type(dev, PVC):
        assert reg.provider.startswith(provider.urn)


def test_kubeconfig_asks_aws_for_a_token():
    import json
    cfg = json.loads(awsmod.kubeconfig_for("c", "us-east-1", "https://x", "Q0E="))
    assert cfg["users"][0]["user"]["exec"]["args"][:4] == ["eks", "get-token", "--cluster-name", "c"]
    assert "token" not in cfg["users"][0]["user"]


# ---------------------------------------------------------------- FSx for Lustre
def test_fsx_persistent2_is_protected_and_retained(dev):
    fs = one(dev, FSX)
    assert (fs.protect, fs.retain_on_delete) == (True, True)
    assert fs.inputs["deploymentType"] == "PERSISTENT_2"
    assert fs.inputs["storageCapacity"] == 2400 and fs.inputs["perUnitStorageThroughput"] == 250
    assert fs.inputs["subnetIds"] == "subnet-0a1b2c3d4e5f60718"
    assert fs.inputs["skipFinalBackup"] is False
    assert parent_of(dev, fs).type == "multinode:index:CheckpointStorage"


def test_fsx_static_pv_and_pvc(dev):
    pv, pvc = one(dev, PV), one(dev, PVC)
    csi = pv.inputs["spec"]["csi"]
    assert csi["driver"] == "fsx.csi.aws.com"
    assert csi["volumeHandle"] == f"{one(dev, FSX).name}-id"
    assert set(csi["volumeAttributes"]) == {"dnsname", "mountname"}
    assert pv.inputs["spec"]["persistentVolumeReclaimPolicy"] == "Retain"
    assert pv.inputs["spec"]["accessModes"] == ["ReadWriteMany"]
    assert pvc.inputs["spec"]["volumeName"] == pv.inputs["metadata"]["name"]
    assert pvc.inputs["spec"]["storageClassName"] == "" == pv.inputs["spec"]["storageClassName"]
    for reg in (pv, pvc):
        assert (reg.protect, reg.retain_on_delete) == (True, True)
    assert pv.urn in pvc.dependencies


def addon_named(run, name):
    regs = [r for r in of_type(run, ADDON) if r.inputs["addonName"] == name]
    assert len(regs) == 1, [r.inputs["addonName"] for r in of_type(run, ADDON)]
    return regs[0]


def test_fsx_csi_addon_with_pod_identity(dev):
    addon = addon_named(dev, "aws-fsx-csi-driver").inputs
    assert addon["addonName"] == "aws-fsx-csi-driver"
    assert addon["podIdentityAssociations"][0]["serviceAccount"] == "fsx-csi-controller-sa"
    assert addon["podIdentityAssociations"][0]["roleArn"].startswith("arn:aws:iam::")


def test_fsx_security_group_opens_lustre_ports_from_the_cluster(dev):
    sg = next(r for r in of_type(dev, SG) if r.name == "checkpoints-sg")
    rules = [r.inputs for r in of_type(dev, INGRESS) if r.inputs["securityGroupId"] == f"{sg.name}-id"]
    from_nodes = {(r["fromPort"], r["toPort"]) for r in rules
                  if r.get("referencedSecurityGroupId") == "sg-0c1a2b3c4d5e6f708"}
    assert from_nodes == {(988, 988), (1018, 1023)}


def test_allow_delete_drops_protection(tmp_path):
    run = run_variant(tmp_path, "aws-dev", lambda c: c["multinode:storage"].update(allowDelete=True))
    fs, pv = one(run, FSX), one(run, PV)
    assert (fs.protect, fs.retain_on_delete) == (False, False)
    assert fs.inputs["skipFinalBackup"] is True
    assert pv.inputs["spec"]["persistentVolumeReclaimPolicy"] == "Delete"
    assert (pv.protect, pv.retain_on_delete) == (False, False)


def test_every_kubernetes_object_validates(dev, tmp_path):
    efs = run_variant(tmp_path, "aws-dev", lambda c: c.update({"multinode:storage": {"kind": "efs", "sizeGib": 1024}}))
    objs = k8s_objects(dev) + k8s_objects(efs)
    assert {o["kind"] for o in objs} >= {"Namespace", "PersistentVolume", "PersistentVolumeClaim", "StorageClass"}
    for obj in objs:
        assert validate_object(obj, "1.33") == [], obj


# ---------------------------------------------------------------- EFS
def test_efs_encrypted_elastic_with_mount_target_access_point_and_storage_class(tmp_path):
    run = run_variant(tmp_path, "aws-dev", lambda c: c.update({"multinode:storage": {"kind": "efs", "sizeGib": 1024}}))
    fs = one(run, EFS)
    assert fs.inputs["encrypted"] is True and fs.inputs["throughputMode"] == "elastic"
    assert (fs.protect, fs.retain_on_delete) == (True, True)
    mt = one(run, "aws:efs/mountTarget:MountTarget").inputs
    assert mt["subnetId"] == "subnet-0a1b2c3d4e5f60718"
    ap = one(run, "aws:efs/accessPoint:AccessPoint")
    assert ap.protect
    sc = one(run, SC).inputs
    assert sc["provisioner"] == "efs.csi.aws.com"
    assert sc["parameters"]["provisioningMode"] == "efs-ap"
    assert sc["parameters"]["fileSystemId"] == f"{fs.name}-id"
    assert sc["reclaimPolicy"] == "Retain"
    pv = one(run, PV).inputs
    assert pv["spec"]["csi"]["volumeHandle"] == f"{fs.name}-id::{ap.name}-id"
    assert addon_named(run, "aws-efs-csi-driver").inputs["addonName"] == "aws-efs-csi-driver"
    nfs = [r.inputs for r in of_type(run, INGRESS) if r.inputs.get("fromPort") == 2049]
    assert nfs and nfs[0]["referencedSecurityGroupId"] == "sg-0c1a2b3c4d5e6f708"


# ---------------------------------------------------------------- refused at config time
def _problem(problems, path):
    hits = [p for p in problems if p.path == path]
    assert hits, f"no problem at {path}: {problems}"
    return hits[0].message


@pytest.mark.parametrize("size,nearest", [(2000, "1200 GiB or 2400 GiB"), (3600, "2400 GiB or 4800 GiB"),
                                          (1000, "1200 GiB")])
def test_fsx_sizes_outside_the_steps_are_refused_with_the_nearest(tmp_path, size, nearest):
    msg = _problem(config_problems(tmp_path, "aws-dev", lambda c: c["multinode:storage"].update(sizeGib=size)),
                   "storage.sizeGib")
    assert str(size) in msg and nearest in msg


@pytest.mark.parametrize("size", [1200, 2400, 4800, 9600])
def test_fsx_allowed_sizes_pass(tmp_path, size):
    assert config_problems(tmp_path, "aws-dev", lambda c: c["multinode:storage"].update(sizeGib=size)) == []


def test_fsx_throughput_tier_is_checked(tmp_path):
    msg = _problem(config_problems(tmp_path, "aws-dev", lambda c: c["multinode:storage"].update(throughput=200)),
                   "storage.throughput")
    assert "200" in msg and "125, 250, 500, 1000" in msg


def test_efa_on_a_machine_without_efa_is_refused(tmp_path):
    spec = {"name": "g4dn.12xlarge", "gpus": 4, "fabric": "none"}
    problems = config_problems(tmp_path, "aws-dev", lambda c: c["multinode:nodePools"][0].update(
        machine=None, machineSpec=spec) or c["multinode:nodePools"][0].pop("machine"))
    msg = _problem(problems, "nodePools[0].machineSpec.fabric")
    assert "g4dn.12xlarge has no efa" in msg and "fabric.enabled false" in msg


def test_more_nodes_than_the_reservation_holds_is_refused(tmp_path):
    problems = config_problems(tmp_path, "aws-dev", pool_edit(capacityReservation={"id": "cr-1", "nodes": 1}))
    assert "holds 1" in _problem(problems, "nodePools[0].nodeCount")


# ---------------------------------------------------------------- lazy imports
# Import isolation (no other cloud's SDK): tests/test_plan.py::test_single_cloud_stack_imports_only_its_cloud_sdk


# ---------------------------------------------------------------- optional local NVMe (issue 14)
def test_local_nvme_is_off_by_default(dev):
    assert "userData" not in one(dev, LT).inputs


def test_local_nvme_raid0_puts_a_nodeadm_config_in_the_launch_template(tmp_path):
    import base64
    run = run_variant(tmp_path, "aws-dev", pool_edit(localNvme="raid0"))
    text = base64.b64decode(one(run, LT).inputs["userData"]).decode()
    assert "Content-Type: application/node.eks.aws" in text and "kind: NodeConfig" in text
    assert "localStorage:\n      strategy: RAID0" in text
    assert text.rstrip().endswith("--MULTINODE--")


def test_local_nvme_user_data_is_one_nodeconfig():
    import yaml

    from multinode import local_nvme
    part = local_nvme.nodeadm_user_data("raid0").split("\n\n", 2)[2].split("\n--")[0]
    assert yaml.safe_load(part) == {"apiVersion": "node.eks.aws/v1alpha1", "kind": "NodeConfig",
                                    "spec": {"instance": {"localStorage": {"strategy": "RAID0"}}}}


def test_local_nvme_refused_off_aws_and_without_instance_store(tmp_path):
    from types import SimpleNamespace

    from multinode import local_nvme
    assert config_problems(tmp_path, "aws-dev", pool_edit(localNvme="raid0")) == []
    gcp = config_problems(tmp_path, "gcp-dev", pool_edit(localNvme="raid0"))
    assert any(p.path == "nodePools[0].localNvme" and "aws" in p.message for p in gcp)
    # a machine whose local NVMe the catalog does not confirm (None, listed in unconfirmed) is refused
    pool = SimpleNamespace(local_nvme="raid0")
    cfg = SimpleNamespace(cloud="aws", node_pools=[pool], machine=lambda p: catalog.lookup("a3-megagpu-8g"))
    (p,) = local_nvme.config_problems(cfg)
    assert p.path == "nodePools[0].localNvme" and "no confirmed local NVMe" in p.message


# ---------------------------------------------------------------- issue 34: EKS node repair
def test_node_groups_repair_themselves_and_the_node_monitoring_agent_is_installed(dev):
    assert one(dev, NG).inputs["nodeRepairConfig"] == {"enabled": True}
    agent = addon_named(dev, "eks-node-monitoring-agent")
    assert agent.inputs["clusterName"] == one(dev, NG).inputs["clusterName"]
    assert parent_of(dev, agent).type == "multinode:index:ClusterAccess"


def test_the_node_monitoring_agents_dcgm_server_tolerates_every_taint_of_our_gpu_node_groups(dev):
    """Issue 40 item 4. On main the add-on had no configurationValues: its dcgm-server DaemonSet (no tolerations by
    default, aws/containers-roadmap#2567) never ran on our tainted GPU nodes and node repair looped on DCGMError."""
    import json
    agent = addon_named(dev, "eks-node-monitoring-agent")
    assert "configurationValues" in agent.inputs, "no configurationValues: dcgm-server tolerates nothing"
    conf = json.loads(agent.inputs["configurationValues"])
    assert set(conf) <= {"global", "nodeAgent", "dcgmAgent", "extraObjects"}  # the add-on schema's top level
    tolerations = conf["dcgmAgent"]["tolerations"]
    effect = {"NO_SCHEDULE": "NoSchedule", "NO_EXECUTE": "NoExecute", "PREFER_NO_SCHEDULE": "PreferNoSchedule"}
    taints = [t for ng in of_type(dev, NG) for t in ng.inputs.get("taints") or []]
    assert taints, "the GPU node groups carry the GPU taint"
    for t in taints:   # Kubernetes' rule: an Exists toleration of the same key and effect tolerates the taint
        assert any(tol["key"] == t["key"] and tol["operator"] == "Exists" and tol["effect"] == effect[t["effect"]]
                   for tol in tolerations), t


def test_the_runtime_class_nvsentinel_names_is_created_before_its_release(dev):
    """Issue 40 item 5: EKS has no RuntimeClass object; the chart requires one in embedded-mode."""
    (rc,) = of_type(dev, "kubernetes:node.k8s.io/v1:RuntimeClass")
    assert rc.inputs["metadata"]["name"] == "nvidia" and rc.inputs["handler"] == "nvidia"
    (release,) = [r for r in of_type(dev, "kubernetes:helm.sh/v3:Release") if r.inputs["name"] == "nvsentinel"]
    assert rc.urn in release.dependencies
    assert release.inputs["values"]["gpu-health-monitor"]["runtimeClassName"] == "nvidia"


def test_node_repair_off_turns_both_off(tmp_path):
    def edit(c):
        c["multinode:cluster"]["nodeRepair"] = False
    run = run_variant(tmp_path, "aws-dev", edit)
    assert one(run, NG).inputs["nodeRepairConfig"] == {"enabled": False}
    assert [r for r in of_type(run, ADDON) if r.inputs["addonName"] == "eks-node-monitoring-agent"] == []
