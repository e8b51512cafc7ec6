"""FabricProfile per cloud, the Kyverno fabric policies, and the effective pods (issue 4)."""
from __future__ import annotations

import copy
import dataclasses

import pytest

from multinode import catalog, checks, config, fabric, pools, stackfile
from multinode import schema_check as validation
from multinode.manifests import effective_pod, kyverno

STACKS = ["aws-dev", "azure-dev", "gcp-dev", "oci-dev", "existing-dev"]


def load(stack: str, **over) -> config.StackConfig:
    raw, secrets, _ = stackfile.read_stack_file(stackfile.stack_path(stack))
    raw = dict(raw)
    raw.update(over)
    return checks.load(raw, secrets)


def gpu_container(name="engine", gpus=8, **extra):
    c = {"name": name, "image": "vllm/vllm-openai:v0.11.0",
         "resources": {"limits": {"nvidia.com/gpu": gpus}}}
    c.update(extra)
    return c


def lws_like(cfg: config.StackConfig):
    """A LeaderWorkerSet-shaped pair of pod templates (leader and worker both hold GPUs)."""
    pool = cfg.node_pools[0]
    meta = {"labels": {pools.FABRIC_POD_LABEL: pools.FABRIC_POD_LABEL_VALUE}}
    spec = {"nodeSelector": pools.node_selector(cfg, pool), "tolerations": pools.tolerations(),
            "containers": [gpu_container(env=[{"name": "MODEL", "value": "x"}]),
                           {"name": "metrics", "image": "busybox:1.36"}]}
    return {"leader": {"metadata": copy.deepcopy(meta), "spec": copy.deepcopy(spec)},
            "worker": {"metadata": copy.deepcopy(meta), "spec": copy.deepcopy(spec)}}


def mutating(cfg):
    return [p for p in kyverno.fabric_policies(cfg) if p["kind"] == kyverno.MUTATING_KIND]


def checks_policy(cfg):
    (vp,) = [p for p in kyverno.fabric_policies(cfg) if p["kind"] == kyverno.VALIDATING_KIND]
    return vp


def env_of(container):
    return {e["name"]: e.get("value") for e in container.get("env", [])}


# ---------------------------------------------------------------- profile facts (hardware.md section 2)
def test_efa_profile_matches_hardware_md():
    cfg = load("aws-dev")
    p = fabric.profile_for(cfg, cfg.node_pools[0])
    assert (p.device_resource, p.devices_per_node, p.nccl_net) == ("vpc.amazonaws.com/efa", 32, "AWS Libfabric")
    assert p.env["FI_PROVIDER"] == "efa" and p.env["FI_EFA_FORK_SAFE"] == "1"
    assert p.env["NCCL_BUFFSIZE"] == "8388608" and p.env["NCCL_P2P_NET_CHUNKSIZE"] == "524288"
    # issue 30: no fixed tuner path (the EFA installer moved it; aws-ofi-nccl builds the tuner into the pinned
    # net plugin, where NCCL >= 2.21 finds it when NCCL_TUNER_PLUGIN is unset)
    assert "NCCL_TUNER_PLUGIN" not in p.env
    # issue 14: one EFA memory setup, libfabric huge pages off and no hugepages-2Mi request (was 5120Mi, which
    # reserved memory FI_EFA_USE_HUGE_PAGE=0 never used and made the API server refuse the pod)
    assert p.extra_resources == {} and p.env["FI_EFA_USE_HUGE_PAGE"] == "0"
    assert p.env["NCCL_NET"] == "AWS Libfabric"


@pytest.mark.parametrize("machine,ignore", [("Standard_ND96isr_H100_v5", True), ("Standard_ND96asr_v4", True),
                                            ("Standard_ND128isr_NDR_GB200_v6", False)])
def test_azure_ignores_cpu_affinity_where_azhpc_images_does(machine, ignore):
    """issue 30: azhpc-images ndv4.sh / ndv5.sh set NCCL_IGNORE_CPU_AFFINITY=1 with the topology file; ndv6 none."""
    cfg = load("azure-dev", nodePools=[{"name": "gpu", "machine": machine, "nodeCount": 2}], workloads=[])
    p = fabric.profile_for(cfg, cfg.node_pools[0])
    assert (p.env.get("NCCL_IGNORE_CPU_AFFINITY") == "1") is ignore
    assert ("NCCL_TOPO_FILE" in p.env) is ignore


