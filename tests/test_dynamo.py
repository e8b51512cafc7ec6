"""Dynamo: the DGD builder (v1beta1), the platform release spec, and the multinode rules on DGDs
in both served versions, with the upstream examples as the truth test."""
from __future__ import annotations

import copy
import hashlib
import json
import re
from pathlib import Path

import pytest
import yaml

from multinode import pools
from multinode.config import ADDON_VERSIONS, load
from multinode.manifests.dynamo_platform import dynamo_platform_release
from multinode.manifests.workloads import dgd as dm
from multinode.schema_check import validate_object, validate_pod_template
from policy.rules import dynamo as rd

ROOT = Path(__file__).resolve().parent.parent
DATA = ROOT / "tests" / "data" / "dynamo"
EXAMPLES = {
    "deepseek-r1-vllm-disagg-hopper-16gpu.yaml": "3191107dd2a1631c38f51141df58c2caef816907691bb08fa77c5f839ef6a838",
    "sglang-disagg-multinode.yaml": "eaf8172caa1a540c45fffd2be5f19a543109cf67038a62280d86afa106615fab",
    "vllm-disagg-multinode.yaml": "52b2cde0e3b31374d3af4225a9e0dc181e1e1be17edf5c4d69c0588e87fa94f6",
}
# (file, the tensor-parallel flag + value as written upstream, the mutated value)
MUTATIONS = [
    ("deepseek-r1-vllm-disagg-hopper-16gpu.yaml", '- --tensor-parallel-size\n            - "1"', "2"),
    ("sglang-disagg-multinode.yaml", '- --tp-size\n          - "8"', "4"),
    ("vllm-disagg-multinode.yaml", '- --tensor-parallel-size\n          - "2"', "4"),
]
SECRET_TOKEN = "hf_literal_token_value_must_not_leak"


def example(name: str) -> dict:
    return yaml.safe_load((DATA / name).read_text())


# ------------------------------------------------------------------ upstream examples
@pytest.mark.parametrize("name", sorted(EXAMPLES))
def test_example_copies_are_upstream_bytes(name):
    data = (DATA / name).read_bytes()
    assert data == (ROOT / "schemas" / "dynamo" / "examples" / name).read_bytes()
    assert hashlib.sha256(data).hexdigest() == EXAMPLES[name]


def test_examples_cover_both_served_versions():
    versions = {example(n)["apiVersion"] for n in EXAMPLES}
    assert versions == {"nvidia.com/v1alpha1", "nvidia.com/v1beta1"}


@pytest.mark.parametrize("name", sorted(EXAMPLES))
def test_upstream_example_validates_and_passes_the_rule(name):
    obj = example(name)
    assert validate_object(obj) == []
    assert rd.check_dgd(obj, machine_gpus=8) == []
    assert rd.check_dgd_readable(obj) == []
    # the rule actually looked at the multi-node workers
    multi = [c for c in rd.components(obj) if c.multinode]
    assert len(multi) == 2 and all(c.gpus_per_node for c in multi)


@pytest.mark.parametrize("name,written,new", MUTATIONS)
def test_mutated_tensor_parallel_fails_quoting_the_numbers(name, written, new):
    text = (DATA / name).read_text()
    assert text.count(written) >= 1
    mutated = yaml.safe_load(text.replace(written, written.rsplit('"', 2)[0] + f'"{new}"'))
    assert validate_object(mutated) == []          # schema-valid, yet wrong
    msgs = rd.check_dgd(mutated)
    assert len(msgs) == text.count(written)
    obj = example(name)
    for m in msgs:
        comp = next(c for c in rd.components(obj) if f"component {c.name} " in m)
        total = comp.node_count * comp.gpus_per_node
        assert f"multinode.nodeCount {comp.node_count} x {comp.gpus_per_node} GPU" in m
        assert f"= {total};" in m
        assert re.search(rf"(--tensor-parallel-size|--tp-size) {new} x", m)
        assert f"set {'--tp-size' if 'sglang' in name else '--tensor-parallel-size'} " in m


