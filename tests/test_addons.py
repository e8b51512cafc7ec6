"""Add-on releases, fabric operators, NicClusterPolicy, GCP DaemonSets, Volcano topology/queues,
the components under Pulumi mocks, and plan's effective pods (issue 4)."""
from __future__ import annotations

import copy

import pytest
import yaml

from multinode import checks, config, fabric, k8sfiles, pools, stackfile
from multinode import plan as mplan
from multinode import schema_check as validation
from multinode.manifests import addons, kyverno, volcano_topology

STACKS = ["aws-dev", "azure-dev", "gcp-dev", "oci-dev", "existing-dev"]
ALL_ON = {"grove": {"enabled": True}, "kai": {"enabled": True}, "gpuOperator": {"enabled": True},
          "dynamo": {"enabled": True}, "trainer": {"enabled": True}}
# Charts whose values.yaml is not in schemas/, so their value keys cannot be checked here:
# nvidia-device-plugin: the index holds its values.yaml only at commits that are not the pinned tag v0.19.3
# (one after v0.19.1 with componentSelectorLabels, PR #1716), so no copy is stored; our keys (nodeSelector,
# tolerations, mofedEnabled) are UNVERIFIED at the tag by this test (see docs/addons-fabric.md).
# kubeflow-trainer: no values.yaml of the chart is in ../shared/schemas; we set no values (the test asserts that).
# dynamo-platform is checked since schemas/dynamo/values.yaml was copied (main 2a6da14, chart 1.5.0).
NO_LOCAL_VALUES = {"nvidiaDevicePlugin": "nvidia-device-plugin", "trainer": "kubeflow-trainer"}


def load(stack: str, **over) -> config.StackConfig:
    raw, secrets, _ = stackfile.read_stack_file(stackfile.stack_path(stack))
    raw = dict(raw)
    raw.update(over)
    return checks.load(raw, secrets)


@pytest.mark.parametrize("stack", STACKS)
def test_every_helm_value_key_exists_upstream(stack):
    cfg = load(stack, addons=ALL_ON)
    specs = addons.addon_releases(cfg) + addons.fabric_releases(cfg)
    assert {"volcano", "lws", "grove", "kai", "kyverno", "dynamo"} <= {s.key for s in specs}
    plain = load(stack)       # the defaults too: the GPU device plugin is only there without the GPU Operator
    specs += addons.addon_releases(plain) + addons.fabric_releases(plain)
    for s in specs:
        if s.key in NO_LOCAL_VALUES:
            assert s.chart_folder == NO_LOCAL_VALUES[s.key]
            if s.key == "trainer":
                assert s.values == {}
            assert not (validation.SCHEMA_DIR / s.chart_folder / "values.yaml").exists(), \
                f"{s.chart_folder}/values.yaml is now in schemas/: check {s.key} and drop it from NO_LOCAL_VALUES"
            continue
        assert validation.helm_values_unknown_keys(s.chart_folder, s.values) == [], s.key


def test_unknown_value_key_would_be_caught():
    # the check above can fail: a typo'd key is reported
    assert validation.helm_values_unknown_keys("lws", {"gangSchedulingManagment": {}}) == ["gangSchedulingManagment"]


def test_versions_pinned_namespaces_and_user_values_win():
    cfg = load("aws-dev", addons={**ALL_ON, "volcano": {"values": {"custom": {"scheduler_replicas": 2}}},
                                  "kyverno": {"namespace": "policy",
                                              "values": {"admissionController": {"replicas": 5}}}})
    by = {s.key: s for s in addons.addon_releases(cfg)}
    assert by["volcano"].version == config.ADDON_VERSIONS["volcano"]
    assert by["lws"].version == config.ADDON_VERSIONS["lws"]
    assert by["grove"].version == "v" + config.ADDON_VERSIONS["grove"]
    assert by["kai"].version == "v" + config.ADDON_VERSIONS["kai"]
    # user values merge over ours (issue 18: ours now include aws-dev's HyperNode discovery from its labels)
    assert by["volcano"].values["custom"]["scheduler_replicas"] == 2
    assert "controller_config_override" in by["volcano"].values["custom"]
    assert by["kyverno"].namespace == "policy" and by["kyverno"].values["admissionController"]["replicas"] == 5
    assert len({s.namespace for s in by.values()}) == len(by)          # each in its own namespace
    assert by["lws"].values["gangSchedulingManagement"] == {"schedulerProvider": "volcano"}


def test_addons_are_optional():
    cfg = load("aws-dev", addons={"volcano": {"enabled": False}, "kyverno": {"enabled": False},
                                  "nvidiaDevicePlugin": {"enabled": False}, "nvsentinel": {"enabled": False}},
               workloads=[])
    keys = {s.key for s in addons.addon_releases(cfg)}
    assert keys == {"lws"}
    assert "gangSchedulingManagement" not in addons.addon_releases(cfg)[0].values


# ---------------------------------------------------------------- NVIDIA GPU device plugin
GPU_TOLERATION = {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}


def _plan_with(tmp_path, stack, addons_over=None):
    src = stackfile.stack_path(stack)
    if not addons_over:
        return mplan.plan(stack, tmp_path / "build")
    doc = yaml.safe_load(src.read_text())
    doc["config"]["multinode:addons"] = {**(doc["config"].get("multinode:addons") or {}), **addons_over}
    name = f"{stack}-variant"
    f = tmp_path / f"Pulumi.{name}.yaml"
    f.write_text(yaml.safe_dump(doc))
    return mplan.plan(name, tmp_path / "build", path=f)