@pytest.mark.parametrize("machine,efa", [("p5en.48xlarge", 16), ("p6e-gb200.36xlarge", 4), ("p4d.24xlarge", 4)])
def test_efa_count_comes_from_catalog(machine, efa):
    cfg = load("aws-dev", nodePools=[{"name": "gpu", "machine": machine, "nodeCount": 2, "zone": "us-east-1a",
                                      "subnetId": "subnet-0a1b2c3d4e5f60718"}], workloads=[])
    p = fabric.profile_for(cfg, cfg.node_pools[0])
    assert p.devices_per_node == efa == catalog.lookup(machine).fabric_nics


def test_azure_ib_profile_and_topology_per_sku():
    cfg = load("azure-dev")
    p = fabric.profile_for(cfg, cfg.node_pools[0])
    assert (p.device_resource, p.devices_per_node, p.nccl_net) == ("rdma/shared_ib", 1, "IB")
    assert p.env["NCCL_IB_DISABLE"] == "0" and p.env["NCCL_NET_GDR_LEVEL"] == "SYS"
    assert p.env["CUDA_DEVICE_ORDER"] == "PCI_BUS_ID" and p.env["NCCL_IB_PCI_RELAXED_ORDERING"] == "1"
    assert p.env["NCCL_TOPO_FILE"] == "/opt/nvidia-topology/ndv5-topo.xml"     # ND H100 v5
    assert "IPC_LOCK" in p.capabilities
    a100 = load("azure-dev", nodePools=[{"name": "gpu", "machine": "Standard_ND96amsr_A100_v4", "nodeCount": 2}],
                workloads=[])
    assert fabric.profile_for(a100, a100.node_pools[0]).env["NCCL_TOPO_FILE"].endswith("ndv4-topo.xml")
    sriov = load("azure-dev", fabric={"rdmaMode": "sriov"})
    ps = fabric.profile_for(sriov, sriov.node_pools[0])
    assert (ps.device_resource, ps.devices_per_node) == ("rdma/ib", 8)


def test_gcp_tcpxo_profile_uses_pool_networks():
    cfg = load("gcp-dev")
    pool = cfg.node_pools[0]
    p = fabric.profile_for(cfg, pool)
    assert p.nccl_net == "FasTrak" and p.device_resource is None
    nets = pools.gcp_network_names(pool, 8)
    assert p.networks == nets
    ann = p.annotations["networking.gke.io/interfaces"]
    for i, n in enumerate(nets, start=1):
        assert f'"interfaceName":"eth{i}","network":"{n}"' in ann
    assert p.annotations["networking.gke.io/default-interface"] == "eth0"
    assert "/dev/nvidia7" in p.annotations["devices.gke.io/container.tcpxo-daemon"]
    assert p.env["NCCL_FASTRAK_IFNAME"] == "eth1,eth2,eth3,eth4,eth5,eth6,eth7,eth8"
    for k, v in {"NCCL_FASTRAK_CTRL_DEV": "eth0", "NCCL_CROSS_NIC": "0", "NCCL_PROTO": "Simple,LL128",
                 "NCCL_MIN_NCHANNELS": "4", "NCCL_FASTRAK_NUM_FLOWS": "2", "NCCL_NET_GDR_LEVEL": "PIX",
                 "NCCL_FASTRAK_USE_LLCM": "1", "NCCL_BUFFSIZE": "8388608"}.items():
        assert p.env[k] == v
    (sidecar,) = p.init_containers
    assert sidecar["restartPolicy"] == "Always" and "tcpgpudmarxd-dev:v1.0.21" in sidecar["image"]
    # issue 30: RxDM v1.0.21 as its repository runs it (`num_nics` retired since v1.0.20)
    assert sidecar["args"][0].endswith("--num_hops=2") and "--num_nics" not in sidecar["args"][0]