def test_v1alpha1_example_counts_data_parallel():
    # DeepSeek-R1 recipe: tp 1 x dp 16 over 2 nodes x 8 GPUs
    obj = example("deepseek-r1-vllm-disagg-hopper-16gpu.yaml")
    decode = next(c for c in rd.components(obj) if c.name == "decode")
    par = rd.parallelism(decode)
    assert (par.tensor, par.pipeline, par.data, decode.node_count, decode.gpus_per_node) == (1, 1, 16, 2, 8)
    assert decode.version == "v1alpha1" and decode.gpu_field == "resources.limits.gpu"


@pytest.mark.parametrize("name", sorted(EXAMPLES))
def test_machine_limit(name):
    obj = example(name)
    gpn = max(c.gpus_per_node or 0 for c in rd.components(obj))
    assert rd.check_dgd(obj, machine_gpus=gpn) == []
    msgs = rd.check_dgd_machine(obj, machine_gpus=gpn - 1) if gpn > 1 else ["n/a"]
    assert msgs and (gpn == 1 or f"{gpn} GPUs per node" in msgs[0] and f"machine has {gpn - 1}" in msgs[0])


@pytest.mark.parametrize("name", sorted(EXAMPLES))
def test_upstream_examples_lack_the_fabric_label(name):
    obj = example(name)
    msgs = rd.check_dgd_fabric_label(obj)
    assert len(msgs) == 2 and all(pools.FABRIC_POD_LABEL in m for m in msgs)
    labelled = copy.deepcopy(obj)
    labelled["spec"]["labels"] = {pools.FABRIC_POD_LABEL: pools.FABRIC_POD_LABEL_VALUE}
    assert rd.check_dgd_fabric_label(labelled) == []


# ------------------------------------------------------------------ argv forms, both shapes
def _v1alpha1(command, args=None, gpu="4", nodes=2, env=None, framework=None, **svc):
    main = {"image": "img:1.4.0", "command": command}
    if args is not None:
        main["args"] = args
    if env:
        main["env"] = [{"name": k, "value": v} for k, v in env.items()]
    spec = {"services": {"Worker": {"componentType": "worker", "multinode": {"nodeCount": nodes},
                                    "resources": {"limits": {"gpu": gpu}},
                                    "extraPodSpec": {"mainContainer": main}, **svc}}}
    if framework:
        spec["backendFramework"] = framework
    return {"apiVersion": "nvidia.com/v1alpha1", "kind": "DynamoGraphDeployment", "metadata": {"name": "t"},
            "spec": spec}


def _v1beta1(command, args=None, gpu="4", nodes=2, env=None, framework=None, requests=False):
    main = {"name": "main", "image": "img:1.4.0", "command": command}
    if args is not None:
        main["args"] = args
    if env:
        main["env"] = [{"name": k, "value": v} for k, v in env.items()]
    main["resources"] = {("requests" if requests else "limits"): {"nvidia.com/gpu": gpu}}
    comp = {"name": "worker", "type": "worker", "podTemplate": {"spec": {"containers": [main]}}}
    if nodes > 1:
        comp["multinode"] = {"nodeCount": nodes}
    spec = {"components": [comp]}
    if framework:
        spec["backendFramework"] = framework
    return {"apiVersion": "nvidia.com/v1beta1", "kind": "DynamoGraphDeployment", "metadata": {"name": "t"},
            "spec": spec}


