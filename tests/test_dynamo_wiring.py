"""Dynamo wired into the program (issue 8): the dynamo-dev example renders a DGD that validates against
the upstream CRD, in the namespace of the checkpoint claim and the Secrets it names, after the
dynamo-platform release; the policy engine runs the DGD rules in plan and as CrossGuard policies, on
both served versions, with the machine of the pool the DGD lands on."""
from __future__ import annotations

import copy
from pathlib import Path

import pytest
import yaml
from pulumi_policy import EnforcementLevel, PolicyResourceOptions, ResourceValidationArgs

from multinode import checks, pools, stackfile
from multinode import plan as mplan
from multinode.manifests import addons as am
from multinode.schema_check import validate_object, validate_pod_template
from policy import engine, pack
from policy.rules import RULES
from policy.rules import dynamo as dyn_rules
from policy.rules import dynamo as rd
from tests import policy_fixtures as F

ROOT = Path(__file__).resolve().parent.parent
DATA = ROOT / "tests" / "data" / "dynamo"
RULE = {r.name: r for r in RULES}
DGD_RULES = [r.name for r in rd.DGD_RULES]


@pytest.fixture(scope="module")
def dev():
    return mplan.plan("dynamo-dev", None)


def _dgd_reg(result):
    (reg,) = [r for r in result.registrations if r.type == "kubernetes:nvidia.com/v1beta1:DynamoGraphDeployment"]
    return reg


def _regs(result, type_):
    return [r for r in result.registrations if r.type == type_]


# ------------------------------------------------------------------ plan dynamo-dev
def test_dynamo_dev_plans_clean_and_renders_a_valid_dgd(dev):
    assert dev.exit_code == mplan.EXIT_OK, dev.error or dev.violations
    assert dev.violations == []
    (dgd,) = [o for o in dev.k8s_objects if o["kind"] == "DynamoGraphDeployment"]
    assert dgd["apiVersion"] == "nvidia.com/v1beta1"
    assert validate_object(dgd) == []                                    # upstream CRD schema
    for comp in dgd["spec"]["components"]:
        assert validate_pod_template(comp["podTemplate"]) == [], comp["name"]
    comps = {c.name: c for c in rd.components(dgd)}
    assert set(comps) == {"frontend", "prefill", "decode"}
    assert (comps["decode"].node_count, comps["decode"].gpus_per_node) == (2, 8)
    assert comps["decode"].labels[pools.FABRIC_POD_LABEL] == pools.FABRIC_POD_LABEL_VALUE
    assert rd.parallelism(comps["decode"]).gpus == 16 and rd.parallelism(comps["prefill"]).gpus == 8
    assert not comps["prefill"].multinode
    # the rules did look at it: the same object with a wrong size fails
    bad = copy.deepcopy(dgd)
    args = bad["spec"]["components"][2]["podTemplate"]["spec"]["containers"][0]["args"]
    args[args.index("--tensor-parallel-size") + 1] = "4"
    assert rd.check_dgd(bad, 8)


def test_dgd_lives_with_its_claim_and_the_secrets_it_names(dev):
    cfg = dev.config
    dgd = _dgd_reg(dev).inputs
    ns = dgd["metadata"]["namespace"]
    assert ns == cfg.storage.namespace
    (pvc,) = _regs(dev, "kubernetes:core/v1:PersistentVolumeClaim")
    secrets = {(s.inputs["metadata"]["namespace"], s.inputs["metadata"]["name"]): s
               for s in _regs(dev, "kubernetes:core/v1:Secret")}
    refs = 0
    for comp in dgd["spec"]["components"]:
        spec = comp["podTemplate"]["spec"]
        assert [v["persistentVolumeClaim"]["claimName"] for v in spec["volumes"]] == [pvc.inputs["metadata"]["name"]]
        assert pvc.inputs["metadata"]["namespace"] == ns
        for e in spec["containers"][0]["env"]:
            ref = e.get("valueFrom", {}).get("secretKeyRef")
            if ref:
                refs += 1
                secret = secrets[(ns, ref["name"])]               # created by the Workload component
                assert ref["key"] in secret.inputs["stringData"]
    assert refs == 3                                             # HF_TOKEN in frontend, prefill, decode
    assert "hf-token-placeholder" not in yaml.safe_dump(dgd)    # only references, never the value


