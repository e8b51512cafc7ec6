"""Fleet stacks (multinode/fleet): the config contract, the cross-cluster fit check, the Karmada and
Volcano Global objects, the policy rule and `plan` of a fleet stack."""
from __future__ import annotations

import copy
from typing import Any

import pytest

from multinode.errors import ConfigError
from multinode.fleet import checks as fchecks

TRAIN = {"name": "fleet-finetune", "kind": "volcano-training", "engine": "torchrun", "nodes": 2,
         "script": "/workspace/train.py"}


def fleet_raw(**fleet: Any) -> dict[str, Any]:
    base: dict[str, Any] = {"host": {"stack": "aws-dev"}, "karmada": {"apiEndpoint": "https://karmada.example.com:5443"},
                            "members": [{"name": "aws-dev", "stack": "aws-dev"},
                                        {"name": "gcp-dev", "stack": "gcp-dev"}],
                            "workloads": [dict(TRAIN)]}
    base.update(fleet)
    return {"fleet": base, "hfToken": "[secret]"}


def load(raw: dict[str, Any], secrets: set[str] | None = None) -> Any:
    return fchecks.load(raw, {"hfToken"} if secrets is None else secrets)


def problems(raw: dict[str, Any], secrets: set[str] | None = None) -> list[str]:
    with pytest.raises(ConfigError) as e:
        load(raw, secrets)
    return [str(p) for p in e.value.problems]


def test_example_shape_loads_and_names_the_fitting_member() -> None:
    cfg = load(fleet_raw())
    fit = cfg.fits["fleet-finetune"]
    assert fit.members() == ["aws-dev"]
    gcp = [c for c in fit.candidates if c.member == "gcp-dev"]
    assert gcp and not gcp[0].fits and "0 free nodes" in gcp[0].reasons[0]


def test_unknown_member_stack_names_the_key_and_the_known_stacks() -> None:
    raw = fleet_raw(members=[{"name": "aws-dev", "stack": "aws-dev"}, {"name": "x", "stack": "aws-prod"}])
    (msg,) = problems(raw)
    assert msg.startswith("fleet.members[1].stack: no stack file stacks/Pulumi.aws-prod.yaml")
    assert "gcp-dev" in msg and "kubeconfigSecret" in msg


def test_missing_kubeconfig_secret_and_plain_text_one() -> None:
    raw = fleet_raw(members=[{"name": "aws-dev", "stack": "aws-dev"},
                             {"name": "lab", "kubeconfigSecret": "labKubeconfig",
                              "nodePools": [{"name": "gpu", "machineSpec": {"name": "h100", "gpus": 8},
                                             "nodeCount": 2, "nodeSelector": {"pool": "gpu"}}]}])
    (msg,) = problems(raw)
    assert msg.startswith("fleet.members[1].kubeconfigSecret: no key multinode:labKubeconfig")
    assert "pulumi config set --secret multinode:labKubeconfig" in msg
    raw["labKubeconfig"] = "apiVersion: v1"
    (msg,) = problems(raw, {"hfToken"})
    assert msg.startswith("labKubeconfig: is a secret but is stored in plain text")


def test_stack_and_kubeconfig_are_exclusive_and_pull_is_refused() -> None:
    raw = fleet_raw(members=[{"name": "aws-dev", "stack": "aws-dev", "kubeconfigSecret": "k", "syncMode": "Pull"}])
    raw["k"] = "[secret]"
    msgs = problems(raw, {"hfToken", "k"})
    assert any(m.startswith("fleet.members[0]: set exactly one of stack") for m in msgs)
    assert any(m.startswith("fleet.members[0].syncMode: Pull mode") for m in msgs)


def test_unknown_keys_get_did_you_mean() -> None:
    raw = fleet_raw()
    raw["fleet"]["member"] = []
    msgs = problems(raw)
    assert any(m.startswith("fleet.member: unknown key 'member'; did you mean 'members'?") for m in msgs), msgs
    raw = fleet_raw()
    raw["nodePools"] = []
    assert any(m.startswith("nodePools: not a fleet stack key") for m in problems(raw))


