"""Issue 16: fail closed outside the stack. The stack-wide Kyverno rule `require-fabric-label-on-fabric-pool`
refuses a GPU pod that selects a fabric pool with neither the fabric label nor the single-node opt-out, and
each fabric policy makes `pulumi up` wait until Kyverno reports it Ready (pulumi.com/waitFor)."""
from __future__ import annotations

import pytest

from multinode import checks, pools, stackfile
from multinode import plan as mplan
from multinode import schema_check as validation
from multinode.manifests import kyverno

from .conftest import EXAMPLE_STACKS

STACKS = ["aws-dev", "azure-dev", "gcp-dev", "oci-dev", "existing-dev"]
RULE = kyverno.SINGLE_NODE_RULE
FABRIC = {pools.FABRIC_POD_LABEL: pools.FABRIC_POD_LABEL_VALUE}
SINGLE = {pools.SINGLE_NODE_POD_LABEL: pools.SINGLE_NODE_POD_LABEL_VALUE}


def load(stack: str) -> checks.config.StackConfig:
    raw, secrets, _ = stackfile.read_stack_file(stackfile.stack_path(stack))
    return checks.load(raw, secrets)


def pod(labels=None, annotations=None, node_selector=None, gpus=8):
    spec = {"containers": [{"name": "engine", "image": "vllm/vllm-openai:v0.11.0",
                            "resources": {"limits": {"nvidia.com/gpu": gpus}}},
                           {"name": "sidecar", "image": "busybox:1.36"}]}
    if node_selector is not None:
        spec["nodeSelector"] = node_selector
    meta = {k: v for k, v in (("labels", labels), ("annotations", annotations)) if v is not None}
    return {"apiVersion": "v1", "kind": "Pod", "metadata": meta, "spec": spec}


def checks_of(cfg):
    (vp,) = [p for p in kyverno.fabric_policies(cfg) if p["kind"] == kyverno.VALIDATING_KIND]
    return vp


def refused(policy, p):
    """["engine"] when this rule refuses the pod (a pod-level check; the old per-container form named the GPU
    container), else []."""
    return ["engine"] if RULE in kyverno.refused_by(policy, p) else []


@pytest.mark.parametrize("stack", STACKS)
def test_rule_is_in_the_stack_checks_and_valid_against_the_kyverno_crd(stack):
    pols = kyverno.fabric_policies(load(stack))
    vp = [p for p in pols if p["kind"] == kyverno.VALIDATING_KIND]
    assert len(vp) == 1
    assert [v["message"].startswith(f"[{RULE}]") for v in vp[0]["spec"]["validations"]].count(True) == 1
    for pol in pols:
        assert validation.validate_object(pol) == []
        assert pol["metadata"]["annotations"]["pulumi.com/waitFor"] == "jsonpath={.status.conditionStatus.ready}=true"


@pytest.mark.parametrize("stack", STACKS)
def test_unlabelled_gpu_pod_on_a_fabric_pool_is_refused(stack):
    cfg = load(stack)
    pol = checks_of(cfg)
    on_pool = pools.node_selector(cfg, cfg.node_pools[0])
    assert refused(pol, pod(labels={"app": "from-kubectl"}, node_selector=on_pool)) == ["engine"]
    assert refused(pol, pod(node_selector=on_pool)) == ["engine"]
    rule = next(v for v in pol["spec"]["validations"] if v["message"].startswith(f"[{RULE}]"))
    assert pools.SINGLE_NODE_POD_LABEL in rule["message"]


@pytest.mark.parametrize("labels,annotations", [
    (SINGLE, None),
    (FABRIC, None),
    ({"app": "x"}, {pools.NEMO_ANNOTATION: "true"}),
])
def test_labelled_or_opted_out_pods_pass_this_rule(labels, annotations):
    cfg = load("aws-dev")
    pol = checks_of(cfg)
    p = pod(labels=labels, annotations=annotations, node_selector=pools.node_selector(cfg, cfg.node_pools[0]))
    assert refused(pol, p) == []


def test_rule_leaves_other_pods_alone():
    cfg = load("aws-dev")
    pol = checks_of(cfg)
    on_pool = pools.node_selector(cfg, cfg.node_pools[0])
    assert refused(pol, pod(node_selector=on_pool, gpus=0)) == []                   # no GPU
    assert refused(pol, pod(node_selector={pools.POOL_LABEL: "cpu"})) == []         # another pool
    assert refused(pol, pod()) == []      # no nodeSelector: admission cannot see the node (documented limit)


@pytest.mark.parametrize("stack", EXAMPLE_STACKS)
def test_every_pod_the_stack_renders_is_admitted_after_its_mutations(stack):
    """Every pod template of the example stack, after the stack's MutatingPolicies (evaluated: plan's effective
    pod), passes every check of its ValidatingPolicy; the templates as written (before the mutation) would not all
    pass, so the check is not vacuous."""
    from multinode.manifests import effective_pod
    result = mplan.plan(stack, out_root=None)
    assert result.exit_code in (0, 1), result.error
    policies = [o for o in result.k8s_objects if kyverno.is_cel_policy(o, kyverno.MUTATING_KIND)]
    (checks,) = [o for o in result.k8s_objects if kyverno.is_cel_policy(o, kyverno.VALIDATING_KIND)]
    assert not [o for o in result.k8s_objects if str(o.get("apiVersion", "")).startswith("kyverno.io/")]
    templates = [t for o in result.k8s_objects for _, t in mplan._pod_templates(o)]
    assert templates and policies
    before = 0
    for t in templates:
        pod_of = {"metadata": t.get("metadata") or {}, "spec": t["spec"]}
        before += bool(kyverno.denials(checks, pod_of))
        eff = effective_pod.apply_policies_to_template(t, policies)
        assert kyverno.denials(checks, eff) == [], t.get("metadata")
    assert before > 0
