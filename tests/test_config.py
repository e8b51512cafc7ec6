"""Bad stack input: one ConfigError naming each key path, the bad value and the fix."""
from __future__ import annotations

import pytest

from multinode import checks
from multinode.errors import ConfigError

from .conftest import EXAMPLE_STACKS, example_raw


def _load(raw, secrets):
    return checks.load(raw, secrets, source="test")


@pytest.mark.parametrize("stack", EXAMPLE_STACKS)
def test_example_stacks_load(stack):
    cfg = _load(*example_raw(stack))
    assert cfg.workloads and cfg.node_pools


def _set(raw, path, value):
    """Set raw[path] where path is like 'workloads.0.tensorParallel'; value None deletes the key."""
    parts = path.split(".")
    node = raw
    for p in parts[:-1]:
        node = node[int(p)] if p.isdigit() else node.setdefault(p, {})
    last = parts[-1]
    if value is None:
        del node[last]
    elif last.isdigit():
        node[int(last)] = value
    else:
        node[last] = value


# (stack, change as (key path, value), expected problem path, expected text in the message)
BAD = [
    ("aws-dev", [("workloads.0.tensorParalel", 8)], "workloads[0].tensorParalel", "did you mean 'tensorParallel'"),
    ("aws-dev", [("workloads.0.tensorParallel", 3)], "workloads[0].tensorParallel",
     "tensorParallel 3 x pipelineParallel 2 = 6 GPUs, but 2 nodes x 8 GPUs (p5.48xlarge) = 16; "
     "use tensorParallel 8 with pipelineParallel 2"),
    ("aws-dev", [("workloads.0.tensorParallel", 4), ("workloads.0.pipelineParallel", 1)],
     "workloads[0].tensorParallel",
     "tensorParallel 4 x pipelineParallel 1 = 4 GPUs, but 2 nodes x 8 GPUs (p5.48xlarge) = 16; "
     "use tensorParallel 8 with pipelineParallel 2"),
    ("aws-dev", [("cloud", "amazon")], "cloud", "'amazon' is not allowed; use one of"),
    ("aws-dev", [("nodePools.0.machine", "p5.48xlarg")], "nodePools[0].machine",
     "unknown machine 'p5.48xlarg': did you mean p5.48xlarge"),
    ("aws-dev", [("nodePools.0.machine", "Standard_ND96isr_H100_v5")], "nodePools[0].machine",
     "is a azure machine, but cloud is 'aws'"),
    ("aws-dev", [("workloads.0.nodePool", "gpus")], "workloads[0].nodePool",
     "no node pool named 'gpus'; use one of: gpu"),
    ("aws-dev", [("nodePools.0.nodeCount", 0)], "nodePools[0].nodeCount", "greater than or equal to 1"),
    ("aws-dev", [("nodePools.0.nodeCount", "two")], "nodePools[0].nodeCount", "valid integer"),
    ("aws-dev", [("workloads.0.gpusPerNode", 16)], "workloads[0].gpusPerNode",
     "16 GPUs per pod, but p5.48xlarge has 8"),
    ("aws-dev", [("workloads.0.nodes", 5)], "workloads[0].nodes", "5 nodes, but node pool 'gpu' has 4"),
    ("aws-dev", [("nodePools.0.subnetId", None)], "nodePools[0].subnetId", "set subnetId"),
    ("aws-dev", [("cluster.name", None)], "cluster.name", "required on cloud 'aws'"),
    ("aws-dev", [("nodePools.0.capacityReservation", {"id": "cr-1", "nodes": 1})], "nodePools[0].nodeCount",
     "4 nodes, but capacity reservation cr-1 holds 1"),
    ("aws-dev", [("storage.kind", "filestore")], "storage.kind", "'filestore' is not available on aws"),
    ("aws-dev", [("workloads.0.engine", "torchrun")], "workloads[0].engine", "does not run as lws-inference"),
    ("aws-dev", [("workloads.0.model", "meta-llama/Llama-3.1-405B-Instruct"), ("workloads.0.nodes", 1),
                 ("workloads.0.tensorParallel", 8), ("workloads.0.pipelineParallel", 1)],
     "workloads[0].nodes", "needs 810 GB of weights"),
    ("aws-dev", [("workloads.0.kind", "inference")], "workloads[0].kind", "is not allowed; use one of"),
    ("aws-dev", [("workloads.0.name", "Llama_405B")], "workloads[0].name", "must be lowercase"),
    ("existing-dev", [("kubeconfig", None)], "kubeconfig", "needs the cluster's kubeconfig"),
    ("existing-dev", [("fabric.kind", "infiniband")], "fabric.kind", "use fabric.kind 'efa'"),
    ("aws-dev", [("fabric.kind", "efa")], "fabric.kind", "only for cloud 'existing'"),
    ("azure-dev", [("cluster.resourceGroup", None)], "cluster.resourceGroup", "required on cloud 'azure'"),
    ("gcp-dev", [("nodePools.0.zone", None)], "nodePools[0].zone", "set zone"),
    ("aws-dev", [("workloads.0.networkTopology", {"mode": "hard"})], "workloads[0].networkTopology",
     "only volcano-training"),
    ("azure-dev", [("storage.subnetId", None)], "storage.subnetId", "the NFS share admits only the nodes' subnet"),
    ("gcp-dev", [("workloads.1.disaggregated.prefill", {"nodes": 1, "tensorParallel": 8})],
     "workloads[1].disaggregated.prefill.nodes", "DeepSeek-R1 (prefill) at fp8 needs 671 GB of weights"),
    ("aws-dev", [("workloads.0.modelParamsB", float("inf"))], "workloads[0].modelParamsB", "finite number"),
    ("aws-dev", [("nodePools.0.capacityReservation", {"id": "cr-1", "nodes": 10**30})],
     "nodePools[0].capacityReservation.nodes", "less than or equal to 100000"),
    ("aws-dev", [("nodePools.0.labels", {"a b/c": "x"})], "nodePools[0].labels", "'a b/c' is not a valid label key"),
    ("aws-dev", [("manifests", [{"apiVersion": "apps/v9", "kind": "Deployment", "metadata": {"name": "x"}}])],
     "manifests[0].apiVersion", "'apps/v9' is not a Kubernetes API version"),
]