def test_workload_that_fits_no_member_names_each_member_and_why() -> None:
    big = dict(TRAIN, nodes=5)
    (msg,) = problems(fleet_raw(workloads=[big]))
    assert msg.startswith("fleet.workloads[0]: 'fleet-finetune' fits in no member cluster")
    assert "member aws-dev pool gpu: nodes: 5 nodes, but node pool 'gpu' has 4" in msg
    assert "member gcp-dev pool gpu: nodes: 5 nodes, but node pool 'gpu' has 6" not in msg
    assert "member gcp-dev pool gpu:" in msg and "6 nodes of a3-megagpu-8g" in msg


def test_multi_node_gang_is_refused_on_a_member_without_fabric() -> None:
    lab = {"name": "lab", "kubeconfigSecret": "labKubeconfig",
           "nodePools": [{"name": "gpu", "machineSpec": {"name": "l40s-box", "gpus": 8, "vcpus": 96, "memoryGib": 768},
                          "nodeCount": 4, "nodeSelector": {"pool": "gpu"}}], "fabric": {"kind": "none"},
           "storage": {"kind": "existing", "existingClaim": "checkpoints"}}
    raw = fleet_raw(members=[lab], workloads=[dict(TRAIN, image="nvcr.io/nvidia/pytorch:25.01-py3")])
    raw["labKubeconfig"] = "[secret]"
    (msg,) = problems(raw, {"hfToken", "labKubeconfig"})
    assert "member lab pool gpu: a gang over 2 nodes needs a GPU fabric, but l40s-box has no GPU fabric" in msg
    one = copy.deepcopy(raw)
    one["fleet"]["workloads"][0]["nodes"] = 1
    assert load(one, {"hfToken", "labKubeconfig"}).fits["fleet-finetune"].members() == ["lab"]


def test_cross_key_contract() -> None:
    raw = fleet_raw(workloads=[dict(TRAIN, queue="nope", priorityClassName="hi", members=["azure"],
                                    images={"azure": "x"}),
                               dict(TRAIN, kind="mpijob")],
                    karmada={"version": "v1.12.0", "apiEndpoint": "https://k.example.com"})
    msgs = problems(raw)
    for start in ("fleet.workloads[0].queue: no queue named 'nope'", "fleet.workloads[0].priorityClassName",
                  "fleet.workloads[0].members[0]: no member named 'azure'", "fleet.workloads[0].images.azure",
                  "fleet.workloads[1].kind: 'mpijob' is not submitted across clusters",
                  "fleet.workloads[1].name: 'fleet-finetune' is already fleet.workloads[0]",
                  "fleet.karmada.version: v1.12.0: Volcano Global needs Karmada v1.13.0-beta.0"):
        assert any(m.startswith(start) for m in msgs), (start, msgs)


def test_a_member_workload_name_collision_is_a_reason() -> None:
    raw = fleet_raw(workloads=[dict(TRAIN, name="llama-finetune", members=["aws-dev"])])
    (msg,) = problems(raw)
    assert "member aws-dev pool -: the member stack already runs a workload named 'llama-finetune'" in msg


# ------------------------------------------------------------------ the Karmada and Volcano Global objects
from multinode.fleet import manifests as fm  # noqa: E402
from multinode.schema_check import helm_values_unknown_keys, validate_object  # noqa: E402

LAB = {"name": "lab", "kubeconfigSecret": "labKubeconfig", "region": "on-prem",
       "nodePools": [{"name": "h100", "machineSpec": {"name": "dgx-h100", "gpus": 8, "fabric": "infiniband",
                                                      "fabricNics": 8, "vcpus": 224, "memoryGib": 2048},
                      "nodeCount": 4, "nodeSelector": {"lab.example.com/pool": "h100"}}],
       "fabric": {"kind": "infiniband"}, "storage": {"kind": "existing", "existingClaim": "checkpoints"}}