def test_gcp_rdma_profile():
    cfg = load("gcp-dev", nodePools=[{"name": "gpu", "machine": "a3-ultragpu-8g", "nodeCount": 2,
                                      "zone": "us-central1-c"}], workloads=[])
    p = fabric.profile_for(cfg, cfg.node_pools[0])
    assert p.nccl_net == "gIB"
    assert {"name": "fabric-gib", "hostPath": {"path": "/home/kubernetes/bin/gib"}} in p.volumes
    assert '"interfaceName":"eth2"' in p.annotations["networking.gke.io/interfaces"]


def test_oci_profile_vfs_and_multus():
    cfg = load("oci-dev")
    p = fabric.profile_for(cfg, cfg.node_pools[0])
    assert (p.device_resource, p.devices_per_node, p.nccl_net) == ("nvidia.com/rdma-vf", 16, "IB")
    # the NAD lives in `default` (manifests/addons.rdma_vf_network): pods of any namespace name it with it.
    # No fixed annotation: the policy writes one entry per VF the pod requests (test_oci_networks_follow_vfs).
    assert p.device_network == "default/rdma-vf" and "k8s.v1.cni.cncf.io/networks" not in p.annotations
    for k, v in {"NCCL_IB_GID_INDEX": "3", "NCCL_IB_TC": "41", "NCCL_IB_SL": "0", "NCCL_IB_TIMEOUT": "22",
                 "NCCL_IB_SPLIT_DATA_ON_QPS": "0", "NCCL_CUMEM_ENABLE": "0", "NCCL_SOCKET_IFNAME": "eth0",
                 "NCCL_IGNORE_CPU_AFFINITY": "1", "NCCL_IB_HCA": "mlx5"}.items():
        assert p.env[k] == v
    h200 = load("oci-dev", nodePools=[{"name": "gpu", "machine": "BM.GPU.H200.8", "nodeCount": 2,
                                       "zone": "Uocm:US-ASHBURN-AD-1", "imageId": "ocid1.image.oc1..x",
                                       "subnetId": "ocid1.subnet.oc1.iad.aaaaaaaaexampleworkersubnet"}], workloads=[])
    assert fabric.profile_for(h200, h200.node_pools[0]).devices_per_node == 8


OCI_POOL = {"name": "gpu", "nodeCount": 2, "zone": "Uocm:US-ASHBURN-AD-1", "imageId": "ocid1.image.oc1..x",
            "subnetId": "ocid1.subnet.oc1.iad.aaaaaaaaexampleworkersubnet"}


@pytest.mark.parametrize("machine,vfs_per_node", [("BM.GPU.H100.8", 16), ("BM.GPU.H200.8", 8)])
@pytest.mark.parametrize("gpus", [1, 2, 4, 8])
def test_oci_networks_follow_vfs(machine, vfs_per_node, gpus):
    """The effective pod (the rendered policy applied) lists exactly as many rdma-vf attachments as VFs it
    requests, for every GPU count (oci-hpc-oke: one `rdma-vf` entry per requested VF)."""
    cfg = load("oci-dev", nodePools=[{**OCI_POOL, "machine": machine}], workloads=[])
    profile = fabric.profile_for(cfg, cfg.node_pools[0])
    pod = {"metadata": {"labels": {pools.FABRIC_POD_LABEL: pools.FABRIC_POD_LABEL_VALUE},
                        "annotations": {"other": "kept"}},
           "spec": {"nodeSelector": pools.node_selector(cfg, cfg.node_pools[0]),
                    "containers": [gpu_container(gpus=gpus), {"name": "sidecar", "image": "busybox:1.36"}]}}
    out = effective_pod.apply_profile_to_template(pod, profile)
    vfs = int(out["spec"]["containers"][0]["resources"]["limits"]["nvidia.com/rdma-vf"])
    assert vfs == gpus * vfs_per_node // 8
    nets = out["metadata"]["annotations"]["k8s.v1.cni.cncf.io/networks"].split(",")
    assert nets == ["default/rdma-vf"] * vfs
    assert out["metadata"]["annotations"]["other"] == "kept"
    assert "nvidia.com/rdma-vf" not in (out["spec"]["containers"][1].get("resources") or {}).get("limits", {})