@pytest.mark.parametrize("stack,over,expected", [
    ("aws-dev", None, True), ("azure-dev", None, True),
    ("gcp-dev", None, False),            # GKE's driver installation runs GKE's device plugin
    ("oci-dev", None, False),            # OKE's NVIDIA GPU Plugin cluster add-on
    ("existing-dev", None, False),       # the cluster already has one
    ("azure-dev", {"gpuOperator": {"enabled": True}}, False),   # the GPU Operator runs its own
    ("aws-dev", {"nvidiaDevicePlugin": {"enabled": False}}, False),
])
def test_gpu_device_plugin_in_plan(tmp_path, stack, over, expected):
    res = _plan_with(tmp_path, stack, over)
    assert res.exit_code == 0, res.error
    regs = {r.name: r for r in res.registrations}
    releases = [r for r in res.registrations if r.type == "kubernetes:helm.sh/v3:Release"
                and r.inputs.get("chart") == "nvidia-device-plugin"]
    assert len(releases) == int(expected), [r.name for r in releases]
    if not expected:
        return
    (rel,) = releases
    assert rel.name == "addons-nvidia-device-plugin" and rel.parent == regs["addons"].urn
    assert rel.inputs["repositoryOpts"] == {"repo": "https://nvidia.github.io/k8s-device-plugin"}
    assert rel.inputs["version"] == config.ADDON_VERSIONS["nvidiaDevicePlugin"]
    assert rel.inputs["namespace"] == "nvidia-device-plugin" and rel.inputs["createNamespace"] is True
    values = rel.inputs["values"]
    assert values["nodeSelector"] == {"nvidia.com/gpu.present": "true"}
    assert GPU_TOLERATION in values["tolerations"]
    assert values["mofedEnabled"] is False
    # every workload object asking for GPUs is created only after the device plugin release
    gpu_objects = [r for r in res.registrations
                   if mplan.is_k8s_object(r) and "multinode:index:Workload" in (r.parent or "")
                   and "'nvidia.com/gpu'" in str(r.inputs)]
    assert gpu_objects
    for r in gpu_objects:
        assert rel.urn in r.dependencies, r.name


@pytest.mark.parametrize("stack", ["aws-dev", "azure-dev"])
def test_gpu_device_plugin_lands_on_every_gpu_node(stack):
    """The nodeSelector must match the labels our pools set, and the tolerations their taints."""
    cfg = load(stack)
    spec = addons.nvidia_device_plugin_release(cfg)
    for pool in cfg.node_pools:
        labels = pools.node_labels(cfg, pool, cfg.machine(pool))
        assert spec.values["nodeSelector"].items() <= labels.items(), pool.name
        for taint in pools.node_taints(cfg):
            assert any(t["key"] == taint["key"] and t["effect"] == taint["effect"] and t["operator"] == "Exists"
                       for t in spec.values["tolerations"]), taint


def test_gpu_device_plugin_user_values_win():
    cfg = load("azure-dev", addons={"nvidiaDevicePlugin": {"version": "0.19.0", "namespace": "kube-system",
                                                           "values": {"nodeSelector": {"gpu": "yes"}}}})
    spec = addons.nvidia_device_plugin_release(cfg)
    assert spec.version == "0.19.0" and spec.namespace == "kube-system"
    assert spec.values["nodeSelector"] == {"nvidia.com/gpu.present": "true", "gpu": "yes"}


@pytest.mark.parametrize("stack,expect", [("aws-dev", {"efaDevicePlugin"}), ("azure-dev", {"networkOperator"}),
                                          ("gcp-dev", set()), ("oci-dev", {"networkOperator"}),
                                          ("existing-dev", set())])
def test_exactly_one_clouds_fabric_operator(stack, expect):
    cfg = load(stack)
    assert {s.key for s in addons.fabric_releases(cfg)} == expect
    assert bool(addons.gcp_daemonsets(cfg)) == (stack == "gcp-dev")
    assert bool(addons.nic_cluster_policy(cfg)) == (stack in ("azure-dev", "oci-dev"))


