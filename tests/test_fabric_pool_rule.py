"""The stack-wide `require-fabric-pool` Kyverno rule (a multi-node GPU pod must select a fabric pool with
spec.nodeSelector), NCCL topology files from the catalog, and the fabric count checks (fabric.config_problems)."""
from __future__ import annotations

import copy

import pytest

from multinode import catalog, checks, config, fabric, pools, stackfile
from multinode import schema_check as validation
from multinode.clouds import gcp as gke
from multinode.manifests import effective_pod, kyverno

STACKS = ["aws-dev", "azure-dev", "gcp-dev", "oci-dev", "existing-dev"]
RULE = "require-fabric-pool"


def raw_of(stack: str, **over):
    raw, secrets, _ = stackfile.read_stack_file(stackfile.stack_path(stack))
    raw = dict(raw)
    raw.update(over)
    return raw, secrets


def load(stack: str, **over) -> config.StackConfig:
    return checks.load(*raw_of(stack, **over))


def unchecked(stack: str, **over) -> config.StackConfig:
    """The stack's config with pydantic validation only (no semantic checks), to feed config_problems."""
    raw, _ = raw_of(stack, **over)
    data = {k: (v if k in config.SECRET_KEYS else config.parse_raw_value(v)) for k, v in raw.items()}
    return config.StackConfig.model_validate(data)


def gpu_pod(labels=None, annotations=None, node_selector=None, affinity=None, gpus=8):
    meta = {}
    if labels is not None:
        meta["labels"] = labels
    if annotations is not None:
        meta["annotations"] = annotations
    spec = {"containers": [{"name": "engine", "image": "vllm/vllm-openai:v0.11.0",
                            "resources": {"limits": {"nvidia.com/gpu": gpus}}},
                           {"name": "metrics", "image": "busybox:1.36"}]}
    if node_selector is not None:
        spec["nodeSelector"] = node_selector
    if affinity is not None:
        spec["affinity"] = affinity
    return {"apiVersion": "v1", "kind": "Pod", "metadata": meta, "spec": spec}


FABRIC = {pools.FABRIC_POD_LABEL: pools.FABRIC_POD_LABEL_VALUE}


def checks_of(cfg):
    (vp,) = [p for p in kyverno.fabric_policies(cfg) if p["kind"] == kyverno.VALIDATING_KIND]
    return vp


def mutating_of(cfg):
    return [p for p in kyverno.fabric_policies(cfg) if p["kind"] == kyverno.MUTATING_KIND]


def pool_rule(policy):
    (rule,) = [v for v in policy["spec"]["validations"] if v["message"].startswith(f"[{RULE}]")]
    return rule


def refused_by_pool_rule(policy, pod):
    """["engine"] when the pool rule refuses the pod (the pod-level CEL check; the old per-container form named
    the GPU container), else []."""
    return ["engine"] if RULE in kyverno.refused_by(policy, pod) else []


# ---------------------------------------------------------------- the rule itself
@pytest.mark.parametrize("stack", STACKS)
def test_rule_compiles_validates_and_has_no_pool_precondition(stack):
    from multinode.manifests import cel
    cfg = load(stack)
    pol = checks_of(cfg)
    assert validation.validate_object(pol) == []
    rule = pool_rule(pol)
    cel.compile_expression(rule["expression"])
    # stack-wide: the only condition is a GPU container (no nodeSelector condition on the policy)
    assert [c["name"] for c in pol["spec"]["matchConditions"]] == ["has-gpu-container"]
    assert pol["spec"]["validationActions"] == ["Deny"] and pol["spec"]["failurePolicy"] == "Fail"
    # the message names the labels to use: the pool's node selector from pools.node_selector
    for k, v in pools.node_selector(cfg, cfg.node_pools[0]).items():
        assert f"{k}: {v}" in rule["message"]
    assert "nodeAffinity" in rule["message"]


@pytest.mark.parametrize("stack", STACKS)
def test_labelled_gpu_pod_without_node_selector_is_refused(stack):
    pol = checks_of(load(stack))
    assert refused_by_pool_rule(pol, gpu_pod(labels=FABRIC)) == ["engine"]
    assert refused_by_pool_rule(pol, gpu_pod(labels=FABRIC, node_selector={})) == ["engine"]
    # the NeMo annotation is matched the same way
    assert refused_by_pool_rule(pol, gpu_pod(annotations={pools.NEMO_ANNOTATION: "true"})) == ["engine"]