def test_oci_networks_sum_over_gpu_containers_and_skip_gpu_less_pods():
    cfg = load("oci-dev", nodePools=[{**OCI_POOL, "machine": "BM.GPU.H100.8"}], workloads=[])
    profile = fabric.profile_for(cfg, cfg.node_pools[0])
    meta = {"labels": {pools.FABRIC_POD_LABEL: pools.FABRIC_POD_LABEL_VALUE}}
    sel = pools.node_selector(cfg, cfg.node_pools[0])
    two = {"metadata": dict(meta), "spec": {"nodeSelector": sel, "containers": [
        gpu_container("a", gpus=1), gpu_container("b", gpus=3)]}}
    out = effective_pod.apply_profile_to_template(two, profile)
    assert out["metadata"]["annotations"]["k8s.v1.cni.cncf.io/networks"].split(",") == ["default/rdma-vf"] * 8
    none = {"metadata": dict(meta), "spec": {"nodeSelector": sel, "containers": [{"name": "c", "image": "x"}]}}
    out = effective_pod.apply_profile_to_template(none, profile)
    assert "k8s.v1.cni.cncf.io/networks" not in (out["metadata"].get("annotations") or {})


def test_fabric_disabled_gives_nothing():
    cfg = load("aws-dev", fabric={"enabled": False})
    assert not fabric.profile_for(cfg, cfg.node_pools[0]).enabled
    assert kyverno.fabric_policies(cfg) == []


# ---------------------------------------------------------------- Kyverno policies
@pytest.mark.parametrize("stack", STACKS)
def test_policies_validate_against_crd_and_cel_compiles(stack):
    from multinode.manifests import cel
    cfg = load(stack)
    pols = kyverno.fabric_policies(cfg)
    assert [p["kind"] for p in pols] == [kyverno.MUTATING_KIND, kyverno.VALIDATING_KIND]
    for pol in pols:
        assert pol["apiVersion"] == "policies.kyverno.io/v1"
        assert validation.validate_object(pol) == []
        spec = pol["spec"]
        assert spec["failurePolicy"] == "Fail"
        assert spec["webhookConfiguration"] == {"timeoutSeconds": cfg.fabric.webhook_timeout_seconds}
        assert spec["autogen"] == {"podControllers": {"controllers": []}}       # pods, not their controllers
        exprs = [c["expression"] for c in spec["matchConditions"]]
        exprs += [m["jsonPatch"]["expression"] for m in spec.get("mutations", [])]
        exprs += [v["expression"] for v in spec.get("validations", [])]
        assert exprs
        for e in exprs:
            cel.compile_expression(e)                                      # raises on a syntax / type error
    assert pols[1]["spec"]["validationActions"] == ["Deny"]
    assert all(m["patchType"] == "JSONPatch" for m in pols[0]["spec"]["mutations"])


def test_policy_matches_any_owner_and_nemo_annotation():
    cfg = load("aws-dev")
    (pol,) = mutating(cfg)
    for p in kyverno.fabric_policies(cfg):
        # Pod CREATE only, no owner filter, no object selector: the conditions read labels / annotations
        assert p["spec"]["matchConstraints"] == {"resourceRules": [
            {"apiGroups": [""], "apiVersions": ["v1"], "operations": ["CREATE"], "resources": ["pods"]}]}
    spec = {"containers": [gpu_container()]}
    assert kyverno.matches(pol, {"metadata": {"labels": {"multinode.dev/fabric": "enabled"}}, "spec": spec})
    assert kyverno.matches(pol, {"metadata": {"annotations": {pools.NEMO_ANNOTATION: "true"}}, "spec": spec})
    assert not kyverno.matches(pol, {"metadata": {"labels": {"app": "x"}}, "spec": spec})
    assert not kyverno.matches(pol, {"metadata": {"annotations": {pools.NEMO_ANNOTATION: "false"}}, "spec": spec})
    # pods of any owner: LWS, Volcano, Grove, Job pods differ only in labels / ownerReferences the policy ignores
    owned = {"metadata": {"labels": {"multinode.dev/fabric": "enabled", "leaderworkerset.sigs.k8s.io/name": "x"},
                          "ownerReferences": [{"kind": "StatefulSet", "name": "x"}]}, "spec": spec}
    assert kyverno.matches(pol, owned)