def test_efa_plugin_values():
    (spec,) = addons.fabric_releases(load("aws-dev"))
    assert spec.values["nodeSelector"] == {"vpc.amazonaws.com/efa.present": "true"}
    assert {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"} in spec.values["tolerations"]
    assert spec.repository == "https://aws.github.io/eks-charts"


def test_gpu_operator_rdma_on_azure():
    # Issue 14: the GPU Operator's driver loads nvidia-peermem against the Network Operator's DOCA driver
    # container (installed by default on azure), so useHostMofed is false; true only with
    # fabric.docaDriverVersion: host (the node image brings MLNX_OFED/DOCA, no ofedDriver rendered).
    cfg = load("azure-dev", addons={"gpuOperator": {"enabled": True}})
    by = {s.key: s for s in addons.fabric_releases(cfg)}
    assert by["gpuOperator"].values["driver"]["rdma"] == {"enabled": True, "useHostMofed": False}
    assert addons.nic_cluster_policy(cfg)["spec"]["ofedDriver"]["image"] == "doca-driver"
    assert by["gpuOperator"].values["nfd"] == {"enabled": False}      # the Network Operator runs NFD
    host = load("azure-dev", addons={"gpuOperator": {"enabled": True}}, fabric={"docaDriverVersion": "host"})
    by = {s.key: s for s in addons.fabric_releases(host)}
    assert by["gpuOperator"].values["driver"]["rdma"] == {"enabled": True, "useHostMofed": True}
    assert "ofedDriver" not in addons.nic_cluster_policy(host)["spec"]


@pytest.mark.parametrize("stack,mode,plugin,resource", [
    ("azure-dev", "shared", "rdmaSharedDevicePlugin", "shared_ib"),
    ("azure-dev", "sriov", "sriovDevicePlugin", "ib"),
    ("oci-dev", "shared", "sriovDevicePlugin", "rdma-vf"),
])
def test_nic_cluster_policy_validates(stack, mode, plugin, resource):
    cfg = load(stack, fabric={"rdmaMode": mode, "docaDriverVersion": "doca3.1.0-25.07-0.9.7.0-0"})
    nic = addons.nic_cluster_policy(cfg)
    assert validation.validate_object(nic) == []
    assert plugin in nic["spec"] and resource in nic["spec"][plugin]["config"]
    assert nic["spec"]["ofedDriver"]["version"] == "doca3.1.0-25.07-0.9.7.0-0"
    assert nic["spec"][plugin]["version"] == "network-operator-v" + config.ADDON_VERSIONS["networkOperator"]
    if stack == "oci-dev":
        assert '"resourcePrefix": "nvidia.com"' in nic["spec"][plugin]["config"]
        assert "multus" in nic["spec"]["secondaryNetwork"] and "cniPlugins" in nic["spec"]["secondaryNetwork"]
        assert nic["spec"]["nvIpam"]["image"] == "nvidia-k8s-ipam" and nic["spec"]["nvIpam"]["enableWebhook"] is False
    else:
        assert "nvIpam" not in nic["spec"] and "secondaryNetwork" not in nic["spec"]


# Kinds we emit without a local schema (no NAD / nv-ipam CRD in schemas/): NOT validated against a schema;
# test_rdma_vf_network checks their structure field by field instead.
NO_SCHEMA_KINDS = {("k8s.cni.cncf.io/v1", "NetworkAttachmentDefinition"), ("nv-ipam.nvidia.com/v1alpha1", "IPPool")}


def test_rdma_vf_network():
    import json
    cfg = load("oci-dev")
    pool, nad, ds = addons.rdma_vf_network(cfg)
    operator_ns = {s.key: s for s in addons.fabric_releases(cfg)}["networkOperator"].namespace
    # nv-ipam pool in the operator's namespace (where nv-ipam reads pools), named by the NAD's ipam.poolName
    assert (pool["apiVersion"], pool["kind"]) == ("nv-ipam.nvidia.com/v1alpha1", "IPPool")
    assert pool["metadata"] == {"name": "rdma-vf", "namespace": operator_ns}
    assert pool["spec"]["subnet"] == "192.168.0.0/16" and pool["spec"]["perNodeBlockSize"] >= 16
    # the NAD: in `default`, named as the pods' Multus annotation names it, tied to the VF resource
    assert (nad["apiVersion"], nad["kind"]) == ("k8s.cni.cncf.io/v1", "NetworkAttachmentDefinition")
    assert nad["metadata"]["name"] == "rdma-vf" and nad["metadata"]["namespace"] == "default"
    assert nad["metadata"]["annotations"] == {"k8s.v1.cni.cncf.io/resourceName": fabric.OCI_VF_RESOURCE}
    profile = fabric.profile_for(cfg, cfg.node_pools[0])
    assert profile.device_network == f"{nad['metadata']['namespace']}/{nad['metadata']['name']}"
    assert set(nad["spec"]) == {"config"} and isinstance(nad["spec"]["config"], str)
    conf = json.loads(nad["spec"]["config"])                       # valid JSON
    assert conf["cniVersion"] == "0.3.1" and conf["name"] == "rdma-vf"
    first, *rest = conf["plugins"]
    assert first["type"] == "host-device" and "device" not in first     # the VF comes from the device plugin
    assert first["ipam"] == {"type": "nv-ipam", "poolName": pool["metadata"]["name"]}
    # oci-hpc-oke sriov-network.yaml metaPlugins: tuning (sysctls, mtu 4220), rdma (exclusive RDMA netns), sbr
    assert [p["type"] for p in rest] == ["tuning", "rdma", "sbr"]
    assert rest[0]["sysctl"]["net.ipv4.conf.all.rp_filter"] == "0"
    assert rest[0]["sysctl"]["net.ipv4.conf.all.accept_local"] == "1" and rest[0]["mtu"] == 4220
    # the rdma CNI binary is installed on the RoCE pools (no NicClusterPolicy component ships it)
    assert (ds["kind"], ds["metadata"]["name"]) == ("DaemonSet", "rdma-cni")
    (c,) = ds["spec"]["template"]["spec"]["containers"]
    assert c["image"].startswith("nvcr.io/nvidia/mellanox/rdma-cni:network-operator-v")
    assert c["volumeMounts"] == [{"name": "cnibin", "mountPath": "/host/opt/cni/bin"}]
    assert ds["spec"]["template"]["spec"]["volumes"] == [{"name": "cnibin", "hostPath": {"path": "/opt/cni/bin"}}]
    assert validation.validate_object(ds) == []
    # metadata that Kubernetes would accept (names, annotation keys)
    for obj in (pool, nad):
        assert (obj["apiVersion"], obj["kind"]) in NO_SCHEMA_KINDS
        assert validation._metadata_errors(obj["metadata"], "metadata", require_name=True, check_name_format=True) == []


def test_oci_device_plugin_selects_the_shapes_fabric_ports():
    """oci-hpc-oke SriovNetworkNodePolicy nicSelector.rootDevices per shape: the device plugin's VF pool is
    limited to those ports (16 on H100.8, 8 on H200.8), not every Mellanox RDMA port."""
    import json

    from multinode.clouds import oci
    for machine, n in (("BM.GPU.H100.8", 16), ("BM.GPU.H200.8", 8)):
        cfg = load("oci-dev", nodePools=[{"name": "gpu", "machine": machine, "nodeCount": 2,
                                          "zone": "Uocm:US-ASHBURN-AD-1", "imageId": "ocid1.image.oc1..x",
                                          "subnetId": "ocid1.subnet.oc1.iad.aaaaaaaaexampleworkersubnet"}],
                   workloads=[])
        conf = json.loads(addons.nic_cluster_policy(cfg)["spec"]["sriovDevicePlugin"]["config"])
        (res,) = conf["resourceList"]
        sel = res["selectors"]
        assert sel["vendors"] == ["15b3"] and sel["isRdma"] is True
        assert sel["rootDevices"] == sorted(oci.FABRIC_ROOT_DEVICES[machine]) and len(sel["rootDevices"]) == n
        assert "0000:0c:00.0" in sel["rootDevices"]
    assert oci.fabric_root_devices(["BM.GPU.H100.8", "BM.GPU.X.8"]) is None      # unknown shape: no guess


@pytest.mark.parametrize("stack,over", [("aws-dev", {}), ("azure-dev", {}), ("gcp-dev", {}), ("existing-dev", {}),
                                        ("oci-dev", {"addons": {"networkOperator": {"enabled": False}}})])
def test_no_rdma_vf_network_elsewhere(stack, over):
    assert addons.rdma_vf_network(load(stack, **over)) == []


def test_gcp_daemonsets_validate_strictly():
    cfg = load("gcp-dev")
    installer, injector = addons.gcp_daemonsets(cfg)
    for ds in (installer, injector):
        assert validation.validate_object(ds) == []
    images = [c["image"] for c in installer["spec"]["template"]["spec"]["initContainers"]]
    assert any(i.endswith("nccl-plugin-gpudirecttcpx-dev:v1.0.15") for i in images)
    assert "nri-device-injector" in injector["spec"]["template"]["spec"]["containers"][0]["image"]


@pytest.mark.parametrize("stack", STACKS)
def test_hypernodes_and_queues_validate(stack):
    cfg = load(stack, queues=[{"name": "training", "weight": 3, "gpus": 16}, {"name": "inference"}])
    hns = volcano_topology.hypernodes(cfg)
    # issue 18: aws-dev (p5) gets its tiers from the cloud's node labels (Volcano's HyperNode discovery), so no
    # pool HyperNode; existing-dev claims no tier. Issue 30: gcp-dev's A3 Mega pool gets GKE's block / subblock
    # labels (cluster-toolkit's levels for A3 Mega); oci-dev gets its pool tier (OKE sets no rdma.* labels: only
    # oci-hpc-oke's labeler DaemonSet does, which this stack does not deploy)
    assert len(hns) == (0 if stack in ("existing-dev", "aws-dev", "gcp-dev") else 1)
    labelled = [p for p in cfg.node_pools if volcano_topology.topology_labels(cfg, p)]
    assert bool(labelled) == (stack in ("aws-dev", "gcp-dev"))
    for hn in hns:
        assert validation.validate_object(hn) == []
        assert hn["spec"]["tier"] == 1
        assert hn["spec"]["members"][0]["selector"]["labelMatch"]["matchLabels"] == {pools.POOL_LABEL: "gpu"}
    qs = volcano_topology.queues(cfg)
    assert [q["metadata"]["name"] for q in qs] == ["training", "inference"]
    assert qs[0]["spec"]["capability"] == {"nvidia.com/gpu": "16"} and qs[0]["spec"]["weight"] == 3
    for q in qs:
        assert validation.validate_object(q) == []


# ---------------------------------------------------------------- components under mocks
@pytest.fixture(scope="module")
def existing_plan(tmp_path_factory):
    return mplan.plan("existing-dev", tmp_path_factory.mktemp("build"))


def test_components_register_with_crd_dependencies(existing_plan):
    regs = {r.name: r for r in existing_plan.registrations}
    urn = {n: r.urn for n, r in regs.items()}
    assert regs["addons"].type == "multinode:index:ClusterAddons" and regs["addons"].parent == urn["multinode"]
    assert regs["fabric"].type == "multinode:index:FabricPolicies" and regs["fabric"].parent == urn["multinode"]
    for name in ("addons-volcano", "addons-lws", "addons-kyverno"):
        assert regs[name].type == "kubernetes:helm.sh/v3:Release" and regs[name].parent == urn["addons"]
        assert "cluster-k8s" in regs[name].provider
    pol = regs["fabric-multinode-fabric-gpu"]
    assert pol.type == "kubernetes:policies.kyverno.io/v1:MutatingPolicy" and pol.parent == urn["fabric"]
    assert urn["addons-kyverno"] in pol.dependencies
    checks = regs["fabric-multinode-fabric-checks"]
    assert checks.type == "kubernetes:policies.kyverno.io/v1:ValidatingPolicy" and checks.parent == urn["fabric"]
    assert urn["addons-kyverno"] in checks.dependencies
    assert not [r for r in regs.values() if r.type.startswith("kubernetes:kyverno.io/")]
    assert urn["addons-volcano"] in regs["addons-lws"].dependencies
    # existing: the cluster already runs its fabric's plugin: no operator is installed
    assert not any(r.name.startswith("fabric-") and r.type == "kubernetes:helm.sh/v3:Release" for r in regs.values())
    for obj in existing_plan.k8s_objects:
        assert validation.validate_object(obj) == [], obj["kind"]


def test_queues_depend_on_volcano_under_mocks(tmp_path):
    src = stackfile.stack_path("existing-dev")
    doc = yaml.safe_load(src.read_text())
    doc["config"]["multinode:queues"] = [{"name": "training", "weight": 2, "gpus": 16}]
    f = tmp_path / "Pulumi.existing-q.yaml"
    f.write_text(yaml.safe_dump(doc))
    res = mplan.plan("existing-q", tmp_path / "build", path=f)
    regs = {r.name: r for r in res.registrations}
    q = regs["fabric-queue-training"]
    assert regs["addons-volcano"].urn in q.dependencies


def test_plan_writes_effective_pods_for_labelled_templates(tmp_path):
    cfg = load("aws-dev")
    tmpl = {"metadata": {"labels": {pools.FABRIC_POD_LABEL: "enabled"}},
            "spec": {"nodeSelector": pools.node_selector(cfg, cfg.node_pools[0]),
                     "containers": [{"name": "vllm", "image": "vllm/vllm-openai:v0.11.0",
                                     "resources": {"limits": {"nvidia.com/gpu": 8}}}]}}
    lws = {"apiVersion": "leaderworkerset.x-k8s.io/v1", "kind": "LeaderWorkerSet",
           "metadata": {"name": "llama-405b", "namespace": "multinode"},
           "spec": {"replicas": 1, "leaderWorkerTemplate": {"size": 2, "leaderTemplate": tmpl, "workerTemplate": tmpl}}}
    other = {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "web"},
             "spec": {"selector": {},
                      "template": {"metadata": {}, "spec": {"containers": [{"name": "c", "image": "x"}]}}}}
    policies = kyverno.fabric_policies(cfg)
    result = mplan.PlanResult("aws-dev", cfg, k8s_objects=[*policies, lws, other])
    written = mplan.write_effective_pods(result, tmp_path)
    assert sorted(p.name for p in written) == ["llama-405b-leader.yaml", "llama-405b-worker.yaml"]
    for p in written:
        eff = yaml.safe_load(p.read_text())
        assert validation.validate_pod_spec(eff["spec"]) == []
        c = eff["spec"]["containers"][0]
        assert c["resources"]["limits"]["vpc.amazonaws.com/efa"] == "32"
        assert {"name": "NCCL_NET", "value": "AWS Libfabric"} in c["env"]
    # the effective pod is what the rendered policy's CEL says: edit the device expression in the rendered
    # MutatingPolicy (32 EFA per 8 GPUs -> 16) and the effective pod follows; drop the NCCL_NET mutation and the
    # pin disappears
    edited = copy.deepcopy(policies)
    muts = edited[0]["spec"]["mutations"]
    (dev,) = [m for m in muts if "vpc.amazonaws.com~1efa" in m["jsonPatch"]["expression"]]
    assert " * 32 + 8 - 1) / 8)" in dev["jsonPatch"]["expression"]
    dev["jsonPatch"]["expression"] = dev["jsonPatch"]["expression"].replace(" * 32 + 8 - 1) / 8)",
                                                                            " * 16 + 8 - 1) / 8)")
    edited[0]["spec"]["mutations"] = [m for m in muts if "env NCCL_NET" not in m["jsonPatch"]["expression"]]
    written = mplan.write_effective_pods(mplan.PlanResult("aws-dev", cfg, k8s_objects=[*edited, lws, other]),
                                         tmp_path / "edited")
    c = yaml.safe_load(written[0].read_text())["spec"]["containers"][0]
    assert c["resources"]["limits"]["vpc.amazonaws.com/efa"] == "16"
    assert "NCCL_NET" not in {e["name"] for e in c["env"]} and "FI_PROVIDER" in {e["name"] for e in c["env"]}
    # and the stack's ValidatingPolicy refuses that pod (no pin), admits the one the real policy produced
    checks = policies[-1]
    assert kyverno.refused_by(checks, {"metadata": tmpl["metadata"], "spec": {**tmpl["spec"], "containers": [c]}}) \
        == [kyverno.FABRIC_RULE]
    good = yaml.safe_load((tmp_path / "llama-405b-leader.yaml").read_text())
    assert kyverno.denials(checks, good) == []