@pytest.mark.parametrize("stack,changes,path,text", BAD, ids=[f"{i}-{b[2]}" for i, b in enumerate(BAD)])
def test_bad_input_names_key_and_fix(stack, changes, path, text):
    raw, secrets = example_raw(stack)
    for key, value in changes:
        _set(raw, key, value)
    with pytest.raises(ConfigError) as info:
        _load(raw, secrets)
    err = info.value
    matches = [p for p in err.problems if p.path == path]
    assert matches, f"no problem at {path}: {err}"
    assert any(text in p.message for p in matches), str(err)
    # the whole message is one block, every line with a key path
    assert str(err).count("\n") == len(err.problems)


def test_every_problem_reported_at_once():
    raw, secrets = example_raw("aws-dev")
    _set(raw, "workloads.0.tensorParallel", 3)
    _set(raw, "workloads.0.nodePool", "gpu")
    _set(raw, "cluster.name", None)
    _set(raw, "nodePools.0.subnetId", None)
    with pytest.raises(ConfigError) as info:
        _load(raw, secrets)
    paths = {p.path for p in info.value.problems}
    assert {"workloads[0].tensorParallel", "cluster.name", "nodePools[0].subnetId"} <= paths


def test_secret_in_plain_text_is_refused_and_not_echoed():
    raw, secrets = example_raw("existing-dev")
    raw["kubeconfig"] = "apiVersion: v1\nclusters: [supersecretvalue]"
    with pytest.raises(ConfigError) as info:
        _load(raw, secrets - {"kubeconfig"})
    assert "kubeconfig" in {p.path for p in info.value.problems}
    assert "supersecretvalue" not in str(info.value)


def test_structured_values_arrive_as_json_text():
    """Pulumi passes objects as JSON strings and scalars as strings; both load."""
    import json
    raw, secrets = example_raw("aws-dev")
    wire = {k: (json.dumps(v) if not isinstance(v, str) else v) for k, v in raw.items()}
    cfg = _load(wire, secrets)
    assert cfg.node_pools[0].node_count == 4


def test_defaults_come_from_the_catalog():
    cfg = _load(*example_raw("aws-dev"))
    w = cfg.workloads[0]
    assert w.gpus_per_node is None and cfg.gpus_per_node(w) == 8
    assert cfg.fabric_kind() == "efa"
    assert cfg.addons.volcano.enabled and cfg.addons.lws.enabled