def test_webhook_timeout_from_config():
    cfg = load("aws-dev", fabric={"webhookTimeoutSeconds": 27})
    assert all(p["spec"]["webhookConfiguration"]["timeoutSeconds"] == 27 for p in kyverno.fabric_policies(cfg))


@pytest.mark.parametrize("stack", STACKS)
def test_validate_rule_rejects_pod_without_fabric_and_accepts_mutated(stack):
    cfg = load(stack)
    (pol,) = mutating(cfg)
    checks = checks_policy(cfg)
    t = lws_like(cfg)["worker"]
    pod = {"apiVersion": "v1", "kind": "Pod", **t}
    assert kyverno.refused_by(checks, pod) == [kyverno.FABRIC_RULE]       # GPU container, no fabric
    mutated = effective_pod.apply_policy_to_pod(pod, pol)
    assert kyverno.refused_by(checks, mutated) == []
    # the pin alone is not enough where a device resource exists, and vice versa
    profile = fabric.profile_for(cfg, cfg.node_pools[0])
    broken = copy.deepcopy(mutated)
    broken["spec"]["containers"][0]["env"] = [e for e in broken["spec"]["containers"][0]["env"]
                                              if e["name"] != "NCCL_NET"]
    assert kyverno.refused_by(checks, broken) == [kyverno.FABRIC_RULE]
    if profile.device_resource:
        broken = copy.deepcopy(mutated)
        del broken["spec"]["containers"][0]["resources"]["limits"][profile.device_resource]
        assert kyverno.refused_by(checks, broken) == [kyverno.FABRIC_RULE]
    # wrong transport pinned by hand: refused too
    wrong = copy.deepcopy(mutated)
    for e in wrong["spec"]["containers"][0]["env"]:
        if e["name"] == "NCCL_NET":
            e["value"] = "Socket"
    assert kyverno.refused_by(checks, wrong) == [kyverno.FABRIC_RULE]
    assert all(m.startswith("[") for m in kyverno.denials(checks, wrong))
    # a pod that sets its own NCCL_NET before admission: the mutation keeps it (never rewritten), so a conflicting
    # value is refused and the fabric's own value admitted
    nccl_net = profile.env.get("NCCL_NET")
    if nccl_net:
        for value, refused in (("Socket", [kyverno.FABRIC_RULE]), (nccl_net, [])):
            own = copy.deepcopy(pod)
            own["spec"]["containers"][0]["env"] = [*own["spec"]["containers"][0].get("env", []),
                                                   {"name": "NCCL_NET", "value": value}]
            out = effective_pod.apply_policy_to_pod(own, pol)
            assert [e["value"] for e in out["spec"]["containers"][0]["env"] if e["name"] == "NCCL_NET"] == [value]
            assert kyverno.refused_by(checks, out) == refused


def test_multi_pool_policies_select_their_pool():
    cfg = load("aws-dev", nodePools=[
        {"name": "p5", "machine": "p5.48xlarge", "nodeCount": 2, "zone": "us-east-1a", "subnetId": "subnet-1"},
        {"name": "p5en", "machine": "p5en.48xlarge", "nodeCount": 2, "zone": "us-east-1a", "subnetId": "subnet-1"}],
        workloads=[])
    pols = {p["metadata"]["name"]: p for p in mutating(cfg)}
    assert set(pols) == {"multinode-fabric-p5", "multinode-fabric-p5en"}
    pod = {"apiVersion": "v1", "kind": "Pod", "metadata": {"labels": {pools.FABRIC_POD_LABEL: "enabled"}},
           "spec": {"nodeSelector": {pools.POOL_LABEL: "p5en"}, "containers": [gpu_container()]}}
    out = effective_pod.apply_policy_to_pod(pod, pols["multinode-fabric-p5"])
    assert "vpc.amazonaws.com/efa" not in out["spec"]["containers"][0]["resources"]["limits"]
    out = effective_pod.apply_policy_to_pod(pod, pols["multinode-fabric-p5en"])
    assert out["spec"]["containers"][0]["resources"]["limits"]["vpc.amazonaws.com/efa"] == "16"
    for p in kyverno.fabric_policies(cfg):
        assert validation.validate_object(p) == []
    assert kyverno.refused_by(checks_policy(cfg), out) == []