_PROGRAM = '''
from multinode import checks, stackfile
from components.kubernetes.addons import ClusterAddons
from components.kubernetes.fabric import FabricPolicies
raw, secrets = stackfile.read_pulumi_config()
cfg = checks.load(raw, secrets)
addons = ClusterAddons("addons", cfg)
FabricPolicies("fabric", cfg, addons)
'''


@pytest.mark.parametrize("stack,operator", [("aws-dev", "fabric-aws-efa-k8s-device-plugin"),
                                            ("azure-dev", "fabric-network-operator"),
                                            ("gcp-dev", None), ("oci-dev", "fabric-network-operator")])
def test_components_render_for_every_cloud_under_mocks(tmp_path, stack, operator):
    """ClusterAddons + FabricPolicies need only cfg and pool data: run them for each cloud's stack."""
    from multinode import recording
    prog = tmp_path / "__main__.py"
    prog.write_text(_PROGRAM)
    raw, secrets, wire = stackfile.read_stack_file(stackfile.stack_path(stack))
    wire = dict(wire)
    wire["multinode:queues"] = '[{"name": "training", "gpus": 16}]'
    run = recording.run_program(wire, [f"multinode:{k}" for k in secrets], stack, program=prog)
    regs = {r.name: r for r in run.registrations}
    urn = {n: r.urn for n, r in regs.items()}
    if operator:
        assert regs[operator].type == "kubernetes:helm.sh/v3:Release" and regs[operator].parent == urn["fabric"]
    other = {"aws-dev": "fabric-aws-efa-k8s-device-plugin", "azure-dev": "fabric-network-operator"}
    for s, name in other.items():
        if s != stack and name != operator:
            assert name not in regs
    pol = regs["fabric-multinode-fabric-gpu"]
    assert urn["addons-kyverno"] in pol.dependencies
    assert urn["addons-volcano"] in regs["fabric-queue-training"].dependencies
    if stack in ("azure-dev", "oci-dev"):    # aws-dev and gcp-dev: tiers discovered from node labels (issues 18, 30)
        assert urn["addons-volcano"] in regs["fabric-hypernode-gpu-tier1"].dependencies
    else:
        assert "fabric-hypernode-gpu-tier1" not in regs
    if stack in ("azure-dev", "oci-dev"):
        assert urn["fabric-network-operator"] in regs["fabric-nic-cluster-policy"].dependencies
    if stack == "gcp-dev":
        assert {"fabric-nccl-tcpxo-installer", "fabric-device-injector"} <= set(regs)
    if stack == "oci-dev":
        # the rdma-vf network waits for the operator and the NicClusterPolicy (Multus / nv-ipam bring the CRDs)
        for n in ("fabric-networkattachmentdefinition-rdma-vf", "fabric-ippool-rdma-vf"):
            assert regs[n].parent == urn["fabric"]
            assert {urn["fabric-network-operator"], urn["fabric-nic-cluster-policy"]} <= set(regs[n].dependencies)
        assert regs["fabric-networkattachmentdefinition-rdma-vf"].type == (
            "kubernetes:k8s.cni.cncf.io/v1:NetworkAttachmentDefinition")
        assert regs["fabric-daemonset-rdma-cni"].type == "kubernetes:apps/v1:DaemonSet"
    else:
        assert "fabric-networkattachmentdefinition-rdma-vf" not in regs
    k8s = [r.inputs for r in run.registrations if mplan.is_k8s_object(r)]
    assert k8s
    for obj in k8s:
        if (obj["apiVersion"], obj["kind"]) in NO_SCHEMA_KINDS:
            continue                    # structure checked in test_rdma_vf_network (no schema here)
        assert validation.validate_object(obj) == [], (obj["kind"], validation.validate_object(obj))


