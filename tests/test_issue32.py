"""Issue 32: hostile input, round two. One section per item of the issue."""
from __future__ import annotations

import copy
import json
from decimal import Decimal

import pytest
import yaml

from multinode import admission, placement
from multinode import quantity as q
from policy import objects

from .conftest import ROOT
from .test_hostile_input import _plan

SECRET = "SECRETVALUE-7f3a9c"


def _corpus(name: str) -> dict:
    return yaml.safe_load((ROOT / "tests" / "corpus" / name).read_text())


def _lws_doc() -> dict:
    return _corpus("lws-group-larger-than-pool.yaml")


def _leader(doc: dict) -> dict:
    return doc["config"]["multinode:manifests"][0]["spec"]["leaderWorkerTemplate"]["leaderTemplate"]["spec"]


# ------------------------------------------------------------------ 1. quantities parsed once, as Kubernetes does
@pytest.mark.parametrize("text,value", [
    ("8", 8), (8, 8), ("500m", Decimal("0.5")), ("64Gi", 64 * 2 ** 30), ("1e3", 1000), ("1E3", 1000),
    ("1e+3", 1000), ("2k", 2000), ("8.0", 8), ("1.", 1), (".5", Decimal("0.5")), (".", 0), ("+", 0), ("-", 0),
    ("0.9n", Decimal("1e-9")),                  # finer than a nano: rounded up, away from zero
    ("-0.0000000001", Decimal("-1e-9")), ("1e-999999999", Decimal("1e-9")), (" 8 ", 8), ("0.5Ki", 512),
    ("7Ei", 7 * 2 ** 60), (str(2 ** 63 - 1), 2 ** 63 - 1), (1.5, Decimal("1.5")),
])
def test_quantity_format_is_kubernetes_format(text, value):
    assert q.parse(text) == value


@pytest.mark.parametrize("text", ["", "K", "1K", "1e", "1ee3", "1Mi5", "0x10", "1_000", "1.2.3", "\uff11",
                                  "8 GPUs", "1.5e1Gi", True, None, [8], {"a": 1}, float("inf"), float("nan")])
def test_quantity_format_refusals(text):
    with pytest.raises(q.QuantityError):
        q.parse(text)


@pytest.mark.parametrize("text", ["1e309", "1e400", "1e999999999", "-1e999999999", "8Ei", str(2 ** 63),
                                  "1e4294967296", "9" * 5000, "huge-int", 1e300], ids=str)
def test_quantity_range_is_bounded_and_decided_without_building_the_number(text):
    text = 10 ** 5000 if text == "huge-int" else text
    # "1e999999999" used to compute 10**999999999; "1e4294967296" is what Kubernetes would wrap to 1
    with pytest.raises(q.QuantityError) as e:
        q.parse(text)
    assert "out of range" in e.value.reason


def test_placement_admission_and_the_pack_read_quantities_through_the_one_parser():
    assert placement.quantity("1e309") is None and admission.parse_quantity("1e999999999") is None
    assert placement.quantity("1K") is None                     # Kubernetes has no "K" suffix (only "k")
    assert objects.container_resource({"resources": {"limits": {"nvidia.com/gpu": "8.0"}}}, objects.GPU) == 8
    assert objects.container_resource({"resources": {"limits": {"nvidia.com/gpu": "1e1"}}}, objects.GPU) == 10
    assert objects.container_resource({"resources": {"limits": {"nvidia.com/gpu": "1.5"}}}, objects.GPU) == 0


def test_plan_refuses_an_out_of_range_quantity_naming_the_key(tmp_path):
    doc = _lws_doc()
    c = _leader(doc)["containers"][0]
    c["resources"]["requests"] = {"cpu": "1e999999999"}
    c["resources"]["limits"]["memory"] = "1e309"
    text = yaml.safe_dump(doc).replace("1e999999999", '"1e999999999"').replace("1e309", '"1e309"')
    code, out, _ = _plan(tmp_path, text)
    assert code == 2, out[-2000:]
    assert ("manifests[0].spec.leaderWorkerTemplate.leaderTemplate.spec.containers[0].resources.requests.cpu: "
            "'1e999999999' is out of range") in out
    assert "resources.limits.memory: '1e309' is out of range" in out and "Traceback" not in out