def test_dgd_depends_on_the_platform_release_and_the_fabric_policy(dev):
    releases = {r.inputs["chart"]: r for r in _regs(dev, "kubernetes:helm.sh/v3:Release")}
    platform = releases["dynamo-platform"]
    assert platform.inputs["repositoryOpts"]["repo"] == "https://helm.ngc.nvidia.com/nvidia/ai-dynamo"
    assert platform.inputs["namespace"] == "dynamo-system"
    deps = set(_dgd_reg(dev).dependencies)
    assert platform.urn in deps                                   # it installs the nvidia.com CRDs
    (policy,) = _regs(dev, "kubernetes:policies.kyverno.io/v1:MutatingPolicy")
    assert policy.urn in deps                                     # fabric injection before the pods exist
    (checks_policy,) = _regs(dev, "kubernetes:policies.kyverno.io/v1:ValidatingPolicy")
    assert checks_policy.urn in deps                              # and the fail-closed checks
    # the operator goes in after the schedulers it hands its graphs to
    grove = next(r for c, r in releases.items() if "grove" in c)
    kai = next(r for c, r in releases.items() if "kai-scheduler" in c)
    assert {grove.urn, kai.urn} <= set(platform.dependencies)


def test_platform_release_is_an_addon_spec_with_the_nvidia_crds():
    raw, secrets = _raw("dynamo-dev")
    cfg = checks.load(raw, secrets)
    (spec,) = [s for s in am.addon_releases(cfg) if s.key == "dynamo"]
    assert spec.installs_crds == ("nvidia.com",) and spec.release_name == "dynamo-platform"
    raw["addons"]["dynamo"] = {"enabled": False}
    raw["workloads"] = []
    assert "dynamo" not in {s.key for s in am.addon_releases(checks.load(raw, secrets))}


def _raw(stack):
    raw, secrets, _ = stackfile.read_stack_file(stackfile.stack_path(stack))
    return copy.deepcopy(raw), set(secrets)


# ------------------------------------------------------------------ policy: plan of a broken variant
def test_hand_written_dgd_with_wrong_tensor_parallel_fails_plan(dev, tmp_path):
    """dynamo-dev plus a DGD in multinode:manifests (a copy of the rendered one, decode tp 4): exit 1."""
    bad = copy.deepcopy(_dgd_reg(dev).inputs)
    bad["metadata"]["name"] = "byo-dynamo"
    args = bad["spec"]["components"][2]["podTemplate"]["spec"]["containers"][0]["args"]
    args[args.index("--tensor-parallel-size") + 1] = "4"
    doc = yaml.safe_load(stackfile.stack_path("dynamo-dev").read_text())
    doc["config"]["multinode:manifests"] = [bad]
    doc["config"]["multinode:nodePools"][0]["nodeCount"] = 6    # room for both DGDs (else stack-fits-node-pools)
    path = tmp_path / "Pulumi.dynamo-bad.yaml"
    path.write_text(yaml.safe_dump(doc))
    result = mplan.plan("dynamo-bad", tmp_path, path)
    assert result.exit_code == mplan.EXIT_POLICY
    mandatory = [v for v in result.violations if v["enforcementLevel"] == "mandatory"]
    assert [(v["policy"], v["resource"]) for v in mandatory] == [
        ("dynamo-parallelism-matches-gpus", "DynamoGraphDeployment multinode/byo-dynamo")]
    msg = mandatory[0]["message"]
    assert "component decode" in msg
    assert "--tensor-parallel-size 4 x --pipeline-parallel-size 2 = 8 GPUs" in msg
    assert "multinode.nodeCount 2 x 8 GPUs per node" in msg and "= 16;" in msg
    assert "set --tensor-parallel-size 8" in msg
    # the command line says the same with its exit code
    assert mplan.main(["dynamo-bad", "--file", str(path), "--out", str(tmp_path / "cli")]) == mplan.EXIT_POLICY


# ------------------------------------------------------------------ policy engine: both versions, machines
def _rec(obj):
    return {"type": f"kubernetes:{obj['apiVersion']}:{obj['kind']}", "name": obj["metadata"]["name"],
            "urn": f"urn:pulumi:t::multinode::x::{obj['metadata']['name']}", "inputs": obj,
            "protect": False, "retainOnDelete": False}