# ---------------------------------------------------------------- versions and CRDs (issue 17)
def test_kai_from_its_new_chart_home_with_groves_values():
    cfg = load("existing-dev", addons={"grove": {"enabled": True}, "kai": {"enabled": True},
                                       "trainer": {"enabled": True}})
    kai = {s.key: s for s in addons.addon_releases(cfg)}["kai"]
    assert kai.chart == "oci://ghcr.io/kai-scheduler/kai-scheduler/kai-scheduler" and kai.repository is None
    assert addons._numeric_version(kai.version) >= (0, 17, 0)
    # Grove's README: turn KAI's stale-gang eviction off; the key exists in KAI v0.17.0's values.yaml
    assert kai.values == {"scheduler": {"args": {"default-staleness-grace-period": "-1s"}}}
    assert validation.helm_values_unknown_keys("kai-scheduler", kai.values) == []
    assert validation.helm_values_unknown_keys("kai-scheduler", {"scheduler": {"argz": {}}}) == ["scheduler.argz"]
    # without Grove, KAI keeps its upstream default
    alone = load("aws-dev", addons={"grove": {"enabled": False}, "kai": {"enabled": True}})
    assert {s.key: s for s in addons.addon_releases(alone)}["kai"].values == {}


def test_old_kai_under_grove_is_an_advisory():
    cfg = load("existing-dev", addons={"grove": {"enabled": True}, "kai": {"enabled": True, "version": "v0.13.0"},
                                       "trainer": {"enabled": True}})
    (p,) = [p for p in checks.advisories(cfg) if p.path == "addons.kai.version"]
    assert "0.15.2" in p.message
    ok = load("existing-dev", addons={"grove": {"enabled": True}, "kai": {"enabled": True, "version": "0.15.2"},
                                      "trainer": {"enabled": True}})
    assert not [p for p in checks.advisories(ok) if p.path == "addons.kai.version"]


