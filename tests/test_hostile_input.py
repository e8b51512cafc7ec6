"""Issue 16: hostile input never crashes `plan` or the policy pack, and secrets are never echoed.

* the strict stack-file reader (multinode/safeyaml.py): each refused YAML class, with its key path;
* policy readers are total: every rule called directly on wrong-typed objects of every kind never raises;
  an object a rule still cannot read is reported as a finding (plan and the CrossGuard adapters);
* secrets: the value never appears in any message, stdout/stderr or build/ file;
* the fuzz run (tests/fuzz_hostile.py): small in CI, longer with MULTINODE_FUZZ_STACKS / MULTINODE_FUZZ_OBJECTS.
"""
from __future__ import annotations

import copy
import io
import os
import random
import tracemalloc
from contextlib import redirect_stderr, redirect_stdout
from pathlib import Path

import pytest
import yaml
from pulumi_policy import PolicyResource, PolicyResourceOptions, ResourceValidationArgs, StackValidationArgs

from multinode import plan as mplan
from multinode import safeyaml, stackfile
from multinode.errors import ConfigError
from policy import engine, pack
from policy.rules import RULES
from tests import fuzz_hostile as fz

from .conftest import ROOT, sized

SECRET = "SECRETVALUE-7f3a9c"


def refused(text: str) -> ConfigError:
    with pytest.raises(ConfigError) as e:
        safeyaml.load(text)
    return e.value


# ------------------------------------------------------------------ the YAML reader
@pytest.mark.parametrize("snippet,path,words", [
    ("{day: 2024-01-01}", "multinode:x.day", "quoted"),
    ("2024-01-01T10:00:00Z", "multinode:x", "timestamp"),
    ("1:30", "multinode:x", "base-60"),
    ("017", "multinode:x", "leading zero"),
    ("0o17", "multinode:x", "decimal"),
    ("0x1F", "multinode:x", "decimal"),
    ("1_000", "multinode:x", "underscores"),
    ("[yes]", "multinode:x[0]", "true or false"),
    ("{a: off}", "multinode:x.a", "true or false"),
    ("{a: y}", "multinode:x.a", "boolean"),
    ("{v: .nan}", "multinode:x.v", "finite"),
    ("[.inf]", "multinode:x[0]", "finite"),
    ("-.Inf", "multinode:x", "finite"),
    ("1e999", "multinode:x", "finite"),
    ("99999999999999999999999", "multinode:x", "2**53"),
    ("!!binary aGVsbG8=", "multinode:x", "tag"),
    ("!!set {a, b}", "multinode:x", "tag"),
    ("!!python/object/apply:os.system [echo]", "multinode:x", "tag"),
    ("{<<: {a: 1}}", "multinode:x", "merge"),
    ("&a {x: *a}", "multinode:x.x", "inside its own anchor"),
    ("*nothing", "multinode:x", "no anchor"),
    ("{name: a, name: b}", "multinode:x.name", "duplicate key"),
    ("{? [a] : b}", "multinode:x", "used as a key"),
    (fz.deep(65), "multinode:x", "deeper than 64"),
    (fz.deep(5000), "multinode:x", "deeper than 64"),
])
def test_reader_refuses_with_key_path_and_line(snippet, path, words):
    err = refused(f"config:\n  multinode:cloud: aws\n  multinode:x: {snippet}\n")
    p = err.problems[0]
    assert p.path.startswith(path), err
    assert words in p.message and "(line 3)" in p.message, err


def test_reader_matches_the_pulumi_cli_where_they_agree():
    doc = safeyaml.load("config:\n  m:x: {a: 1, b: 1.5, c: 1e3, d: true, e: ~, f: 'yes', g: !!str 2024-01-01, "
                        "h: \"1:30\", i: -7, j: 0, k: 8}\n")
    assert doc["config"]["m:x"] == {"a": 1, "b": 1.5, "c": 1000.0, "d": True, "e": None, "f": "yes",
                                    "g": "2024-01-01", "h": "1:30", "i": -7, "j": 0, "k": 8}


def test_example_stacks_and_corpus_read_as_before():
    files = sorted((ROOT / "stacks").glob("*.yaml")) + sorted((ROOT / "tests" / "corpus").glob("*.yaml"))
    assert len(files) > 20
    for f in files:
        text = f.read_text()
        assert safeyaml.load(text) == yaml.safe_load(text), f


def test_bounded_aliases_are_expanded_as_copies():
    doc = safeyaml.load("config:\n  m:a: &p {name: gpu, labels: {x: '1'}}\n  m:b: *p\n")["config"]
    assert doc["m:a"] == doc["m:b"] and doc["m:a"] is not doc["m:b"]