def test_pod_spec_quantities_cover_every_container_list_overhead_and_shm():
    spec = {"initContainers": [{"resources": {"limits": {"cpu": "x"}}}],
            "containers": [{"resources": {"requests": {"memory": "1Gi"}}}],
            "ephemeralContainers": [{"resources": {"limits": {"cpu": "1e400"}}}],
            "overhead": {"cpu": "bad"},
            "volumes": [{"name": "d", "emptyDir": {"medium": "Memory", "sizeLimit": "9Ei"}}]}
    paths = [p for p, _ in q.pod_spec_problems(copy.deepcopy(spec))]
    assert paths == ["initContainers[0].resources.limits.cpu", "ephemeralContainers[0].resources.limits.cpu",
                     "overhead.cpu", "volumes[0].emptyDir.sizeLimit"]


# ------------------------------------------------------------------ 2. placement never passes what it did not place
def _p5_pool(nodes: int):
    from tests.test_placement import pool
    return pool(nodes)


def _lws_obj(replicas, size: int = 3):
    from tests.test_placement import lws
    return lws("big", size=size, replicas=replicas)


@pytest.mark.parametrize("replicas,at_least", [(700, False), (10 ** 12, True)])
def test_an_object_too_large_to_simulate_is_refused_by_count_arithmetic(replicas, at_least):
    res = placement.simulate([_lws_obj(replicas)], [_p5_pool(4)])
    assert not res.fits and [c.owner for c in res.counted] == ["LeaderWorkerSet research/big"]
    (f,) = res.findings
    assert f.kind == placement.COUNTED and "more than the pool has" in f.message
    want = f"at least {3 * placement.MAX_COUNT} pods" if at_least else \
        "2100 pods in 700 gangs of up to 3 pods asking 16800 GPUs"
    assert want in f.message and "(32 GPUs)" in f.message
    assert placement.as_json(res)["countedNotSimulated"][0]["pods"] == (3 * placement.MAX_COUNT if at_least else 2100)


def test_a_large_object_the_count_cannot_refuse_still_does_not_pass():
    # 2,100 CPU pods on the GPU pool: GPUs suffice by count (0), but nothing was placed: not proven, a finding
    dep = {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "web", "namespace": "x"},
           "spec": {"replicas": 2100, "template": {"metadata": {}, "spec": {
               "nodeSelector": dict(_p5_pool(4).labels), "containers": [{"name": "c", "image": "i"}]}}}}
    res = placement.simulate([dep], [_p5_pool(4)])
    assert not res.fits and res.findings[0].kind == placement.COUNTED
    assert "placement is not proven" in res.findings[0].message
    # just under the limit: simulated pod by pod as before (no counted object)
    dep["spec"]["replicas"] = 2000
    assert placement.simulate([dep], [_p5_pool(4)]).counted == []


def test_the_pack_reports_the_counted_object(monkeypatch):
    import policy.rules.placement as rp
    from policy.engine import Context, Resource
    monkeypatch.setattr(rp, "pool_specs", lambda ctx: [_p5_pool(4)])
    r = Resource(type="kubernetes:leaderworkerset.x-k8s.io/v1:LeaderWorkerSet", name="big", props=_lws_obj(700))
    got = list(rp.check_stack_fits([r], Context()))
    assert len(got) == 1 and "decided by count arithmetic" in got[0][1]


def test_an_object_too_large_even_to_count_is_not_passed_either():
    cl = {"name": "a", "spec": {"replicas": 1000, "minAvailable": 1, "podSpec": {"containers": [{"name": "c"}]}}}
    pcs = {"apiVersion": "grove.io/v1alpha1", "kind": "PodCliqueSet", "metadata": {"name": "g"},
           "spec": {"replicas": 2000, "template": {"cliques": [cl], "podCliqueScalingGroups": [
               {"name": "sg", "cliqueNames": ["a"], "replicas": 2000, "minAvailable": 1}]}}}
    res = placement.simulate([pcs], [_p5_pool(4)])
    assert not res.fits and "not simulated, not counted" in res.findings[0].message