@pytest.mark.parametrize("stack", STACKS)
def test_labelled_gpu_pod_for_an_unknown_pool_is_refused(stack):
    cfg = load(stack)
    pol = checks_of(cfg)
    right = pools.node_selector(cfg, cfg.node_pools[0])
    wrong = {k: v + "-other" for k, v in right.items()}
    assert refused_by_pool_rule(pol, gpu_pod(labels=FABRIC, node_selector=wrong)) == ["engine"]
    assert refused_by_pool_rule(pol, gpu_pod(labels=FABRIC, node_selector={"kubernetes.io/os": "linux"})) == \
        ["engine"]
    # extra labels beside the pool's are fine
    ok = gpu_pod(labels=FABRIC, node_selector={**right, "kubernetes.io/os": "linux"})
    assert refused_by_pool_rule(pol, ok) == []


@pytest.mark.parametrize("stack", STACKS)
def test_correct_pod_passes_every_rule(stack):
    cfg = load(stack)
    pol = checks_of(cfg)
    (mpol,) = mutating_of(cfg)
    pod = gpu_pod(labels=FABRIC, node_selector=pools.node_selector(cfg, cfg.node_pools[0]))
    assert refused_by_pool_rule(pol, pod) == []
    assert kyverno.refused_by(pol, pod) == [kyverno.FABRIC_RULE]      # not yet mutated
    mutated = effective_pod.apply_policy_to_pod(pod, mpol)
    assert kyverno.denials(pol, mutated) == []


@pytest.mark.parametrize("stack", STACKS)
def test_unlabelled_pod_is_untouched(stack):
    cfg = load(stack)
    pol = checks_of(cfg)
    (mpol,) = mutating_of(cfg)
    pod = gpu_pod(labels={"app": "single-node"})
    assert kyverno.denials(pol, pod) == []
    assert effective_pod.apply_policy_to_pod(pod, mpol) == pod
    bare = gpu_pod()
    assert kyverno.denials(pol, bare) == [] and effective_pod.apply_policy_to_pod(bare, mpol) == bare


def test_labelled_pod_without_gpus_is_not_refused():
    pol = checks_of(load("aws-dev"))
    assert refused_by_pool_rule(pol, gpu_pod(labels=FABRIC, gpus=0)) == []
    assert not kyverno.matches(pol, gpu_pod(labels=FABRIC, gpus=0))       # has-gpu-container: not evaluated


def test_node_affinity_alone_is_refused():
    """Chosen behaviour: the pool must be named with spec.nodeSelector; a required nodeAffinity on the pool
    label is not read (the mutations pick the pool from nodeSelector), so such a pod is refused."""
    pol = checks_of(load("aws-dev"))
    affinity = {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
        {"matchExpressions": [{"key": pools.POOL_LABEL, "operator": "In", "values": ["gpu"]}]}]}}}
    assert refused_by_pool_rule(pol, gpu_pod(labels=FABRIC, affinity=affinity)) == ["engine"]
    both = gpu_pod(labels=FABRIC, affinity=affinity, node_selector={pools.POOL_LABEL: "gpu"})
    assert refused_by_pool_rule(pol, both) == []


def multi_pool_cfg():
    return load("aws-dev", nodePools=[
        {"name": "p5", "machine": "p5.48xlarge", "nodeCount": 2, "zone": "us-east-1a", "subnetId": "subnet-1"},
        {"name": "p5en", "machine": "p5en.48xlarge", "nodeCount": 2, "zone": "us-east-1a", "subnetId": "subnet-1"}],
        workloads=[])


def test_multi_pool_one_stack_wide_check_covers_every_pool():
    cfg = multi_pool_cfg()
    pol = checks_of(cfg)
    mpols = {p["metadata"]["name"]: p for p in mutating_of(cfg)}
    msg = pool_rule(pol)["message"]
    assert f"{pools.POOL_LABEL}: p5}}" in msg and f"{pools.POOL_LABEL}: p5en}}" in msg
    # one require-fabric check per pool, each scoped to the pods that select its pool
    assert [v["message"].split("]")[0] for v in pol["spec"]["validations"]].count(f"[{kyverno.FABRIC_RULE}") == 2
    assert validation.validate_object(pol) == []
    for pool in ("p5", "p5en"):
        pod = gpu_pod(labels=FABRIC, node_selector={pools.POOL_LABEL: pool})
        assert kyverno.refused_by(pol, pod) == [kyverno.FABRIC_RULE]       # not mutated yet
        for name, mpol in mpols.items():
            # a pod for the other pool is not touched by this pool's policy
            out = effective_pod.apply_policy_to_pod(pod, mpol)
            assert (out != pod) == name.endswith("-" + pool)
    # a pod for no pool is neither mutated by any policy nor admitted
    stray = gpu_pod(labels=FABRIC, node_selector={pools.POOL_LABEL: "p4d"})
    assert all(effective_pod.apply_policy_to_pod(stray, m) == stray for m in mpols.values())
    assert kyverno.refused_by(pol, stray) == [RULE]
    assert kyverno.refused_by(pol, gpu_pod(labels=FABRIC)) == [RULE]
    # the pod for p5en ends up mutated by its policy and passes every check
    pod = gpu_pod(labels=FABRIC, node_selector={pools.POOL_LABEL: "p5en"})
    for m in mpols.values():
        pod = effective_pod.apply_policy_to_pod(pod, m)
    assert kyverno.denials(pol, pod) == []