# ---------------------------------------------------------------- effective pods
@pytest.mark.parametrize("stack", STACKS)
def test_leader_and_worker_get_the_same_fabric_and_validate(stack):
    cfg = load(stack)
    profile = fabric.profile_for(cfg, cfg.node_pools[0])
    roles = {r: effective_pod.apply_profile_to_template(t, profile) for r, t in lws_like(cfg).items()}
    assert roles["leader"] == roles["worker"]
    for eff in roles.values():
        assert validation.validate_pod_spec(eff["spec"]) == []
        engine, metrics = eff["spec"]["containers"]
        env = env_of(engine)
        assert env["NCCL_NET"] == profile.nccl_net and env["MODEL"] == "x"
        for k, v in profile.env.items():
            assert env[k] == v
        if profile.device_resource:
            assert engine["resources"]["limits"][profile.device_resource] == str(profile.devices_for(8))
        assert metrics == {"name": "metrics", "image": "busybox:1.36"}          # no GPUs: untouched
        for k, v in profile.annotations.items():
            assert eff["metadata"]["annotations"][k] == v
        names = {v["name"] for v in eff["spec"].get("volumes", [])}
        assert {v["name"] for v in profile.volumes} <= names


@pytest.mark.parametrize("stack,gpus,expect", [("aws-dev", 4, 16), ("aws-dev", 1, 4), ("azure-dev", 2, 1),
                                               ("oci-dev", 3, 6)])
def test_device_count_is_gpus_times_devices_per_gpu(stack, gpus, expect):
    cfg = load(stack)
    profile = fabric.profile_for(cfg, cfg.node_pools[0])
    spec = effective_pod.apply_profile({"containers": [gpu_container(gpus=gpus), gpu_container("b", gpus=0)]},
                                       profile)
    assert spec["containers"][0]["resources"]["limits"][profile.device_resource] == str(expect)
    assert profile.devices_for(gpus) == expect                         # CEL == Python
    assert profile.device_resource not in spec["containers"][1]["resources"]["limits"]


def test_fractional_devices_round_up():
    cfg = load("aws-dev", nodePools=[{"name": "gpu", "machine": "p4d.24xlarge", "nodeCount": 2, "zone": "us-east-1a",
                                      "subnetId": "subnet-1"}], workloads=[])
    profile = fabric.profile_for(cfg, cfg.node_pools[0])                 # 4 EFA for 8 GPUs
    for gpus, expect in [(1, 1), (2, 1), (3, 2), (8, 4)]:
        spec = effective_pod.apply_profile({"containers": [gpu_container(gpus=gpus)]}, profile)
        assert spec["containers"][0]["resources"]["limits"]["vpc.amazonaws.com/efa"] == str(expect)


def test_string_gpu_limit_and_unlabelled_pod():
    cfg = load("aws-dev")
    (pol,) = mutating(cfg)
    pod = {"apiVersion": "v1", "kind": "Pod", "metadata": {"labels": {pools.FABRIC_POD_LABEL: "enabled"}},
           "spec": {"containers": [gpu_container(gpus="8")]}}
    assert effective_pod.apply_policy_to_pod(pod, pol)["spec"]["containers"][0]["resources"]["limits"][
        "vpc.amazonaws.com/efa"] == "32"
    plain = {**pod, "metadata": {"labels": {"app": "single-node"}}}
    assert effective_pod.apply_policy_to_pod(plain, pol) == plain