def test_volcano_pinned_past_the_scheduler_dos():
    # GHSA-j38h-7pfq-cxmw: v1.15.0 and v1.15.1 affected, fixed in v1.15.2
    assert addons._numeric_version(config.ADDON_VERSIONS["volcano"]) >= (1, 15, 2)


def test_pinned_crds_are_stored():
    """Every add-on whose CRDs the program applies has the CRD files of its pinned version in schemas/."""
    from multinode.manifests import crds
    assert set(crds.OWNED) == {"lws", "grove"}
    for key in crds.OWNED:
        stored = crds.STORED[key][config.ADDON_VERSIONS[key]]
        for path in stored.paths():
            doc = validation.crd_document(path)
            assert doc is not None and doc["kind"] == "CustomResourceDefinition", path


def _crd_regs(res):
    return {r.inputs["metadata"]["name"]: r for r in res.registrations
            if r.type == "kubernetes:apiextensions.k8s.io/v1:CustomResourceDefinition"}


def test_crds_are_their_own_resources_before_the_release_and_the_workloads(existing_plan):
    from multinode import recording
    from multinode.manifests import crds
    regs = {r.name: r for r in existing_plan.registrations}
    crd = _crd_regs(existing_plan)
    # only the add-ons whose chart never upgrades its crds/ (LWS, Grove); Volcano/Kyverno/KAI own theirs
    assert set(crd) == {"leaderworkersets.leaderworkerset.x-k8s.io", "podcliquesets.grove.io", "podcliques.grove.io",
                        "podcliquescalinggroups.grove.io", "clustertopologybindings.grove.io",
                        "podgangs.scheduler.grove.io"}
    # one yaml/v2 ConfigGroup per add-on under the add-ons component; each CRD is a resource the provider
    # registers under its group, named <prefix>-<CRD name>
    groups = {n: r for n, r in regs.items() if r.type == recording.CONFIG_GROUP}
    assert set(groups) == {"addons-crds-lws", "addons-crds-grove"}
    assert all(g.parent == regs["addons"].urn and not g.custom and "cluster-k8s" in g.provider
               for g in groups.values())
    lws = crd["leaderworkersets.leaderworkerset.x-k8s.io"]
    assert lws.parent == groups["addons-crds-lws"].urn and "cluster-k8s" in lws.provider
    assert lws.name == "addons-crd-leaderworkersets.leaderworkerset.x-k8s.io" and lws.custom
    assert {crd[n].parent for n in crd if "grove" in n} == {groups["addons-crds-grove"].urn}
    upstream = validation.crd_document(validation.SCHEMA_DIR / "lws" / "leaderworkerset.x-k8s.io_leaderworkersets.yaml")
    assert lws.inputs["spec"] == upstream["spec"]                 # the stored upstream file, unchanged
    assert lws.inputs["metadata"]["annotations"] == {
        **upstream["metadata"]["annotations"], crds.PATCH_FORCE: "true", crds.SOURCE_ANNOTATION: "lws@0.10.0"}
    # the release waits for its CRDs' group; Helm still installs the chart's other crds/ (DisaggregatedSet)
    assert groups["addons-crds-lws"].urn in regs["addons-lws"].dependencies
    assert "skipCrds" not in regs["addons-lws"].inputs
    assert groups["addons-crds-grove"].urn in regs["addons-grove"].dependencies
    # every custom resource of those kinds waits for its CRD's group (the SDK records a dependency on the
    # add-ons component as one on each of its children; the engine waits for a ConfigGroup's children)
    for kind, group in (("LeaderWorkerSet", "addons-crds-lws"), ("PodCliqueSet", "addons-crds-grove")):
        objs = [r for r in existing_plan.registrations if mplan.is_k8s_object(r) and r.inputs["kind"] == kind]
        assert objs, kind
        for r in objs:
            assert groups[group].urn in r.dependencies, r.name
    # ... and build/ writes the CRDs before every object (apply_order follows a group to its children)
    order = k8sfiles.ordered_files(existing_plan.out_dir / "k8s")        # k8s/apply-order.txt
    written_kinds = [yaml.safe_load(p.read_text())["kind"] for p in order]
    assert written_kinds[:len(crd)] == ["CustomResourceDefinition"] * len(crd)
    # the written plan keeps the CRD short: group/names/versions + the digest of the full spec
    written = list((existing_plan.out_dir / "k8s").glob("CustomResourceDefinition-leaderworkersets*.yaml"))
    assert len(written) == 1 and written[0].stat().st_size < 5000
    assert "sha256" in written[0].read_text().splitlines()[0]