@pytest.mark.parametrize("build", [_v1alpha1, _v1beta1])
@pytest.mark.parametrize("command,args,ok", [
    (["python3", "-m", "dynamo.sglang"], ["--tp-size", "8"], True),
    (["python3", "-m", "dynamo.sglang"], ["--tp-size=8"], True),
    (["python3", "-m", "dynamo.sglang"], ["--tp", "8"], True),
    (["python3", "-m", "dynamo.sglang"], ["--tp-size", "4", "--pp-size", "2"], True),
    (["python3", "-m", "dynamo.sglang"], ["--tp-size", "4"], False),
    (["/bin/sh", "-c"], ["python3 -m dynamo.sglang --model-path m --tp-size 8 --trust-remote-code"], True),
    (["/bin/sh", "-c"], ["python3 -m dynamo.sglang --model-path m --tp-size 16"], False),
    (["sh", "-c", "ray start --head && python3 -m dynamo.vllm --tensor-parallel-size=4 "
                  "--pipeline-parallel-size 2"], None, True),
    (["python3", "-m", "dynamo.vllm"], ["-tp", "2", "-pp", "2", "--data-parallel-size", "2"], True),
    (["python3", "-m", "dynamo.vllm"], [], False),                  # defaults tp 1 on 2 nodes x 4
    (["python3", "-m", "dynamo.sglang"], ["--tp-size", "8", "--dp-size", "8", "--enable-dp-attention"], True),
    (["python3", "-m", "dynamo.sglang"], ["--tp-size", "8", "--dp-size", "2"], False),
    (["python3", "-m", "dynamo.trtllm"], ["--tensor-parallel-size", "8"], True),
    (["python3", "-m", "dynamo.trtllm"], ["--override-engine-args", '{"tensor_parallel_size": 8}'], True),
    (["python3", "-m", "dynamo.trtllm"], ["--override-engine-args", '{"tensor_parallel_size": 2}'], False),
])
def test_parallel_flags(build, command, args, ok):
    msgs = rd.check_dgd(build(command, args))
    assert (msgs == []) is ok, msgs
    if not ok:
        assert "multinode.nodeCount 2 x 4 GPUs per node" in msgs[0] and "= 8;" in msgs[0]


def test_v1alpha1_key_differs_from_v1beta1_gpu_location():
    # v1beta1 reads the main container; v1alpha1 reads resources.gpu (strings) -- both to 4 here
    a = rd.components(_v1alpha1(["x"], gpu="4"))[0]
    b = rd.components(_v1beta1(["x"], gpu="4", requests=True))[0]
    assert (a.gpus_per_node, b.gpus_per_node) == (4, 4)
    assert "requests" in b.gpu_field


def test_env_var_reference_and_trtllm_env():
    obj = _v1beta1(["python3", "-m", "dynamo.sglang"], ["--tp-size", "$(TP)"], env={"TP": "8"})
    assert rd.check_dgd(obj) == []
    obj = _v1beta1(["python3", "-m", "dynamo.sglang"], ["--tp-size", "$(TP)"], env={"TP": "2"})
    assert "--tp-size 2 x" in rd.check_dgd(obj)[0]
    obj = _v1alpha1(["python3", "-m", "dynamo.trtllm"], [], env={"DYN_TRTLLM_TENSOR_PARALLEL_SIZE": "8"})
    assert rd.check_dgd(obj) == []


def test_engine_config_file_is_reported_not_failed():
    obj = _v1beta1(["python3", "-m", "dynamo.trtllm"], ["--extra-engine-args", "/workspace/decode.yaml"],
                   framework="trtllm")
    assert rd.check_dgd(obj) == []
    msgs = rd.check_dgd_readable(obj)
    assert len(msgs) == 1 and "/workspace/decode.yaml" in msgs[0]
    obj = _v1beta1(["python3", "-m", "dynamo.trtllm"], ["--extra-engine-args", "/w/d.yaml",
                                                         "--tensor-parallel-size", "8"])
    assert rd.check_dgd(obj) == [] and rd.check_dgd_readable(obj) == []