def _dyn(violations):
    return sorted((v["policy"], v["enforcementLevel"]) for v in violations if v["policy"] in DGD_RULES)


@pytest.mark.parametrize("name", sorted(p.name for p in DATA.glob("*.yaml")))
def test_engine_runs_the_dgd_rules_on_both_served_versions(name, dev):
    """The upstream examples (one v1alpha1, two v1beta1) through evaluate(): they lack our fabric label
    (mandatory for their nodeCount 2 workers); labelled they pass; labelled with a wrong tp they fail."""
    obj = yaml.safe_load((DATA / name).read_text())
    obj["metadata"].setdefault("namespace", "multinode")
    assert _dyn(pack.evaluate([_rec(obj)], dev.config)) == [("dynamo-multinode-fabric-label", "mandatory")] * 2
    obj["spec"]["labels"] = {pools.FABRIC_POD_LABEL: pools.FABRIC_POD_LABEL_VALUE}
    assert _dyn(pack.evaluate([_rec(obj)], dev.config)) == []
    multi = next(c for c in rd.components(obj) if c.multinode)
    par = rd.parallelism(multi)
    flag = par.tp_flag
    mutated = _set_tp(obj, multi, flag, par.tensor * 2)
    out = [v for v in pack.evaluate([_rec(mutated)], dev.config) if v["policy"] == "dynamo-parallelism-matches-gpus"]
    assert out and all(v["enforcementLevel"] == "mandatory" for v in out)
    assert f"{flag} {par.tensor * 2} x" in out[0]["message"]
    assert out[0]["type"] == f"kubernetes:{obj['apiVersion']}:DynamoGraphDeployment"


def _set_tp(obj, comp, flag, value):
    """A copy of obj with the tensor parallel size of every component's argv set to value."""
    out = copy.deepcopy(obj)

    def fix(container):
        for key in ("command", "args"):
            items = container.get(key) or []
            for i, a in enumerate(items):
                if a == flag and i + 1 < len(items):
                    items[i + 1] = str(value)
                elif isinstance(a, str) and f"{flag} " in a:
                    import re
                    items[i] = re.sub(rf"{re.escape(flag)} \S+", f"{flag} {value}", a)
    spec = out["spec"]
    if "services" in spec:
        for svc in spec["services"].values():
            fix(svc.get("extraPodSpec", {}).get("mainContainer", {}))
    else:
        for c in spec["components"]:
            for cont in c.get("podTemplate", {}).get("spec", {}).get("containers", []):
                fix(cont)
    return out


def test_machine_comes_from_the_pool_the_dgd_lands_on(dev):
    """16 GPUs per node on the 8-GPU p5.48xlarge pool: the machine rule quotes the pool's machine, in plan
    (stack pools) and under preview (the pod's own instance-type label); with no way to tell, it is silent."""
    big = F.dgd()
    for c in big["spec"]["components"][1:]:
        c["podTemplate"]["spec"]["containers"][0]["resources"]["limits"]["nvidia.com/gpu"] = "16"
        args = c["podTemplate"]["spec"]["containers"][0]["args"]
        args[args.index("--tensor-parallel-size") + 1] = "16"      # prefill 1 x 16, decode 2 x 16 = 16 x pp 2
    props = copy.deepcopy(big)
    assert dyn_rules.machine_gpus(props, engine.build_context(dev.config, [])) == 8
    out = pack.evaluate([_rec(big)], dev.config)
    msgs = [v["message"] for v in out if v["policy"] == "dynamo-gpus-per-node-within-machine"]
    assert len(msgs) == 2 and all("machine has 8" in m for m in msgs)
    assert len(out) == 2                   # the generic per-pod rule leaves DGDs to this one (no duplicate)
    # preview: no stack config, the node selector names the instance type
    got = []
    pack.resource_validator(RULE["dynamo-gpus-per-node-within-machine"])(_args(big), lambda m, urn=None: got.append(m))
    assert len(got) == 2
    # a selector that names no machine and no pool context: unknown machine, no guess
    for c in big["spec"]["components"][1:]:
        c["podTemplate"]["spec"]["nodeSelector"] = {"team": "research"}
    got.clear()
    pack.resource_validator(RULE["dynamo-gpus-per-node-within-machine"])(_args(big), lambda m, urn=None: got.append(m))
    assert got == []