def test_a_version_bump_changes_the_crd_resource(tmp_path, monkeypatch):
    """Bumping addons.lws.version to a release whose CRDs are stored changes the registered CRD (here a
    copy of the v0.10.0 file with one schema description changed stands in for the next release)."""
    from multinode.manifests import crds
    src = validation.SCHEMA_DIR / "lws" / "leaderworkerset.x-k8s.io_leaderworkersets.yaml"
    nxt = tmp_path / "lws-next"
    nxt.mkdir()
    text = src.read_text()
    assert "Number of ready replicas" in text
    (nxt / src.name).write_text(text.replace("Number of ready replicas", "Number of ready groups", 1))
    stored = dict(crds.STORED["lws"])
    stored["0.11.0"] = crds.CrdSet("lws", "0.11.0", str(nxt), (src.name,), chart_crds_complete=False)
    monkeypatch.setitem(crds.STORED, "lws", stored)
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    old = _crd_regs(_plan_with(tmp_path / "a", "existing-dev"))["leaderworkersets.leaderworkerset.x-k8s.io"]
    new = _crd_regs(_plan_with(tmp_path / "b", "existing-dev", {"lws": {"version": "0.11.0"}}))[
        "leaderworkersets.leaderworkerset.x-k8s.io"]
    # the same resource (URN but for the stack name), so Pulumi updates it in place
    assert old.urn.split("::", 2)[2] == new.urn.split("::", 2)[2]
    assert old.inputs["spec"] != new.inputs["spec"]
    assert new.inputs["metadata"]["annotations"][crds.SOURCE_ANNOTATION] == "lws@0.11.0"
    cols = new.inputs["spec"]["versions"][0]["additionalPrinterColumns"]
    assert cols[0]["description"] == "Number of ready groups"


def test_unstored_version_falls_back_to_helm_with_an_advisory(tmp_path):
    res = _plan_with(tmp_path, "existing-dev", {"lws": {"version": "0.9.0"}})
    assert res.exit_code == 0, res.error
    assert "leaderworkersets.leaderworkerset.x-k8s.io" not in _crd_regs(res)
    assert "podcliquesets.grove.io" in _crd_regs(res)              # Grove's are still applied
    assert any(a.startswith("addons.lws.version") and "never upgrades" in a for a in res.advisories)


_SEEN: dict = {}     # filled by the program test_crds_for_a_kind_under_mocks runs


_CRDS_FOR_PROGRAM = """
from components.kubernetes.addons import ClusterAddons
from tests import test_addons as T

comp = ClusterAddons("addons", T.load("existing-dev"))
for api, kind in (("leaderworkerset.x-k8s.io/v1", "LeaderWorkerSet"), ("grove.io/v1alpha1", "PodCliqueSet"),
                  ("batch.volcano.sh/v1alpha1", "Job"), ("apps/v1", "Deployment")):
    T._SEEN[kind] = [r._name for r in comp.crds_for(api, kind)]
T._SEEN["crd_ready(grove.io)"] = [r._name for r in comp.crd_ready("grove.io")]
T._SEEN["counts"] = {k: len(v) for k, v in comp.crds.items()}
"""


def test_crds_for_a_kind_under_mocks(tmp_path):
    """ClusterAddons.crds_for(api_version, kind): the CRD resource of that kind plus its add-on's release.
    Run as a program under the recording mocks, which wait for every registration to finish."""
    from multinode import recording
    program = tmp_path / "crds_for_program.py"
    program.write_text(_CRDS_FOR_PROGRAM)
    _SEEN.clear()
    recording.run_program({"multinode:cloud": "existing"}, [], "crds-for", program=program)
    assert _SEEN["LeaderWorkerSet"] == ["addons-crds-lws", "addons-lws"]
    assert _SEEN["PodCliqueSet"] == ["addons-crds-grove", "addons-grove"]
    assert _SEEN["Job"] == ["addons-volcano"]                  # Volcano's chart owns its CRDs
    assert _SEEN["Deployment"] == []
    # Grove's CRDs are in two API groups (grove.io, scheduler.grove.io), all in the one ConfigGroup
    assert _SEEN["crd_ready(grove.io)"] == ["addons-crds-grove", "addons-grove"]
    assert _SEEN["counts"] == {"lws": 1, "grove": 1}