def test_multinode_without_gpus_and_default_node_count():
    obj = _v1beta1(["python3", "-m", "dynamo.vllm"], ["--tensor-parallel-size", "8"])
    del obj["spec"]["components"][0]["podTemplate"]["spec"]["containers"][0]["resources"]
    assert "no GPU request" in rd.check_dgd(obj)[0]
    obj = _v1beta1(["python3", "-m", "dynamo.vllm"], ["--tensor-parallel-size", "8"])
    obj["spec"]["components"][0]["multinode"] = {}          # CRD default nodeCount 2
    assert rd.components(obj)[0].node_count == 2 and rd.check_dgd(obj) == []


def test_single_node_worker_checked_only_with_flags():
    assert rd.check_dgd(_v1beta1(["python3", "-m", "dynamo.vllm"], [], nodes=1)) == []
    msgs = rd.check_dgd(_v1beta1(["python3", "-m", "dynamo.vllm"], ["--tensor-parallel-size", "8"], nodes=1))
    assert "1 node (no multinode) x 4 GPUs per node" in msgs[0]


def test_not_a_dgd_is_ignored():
    assert rd.check_dgd({"apiVersion": "apps/v1", "kind": "Deployment", "spec": {}}) == []
    assert rd.components({"apiVersion": "other.io/v1", "kind": "DynamoGraphDeployment"}) == []


def test_rules_metadata():
    names = [r.name for r in rd.DGD_RULES]
    assert len(set(names)) == len(names) == 4
    for r in rd.DGD_RULES:
        assert r.enforcement in (rd.MANDATORY, rd.ADVISORY) and r.description and callable(r.check)
        assert r.check({"kind": "x"}, None) == []


# ------------------------------------------------------------------ the builder
def stack(engine: str, disaggregated: bool, grove: bool = True, nodes: int = 2, **workload) -> dict:
    w = {"name": f"{engine}-{'disagg' if disaggregated else 'agg'}", "kind": "dynamo", "engine": engine,
         "model": "meta-llama/Llama-3.1-405B-Instruct", "nodePool": "gpu"}
    if disaggregated:
        w["disaggregated"] = {"prefill": {"nodes": 2}, "decode": {"nodes": 2, "tensorParallel": 8,
                                                                  "pipelineParallel": 2}}
    else:
        w.update(nodes=nodes, tensorParallel=8, pipelineParallel=nodes)
    w.update(workload)
    addons = {"dynamo": {"enabled": True}}
    if grove:
        addons.update(grove={"enabled": True}, kai={"enabled": True})
    return {"cloud": "aws", "cluster": {"name": "dev-eks", "region": "us-east-1"}, "hfToken": SECRET_TOKEN,
            "nodePools": [{"name": "gpu", "machine": "p5.48xlarge", "nodeCount": 4, "zone": "us-east-1a",
                           "subnetId": "subnet-0a1b2c3d4e5f60718"}],
            "storage": {"kind": "fsx-lustre", "sizeGib": 2400, "throughput": 250},
            "addons": addons, "workloads": [w]}


def build(raw, **kw):
    cfg = load(raw, ["hfToken"])
    return cfg, dm.dynamo_graph_deployment(cfg, cfg.workloads[0], **kw)


CASES = [(e, d) for e in ("vllm", "sglang", "trtllm") for d in (False, True)]