def two_member_fleet(**kw: Any) -> Any:
    raw = fleet_raw(members=[{"name": "aws-dev", "stack": "aws-dev", "region": "us-east-1"}, LAB],
                    queues=[{"name": "research", "weight": 3, "priority": 10, "gpus": 64}, {"name": "batch"}],
                    priorityClasses=[{"name": "fleet-high", "value": 100000}],
                    workloads=[dict(TRAIN, queue="research", priorityClassName="fleet-high",
                                    images={"lab": "nvcr.io/nvidia/pytorch:25.01-py3"})], **kw)
    raw["labKubeconfig"] = "[secret]"
    return load(raw, {"hfToken", "labKubeconfig"})


def all_objects(cfg: Any) -> list[dict[str, Any]]:
    objs: list[dict[str, Any]] = []
    for m in cfg.fleet.members:
        objs += fm.member_access_objects(m.name) + [fm.member_token_secret(),
                                                    fm.cluster_secret(m.name, "dG9rZW4=", "Y2E="),
                                                    fm.cluster_object(cfg, m.name, "https://member.example.com")]
    objs += fm.volcano_global_host_objects(cfg, "kubeconfig") + fm.volcano_global_karmada_objects(cfg)
    objs += fm.queue_objects(cfg) + fm.priority_class_objects(cfg)
    for w in cfg.fleet.workloads:
        objs += fm.workload_objects(cfg, w, cfg.fits[w.name]).objects
    return objs


_TWO_MEMBER_OBJECTS: list[list[dict[str, Any]]] = []


def two_member_objects() -> list[dict[str, Any]]:
    """all_objects(two_member_fleet()), built once per process: it parses three Volcano CRD files of schemas/
    each time (~1 s of CPU, fleet.manifests._crd); every test gets its own deep copy to change."""
    if not _TWO_MEMBER_OBJECTS:
        _TWO_MEMBER_OBJECTS.append(all_objects(two_member_fleet()))
    return copy.deepcopy(_TWO_MEMBER_OBJECTS[0])


def test_every_fleet_object_is_valid_against_the_upstream_schemas() -> None:
    objs = two_member_objects()
    kinds = {o["kind"] for o in objs}
    assert {"Cluster", "PropagationPolicy", "ClusterPropagationPolicy", "OverridePolicy", "Queue",
            "ResourceInterpreterCustomization", "CustomResourceDefinition", "Deployment"} <= kinds
    for o in objs:
        assert validate_object(o) == [], (o["kind"], o["metadata"]["name"], validate_object(o))


def test_the_schemas_refuse_what_the_api_servers_would() -> None:
    cfg = two_member_fleet()
    pp = next(o for o in two_member_objects() if o["kind"] == "PropagationPolicy")
    bad = copy.deepcopy(pp)
    bad["spec"]["placement"]["replicaScheduling"]["replicaSchedulingType"] = "Split"
    bad["spec"]["placement"]["spreadConstraint"] = []
    errors = validate_object(bad)
    assert any("replicaSchedulingType" in e for e in errors) and any("spreadConstraint" in e for e in errors)
    cluster = fm.cluster_object(cfg, "lab", "https://lab.example.com")
    cluster["spec"]["apiEndpointt"] = "x"
    assert any("apiEndpointt" in e for e in validate_object(cluster))


def test_karmada_values_keys_exist_upstream() -> None:
    cfg = two_member_fleet(karmada={"apiEndpoint": "https://karmada.example.com:5443",
                                    "values": {"scheduler": {"replicaCount": 2}}})
    rel = fm.karmada_release(cfg)
    assert helm_values_unknown_keys("karmada", rel.values) == []
    assert rel.values["certs"]["auto"]["hosts"][-1] == "karmada.example.com"
    assert rel.values["scheduler"]["replicaCount"] == 2
    typo = {"apiServer": {"serviceTyp": "LoadBalancer"}}
    assert helm_values_unknown_keys("karmada", typo) == ["apiServer.serviceTyp"]