def test_a_job_reads_completions_only_without_parallelism():
    job = {"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": "j"},
           "spec": {"parallelism": 2, "completions": 10 ** 9, "template": {"spec": {"containers": [{"name": "c"}]}}}}
    assert len(placement.gangs_of(job)) == 2 and placement.counted_of(job) is None


# ------------------------------------------------------------------ 3. no secret echoed, whatever its type
def _stack(name: str) -> dict:
    return yaml.safe_load((ROOT / "stacks" / f"Pulumi.{name}.yaml").read_text())


@pytest.mark.parametrize("value", [{"value": SECRET}, 7319264051, [SECRET], {"secure": 5, "x": SECRET}])
def test_a_credential_named_workload_env_var_of_the_wrong_type_is_refused_without_its_value(tmp_path, value):
    doc = _stack("aws-dev")
    doc["config"]["multinode:workloads"][0]["env"] = {"DB_PASSWORD": value}
    code, text, files = _plan(tmp_path, doc)
    # refused at the key, the value never echoed (the message names the allowed shapes, not the value)
    assert code == 2 and "workloads[0].env.DB_PASSWORD" in text, text[-2000:]
    assert SECRET not in text + files and "7319264051" not in text + files


@pytest.mark.parametrize("obj", [
    {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "d"},
     "spec": {"selector": {"matchLabels": {"a": "b"}}, "template": {"metadata": {"labels": {"a": "b"}}, "spec": {
         "containers": [{"name": "c", "image": "i", "env": [{"name": "DB_PASSWORD", "value": 7319264051}]}]}}}},
    {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "d"},
     "spec": {"selector": {"matchLabels": {"a": "b"}}, "template": {"metadata": {"labels": {"a": "b"}}, "spec": {
         "containers": [{"name": "c", "image": "i", "env": [{"name": "HF_TOKEN", "value": {"v": SECRET}}]}]}}}},
    {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "s"}, "data": {"pw": 7319264051}},
    {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "s"}, "stringData": [SECRET]},
])
def test_schema_errors_under_a_secret_path_never_show_the_value(tmp_path, obj):
    doc = _lws_doc()
    doc["config"]["multinode:manifests"] = [obj]
    code, text, files = _plan(tmp_path, doc)
    assert code == 2 and "[secret]" in text, text[-2000:]
    assert SECRET not in text + files and "7319264051" not in text + files


def test_the_pack_flags_a_literal_credential_of_any_type_without_its_value():
    from policy.engine import Context, Resource
    from policy.rules.secrets import check_literal_secrets
    doc = _lws_doc()
    lws = doc["config"]["multinode:manifests"][0]
    _leader(doc)["containers"][0]["env"] = [{"name": "DB_PASSWORD", "value": 7319264051},
                                            {"name": "API_TOKEN", "value": {"x": SECRET}},
                                            {"name": "USE_TOKEN", "value": True}]
    got = list(check_literal_secrets(Resource(type="kubernetes:leaderworkerset.x-k8s.io/v1:LeaderWorkerSet",
                                              name="l", props=lws), Context()))
    assert len(got) == 2 and "DB_PASSWORD" in got[0] and "API_TOKEN" in got[1]
    assert all(SECRET not in m and "7319264051" not in m for m in got)


# ------------------------------------------------------------------ 7. renames that keep the data
def _plan_file(tmp_path, doc: dict, stack: str, out) -> tuple[int, str]:
    import io
    from contextlib import redirect_stderr, redirect_stdout

    from multinode import plan as mplan
    f = tmp_path / f"Pulumi.{stack}.yaml"
    f.write_text(yaml.safe_dump(doc, sort_keys=False))
    buf = io.StringIO()
    with redirect_stdout(buf), redirect_stderr(buf):
        code = mplan.main([stack, "--file", str(f), "--out", str(out)])
    return code, buf.getvalue()


@pytest.mark.parametrize("stack,file_system", [("aws-dev", "aws:fsx/lustreFileSystem:LustreFileSystem"),
                                               ("gcp-dev", "gcp:filestore/instance:Instance")])