@pytest.mark.parametrize("engine,disagg", CASES)
def test_builder_validates_and_passes_the_rules(engine, disagg):
    cfg, dgd = build(stack(engine, disagg))
    assert dgd["apiVersion"] == "nvidia.com/v1beta1" and dgd["spec"]["backendFramework"] == engine
    assert validate_object(dgd) == []
    for comp in dgd["spec"]["components"]:
        assert validate_pod_template(comp["podTemplate"]) == [], comp["name"]
    for rule in rd.DGD_RULES:
        assert rule.check(dgd, 8) == [], rule.name
    comps = rd.components(dgd)
    assert [c.name for c in comps] == (["frontend", "prefill", "decode"] if disagg else ["frontend", "worker"])
    assert [c.component_type for c in comps][1:] == (["prefill", "decode"] if disagg else ["worker"])
    for c in comps[1:]:
        assert c.backend == engine and c.multinode and c.node_count == 2 and c.gpus_per_node == 8
        assert c.labels[pools.FABRIC_POD_LABEL] == pools.FABRIC_POD_LABEL_VALUE
    assert pools.FABRIC_POD_LABEL not in comps[0].labels          # the frontend is one pod
    flags = dm.BACKENDS[engine]
    decode_args = dgd["spec"]["components"][-1]["podTemplate"]["spec"]["containers"][0]["args"]
    tp, pp = decode_args[decode_args.index(flags["tp"]) + 1], decode_args[decode_args.index(flags["pp"]) + 1]
    assert int(tp) * int(pp) == 16 and pp == "2"


@pytest.mark.parametrize("engine,disagg", CASES)
def test_builder_mutation_is_caught(engine, disagg):
    _, dgd = build(stack(engine, disagg))
    bad = copy.deepcopy(dgd)
    args = bad["spec"]["components"][-1]["podTemplate"]["spec"]["containers"][0]["args"]
    i = args.index(dm.BACKENDS[engine]["tp"])
    args[i + 1] = "4"
    msgs = rd.check_dgd(bad)
    assert len(msgs) == 1
    assert f"{dm.BACKENDS[engine]['tp']} 4 x {dm.BACKENDS[engine]['pp']} 2 = 8 GPUs" in msgs[0]
    assert "multinode.nodeCount 2 x 8 GPUs per node" in msgs[0] and "= 16;" in msgs[0]


@pytest.mark.parametrize("engine,disagg", CASES)
def test_builder_placement_storage_and_secrets(engine, disagg):
    cfg, dgd = build(stack(engine, disagg))
    text = json.dumps(dgd)
    assert SECRET_TOKEN not in text
    for comp in dgd["spec"]["components"]:
        spec = comp["podTemplate"]["spec"]
        main = spec["containers"][0]
        assert main["name"] == "main"
        for e in main["env"]:
            assert ("value" in e) != ("valueFrom" in e)
        hf = next(e for e in main["env"] if e["name"] == "HF_TOKEN")
        assert hf["valueFrom"]["secretKeyRef"] == {"name": f"{cfg.workloads[0].name}-hf-token", "key": "token"}
        assert {"name": "HF_HOME", "value": "/checkpoints/models"} in main["env"]
        assert spec["volumes"] == [{"name": "checkpoints",
                                    "persistentVolumeClaim": {"claimName": "checkpoints", "readOnly": False}}]
        assert main["volumeMounts"][0]["mountPath"] == "/checkpoints"
        assert spec["tolerations"] == pools.tolerations()
        if comp["type"] != "frontend":
            assert spec["nodeSelector"] == {pools.POOL_LABEL: "gpu"}
            assert main["resources"]["limits"] == main["resources"]["requests"] == {"nvidia.com/gpu": "8"}
            assert main["command"] == ["python3", "-m", dm.BACKENDS[engine]["module"]]
    # the stack's pool is EFA (p5): the release's runtime image with AWS EFA (multinode/images.py I7)
    assert dgd["spec"]["components"][0]["podTemplate"]["spec"]["containers"][0]["image"] == \
        f"{dm.RUNTIME_IMAGE_REPOSITORIES[engine]}:{ADDON_VERSIONS['dynamo']}-efa"


def test_builder_secret_names_and_claim_arguments():
    class Ref:
        name, key = "shared-hf", "HF_TOKEN"
    _, dgd = build(stack("vllm", False), claim_name="models-rwx",
                   secret_names={"hfToken": Ref(), "imagePullSecret": "nvcr-pull"})
    spec = dgd["spec"]["components"][1]["podTemplate"]["spec"]
    env = {e["name"]: e for e in spec["containers"][0]["env"]}
    assert env["HF_TOKEN"]["valueFrom"]["secretKeyRef"] == {"name": "shared-hf", "key": "HF_TOKEN"}
    assert spec["imagePullSecrets"] == [{"name": "nvcr-pull"}]
    assert spec["volumes"][0]["persistentVolumeClaim"]["claimName"] == "models-rwx"
    assert validate_object(dgd) == []