def test_gang_is_placed_whole_in_one_member_and_overridden_per_member() -> None:
    cfg = two_member_fleet()
    assert cfg.fits["fleet-finetune"].members() == ["aws-dev", "lab"]
    objs = {(o["kind"], o["metadata"]["name"]): o for o in two_member_objects()}
    job = objs[("Job", "fleet-finetune")]
    assert job["spec"]["queue"] == "research" and job["spec"]["priorityClassName"] == "fleet-high"
    pp = objs[("PropagationPolicy", "fleet-finetune")]["spec"]
    assert pp["placement"]["clusterAffinity"] == {"clusterNames": ["aws-dev", "lab"]}
    assert pp["placement"]["spreadConstraints"] == [{"spreadByField": "cluster", "maxGroups": 1, "minGroups": 1}]
    assert pp["placement"]["replicaScheduling"] == {"replicaSchedulingType": "Duplicated"}
    deps = objs[("PropagationPolicy", "fleet-finetune-deps")]["spec"]
    assert {"apiVersion": "v1", "kind": "Secret", "name": "fleet-finetune-hf-token",
            "namespace": "multinode"} in deps["resourceSelectors"]
    rules = {r["targetCluster"]["clusterNames"][0]: r["overriders"]["plaintext"]
             for r in objs[("OverridePolicy", "fleet-finetune")]["spec"]["overrideRules"]}
    lab = {op["path"]: op for op in rules["lab"]}
    sel = lab["/spec/tasks/0/template/spec/nodeSelector"]
    assert sel == {"path": "/spec/tasks/0/template/spec/nodeSelector", "operator": "replace",
                   "value": {"lab.example.com/pool": "h100"}}
    assert lab["/spec/tasks/0/template/spec/containers/0/image"]["value"] == "nvcr.io/nvidia/pytorch:25.01-py3"
    aws = {op["path"] for op in rules["aws-dev"]}
    assert aws == {"/spec/tasks/0/template/spec/nodeSelector", "/spec/tasks/1/template/spec/nodeSelector"}
    labels = fm.cluster_object(cfg, "lab", "https://x")["metadata"]["labels"]
    assert labels["multinode.dev/fabric"] == "infiniband"
    assert fm.cluster_object(cfg, "aws-dev", "https://x")["metadata"]["labels"]["multinode.dev/fabric"] == "efa"


def test_json_diff_round_trip_shapes() -> None:
    ops = fm.json_diff({"a": {"x/y": 1, "gone": 2}, "l": [1, 2]}, {"a": {"x/y": 3, "new": 4}, "l": [1]})
    assert {"path": "/a/x~1y", "operator": "replace", "value": 3} in ops
    assert {"path": "/a/gone", "operator": "remove"} in ops
    assert {"path": "/a/new", "operator": "add", "value": 4} in ops
    assert {"path": "/l", "operator": "replace", "value": [1]} in ops


# ------------------------------------------------------------------ plan of the example fleet stack
import json  # noqa: E402
import subprocess  # noqa: E402
import sys  # noqa: E402

import yaml  # noqa: E402

from multinode import plan as mplan  # noqa: E402

from .conftest import ROOT  # noqa: E402

FLEET_PROBE = """
import sys, json
sys.path.insert(0, {root!r})
from multinode import plan
r = plan.plan("fleet-dev", {out!r})
print(json.dumps({{"exit": r.exit_code, "error": r.error,
                  "mods": sorted(m for m in sys.modules if m.split('.')[0] in
                                 ("pulumi_aws", "pulumi_azure_native", "pulumi_gcp", "pulumi_oci")
                                 or m in ("components.platform", "components.clouds.aws", "components.clouds.azure",
                                          "components.clouds.gcp", "components.clouds.oci",
                                          "components.clouds.existing"))}}))
"""