# ---------------------------------------------------------------- issue 30
@pytest.mark.parametrize("stack,kind", [("azure-dev", "infiniband"), ("oci-dev", "roce")])
def test_nic_cluster_policy_runs_only_on_the_fabric_pools(stack, kind):
    """The policy's DaemonSets (DOCA driver, device plugins) select the fabric pools' own label, so a CPU node with
    a Mellanox NIC (AKS Accelerated Networking) is not eligible; the label is the one the pools carry."""
    cfg = load(stack)
    nic = addons.nic_cluster_policy(cfg)
    assert validation.validate_object(nic) == []
    (term,) = nic["spec"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"]
    (expr,) = term["matchExpressions"]
    assert expr == {"key": pools.FABRIC_NODE_LABEL, "operator": "In", "values": [kind]}
    pool = cfg.node_pools[0]
    assert pools.node_labels(cfg, pool, cfg.machine(pool))[expr["key"]] in expr["values"]


def test_doca_driver_upgrades_itself_one_drained_node_at_a_time():
    nic = addons.nic_cluster_policy(load("azure-dev"))
    policy = nic["spec"]["ofedDriver"]["upgradePolicy"]
    assert policy["autoUpgrade"] is True and policy["maxParallelUpgrades"] == 1
    assert policy["drain"]["enable"] is True and policy["drain"]["deleteEmptyDir"] is True
    assert validation.validate_object(nic) == []


@pytest.mark.parametrize("machine,name,image", [
    ("a3-highgpu-8g", "nccl-tcpx-installer", "gpudirect-tcpx/nccl-plugin-gpudirecttcpx-dev:v3.1.9"),
    ("a3-ultragpu-8g", "nccl-rdma-installer", "gpudirect-gib/nccl-plugin-gib:v1.1.1"),
])
def test_tcpx_and_gib_pools_get_their_plugin_installer(machine, name, image):
    """issue 30: the pinned NCCL_NET plugin of TCPX / gIB pools comes from the host, so the host needs the
    installer (container-engine-accelerators gpudirect-tcpx/ and gpudirect-rdma/ installers)."""
    raw, secrets, _ = stackfile.read_stack_file(stackfile.stack_path("gcp-dev"))
    raw = copy.deepcopy(dict(raw))
    raw["nodePools"][0]["machine"] = machine
    raw["workloads"] = []
    cfg = checks.load(raw, secrets)
    (ds,) = addons.gcp_daemonsets(cfg)                 # no TCPXO pool: no TCPXO installer, no NRI injector
    assert ds["metadata"]["name"] == name and validation.validate_object(ds) == []
    spec = ds["spec"]["template"]["spec"]
    assert spec["initContainers"][0]["image"].endswith(image)
    (term,) = spec["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"]
    assert term["matchExpressions"][0]["values"] == ["gpu"]
    mounts = {m["mountPath"] for m in spec["initContainers"][0]["volumeMounts"]}
    host = {v["hostPath"]["path"] for v in spec["volumes"]}
    profile = fabric.profile_for(cfg, cfg.node_pools[0])
    # every host folder the fabric policy mounts into the pod is one this installer fills
    policy_host = {v["hostPath"]["path"] for v in profile.volumes if "hostPath" in v and "bin" in v["hostPath"]["path"]}
    assert policy_host and all(any(h == p or p.startswith(h + "/") for h in host) for p in policy_host), \
        (policy_host, host, mounts)


# ---------------------------------------------------------------------------------------------------- issue 40
def _alpha(v: str) -> tuple[int, ...]:
    """(0, 1, 0, 13) from "0.1.0-alpha.13"."""
    core, _, pre = v.lstrip("v").partition("-alpha.")
    return tuple(int(x) for x in core.split(".")) + (int(pre.split("-")[0]),)


def test_grove_and_kai_pins_meet_the_floor_dynamo_1_5_documents():
    """ai-dynamo/dynamo PR #14553 / docs/kubernetes/installation-guide.md: dynamo-platform 1.5.x needs KAI >= v0.17.0
    and Grove >= v0.1.0-alpha.13. On main Grove was pinned at alpha.11."""
    from multinode.config import ADDON_VERSIONS
    assert ADDON_VERSIONS["dynamo"].startswith("1.5.")
    assert _alpha(ADDON_VERSIONS["grove"]) >= (0, 1, 0, 13)
    assert addons._numeric_version(ADDON_VERSIONS["kai"]) >= (0, 17, 0)


def test_the_grove_crds_say_which_release_they_were_read_at_and_the_plan_says_so():
    """The pin is newer than the stored CRDs: the set records alpha.11, the CRDs we apply are annotated with it,
    Grove's own CRD installer is on, and every Grove stack's plan names the gap (never a silent pass)."""
    from multinode.manifests import crds
    cfg = load("gcp-dev")
    assert cfg.addons.grove.enabled
    owned = crds.crd_set(cfg, "grove")
    assert (owned.version, owned.files_version, owned.behind) == ("0.1.0-alpha.13", "0.1.0-alpha.11", True)
    anns = {o["metadata"]["annotations"][crds.SOURCE_ANNOTATION] for o in crds.crd_objects(owned)}
    assert anns == {"grove@0.1.0-alpha.11"}
    grove = next(s for s in addons.addon_releases(cfg) if s.key == "grove")
    assert grove.version == "v0.1.0-alpha.13" and grove.values == {"crdInstaller": {"enabled": True}}
    assert not grove.skip_crds
    assert validation.helm_values_unknown_keys("grove", grove.values) == []
    (gap,) = [p for p in crds.advisories(cfg) if p.path == "addons.grove.version"]
    assert "read at 0.1.0-alpha.11" in gap.message and "0.1.0-alpha.13" in gap.message
    # a stack that pins the stored release has no gap and leaves the installer off (the chart default)
    old = load("gcp-dev", addons={"grove": {"enabled": True, "version": "0.1.0-alpha.11"}})
    assert not crds.crd_set(old, "grove").behind
    assert next(s for s in addons.addon_releases(old) if s.key == "grove").values == {}
    assert [p for p in crds.advisories(old) if p.path == "addons.grove.version"] == []


# Kyverno chart -> the Kyverno release it deploys (kyverno/kyverno@v1.19.1 charts/kyverno/Chart.yaml: version 3.9.1,
# appVersion v1.19.1; the stored 3.9.0 chart: appVersion v1.19.0).
KYVERNO_APP = {"3.9.0": "v1.19.0", "3.9.1": "v1.19.1"}


def test_kyverno_runs_v1_19_1_in_the_chart_and_in_conformance():
    """v1.19.1 has security fixes over v1.19.0; on main the chart pin was 3.9.0 and conformance/kyverno built
    v1.19.0."""
    from pathlib import Path

    from multinode.config import ADDON_VERSIONS
    assert KYVERNO_APP[ADDON_VERSIONS["kyverno"]] == "v1.19.1"
    gomod = (Path(__file__).resolve().parent.parent / "conformance" / "kyverno" / "go.mod").read_text()
    required = {ln.split()[0]: ln.split()[1] for ln in gomod.splitlines()
                if ln.startswith("\tgithub.com/kyverno/kyverno ")}
    assert required == {"github.com/kyverno/kyverno": KYVERNO_APP[ADDON_VERSIONS["kyverno"]]}


def test_a_grove_or_kai_override_below_the_dynamo_floor_gets_a_note():
    from multinode.config import ADDON_VERSIONS
    base = {"dynamo": {"enabled": True}, "grove": {"enabled": True}, "kai": {"enabled": True}}
    assert addons.dynamo_floor_advisories(load("dynamo-dev", addons=base)) == []
    old = copy.deepcopy(base)
    old["grove"]["version"] = "0.1.0-alpha.11"
    old["kai"]["version"] = "v0.16.9"
    notes = {p.path: p.message for p in addons.dynamo_floor_advisories(load("dynamo-dev", addons=old))}
    assert set(notes) == {"addons.grove.version", "addons.kai.version"}
    assert "below 0.1.0-alpha.13" in notes["addons.grove.version"]
    rc = copy.deepcopy(base)
    rc["grove"]["version"] = "v0.1.0-alpha.13-rc1"        # a release candidate is below its release
    assert [p.path for p in addons.dynamo_floor_advisories(load("dynamo-dev", addons=rc))] == ["addons.grove.version"]
    assert ADDON_VERSIONS["grove"] == "0.1.0-alpha.13"