def test_renaming_storage_warns_naming_the_file_system_and_resource_name_keeps_it(tmp_path, stack, file_system):
    out = tmp_path / "build"
    doc = _stack(stack)
    code, _ = _plan_file(tmp_path, doc, stack, out)
    assert code == 0
    first = (out / stack / "resources.json").read_text()
    doc["config"]["multinode:storage"]["name"] = "ckpt-v2"
    code, text = _plan_file(tmp_path, doc, stack, out)
    assert code == 0, text[-2000:]
    warned = [ln for ln in text.splitlines() if ln.startswith("WARNING")]
    assert any(file_system in ln and "protected" in ln and "storage.resourceName: checkpoints" in ln
               for ln in warned), text[-3000:]
    # the fix the warning names: every resource keeps its URN and its names; only the displayed name (tags) moves
    (out / stack / "resources.json").write_text(first)
    doc["config"]["multinode:storage"]["resourceName"] = "checkpoints"
    code, text = _plan_file(tmp_path, doc, stack, out)
    assert code == 0 and "WARNING" not in text, text[-3000:]
    before, after = json.loads(first), json.loads((out / stack / "resources.json").read_text())
    assert [r["urn"] for r in before] == [r["urn"] for r in after]


def test_rename_warnings_on_records():
    from multinode import renames
    fs = {"urn": "u:fs", "type": "gcp:filestore/instance:Instance", "name": "a-filestore", "protect": True,
          "retainOnDelete": True, "inputs": {"name": "lab-a"}}
    pvc = {"urn": "u:pvc", "type": "kubernetes:core/v1:PersistentVolumeClaim", "name": "a-pvc", "protect": True,
           "retainOnDelete": True, "inputs": {"metadata": {"name": "a", "namespace": "m"}}}
    free = {"urn": "u:cm", "type": "kubernetes:core/v1:ConfigMap", "name": "c", "protect": False,
            "retainOnDelete": False, "inputs": {"metadata": {"name": "c"}}}
    assert renames.warnings([fs, pvc, free], [fs, pvc]) == []                 # an unprotected removal: no warning
    renamed = [dict(fs, inputs={"name": "lab-b"}), dict(pvc, inputs={"metadata": {"name": "b", "namespace": "m"}})]
    got = renames.warnings([fs, pvc], renamed)
    assert "would be replaced: name changed" in got[0] and "metadata.name changed" in got[1]
    assert "is not in this plan" in renames.warnings([fs], [])[0]
    addon = {"urn": "u:old", "type": "aws:eks/addon:Addon", "name": "a-csi", "inputs": {"addonName": "aws-efs-csi"}}
    moved = dict(addon, urn="u:new", name="b-csi")
    assert "removes aws-efs-csi from the cluster" in renames.warnings([addon], [moved])[0]


def test_a_previous_resources_json_that_is_not_ours_is_ignored(tmp_path):
    from multinode import renames
    p = tmp_path / "resources.json"
    for text in ("not json", "{}", "[1, 2]"):
        p.write_text(text)
        assert not renames.previous_records(p)


def test_resource_name_must_be_a_dns_label(tmp_path):
    doc = _stack("aws-dev")
    doc["config"]["multinode:storage"]["resourceName"] = "Bad_Name"
    code, text = _plan_file(tmp_path, doc, "aws-dev", tmp_path / "b")
    assert code == 2 and "storage.resourceName" in text


# ------------------------------------------------------------------ 4. hand-written pods wait for the fabric policies
def test_hand_written_pod_objects_wait_for_the_fabric_policies_and_nothing_else_does(tmp_path):
    doc = _lws_doc()
    doc["config"]["multinode:manifests"] += [
        {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "cm", "namespace": "research"},
         "data": {"MODEL": "llama"}},
        {"apiVersion": "v1", "kind": "Service", "metadata": {"name": "svc", "namespace": "research"},
         "spec": {"selector": {"app": "x"}, "ports": [{"port": 80}]}}]
    code, text = _plan_file(tmp_path, doc, "deps", tmp_path / "build")
    assert code in (0, 1), text[-2000:]
    recs = json.loads((tmp_path / "build" / "deps" / "resources.json").read_text())
    policies = {r["urn"] for r in recs if r["type"].startswith("kubernetes:policies.kyverno.io/")}
    assert policies, "the stack renders fabric policies"
    by_name = {r["name"]: r for r in recs}
    lws = by_name["manifest-leaderworkerset-research-byo-llama"]
    assert policies <= set(lws["dependencies"])
    for name in ("manifest-configmap-research-cm", "manifest-service-research-svc"):
        assert not policies & set(by_name[name]["dependencies"]), name


