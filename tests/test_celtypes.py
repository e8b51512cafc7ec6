"""The fabric policies' CEL type-checked as the Kubernetes CEL environment does (multinode.manifests.celtypes),
without Go: the two defect classes Kyverno's engine found in issue 27 are refused here, every rendered policy of
every example and guide stack passes, and the pack's rule kyverno-cel-compiles reports a planted defect.
Kyverno's own CLI judges the same policies in `make conformance` (conformance/kyverno)."""
from __future__ import annotations

from pathlib import Path

import pytest

from multinode import plan as mplan
from multinode.manifests import cel, celtypes, kyverno
from policy.engine import Context, Resource
from policy.rules import kyverno_cel

GUIDES = sorted(Path(__file__).parent.joinpath("guides").glob("Pulumi.*.yaml"))
EXAMPLES = ["aws-dev", "azure-dev", "gcp-dev", "oci-dev", "existing-dev", "dynamo-dev"]
OLD_GPUS = "int(c.?resources.?limits[?'nvidia.com/gpu'].orValue(0))"     # the expression issue 27 found


# ------------------------------------------------------------------- defect class 1: an overload pinned by a default
def test_int_of_a_quantity_defaulted_with_an_int_is_refused():
    # quantities are strings in the Pod's declared types: orValue(0) on optional(string) has no overload
    found = celtypes.problems(f"object.spec.containers.filter(c, {OLD_GPUS} > 0)")
    assert found and "orValue" in found[0] and "optional_type(string), int" in found[0]


def test_the_rendered_gpu_count_type_checks_and_reads_string_quantities():
    expr = f"object.spec.containers.map(c, {kyverno.gpus('c')})"
    assert celtypes.problems(expr) == ()
    pod = {"spec": {"containers": [{"name": "a", "resources": {"limits": {"nvidia.com/gpu": "8"}}}, {"name": "b"}]}}
    assert cel.evaluate(expr, object=pod) == [8, 0]


def test_untyped_evaluation_alone_does_not_see_the_defect():
    # why this check exists: the dyn-typed engine plan evaluates with runs the old expression happily
    pod = {"spec": {"containers": [{"name": "a", "resources": {"limits": {"nvidia.com/gpu": "8"}}}]}}
    assert cel.evaluate(f"object.spec.containers.map(c, {OLD_GPUS})", object=pod) == [8]


def test_unknown_pod_field_is_refused():
    assert celtypes.problems("object.spec.containerz.size() > 0")
    assert celtypes.problems("has(object.spec.containers[0].resources.limit)")


# ------------------------------------------------------------------- defect class 2: heterogeneous literals
@pytest.mark.parametrize("expr,expected,found", [
    ("[{'name': 'a', 'configMap': {'name': 'b', 'optional': true}}]", "string", "map(string, dyn)"),
    ("{'name': 'a', 'optional': true}", "string", "bool"),
    ("[1, 'a']", "int", "string"),
    ("[1, 2, []]", "int", "list(dyn)"),
    ("{'a': ['x'], 'b': {'c': 'd'}}", "list(string)", "map(string, string)"),
])
def test_heterogeneous_literal_is_refused(expr, expected, found):
    # every literal that does not join is reported (the nested map of the first case is one of its own)
    problems = celtypes.problems(expr)
    assert any(f"expected type '{expected}' but found '{found}'" in p for p in problems), problems


@pytest.mark.parametrize("expr", [
    "[1, dyn('a')]", "[[], [1]]", "{'a': dyn(1), 'b': dyn(null)}",
    "[{'a': 'b'}, {}]", "{'k': [1], 'l': []}", "[dyn({'x': 1}), {'y': 'z'}]",
])
def test_homogeneous_or_dyn_literal_passes(expr):
    assert celtypes.problems(expr) == ()


@pytest.mark.parametrize("value", [
    {"name": "fabric-nccl-topology", "configMap": {"name": "nccl-topology-ndv5", "optional": True}},
    [{"name": "a", "value": "1"}, {"name": "b", "valueFrom": {"fieldRef": {"fieldPath": "x"}}}],
    {"add": ["IPC_LOCK"], "drop": []},
    {"a": [1, "x", None, True, {"b": [[], [1]]}], "c": {}},
    [],
    {},
])
def test_literal_is_homogeneous_and_means_the_same(value):
    text = cel.literal(value)
    assert celtypes.problems(text) == ()
    assert cel.evaluate(text) == value