def test_fleet_plan_imports_no_cloud_sdk_and_writes_the_build(tmp_path: Any) -> None:
    """One subprocess: plan of the example fleet stack loads no cloud SDK and no cloud component (its members
    are read from their stack files), exits 0 and writes build/fleet-dev/ like a cluster stack's plan."""
    code = FLEET_PROBE.format(root=str(ROOT), out=str(tmp_path))
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    data = json.loads(proc.stdout.strip().splitlines()[-1])
    assert data["exit"] == 0, data["error"]
    assert data["mods"] == []
    out = tmp_path / "fleet-dev"
    objs = [yaml.safe_load(p.read_text()) for p in sorted((out / "k8s").glob("*.yaml"))]
    kinds = {o["kind"] for o in objs}
    assert {"Cluster", "PropagationPolicy", "ClusterPropagationPolicy", "OverridePolicy", "Queue", "Deployment",
            "ResourceInterpreterCustomization", "MutatingWebhookConfiguration"} <= kinds
    for o in objs:
        assert validate_object(o) == [], (o["kind"], o["metadata"]["name"], validate_object(o))
    clusters = {o["metadata"]["name"]: o for o in objs if o["kind"] == "Cluster"}
    assert clusters["aws-dev"]["spec"]["apiEndpoint"] == "https://aws-dev.invalid"
    release = yaml.safe_load((out / "helm" / "karmada.yaml").read_text())
    assert release["chart"] == "karmada" and release["version"] == "v1.18.2"
    assert helm_values_unknown_keys("karmada", release["values"]) == []
    fit = json.loads((out / "fit.json").read_text())
    assert fit["fleet-finetune"]["members"] == ["aws-dev"]
    assert json.loads((out / "policy.json").read_text()) == []


def test_fleet_plan_of_bad_input_is_a_config_error(tmp_path: Any) -> None:
    path = tmp_path / "Pulumi.broken-fleet.yaml"
    doc = yaml.safe_load((ROOT / "stacks" / "Pulumi.fleet-dev.yaml").read_text())
    doc["config"]["multinode:fleet"]["members"][1]["stack"] = "gcp-prod"
    path.write_text(yaml.safe_dump(doc))
    result = mplan.plan("broken-fleet", tmp_path / "out", path)
    assert result.exit_code == mplan.EXIT_CONFIG
    assert "fleet.members[1].stack: no stack file stacks/Pulumi.gcp-prod.yaml" in result.error
    assert not (tmp_path / "out").exists()


# ------------------------------------------------------------------ the policy rule
from policy.pack import evaluate  # noqa: E402