def _aws_policies():
    from multinode import checks, stackfile
    from multinode.manifests import kyverno
    values, secrets, _ = stackfile.read_stack_file(stackfile.stack_path("aws-dev"))
    cfg = checks.load(values, secrets)
    pols = kyverno.fabric_policies(cfg)
    mutating = [p for p in pols if p["kind"] == kyverno.MUTATING_KIND]
    (validating,) = [p for p in pols if p["kind"] == kyverno.VALIDATING_KIND]
    return cfg, mutating, validating


def _gpu_pod(cfg, gpus="8", where="containers"):
    from multinode import pools
    sel = pools.node_selector(cfg, cfg.node_pools[0])
    main = {"name": "main", "image": "i"}
    gpu = {"name": "g", "image": "i", "resources": {"limits": {"nvidia.com/gpu": gpus}}}
    spec: dict = {"nodeSelector": sel, "containers": [main]}
    if where == "containers":
        spec["containers"] = [gpu]
    else:
        spec["initContainers"] = [dict(gpu, restartPolicy="Always")]
    labels = {pools.FABRIC_POD_LABEL: pools.FABRIC_POD_LABEL_VALUE}
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p", "labels": labels}, "spec": spec}


def test_the_validating_policy_counts_gpus_in_native_sidecars():
    from multinode.manifests import kyverno
    cfg, mutating, validating = _aws_policies()
    pod = _gpu_pod(cfg, where="initContainers")
    for m in mutating:
        pod = kyverno.mutate(m, pod)
    # the fabric is injected into spec.containers only: a GPU sidecar without it is refused, no longer skipped
    assert kyverno.FABRIC_RULE in kyverno.refused_by(validating, pod)
    cond = validating["spec"]["matchConditions"][0]["expression"]
    assert "initContainers" in cond and "ephemeralContainers" in cond


@pytest.mark.parametrize("gpus", ["8", "8.0", 8, "8000m", "1e1"])
def test_gpu_quantities_in_any_form_kubernetes_accepts_are_read_by_the_policies(gpus):
    from multinode.manifests import kyverno
    cfg, mutating, validating = _aws_policies()
    pod = _gpu_pod(cfg, gpus=gpus)
    for m in mutating:
        pod = kyverno.mutate(m, pod)     # a CEL error raises here: "8.0" broke int() before
    limits = pod["spec"]["containers"][0]["resources"]["limits"]
    assert str(limits.get("vpc.amazonaws.com/efa")) == ("40" if gpus == "1e1" else "32")
    assert kyverno.denials(validating, pod) == []


def test_the_cel_quantity_library_follows_kubernetes():
    from multinode.manifests import cel
    assert cel.evaluate("quantity('1k').asInteger()") == 1000
    assert cel.evaluate("quantity('2Ki').asInteger()") == 2048
    assert cel.evaluate("quantity('1.5').isInteger()") is False
    assert cel.evaluate("isQuantity('8 GPUs')") is False
    with pytest.raises(cel.CelError):
        cel.evaluate("quantity('1.5').asInteger()")       # "cannot convert value to integer"
    assert q.as_int64("8.0") is None and q.as_int64(q.canonical("8.0")) == 8    # AsInt64 kept exactly
    assert [q.canonical(v) for v in ("1.5", "2048Ki", "1000", "1e3", "0.5Gi")] == ["1500m", "2Mi", "1k", "1e3",
                                                                                  "512Mi"]