def test_alias_bomb_is_refused_small():
    tracemalloc.start()
    try:
        err = refused("config:\n  m:x: " + fz.alias_bomb(9, 9) + "\n")
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert "alias bomb" in str(err)
    assert peak < 64 * 1024 * 1024, peak       # ~10**9 values were asked for; a few MB were used


def test_refusal_of_a_secret_key_never_repeats_its_value(tmp_path):
    f = tmp_path / "Pulumi.s.yaml"
    f.write_text("config:\n  multinode:cloud: aws\n  multinode:hfToken: 2024-01-01\n"
                 "  multinode:x: {apiToken: 1:30}\n")
    with pytest.raises(ConfigError) as e:
        stackfile.read_stack_file(f)
    text = str(e.value)
    assert "2024-01-01" not in text and "1:30" not in text and text.count("[secret]") == 2


# ------------------------------------------------------------------ policy readers are total
def _hostile_objects(n: int, seed: int):
    rng = random.Random(seed)
    objs = fz.object_cases()
    for i in range(n):
        _, obj = objs[i % len(objs)]
        m = copy.deepcopy(obj)
        for _ in range(rng.choice([1, 2, 4])):
            ps = [p for p in fz.paths(m) if p and p[0] not in ("apiVersion", "kind")]
            if not ps:
                break
            p = rng.choice(ps)
            fz.set_at(m, p, rng.choice(fz.WRONG_VALUES + [fz.wrong_type_for(fz.get_at(m, p), rng)]))
        yield m


def test_every_rule_reads_wrong_typed_objects_of_every_kind_without_raising():
    kinds = set()
    calls = 0
    for props in _hostile_objects(400, seed=16):
        kinds.add(props.get("kind"))
        res = engine.Resource(type=f"kubernetes:{props.get('apiVersion')}:{props.get('kind')}", name="x",
                              props=props)
        ctx = engine.build_context(None, [res])
        for rule in RULES:     # called directly: the engine's last-resort guard is not in the way
            calls += 1
            list(rule.check(res, ctx) if rule.scope == "resource" else rule.check([res], ctx))
    assert {"LeaderWorkerSet", "PodCliqueSet", "Job", "MPIJob", "PyTorchJob", "DynamoGraphDeployment",
            "ClusterPolicy", "PersistentVolumeClaim", "PersistentVolume", "StorageClass", "ConfigMap",
            "Secret", "Deployment"} <= kinds
    assert calls == 400 * len(RULES)


@pytest.mark.parametrize("props", [
    {"apiVersion": "batch.volcano.sh/v1alpha1", "kind": "Job", "metadata": {"name": "v"}, "spec": {"tasks": "x"}},
    {"apiVersion": "kyverno.io/v1", "kind": "ClusterPolicy", "metadata": {"name": "k"}, "spec": {"rules": 42}},
    {"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": "j"},
     "spec": {"completionMode": "Indexed", "parallelism": 2, "template": {"spec": {
         "containers": [{"name": "c", "image": {"repo": "x"}, "command": "torchrun --nnodes 2",
                         "resources": {"limits": ["nvidia.com/gpu"]}, "env": {"A": 1}}]}}}},
    {"apiVersion": "leaderworkerset.x-k8s.io/v1", "kind": "LeaderWorkerSet", "metadata": {"name": "l"},
     "spec": {"leaderWorkerTemplate": {"size": 2, "workerTemplate": {"metadata": {"labels": ["a"]},
                                                                      "spec": {"containers": "c"}}}}},
])
def test_issue_shapes_are_readable(props):
    res = engine.Resource(type="kubernetes:x:y", name="x", props=props)
    ctx = engine.build_context(None, [res])
    for rule in RULES:
        list(rule.check(res, ctx) if rule.scope == "resource" else rule.check([res], ctx))


def _raising(res, ctx):
    raise TypeError("a value that must not be echoed " + SECRET)
    yield  # pragma: no cover