def test_fabric_pool_expression_requires_every_selector_label():
    cfg = load("existing-dev", nodePools=[{"name": "gpu", "machine": "p5.48xlarge", "nodeCount": 2,
                                           "nodeSelector": {"node.kubernetes.io/instance-type": "p5.48xlarge",
                                                            "lab.multinode.dev/rack": "r1"}}],
               workloads=[])
    pol = checks_of(cfg)
    one = gpu_pod(labels=FABRIC, node_selector={"node.kubernetes.io/instance-type": "p5.48xlarge"})
    assert refused_by_pool_rule(pol, one) == ["engine"]
    both = gpu_pod(labels=FABRIC, node_selector={"node.kubernetes.io/instance-type": "p5.48xlarge",
                                                 "lab.multinode.dev/rack": "r1"})
    assert refused_by_pool_rule(pol, both) == []


# ---------------------------------------------------------------- NCCL topology from the catalog
def test_nccl_topology_is_a_catalog_fact():
    azure = [m for m in catalog.MACHINES.values() if m.cloud == "azure"]
    with_topo = {m.name: m.nccl_topology for m in azure if m.nccl_topology}
    assert with_topo == {"Standard_ND96asr_v4": "ndv4-topo.xml", "Standard_ND96amsr_A100_v4": "ndv4-topo.xml",
                         "Standard_ND96isr_H100_v5": "ndv5-topo.xml", "Standard_ND96isr_H200_v5": "ndv5-topo.xml"}
    for name in with_topo:
        assert "Z4" in catalog.MACHINES[name].source.split(",")
    assert all(m.nccl_topology is None for m in catalog.MACHINES.values() if m.cloud != "azure")
    assert not hasattr(fabric, "AZURE_TOPOLOGY")                   # no second table


def test_profile_reads_topology_from_catalog():
    gb = load("azure-dev", nodePools=[{"name": "gpu", "machine": "Standard_ND128isr_NDR_GB200_v6", "nodeCount": 2}],
              workloads=[])
    p = fabric.profile_for(gb, gb.node_pools[0])
    assert p.topology_file is None and "NCCL_TOPO_FILE" not in p.env and p.volumes == []
    h200 = load("azure-dev", nodePools=[{"name": "gpu", "machine": "Standard_ND96isr_H200_v5", "nodeCount": 2}],
                workloads=[])
    p = fabric.profile_for(h200, h200.node_pools[0])
    assert p.topology_file == "ndv5-topo.xml" and p.env["NCCL_TOPO_FILE"] == "/opt/nvidia-topology/ndv5-topo.xml"
    assert p.volumes[0]["configMap"]["name"] == "nccl-topology-ndv5"


# ---------------------------------------------------------------- counts are never guessed
def _spec_pool(stack, spec, **extra):
    base = raw_of(stack)[0]["nodePools"]
    pool = dict(config.parse_raw_value(base)[0])
    pool.pop("machine", None)
    pool["machineSpec"] = spec
    pool.update(extra)
    return [pool]


@pytest.mark.parametrize("stack,fabric_kind", [("aws-dev", "efa"), ("oci-dev", "roce"), ("gcp-dev", "tcpxo"),
                                               ("gcp-dev", "gcp-rdma")])