# ------------------------------------------------------------------ 5. names, labels, bounds as Kubernetes checks them
@pytest.mark.parametrize("obj,where,words", [
    ({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "Bad_Name"}, "data": {"a": "b"}},
     "metadata.name", "DNS subdomain"),
    ({"apiVersion": "v1", "kind": "Service", "metadata": {"name": "9svc"}, "spec": {"ports": [{"port": 80}]}},
     "metadata.name", "DNS-1035 label"),
    ({"apiVersion": "leaderworkerset.x-k8s.io/v1", "kind": "LeaderWorkerSet",
      "metadata": {"name": "l", "labels": {"team": True}}, "spec": {}}, "metadata.labels.team", "is text"),
    ({"apiVersion": "leaderworkerset.x-k8s.io/v1", "kind": "LeaderWorkerSet",
      "metadata": {"name": "l", "labels": {"team": {"a": 1}}}, "spec": {}}, "metadata.labels.team", "is text"),
    ({"apiVersion": "leaderworkerset.x-k8s.io/v1", "kind": "LeaderWorkerSet",
      "metadata": {"name": "L", "labels": {"team": "x" * 64}}, "spec": {}}, "metadata.labels.team", "at most 63"),
    ({"apiVersion": "leaderworkerset.x-k8s.io/v1", "kind": "LeaderWorkerSet",
      "metadata": {"name": "Upper"}, "spec": {}}, "metadata.name", "DNS subdomain"),
])
def test_names_and_labels_of_hand_written_objects_are_checked_as_the_api_server_does(tmp_path, obj, where, words):
    doc = _lws_doc()
    doc["config"]["multinode:manifests"] = [obj]
    code, text, _ = _plan(tmp_path, doc)
    assert code == 2 and f"manifests[0].{where}" in text and words in text, text[-2000:]


def test_a_valid_dotted_name_and_quoted_labels_pass():
    from multinode import config
    obj = {"kind": "ConfigMap", "metadata": {"name": "a.b-c", "labels": {"example.com/team": "ml", "on": "true"}}}
    assert config._manifest_meta_problems(obj) == []


@pytest.mark.parametrize("path,value", [("queues", [{"name": "q", "gpus": 2 ** 63}]),
                                        ("queues", [{"name": "q", "priority": 2 ** 31}])])
def test_counts_in_the_fleet_config_are_bounded(path, value):
    from pydantic import ValidationError

    from multinode.fleet import config as fc
    raw = yaml.safe_load((ROOT / "stacks" / "Pulumi.fleet-dev.yaml").read_text())["config"]
    fleet = copy.deepcopy(raw["multinode:fleet"])
    fleet[path] = value
    with pytest.raises(ValidationError) as e:
        fc.Fleet.model_validate(fleet)  # the model alone: the bound is in the shape
    assert e.value.errors()[0]["type"] == "less_than_equal"


# ------------------------------------------------------------------ 6. credential file paths are paths
@pytest.mark.parametrize("key,value", [("gcp:credentials", "~/.config/gcloud/key.json"),
                                       ("gcp:credentials", "key.json"),
                                       ("aws:sharedCredentialsFiles", ["~/.aws/credentials", "/etc/aws/creds"]),
                                       ("oci:privateKeyPath", "~/.oci/oci_api_key.pem"),
                                       ("azure-native:clientCertificatePath", "/certs/sp.pfx")])
def test_credential_file_paths_are_accepted(tmp_path, key, value):
    from multinode import stackfile
    doc = _stack("gcp-dev" if key.startswith("gcp") else "aws-dev")
    doc["config"][key] = value
    f = tmp_path / "Pulumi.p.yaml"
    f.write_text(yaml.safe_dump(doc))
    stackfile.read_stack_file(f)      # no ConfigError


_JSON_KEY = json.dumps({"type": "service_account", "private_key": SECRET})


@pytest.mark.parametrize("key,value", [("gcp:credentials", _JSON_KEY),
                                       ("gcp:credentials", SECRET),
                                       ("aws:sharedCredentialsFiles", [f"[default]\naws_secret_access_key={SECRET}"]),
                                       ("oci:privateKeyPath", f"-----BEGIN PRIVATE KEY-----\n{SECRET}")])
def test_inline_key_material_is_still_refused_without_its_value(tmp_path, key, value):
    doc = _stack("gcp-dev" if key.startswith("gcp") else "aws-dev")
    doc["config"][key] = value
    code, text, files = _plan(tmp_path, doc)
    assert code == 2 and key in text and "pulumi config set --secret" in text, text[-2000:]
    assert SECRET not in text + files