def records(objs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [{"type": f"kubernetes:{o['apiVersion']}:{o['kind']}", "name": o["metadata"]["name"],
             "urn": f"urn:x::{o['kind']}-{o['metadata']['name']}", "inputs": o} for o in objs]


def fleet_violations(objs: list[dict[str, Any]]) -> list[dict[str, str]]:
    return [v for v in evaluate(records(objs)) if v["policy"] == "fleet-gang-in-one-member"]


def test_policy_passes_the_rendered_fleet_and_refuses_a_split() -> None:
    objs = two_member_objects()
    assert fleet_violations(objs) == []
    pp = next(o for o in objs if o["kind"] == "PropagationPolicy" and o["metadata"]["name"] == "fleet-finetune")
    pp["spec"]["placement"]["replicaScheduling"] = {"replicaSchedulingType": "Divided",
                                                   "replicaDivisionPreference": "Aggregated"}
    (v,) = fleet_violations(objs)
    assert v["enforcementLevel"] == "mandatory"
    assert v["message"].startswith("PropagationPolicy multinode/fleet-finetune: replicaSchedulingType Divided")
    assert "maxGroups: 1" in v["message"]


def test_policy_refuses_a_duplicate_into_several_members() -> None:
    objs = two_member_objects()
    pp = next(o for o in objs if o["kind"] == "PropagationPolicy" and o["metadata"]["name"] == "fleet-finetune")
    del pp["spec"]["placement"]["spreadConstraints"]
    (v,) = fleet_violations(objs)
    assert "could start in several members" in v["message"]
    pp["spec"]["placement"]["clusterAffinity"] = {"clusterNames": ["lab"]}       # one named cluster: whole, once
    assert fleet_violations(objs) == []


def test_policy_refuses_a_member_without_fabric() -> None:
    objs = two_member_objects()
    lab = next(o for o in objs if o["kind"] == "Cluster" and o["metadata"]["name"] == "lab")
    lab["metadata"]["labels"]["multinode.dev/fabric"] = "none"
    (v,) = fleet_violations(objs)
    assert "to member cluster(s) lab, which have no GPU fabric" in v["message"]
    assert "Job multinode/fleet-finetune" in v["message"]
    pp = next(o for o in objs if o["kind"] == "PropagationPolicy" and o["metadata"]["name"] == "fleet-finetune")
    pp["spec"]["placement"]["clusterAffinity"] = {"labelSelector": {"matchExpressions": [
        {"key": "multinode.dev/fabric", "operator": "NotIn", "values": ["none"]}]}}
    assert fleet_violations(objs) == []           # selecting by the fabric label keeps lab out


def test_policy_ignores_non_gang_propagation() -> None:
    objs = two_member_objects()
    deps = next(o for o in objs if o["metadata"]["name"] == "fleet-finetune-deps")
    assert "spreadConstraints" not in deps["spec"]["placement"]       # Secrets go to every candidate: allowed
    assert fleet_violations(objs) == []


def test_a_member_stack_name_is_never_a_path() -> None:
    raw = fleet_raw(members=[{"name": "aws-dev", "stack": "../stacks/Pulumi.aws-dev"}])
    (msg,) = problems(raw)
    assert msg.startswith("fleet.members[0].stack: '../stacks/Pulumi.aws-dev' is not a stack name")


def test_member_pool_outputs_that_differ_from_the_stack_file_are_warned(monkeypatch: Any) -> None:
    import pulumi

    from components import fleet as cfleet
    said: list[str] = []
    monkeypatch.setattr(pulumi.log, "warn", lambda msg, *a, **k: said.append(msg))
    cfleet._check_pools("aws-dev", {"gpu": 4}, {"gpu": {"machine": "p5.48xlarge", "nodeCount": 4}})
    cfleet._check_pools("aws-dev", {"gpu": 4}, None)                     # not up yet: nothing to compare
    assert said == []
    cfleet._check_pools("aws-dev", {"gpu": 4}, {"gpu": {"nodeCount": 2}})
    assert len(said) == 1 and "run `pulumi up` of aws-dev first" in said[0]


def test_an_inference_gang_is_propagated_whole_with_its_service() -> None:
    lws = {"name": "fleet-llama", "kind": "lws-inference", "engine": "vllm", "nodes": 2,
           "model": "meta-llama/Llama-3.1-405B-Instruct", "tensorParallel": 8, "pipelineParallel": 2}
    raw = fleet_raw(members=[LAB], workloads=[lws])
    raw["labKubeconfig"] = "[secret]"
    cfg = load(raw, {"hfToken", "labKubeconfig"})
    built = fm.workload_objects(cfg, cfg.fleet.workloads[0], cfg.fits["fleet-llama"])
    by = {(o["kind"], o["metadata"]["name"]): o for o in built.objects}
    gang = by[("PropagationPolicy", "fleet-llama")]["spec"]["resourceSelectors"]
    assert [s["kind"] for s in gang] == ["LeaderWorkerSet"]
    deps = {s["kind"] for s in by[("PropagationPolicy", "fleet-llama-deps")]["spec"]["resourceSelectors"]}
    assert "Service" in deps and "Secret" in deps
    for o in built.objects:
        assert validate_object(o) == [], (o["kind"], validate_object(o))
    assert fleet_violations(built.objects + [fm.cluster_object(cfg, "lab", "https://lab")]) == []
    assert problems(fleet_raw(members=[LAB], workloads=[dict(lws, queue="research")],
                              queues=[{"name": "research"}]) | {"labKubeconfig": "[secret]"},
                    {"hfToken", "labKubeconfig"}) == [
        "fleet.workloads[0].queue: Volcano Global queues order Volcano Jobs only; remove queue"]


def test_karmada_values_keys_are_checked_at_config_time() -> None:
    raw = fleet_raw(karmada={"apiEndpoint": "https://k.example.com", "values": {"schedulr": {"replicaCount": 2},
                                                                                 "scheduler": {"replicaCount": 2}}})
    (msg,) = problems(raw)
    assert msg.startswith("fleet.karmada.values.schedulr: not a key of the karmada chart's values.yaml")