def test_explicit_machine_spec():
    raw, secrets = example_raw("existing-dev")
    raw["nodePools"][0].pop("machine")
    raw["nodePools"][0]["machineSpec"] = {"name": "lab-h100x4", "gpus": 4, "gpuMemoryGb": 80, "fabric": "efa",
                                          "fabricNics": 4}
    raw["workloads"] = raw["workloads"][:1]   # the example's other workloads are sized for 8-GPU nodes
    raw["workloads"][0].update({"tensorParallel": 4, "pipelineParallel": 2, "precision": "fp8"})
    cfg = _load(raw, secrets)
    m = cfg.machine(cfg.node_pools[0])
    assert (m.name, m.gpus, m.fabric) == ("lab-h100x4", 4, "efa")


def test_two_fabrics_in_one_stack_refused():
    raw, secrets = example_raw("existing-dev")
    raw["nodePools"].append({"name": "ib", "machine": "Standard_ND96isr_H100_v5", "nodeCount": 2,
                             "nodeSelector": {"pool": "ib"}})
    with pytest.raises(ConfigError) as info:
        _load(raw, secrets)
    assert any(p.path == "nodePools" and "exactly one cloud fabric" in p.message for p in info.value.problems)


def test_image_pull_secret_must_be_a_docker_config_and_is_never_echoed():
    raw, secrets = example_raw("aws-dev")
    raw["imagePullSecret"] = "not-json-hunter2"
    with pytest.raises(ConfigError) as info:
        _load(raw, secrets | {"imagePullSecret"})
    assert any(p.path == "imagePullSecret" and ".dockerconfigjson" in p.message for p in info.value.problems)
    assert "hunter2" not in str(info.value)
    raw["imagePullSecret"] = '{"auths": {"nvcr.io": {"auth": "eA=="}}}'
    assert _load(raw, secrets | {"imagePullSecret"}).image_pull_secret.startswith("{")


def test_multi_node_without_fabric_is_an_advisory():
    raw, secrets = example_raw("aws-dev")
    raw["fabric"] = {"enabled": False}
    cfg = _load(raw, secrets)
    assert any("NCCL will run over the primary network" in p.message for p in checks.advisories(cfg))
    assert not any("primary network" in p.message for p in checks.advisories(_load(*example_raw("aws-dev"))))


def test_azure_infiniband_advisories_peermem_and_topology():
    # Issue 14: the default (AKS driver + peermem loader + DOCA driver container) and the GPU Operator
    # path both run GPUDirect RDMA, and the topology ConfigMap is shipped: no advisory for either.
    # (issue 36: azure-dev's 2-node LWS fills its 2-node pool, so the pool's no-room-to-surge advisory stays; issue
    # 34: so does its no-spare-node advisory; NVSentinel's plan notes, addons.nvsentinel, are tested in
    # tests/test_node_health.py)
    def fabric_advice(cfg):
        return [p for p in checks.advisories(cfg) if "no room to surge" not in p.message
                and "no spare node" not in p.message and p.path != "addons.nvsentinel"]
    raw, secrets = example_raw("azure-dev")
    assert fabric_advice(_load(raw, secrets)) == []
    raw.setdefault("addons", {})["gpuOperator"] = {"enabled": True}
    assert fabric_advice(_load(raw, secrets)) == []
    # configs that really run without the peer-memory stack keep the advisory
    raw, secrets = example_raw("azure-dev")
    raw["fabric"] = {"docaDriverVersion": "host"}
    advice = {p.path: p.message for p in checks.advisories(_load(raw, secrets))}
    assert "nvidia-peermem" in advice["fabric.docaDriverVersion"]
    raw, secrets = example_raw("azure-dev")
    raw.setdefault("addons", {})["networkOperator"] = {"enabled": False}
    advice = {p.path: p.message for p in checks.advisories(_load(raw, secrets))}
    assert "nvidia-peermem" in advice["addons.networkOperator.enabled"]


def test_config_load_knows_no_cloud_and_checks_load_asks_the_cloud_module():
    """config.load checks shape and the cloud-independent contract; the cloud's rules (here gcp: a pool
    needs its zone) come from multinode/clouds/gcp.py through checks.load."""
    from multinode import config

    raw, secrets = example_raw("gcp-dev")
    del raw["nodePools"][0]["zone"]
    cfg = config.load(raw, secrets, source="test")          # no cloud rule ran
    assert cfg.node_pools[0].zone is None
    with pytest.raises(ConfigError) as info:
        checks.load(raw, secrets, source="test")
    assert "nodePools[0].zone" in {p.path for p in info.value.problems}