# ------------------------------------------------------------------ 8. the pack reports a gang object failing its CRD
def test_the_pack_reports_a_wrong_typed_gang_object_instead_of_reading_it_as_absent():
    from policy.engine import Context, Resource
    from policy.rules.gangs import check_gang_schema
    lws = _lws_doc()["config"]["multinode:manifests"][0]
    typ = "kubernetes:leaderworkerset.x-k8s.io/v1:LeaderWorkerSet"
    assert list(check_gang_schema(Resource(type=typ, name="l", props=lws), Context())) == []
    bad = copy.deepcopy(lws)
    bad["spec"]["leaderWorkerTemplate"]["size"] = "four"              # a wrong type: the readers see no size
    bad["spec"]["leaderWorkerTemplate"]["leaderTemplate"]["spec"]["containers"][0]["env"] = [
        {"name": "DB_PASSWORD", "value": 7319264051}]
    got = list(check_gang_schema(Resource(type=typ, name="l", props=bad), Context()))
    assert len(got) == 1 and "leaderWorkerTemplate.size" in got[0] and "CustomResourceDefinition" in got[0]
    assert "7319264051" not in got[0]
    assert placement.gangs_of(bad)                     # what the readers do with it: a gang of one size (absent)


def test_a_gang_object_with_values_unknown_until_up_is_not_judged():
    from policy.engine import Context, Resource
    from policy.rules.gangs import check_gang_schema
    lws = copy.deepcopy(_lws_doc()["config"]["multinode:manifests"][0])
    lws["spec"]["replicas"] = objects.UNKNOWN
    typ = "kubernetes:leaderworkerset.x-k8s.io/v1:LeaderWorkerSet"
    assert list(check_gang_schema(Resource(type=typ, name="l", props=lws), Context())) == []


# ------------------------------------------------------------------ 9. the hostile generator's issue-32 families
def test_fuzz_issue32_families_sample():
    """One case of each family (quantities, large gangs, credential-named env, renames), seeded; longer:
    `python -m tests.fuzz_hostile --stacks 0 --objects 0 --round2 50 --seed 32` (MULTINODE_FUZZ_ROUND2 here)."""
    import os

    from tests import fuzz_hostile as fz
    n = int(os.environ.get("MULTINODE_FUZZ_ROUND2", "1"))
    cases = fz.generate_round2(n, int(os.environ.get("MULTINODE_FUZZ_SEED", "32")), light=n == 1)
    assert {c["id"].split("-")[0] for c in cases} == {"quantity", "large", "credenv", "rename"}
    results = fz.run_cases(cases)
    bad = fz.failures(results)
    assert not bad, [(r["id"], r["what"], r["exit"], r["output"][-800:]) for r in bad[:3]]
    assert all(r["exit"] in (0, 1, 2) for r in results)


def test_issue32_family_generators_make_what_they_say():
    import random

    from tests import fuzz_hostile as fz
    rng = random.Random(5)
    text, what = fz.quantity_case(rng)
    value = what.split("'")[1]
    assert f'"{value}"' in text                     # written quoted: the stack file reads it as text
    before, after, what = fz.rename_case(random.Random(1))
    assert before != after
    text, what = fz.large_case(random.Random(2))
    assert "large" in what


@pytest.mark.parametrize("value", [7319264051, {"v": SECRET}, [SECRET]])
def test_a_credential_named_env_entry_of_a_hand_written_object_that_is_not_text_is_refused(tmp_path, value):
    doc = _lws_doc()
    _leader(doc)["containers"][0]["env"] = [{"name": "DB_PASSWORD", "value": value}]
    code, text, files = _plan(tmp_path, doc)
    assert code == 2, text[-2000:]
    assert "leaderTemplate.spec.containers[0].env[0].value" in text and "DB_PASSWORD" in text
    assert SECRET not in text + files and "7319264051" not in text + files


@pytest.mark.parametrize("name", ["", "Bad_Name", "x" * 300])
def test_storage_name_must_be_a_dns_subdomain(tmp_path, name):
    # found by the rename family: an empty storage.name ended the program with a TypeError (no resource name)
    doc = _stack("existing-dev")
    doc["config"]["multinode:storage"]["name"] = name
    code, text = _plan_file(tmp_path, doc, "existing-dev", tmp_path / "b")
    assert code == 2 and "storage.name" in text and "Traceback" not in text, text[-2000:]