def test_builder_single_node_worker_has_no_multinode_and_no_fabric_label():
    raw = stack("vllm", False, nodes=1)
    raw["workloads"][0].update(tensorParallel=8, pipelineParallel=1, model="meta-llama/Llama-3.1-8B-Instruct")
    _, dgd = build(raw)
    worker = dgd["spec"]["components"][1]
    assert "multinode" not in worker
    assert pools.FABRIC_POD_LABEL not in worker["podTemplate"]["metadata"]["labels"]
    assert validate_object(dgd) == [] and rd.check_dgd(dgd, 8) == []


def test_builder_lws_path_and_custom_image():
    _, dgd = build(stack("sglang", True, grove=False, image="my-registry/sglang-runtime:my-tag"))
    assert dgd["metadata"]["annotations"] == {dm.ANNOTATION_ENABLE_GROVE: "false"}
    # a non-semver tag needs runtimeVersionOverride (v1beta1 CRD); the pinned Dynamo release
    assert {c["runtimeVersionOverride"] for c in dgd["spec"]["components"]} == {ADDON_VERSIONS["dynamo"]}
    assert validate_object(dgd) == []
    _, dgd = build(stack("sglang", True, queue="default"))
    assert dgd["metadata"]["annotations"] == {dm.ANNOTATION_KAI_QUEUE: "default"}
    assert all("runtimeVersionOverride" not in c for c in dgd["spec"]["components"])


def test_builder_refuses_other_kinds():
    raw = stack("vllm", False)
    raw["workloads"][0].update(kind="lws-inference")
    raw["addons"]["dynamo"]["enabled"] = True
    cfg = load(raw, ["hfToken"])
    with pytest.raises(ValueError, match="not dynamo"):
        dm.dynamo_graph_deployment(cfg, cfg.workloads[0])


# ------------------------------------------------------------------ the platform release
def test_platform_release_grove_default():
    cfg = load(stack("vllm", False), ["hfToken"])
    rel = dynamo_platform_release(cfg)
    assert rel["chart"] == "dynamo-platform" and rel["repository"] == "https://helm.ngc.nvidia.com/nvidia/ai-dynamo"
    assert rel["version"] == ADDON_VERSIONS["dynamo"] and rel["namespace"] == "dynamo-system"
    g = rel["values"]["global"]
    assert g["grove"] == {"install": False, "enabled": True}
    assert g["kai-scheduler"] == {"install": False, "enabled": True}


def test_platform_release_lws_volcano_path_and_overrides():
    raw = stack("vllm", False, grove=False)
    raw["addons"]["dynamo"].update(version="1.4.1", namespace="dynamo",
                                   values={"dynamo-operator": {"discoveryBackend": "etcd"}})
    rel = dynamo_platform_release(load(raw, ["hfToken"]))
    g = rel["values"]["global"]
    assert g["grove"]["enabled"] is False and g["kai-scheduler"]["enabled"] is False
    # the 1.5 chart's values.yaml has no global.lws (schemas/dynamo/values.yaml): nothing is set for it
    assert "lws" not in g
    assert rel["values"]["dynamo-operator"] == {"discoveryBackend": "etcd"}
    assert (rel["version"], rel["namespace"]) == ("1.4.1", "dynamo")


def test_platform_release_off_when_disabled():
    raw = stack("vllm", False)
    raw["workloads"] = []
    raw["addons"]["dynamo"]["enabled"] = False
    assert dynamo_platform_release(load(raw, ["hfToken"])) is None