def _args(obj, type_=None, props=None):
    return ResourceValidationArgs(type_ or f"kubernetes:{obj['apiVersion']}:{obj['kind']}",
                                  obj if props is None else props, "urn:x", obj["metadata"]["name"],
                                  PolicyResourceOptions(False, [], None, [], None, [], None), None, {}, {})


def test_crossguard_policies_include_the_dgd_rules_with_their_levels():
    by = {p.name: p for p in pack.policies()}
    want = {"dynamo-parallelism-matches-gpus": EnforcementLevel.MANDATORY,
            "dynamo-gpus-per-node-within-machine": EnforcementLevel.MANDATORY,
            "dynamo-multinode-fabric-label": EnforcementLevel.MANDATORY,
            "dynamo-parallelism-readable": EnforcementLevel.ADVISORY}
    assert {n: by[n].enforcement_level for n in want} == want
    assert all(by[n].description for n in want)


def _v1alpha1_dgd(tp):
    """The same decode worker in the v1alpha1 shape (spec.services map, resources.limits.gpu,
    extraPodSpec.mainContainer)."""
    main = {"image": F.DYNAMO_IMAGE, "command": ["python3", "-m", "dynamo.vllm"],
            "args": ["--model", "m", "--tensor-parallel-size", str(tp), "--pipeline-parallel-size", "2"]}
    return {"apiVersion": "nvidia.com/v1alpha1", "kind": "DynamoGraphDeployment",
            "metadata": {"name": "byo-dynamo-alpha", "namespace": F.NS},
            "spec": {"backendFramework": "vllm", "services": {"VllmDecodeWorker": {
                "componentType": "worker", "subComponentType": "decode", "replicas": 1,
                "multinode": {"nodeCount": 2}, "resources": {"limits": {"gpu": "8"}},
                "extraPodMetadata": {"labels": dict(F.FABRIC_LABEL)},
                "extraPodSpec": {"nodeSelector": dict(F.SELECTOR), "mainContainer": main}}}}}


@pytest.mark.parametrize("api_version", ["nvidia.com/v1beta1", "nvidia.com/v1alpha1"])
def test_crossguard_adapter_reports_a_wrong_dgd_of_either_type_token(api_version):
    bad = F.dgd(decode_tp=4) if api_version.endswith("v1beta1") else _v1alpha1_dgd(4)
    good = F.dgd() if api_version.endswith("v1beta1") else _v1alpha1_dgd(8)
    assert validate_object(bad) == [] and validate_object(good) == []
    got = []
    validate = pack.resource_validator(RULE["dynamo-parallelism-matches-gpus"])
    validate(_args(good), lambda m, urn=None: got.append(m))
    assert got == []
    validate(_args(bad), lambda m, urn=None: got.append(m))
    assert len(got) == 1 and "--tensor-parallel-size 4 x --pipeline-parallel-size 2 = 8 GPUs" in got[0]
    assert f"({api_version.split('/')[1]} " in got[0]
    # props without apiVersion/kind (the type token still says what it is)
    got.clear()
    bare = {k: v for k, v in bad.items() if k not in ("apiVersion", "kind")}
    validate(_args(bad, type_=f"kubernetes:{api_version}:DynamoGraphDeployment", props=bare),
             lambda m, urn=None: got.append(m))
    assert len(got) == 1
    # anything else is ignored
    got.clear()
    validate(_args(F.lws()), lambda m, urn=None: got.append(m))
    assert got == []


def test_fabric_label_rule_is_silent_when_the_stack_has_no_fabric(dev):
    unlabelled = F.dgd(decode_labels={})
    assert _dyn(pack.evaluate([_rec(unlabelled)], dev.config)) == [("dynamo-multinode-fabric-label", "mandatory")]
    raw, secrets = _raw("dynamo-dev")
    raw["fabric"] = {"kind": "efa", "enabled": False}
    off = checks.load(raw, secrets)
    assert _dyn(pack.evaluate([_rec(unlabelled)], off)) == []


def test_fixture_dgd_validates_against_the_crd():
    assert validate_object(F.dgd()) == []
    assert validate_object(F.dgd(decode_tp=4)) == []                     # schema-valid, yet wrong