def test_machine_spec_with_a_fabric_but_no_count_is_refused(stack, fabric_kind):
    cfg = unchecked(stack, nodePools=_spec_pool(stack, {"name": "lab-8x", "gpus": 8, "fabric": fabric_kind}),
                    workloads=[])
    (problem,) = fabric.config_problems(cfg)
    assert problem.path == "nodePools[0].machineSpec.fabricNics"
    assert "lab-8x" in problem.message and fabric_kind in problem.message and "fabric.devicesPerGpu" in problem.message
    with pytest.raises(fabric.FabricError, match="fabricNics"):
        fabric.profile_for(cfg, cfg.node_pools[0])
    # with a count (either way) it is accepted and used
    counted = unchecked(stack, nodePools=_spec_pool(stack, {"name": "lab-8x", "gpus": 8, "fabric": fabric_kind,
                                                           "fabricNics": 8}), workloads=[])
    assert fabric.config_problems(counted) == []
    per_gpu = unchecked(stack, nodePools=_spec_pool(stack, {"name": "lab-8x", "gpus": 8, "fabric": fabric_kind}),
                        fabric={"devicesPerGpu": 1}, workloads=[])
    assert fabric.config_problems(per_gpu) == []
    p = fabric.profile_for(per_gpu, per_gpu.node_pools[0])
    assert (p.devices_per_node if p.device_resource else len(p.networks)) == 8


def test_existing_cluster_fabric_kind_needs_a_count_too():
    cfg = unchecked("existing-dev", nodePools=[{"name": "gpu", "machineSpec": {"name": "lab", "gpus": 8},
                                                "nodeCount": 2, "nodeSelector": {"lab/gpu": "yes"}}], workloads=[])
    assert cfg.fabric.kind == "efa"
    (problem,) = fabric.config_problems(cfg)
    assert problem.path == "nodePools[0].machineSpec.fabricNics"


def test_infiniband_needs_a_count_only_in_sriov_mode():
    spec = {"name": "nd-lab", "gpus": 8, "fabric": "infiniband"}
    shared = unchecked("azure-dev", nodePools=_spec_pool("azure-dev", spec), workloads=[])
    assert fabric.config_problems(shared) == []
    assert fabric.profile_for(shared, shared.node_pools[0]).devices_per_node == 1
    sriov = unchecked("azure-dev", nodePools=_spec_pool("azure-dev", spec), fabric={"rdmaMode": "sriov"},
                      workloads=[])
    assert [p.path for p in fabric.config_problems(sriov)] == ["nodePools[0].machineSpec.fabricNics"]


def test_fabric_disabled_needs_no_count():
    cfg = unchecked("aws-dev", nodePools=_spec_pool("aws-dev", {"name": "lab", "gpus": 8, "fabric": "efa"}),
                    fabric={"enabled": False}, workloads=[])
    assert fabric.config_problems(cfg) == []
    assert not fabric.profile_for(cfg, cfg.node_pools[0]).enabled


@pytest.mark.parametrize("stack", STACKS)
def test_example_stacks_have_no_fabric_problems(stack):
    assert fabric.config_problems(load(stack)) == []


def test_gcp_networks_follow_devices_per_gpu_like_the_network_plan():
    """Behaviour change: the TCPX/TCPXO/gIB profile uses fabric.devicesPerGpu x GPUs when set (before: always
    the catalog count), the same count gke.network_plan creates networks for."""
    cfg = load("gcp-dev", nodePools=[{"name": "gpu", "machine": "a3-ultragpu-8g", "nodeCount": 2,
                                      "zone": "us-central1-c"}], fabric={"devicesPerGpu": 1}, workloads=[])
    pool = cfg.node_pools[0]
    assert len(fabric.profile_for(cfg, pool).networks) == gke.gpu_network_count(cfg, pool) == 8


def test_multi_node_workload_on_a_pool_without_fabric_is_refused():
    raw, _ = raw_of("gcp-dev")
    base = dict(config.parse_raw_value(raw["nodePools"])[0])
    cpu = {**base, "name": "a2", "machine": "a2-highgpu-8g"}
    work = [dict(w) for w in config.parse_raw_value(raw["workloads"])]
    work[0]["nodePool"] = "a2"
    assert work[0].get("nodes", 1) > 1
    cfg = unchecked("gcp-dev", nodePools=[base, cpu], workloads=work)
    (problem,) = fabric.config_problems(cfg)
    assert problem.path == "workloads[0].nodePool"
    assert "'a2' has no GPU fabric" in problem.message and base["name"] in problem.message
    single = copy.deepcopy(work)
    single[0]["nodes"] = 1
    single[0].pop("pipelineParallel", None)
    assert fabric.config_problems(unchecked("gcp-dev", nodePools=[base, cpu], workloads=single)) == []


def test_config_load_runs_the_fabric_checks():
    raw, secrets = raw_of("aws-dev", nodePools=_spec_pool("aws-dev", {"name": "lab", "gpus": 8, "fabric": "efa"}),
                          workloads=[])
    with pytest.raises(config.ConfigError, match=r"nodePools\[0\]\.machineSpec\.fabricNics"):
        checks.load(raw, secrets)