# ---------------------------------------------------------------- capabilities: union, not replace
def _with_caps(cfg, caps):
    t = lws_like(cfg)["worker"]
    t["spec"]["containers"][0]["securityContext"] = {"capabilities": {"add": list(caps)}, "privileged": False}
    return {"apiVersion": "v1", "kind": "Pod", **t}


@pytest.mark.parametrize("stack", ["azure-dev", "oci-dev"])
def test_user_capabilities_are_kept_and_ours_added_once(stack):
    cfg = load(stack)
    profile = fabric.profile_for(cfg, cfg.node_pools[0])
    assert profile.capabilities == ["IPC_LOCK"]
    (pol,) = mutating(cfg)
    assert validation.validate_object(pol) == []
    for have, want in [(["SYS_PTRACE"], ["SYS_PTRACE", "IPC_LOCK"]), (["IPC_LOCK"], ["IPC_LOCK"]),
                       (["IPC_LOCK", "SYS_PTRACE"], ["IPC_LOCK", "SYS_PTRACE"]), ([], ["IPC_LOCK"])]:
        out = effective_pod.apply_policy_to_pod(_with_caps(cfg, have), pol)
        sc = out["spec"]["containers"][0]["securityContext"]
        assert sc["capabilities"]["add"] == want and sc["privileged"] is False
        assert validation.validate_pod_spec(out["spec"]) == []
        # applying the policy again (a reinvocation) adds nothing
        again = effective_pod.apply_policy_to_pod(out, pol)
        assert again["spec"]["containers"][0]["securityContext"]["capabilities"]["add"] == want
    bare = _with_caps(cfg, [])
    del bare["spec"]["containers"][0]["securityContext"]                      # no securityContext at all
    out = effective_pod.apply_policy_to_pod(bare, pol)
    assert out["spec"]["containers"][0]["securityContext"] == {"capabilities": {"add": ["IPC_LOCK"]}}


def test_several_capabilities_are_each_added_once():
    cfg = load("azure-dev")
    profile = dataclasses.replace(fabric.profile_for(cfg, cfg.node_pools[0]), capabilities=["IPC_LOCK", "NET_ADMIN"])
    for have, want in [(["NET_ADMIN"], ["NET_ADMIN", "IPC_LOCK"]),
                       (["SYS_PTRACE"], ["SYS_PTRACE", "IPC_LOCK", "NET_ADMIN"]),
                       (None, ["IPC_LOCK", "NET_ADMIN"])]:
        c = gpu_container()
        if have is not None:
            c["securityContext"] = {"capabilities": {"add": have}}
        spec = effective_pod.apply_profile({"containers": [c]}, profile)
        assert spec["containers"][0]["securityContext"]["capabilities"]["add"] == want


# ---------------------------------------------------------------- AWS pods the API server admits (issue 14)
def test_efa_requests_per_gpu_come_from_the_catalog():
    m = catalog.lookup("p5.48xlarge")                     # 192 vCPUs, 2048 GiB, 8 GPUs (catalog A11)
    assert fabric.node_share_per_gpu(m) == {"cpu": (18, ""), "memory": (192, "Gi")}   # 3/4 of 24 and of 256
    # a machine without confirmed node resources gets no request at all (nothing guessed)
    assert fabric.node_share_per_gpu(catalog.lookup("a3-megagpu-8g")) == {}


@pytest.mark.parametrize("machine,gpus,cpu,mem", [("p5.48xlarge", 8, "144", "1536Gi"),
                                                  ("p5.48xlarge", 4, "72", "768Gi"),
                                                  ("p6e-gb200.36xlarge", 4, "108", "720Gi"),
                                                  ("g5.48xlarge", 1, "18", "72Gi")])