def test_a_rule_that_still_raises_reports_the_object_as_unreadable():
    rule = engine.Rule("boom", "d", engine.MANDATORY, _raising)
    res = engine.Resource(type="kubernetes:v1:ConfigMap", name="cm",
                          props={"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "cm"}})
    out = pack.run_rules([res], engine.Context(), [rule])
    assert len(out) == 1 and out[0].enforcementLevel == "mandatory"
    assert "could not read this object" in out[0].message and "ConfigMap cm" in out[0].message
    assert SECRET not in out[0].message
    # the CrossGuard adapter reports it too (no PolicyPack is built)
    args = ResourceValidationArgs("kubernetes:core/v1:ConfigMap", res.props, "urn:cm", "cm",
                                  PolicyResourceOptions(False, [], None, [], None, [], None), None, {}, {})
    got = []
    pack.resource_validator(rule)(args, lambda msg, urn=None: got.append(msg))
    assert len(got) == 1 and "could not read" in got[0]


def test_a_stack_rule_that_raises_names_the_unreadable_resource_and_checks_the_rest():
    def check(resources, ctx):
        for r in resources:
            if r.name == "bad":
                raise AttributeError("x")
            yield r, f"{r.name} checked"
    rule = engine.Rule("stackboom", "d", engine.ADVISORY, check, scope="stack")
    opts = PolicyResourceOptions(False, [], None, [], None, [], None)
    resources = [PolicyResource("kubernetes:v1:ConfigMap", {"kind": "ConfigMap", "metadata": {"name": n}},
                                f"urn:{n}", n, opts, None, None, [], {}) for n in ("good", "bad")]
    got = []
    pack.stack_validator(rule)(StackValidationArgs(resources, {}), lambda msg, urn=None: got.append((urn, msg)))
    assert ("urn:good", "good checked") in got
    assert any(urn == "urn:bad" and "could not read" in msg for urn, msg in got)


# ------------------------------------------------------------------ plan end to end (in-process)
def _plan(tmp_path: Path, doc_or_text) -> tuple:
    f = tmp_path / "Pulumi.h.yaml"
    f.write_text(doc_or_text if isinstance(doc_or_text, str) else fz._dump(doc_or_text))
    out, err = io.StringIO(), io.StringIO()
    with redirect_stdout(out), redirect_stderr(err):
        code = mplan.main(["h", "--file", str(f), "--out", str(tmp_path / "build")])
    files = "".join(p.read_text(errors="replace") for p in (tmp_path / "build").rglob("*") if p.is_file()) \
        if (tmp_path / "build").exists() else ""
    return code, out.getvalue() + err.getvalue(), files


def _base() -> dict:
    return yaml.safe_load((ROOT / "tests" / "corpus" / "lws-no-shm.yaml").read_text())


@pytest.mark.parametrize("obj", [
    {"apiVersion": "batch.volcano.sh/v1alpha1", "kind": "Job", "metadata": {"name": "v"}, "spec": {"tasks": "x"}},
    {"apiVersion": "kyverno.io/v1", "kind": "ClusterPolicy", "metadata": {"name": "k"}, "spec": {"rules": 42}},
    {"apiVersion": "v1", "kind": "PersistentVolumeClaim", "metadata": {"name": "p"}, "spec": "10Gi"},
])
def test_plan_on_wrong_typed_objects_exits_cleanly(tmp_path, obj):
    doc = _base()
    doc["config"]["multinode:manifests"] = [obj]
    code, text, _ = _plan(tmp_path, doc)
    assert code in (0, 1, 2) and "Traceback" not in text, text[-2000:]


# ------------------------------------------------------------------ secrets are never echoed
@pytest.mark.parametrize("key", ["multinode:kubeconfig", "multinode:hfToken", "multinode:ngcApiKey",
                                 "multinode:imagePullSecret"])
@pytest.mark.parametrize("value", [{"clusters": [{"token": SECRET}]}, [SECRET, SECRET], 7319264051, SECRET,
                                   {"secure": {"nested": SECRET}}])
def test_a_secret_key_in_plain_text_or_the_wrong_type_is_refused_without_its_value(tmp_path, key, value):
    doc = _base()
    doc["config"][key] = value
    code, text, files = _plan(tmp_path, doc)
    assert code == 2, text[-2000:]
    assert SECRET not in text + files and "7319264051" not in text + files
    assert key.split(":")[1] in text


@pytest.mark.parametrize("key", ["aws:secretKey", "aws:accessKey", "aws:token", "gcp:credentials",
                                 "oci:privateKey", "azure-native:clientSecret", "kubernetes:kubeconfig"])
def test_plain_provider_credentials_are_refused(tmp_path, key):
    doc = _base()
    doc["config"][key] = f"apiVersion: v1\nclusters: []\nusers: [{{token: {SECRET}}}]"
    code, text, files = _plan(tmp_path, doc)
    assert code == 2 and key in text and "pulumi config set --secret" in text, text[-2000:]
    assert SECRET not in text + files


def test_provider_settings_that_are_not_credentials_pass(tmp_path):
    raw = stackfile.read_stack_file(stackfile.stack_path("aws-dev"))
    assert raw  # aws:region is read as before
    f = tmp_path / "Pulumi.k.yaml"
    f.write_text((ROOT / "stacks" / "Pulumi.aws-dev.yaml").read_text()
                 + "  kubernetes:kubeconfig: ~/.kube/config\n  aws:profile: dev\n"
                 + "  aws:secretKey:\n    secure: v1:c2VjcmV0\n")
    stackfile.read_stack_file(f)      # a kubeconfig path, a profile name and an encrypted key are fine


@pytest.mark.parametrize("obj,where", [
    ({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "hf"}, "stringData": {"token": SECRET}},
     "stringData"),
    ({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "hf"}, "data": {"token": "U0VDUkVU"}}, "data"),
    ({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "env"}, "data": {"HF_TOKEN": SECRET}},
     "data.HF_TOKEN"),
    ({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "env"}, "data": {"dbPassword": SECRET}},
     "data.dbPassword"),
])
def test_literal_credentials_in_manifests_are_refused(tmp_path, obj, where):
    doc = _base()
    doc["config"]["multinode:manifests"] = [obj]
    code, text, files = _plan(tmp_path, doc)
    assert code == 2 and f"manifests[0].{where}" in text, text[-2000:]
    assert SECRET not in text + files and "U0VDUkVU" not in text + files