def test_literal_wraps_only_what_differs():
    assert cel.literal({"a": "x", "b": "y"}) == "{'a': 'x', 'b': 'y'}"
    assert cel.literal({"a": "x", "b": True}) == "{'a': dyn('x'), 'b': dyn(true)}"
    assert cel.literal([{"a": "x"}, {"a": "y", "b": "z"}]) == "[{'a': 'x'}, {'a': 'y', 'b': 'z'}]"


# ------------------------------------------------------------------- every rendered policy
def _cel_policies(objects):
    return [o for o in objects if str(o.get("apiVersion", "")).startswith("policies.kyverno.io/")]


@pytest.mark.parametrize("stack", EXAMPLES)
def test_every_rendered_policy_of_an_example_stack_type_checks(stack):
    policies = _cel_policies(mplan.plan(stack, None).k8s_objects)
    assert policies, f"{stack} renders no Kyverno CEL policy"
    assert sum(len(celtypes.policy_expressions(p)) for p in policies) > 5
    assert [(p["metadata"]["name"], path, problem) for p in policies
            for path, problem in celtypes.policy_problems(p)] == []


@pytest.mark.parametrize("guide", GUIDES, ids=lambda p: p.name)
def test_every_rendered_policy_of_a_guide_stack_type_checks(guide):
    name = guide.name.removeprefix("Pulumi.").removesuffix(".yaml")
    policies = _cel_policies(mplan.plan(name, None, path=guide).k8s_objects)
    assert [(p["metadata"]["name"], path, problem) for p in policies
            for path, problem in celtypes.policy_problems(p)] == []


def test_policy_expressions_covers_every_expression_field():
    policy = {"spec": {"matchConditions": [{"name": "m", "expression": "true"}],
                       "variables": [{"name": "v", "expression": "1"}],
                       "validations": [{"expression": "true", "messageExpression": "'m'"}],
                       "mutations": [{"patchType": "JSONPatch", "jsonPatch": {"expression": "[]"}},
                                     {"patchType": "ApplyConfiguration",
                                      "applyConfiguration": {"expression": "Object{}"}}]}}
    assert [p for p, _ in celtypes.policy_expressions(policy)] == [
        "spec.matchConditions[0].expression", "spec.variables[0].expression", "spec.validations[0].expression",
        "spec.validations[0].messageExpression", "spec.mutations[0].jsonPatch.expression",
        "spec.mutations[1].applyConfiguration.expression"]


# ------------------------------------------------------------------- the pack's rule
def _resource(props):
    return Resource(type="kubernetes:policies.kyverno.io/v1:MutatingPolicy", name=props["metadata"]["name"],
                    props=props, urn="urn:pulumi:s::p::kubernetes:policies.kyverno.io/v1:MutatingPolicy::x")


def test_pack_rule_reports_a_planted_defect_and_passes_the_rendered_policy():
    policy = next(p for p in _cel_policies(mplan.plan("azure-dev", None).k8s_objects)
                  if p["kind"] == "MutatingPolicy")
    ctx = Context()
    assert list(kyverno_cel.check_cel_compiles(_resource(policy), ctx)) == []
    planted = {**policy, "spec": {**policy["spec"], "mutations": policy["spec"]["mutations"] + [
        {"patchType": "JSONPatch", "jsonPatch": {"expression": "[JSONPatch{op: 'add', path: '/spec/volumes/-', "
                                                               "value: {'name': 'x', 'configMap': {'name': 'y'}}}]"}},
        {"patchType": "JSONPatch", "jsonPatch": {"expression": f"object.spec.containers.filter(c, {OLD_GPUS} > 0)"
                                                               ".map(c, JSONPatch{op: 'add', path: '/x', value: 1})"}}]}}
    found = list(kyverno_cel.check_cel_compiles(_resource(planted), ctx))
    n = len(policy["spec"]["mutations"])
    assert len(found) == 2
    assert f"spec.mutations[{n}].jsonPatch.expression map literal values" in found[0]
    assert f"spec.mutations[{n + 1}].jsonPatch.expression does not type-check" in found[1]