def test_efa_gpu_container_gets_cpu_memory_and_no_hugepages(machine, gpus, cpu, mem):
    from multinode import admission
    cfg = load("aws-dev", nodePools=[{"name": "gpu", "machine": machine, "nodeCount": 2, "zone": "us-east-1a",
                                      "subnetId": "subnet-0a1b2c3d4e5f60718"}], workloads=[])
    profile = fabric.profile_for(cfg, cfg.node_pools[0])
    spec = effective_pod.apply_profile({"containers": [gpu_container(gpus=gpus), gpu_container("b", gpus=0)]},
                                       profile)
    res = spec["containers"][0]["resources"]
    assert res["requests"]["cpu"] == cpu and res["requests"]["memory"] == mem
    assert "cpu" not in res["limits"] and "memory" not in res["limits"]        # requests only: no throttling
    assert not [k for k in list(res["limits"]) + list(res["requests"]) if k.startswith("hugepages-")]
    assert "resources" not in spec["containers"][1] or "cpu" not in spec["containers"][1]["resources"].get(
        "requests", {})
    assert admission.check_pod_spec(spec) == []


def test_efa_requests_keep_what_the_container_states():
    cfg = load("aws-dev")
    profile = fabric.profile_for(cfg, cfg.node_pools[0])
    c = gpu_container()
    c["resources"]["requests"] = {"cpu": "32", "memory": "100Gi"}
    spec = effective_pod.apply_profile({"containers": [c]}, profile)
    assert spec["containers"][0]["resources"]["requests"]["cpu"] == "32"
    assert spec["containers"][0]["resources"]["requests"]["memory"] == "100Gi"


def test_efa_requests_are_added_only_where_absent_and_no_hugepages():
    cfg = load("aws-dev")
    (pol,) = mutating(cfg)
    exprs = [m["jsonPatch"]["expression"] for m in pol["spec"]["mutations"]]
    req = [e for e in exprs if "/resources/requests" in e]
    assert len(req) == 2 and all("!('cpu' in" in e or "!('memory' in" in e for e in req)
    assert not any("hugepages-" in e for e in exprs)
    c = gpu_container()
    c["resources"]["requests"] = {"cpu": "32"}
    spec = effective_pod.apply_profile({"containers": [c]}, fabric.profile_for(cfg, cfg.node_pools[0]))
    assert spec["containers"][0]["resources"]["requests"] == {"cpu": "32", "memory": "1536Gi"}


def test_oci_networks_per_pool_in_a_two_pool_stack():
    """With two pools, each pool's policy sizes the list by its own VFs per GPU (its pool condition holds only for
    pods on that pool)."""
    cfg = load("oci-dev", nodePools=[{**OCI_POOL, "machine": "BM.GPU.H100.8"},
                                     {**OCI_POOL, "name": "h200", "machine": "BM.GPU.H200.8"}], workloads=[])
    pols = mutating(cfg)
    assert len(pols) == 2
    for pool, per_gpu in ((cfg.node_pools[0], 2), (cfg.node_pools[1], 1)):
        pod = {"apiVersion": "v1", "kind": "Pod",
               "metadata": {"labels": {pools.FABRIC_POD_LABEL: pools.FABRIC_POD_LABEL_VALUE}},
               "spec": {"nodeSelector": pools.node_selector(cfg, pool), "containers": [gpu_container(gpus=4)]}}
        for pol in pols:
            pod = effective_pod.apply_policy_to_pod(pod, pol)
        nets = pod["metadata"]["annotations"]["k8s.v1.cni.cncf.io/networks"].split(",")
        assert nets == ["default/rdma-vf"] * (4 * per_gpu)
        assert pod["spec"]["containers"][0]["resources"]["limits"]["nvidia.com/rdma-vf"] == str(4 * per_gpu)


@pytest.mark.parametrize("stack", STACKS)
def test_mutations_are_idempotent_so_reinvocation_adds_nothing(stack):
    """reinvocationPolicy: IfNeeded re-runs the mutations after a later webhook's change: a second pass over the
    mutated pod must change nothing (env / mounts / volumes / sidecars replaced by key, the rest only if absent)."""
    cfg = load(stack)
    (pol,) = mutating(cfg)
    assert pol["spec"]["reinvocationPolicy"] == "IfNeeded"
    pod = {"apiVersion": "v1", "kind": "Pod", **lws_like(cfg)["leader"]}
    once = effective_pod.apply_policy_to_pod(pod, pol)
    assert once != pod and effective_pod.apply_policy_to_pod(once, pol) == once