def test_a_plain_configmap_and_an_empty_secret_pass(tmp_path):
    doc = _base()
    doc["config"]["multinode:manifests"] = [
        {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "env"},
         "data": {"MODEL": "llama", "MAX_TOKENS": "4096", "TOKENIZER": "x"}},
        {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "filled-elsewhere"}, "type": "Opaque"}]
    code, text, _ = _plan(tmp_path, doc)
    assert code in (0, 1), text[-2000:]


# ------------------------------------------------------------------ the fuzz run
def test_fuzz_hostile_stack_files_and_objects():
    """Seeded; small by default (16 + 16 cases, a plan each, ~0.5 s per case). Longer: MULTINODE_LONG_TESTS=1
    (300 + 150), or MULTINODE_FUZZ_STACKS / MULTINODE_FUZZ_OBJECTS (and MULTINODE_FUZZ_SEED), or
    `python -m tests.fuzz_hostile --stacks 300 --objects 150`."""
    n_stacks = int(os.environ.get("MULTINODE_FUZZ_STACKS", sized(16, 300)))
    n_objects = int(os.environ.get("MULTINODE_FUZZ_OBJECTS", sized(16, 150)))
    seed = int(os.environ.get("MULTINODE_FUZZ_SEED", "16"))
    results = fz.run_cases(fz.generate(n_stacks, n_objects, seed))
    assert len(results) == n_stacks + n_objects
    bad = fz.failures(results)
    assert not bad, [(r["id"], r["what"], r["exit"], r["output"][-800:]) for r in bad[:3]]
    assert {r["exit"] for r in results} >= {2}


# ------------------------------------------------------------------ the pack's ConfigMap rule (preview too)
def test_configmap_credential_rule_names_the_key_not_the_value():
    rule = next(r for r in RULES if r.name == "no-credentials-in-configmap")
    cm = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "env", "namespace": "ml"},
          "data": {"HF_TOKEN": SECRET, "MODEL": "llama", "MAX_TOKENS": "4096", "USE_KEY": "true"}}
    res = engine.Resource(type="kubernetes:core/v1:ConfigMap", name="env", props=cm)
    msgs = list(rule.check(res, engine.Context()))
    assert len(msgs) == 1 and "HF_TOKEN" in msgs[0] and SECRET not in msgs[0]
    allowed = engine.Context(settings={"no-credentials-in-configmap": {"allowedNames": ["HF_TOKEN"]}})
    assert list(rule.check(res, allowed)) == []
    cm["data"] = "not a map"
    assert list(rule.check(res, engine.Context())) == []


@pytest.mark.parametrize("obj,words", [
    ({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "a"}}, "spec is missing"),
    ({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "a"}, "spec": None}, "spec is missing"),
    ({"apiVersion": "v1", "kind": "Deployment", "metadata": {"name": "a"}}, "has no kind Deployment"),
    ({"apiVersion": "storage.k8s.io/v1", "kind": "StorageClass", "metadata": {"name": "a"},
      "provisioner": ["efs.csi.aws.com"]}, "not a valid StorageClass"),
    ({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "a", "namespace": 7}}, "DNS label"),
])
def test_core_kind_manifests_of_the_wrong_shape_are_config_errors(tmp_path, obj, words):
    doc = _base()
    doc["config"]["multinode:manifests"] = [obj]
    code, text, _ = _plan(tmp_path, doc)
    assert code == 2 and words in text and "manifests[0]" in text, text[-2000:]
