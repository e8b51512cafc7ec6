"""The CEL engine plan evaluates Kyverno's CEL policies with (multinode.manifests.cel), the functions supplied
beside cel-expr-python, each against its Kubernetes definition, and RFC 6902 JSON Patch (manifests.jsonpatch)
against the RFC's own examples."""
from __future__ import annotations

import pytest

from multinode.manifests import cel, jsonpatch, kyverno


# ---------------------------------------------------------------- Kubernetes list library (supplied here)
# Definition: k8s.io/apiserver/pkg/cel/library/lists.go and https://kubernetes.io/docs/reference/using-api/cel/
# ("Kubernetes list library"): indexOf returns the first index of an equal element, -1 when none;
# sum of a list of ints, 0 for an empty list. Examples from that documentation.
@pytest.mark.parametrize("expr,want", [
    ("[1, 2, 2, 3].indexOf(2)", 1),
    ("['a', 'b', 'b', 'c'].indexOf('b')", 1),
    ("['a', 'b'].indexOf('z')", -1),
    ("[].indexOf(1)", -1),
    ("[1, 3].sum()", 4),
    ("[].sum()", 0),
    ("[{'name': 'x'}, {'name': 'y'}].map(c, c.name).indexOf('y')", 1),
])
def test_kubernetes_list_functions(expr, want):
    assert cel.evaluate(expr) == want


def test_string_indexOf_of_the_strings_extension_is_not_shadowed():
    # cel-go ext.Strings (Kubernetes enables it): 'hello mellow'.indexOf('ello') == 1
    assert cel.evaluate("'hello mellow'.indexOf('ello')") == 1
    assert cel.evaluate("'tacocat'.substring(4)") == "cat" and cel.evaluate("['a', 'b'].join(',')") == "a,b"


def test_optional_field_and_index_selection():
    # Kubernetes enables CEL optional types (1.29+): obj.?f and m[?k] give optional values, orValue a default
    obj = {"metadata": {"labels": {"multinode.dev/fabric": "enabled"}}}
    assert cel.evaluate("object.metadata.?labels[?'multinode.dev/fabric'].orValue('')", object=obj) == "enabled"
    assert cel.evaluate("object.metadata.?annotations[?'x'].orValue('none')", object=obj) == "none"


def test_jsonpatch_type_builds_patch_operations():
    # k8s MutatingAdmissionPolicy JSONPatch{op, path, from, value}; value may be any JSON value
    out = cel.evaluate("[JSONPatch{op: 'add', path: '/spec/x', value: {'a': [1, 'b', true]}},"
                       " JSONPatch{op: 'move', from: '/a', path: '/b'}, JSONPatch{op: 'add', path: '/n', value: 3}]")
    assert out == [{"op": "add", "path": "/spec/x", "value": {"a": [1, "b", True]}},
                   {"op": "move", "path": "/b", "from": "/a"}, {"op": "add", "path": "/n", "value": 3}]


def test_compile_once_and_errors_are_cel_errors():
    e = "1 + 2"
    assert cel.compile_expression(e) is cel.compile_expression(e)          # cached
    with pytest.raises(cel.CelError, match="does not compile"):
        cel.evaluate("1 +")
    with pytest.raises(cel.CelError, match="evaluation failed"):
        cel.evaluate("object.missing", object={})


def test_literal_round_trips():
    value = {"name": "x", "n": 3, "ok": True, "l": ["a'b", "c\\d"], "none": None}
    assert cel.evaluate(cel.literal(value)) == value


# ---------------------------------------------------------------- RFC 6902 (appendix A examples)
def test_rfc6902_examples():
    assert jsonpatch.apply({"foo": "bar"}, [{"op": "add", "path": "/baz", "value": "qux"}]) == \
        {"baz": "qux", "foo": "bar"}                                                          # A.1
    assert jsonpatch.apply({"foo": ["bar", "baz"]}, [{"op": "add", "path": "/foo/1", "value": "qux"}]) == \
        {"foo": ["bar", "qux", "baz"]}                                                        # A.2
    assert jsonpatch.apply({"baz": "qux", "foo": "bar"}, [{"op": "remove", "path": "/baz"}]) == {"foo": "bar"}  # A.3
    assert jsonpatch.apply({"baz": "qux", "foo": "bar"}, [{"op": "replace", "path": "/baz", "value": "boo"}]) == \
        {"baz": "boo", "foo": "bar"}                                                          # A.5
    assert jsonpatch.apply({"foo": ["bar"]}, [{"op": "add", "path": "/foo/-", "value": ["abc", "def"]}]) == \
        {"foo": ["bar", ["abc", "def"]]}                                                      # A.16
    doc = {"baz": "qux", "foo": ["a", 2, "c"]}
    assert jsonpatch.apply(doc, [{"op": "test", "path": "/baz", "value": "qux"},
                                 {"op": "test", "path": "/foo/1", "value": 2}]) == doc         # A.8
    with pytest.raises(jsonpatch.PatchError):
        jsonpatch.apply({"baz": "qux"}, [{"op": "test", "path": "/baz", "value": "bar"}])       # A.9
    with pytest.raises(jsonpatch.PatchError):
        jsonpatch.apply({"foo": "bar"}, [{"op": "add", "path": "/baz/bat", "value": "qux"}])   # A.12
    with pytest.raises(jsonpatch.PatchError):
        jsonpatch.apply({"foo": ["a"]}, [{"op": "add", "path": "/foo/5", "value": "x"}])      # index past the end
    assert jsonpatch.apply({"a": {"b": 1}}, [{"op": "move", "from": "/a/b", "path": "/c"}]) == {"a": {}, "c": 1}
    assert jsonpatch.apply({"a": [1]}, [{"op": "copy", "from": "/a", "path": "/b"}]) == {"a": [1], "b": [1]}


def test_json_pointer_escapes_rfc6901():
    assert jsonpatch.escape("vpc.amazonaws.com/efa") == "vpc.amazonaws.com~1efa"
    assert jsonpatch.escape("a~b/c") == "a~0b~1c" and jsonpatch.unescape("a~0b~1c") == "a~b/c"
    assert jsonpatch.unescape("~01") == "~1"                 # '~1' is replaced first, then '~0' (RFC 6901 section 4)
    doc = {"limits": {}}
    out = jsonpatch.apply(doc, [{"op": "add", "path": "/limits/vpc.amazonaws.com~1efa", "value": "32"}])
    assert out == {"limits": {"vpc.amazonaws.com/efa": "32"}} and doc == {"limits": {}}


# ---------------------------------------------------------------- the policy evaluator on hand-written policies
POD_CREATE = {"resourceRules": [{"apiGroups": [""], "apiVersions": ["v1"], "operations": ["CREATE"],
                                 "resources": ["pods"]}]}


def _mpol(**spec):
    return {"apiVersion": "policies.kyverno.io/v1", "kind": "MutatingPolicy", "metadata": {"name": "m"},
            "spec": {"matchConstraints": POD_CREATE, **spec}}


def test_mutations_apply_in_order_each_on_the_result_of_the_one_before_and_variables():
    pol = _mpol(variables=[{"name": "n", "expression": "size(object.spec.containers)"}], mutations=[
        {"patchType": "JSONPatch", "jsonPatch": {"expression": "[JSONPatch{op: 'add', path: '/metadata/labels', "
                                                               "value: {'n': string(variables.n)}}]"}},
        {"patchType": "JSONPatch", "jsonPatch": {"expression": "[JSONPatch{op: 'add', path: '/metadata/labels/m', "
                                                               "value: object.metadata.labels.n + '!'}]"}}])
    pod = {"metadata": {}, "spec": {"containers": [{"name": "a"}, {"name": "b"}]}}
    assert kyverno.mutate(pol, pod)["metadata"]["labels"] == {"n": "2", "m": "2!"}
    assert pod == {"metadata": {}, "spec": {"containers": [{"name": "a"}, {"name": "b"}]}}    # input untouched


def test_match_constraints_selector_and_conditions():
    m = [{"patchType": "JSONPatch", "jsonPatch": {"expression": "[JSONPatch{op: 'add', path: '/x', value: 1}]"}}]
    pod = {"metadata": {"labels": {"team": "a"}}, "spec": {"containers": []}}
    assert kyverno.mutate(_mpol(mutations=m), pod)["x"] == 1
    assert "x" not in kyverno.mutate(_mpol(mutations=m, matchConditions=[{"name": "c", "expression": "false"}]), pod)
    sel = {**POD_CREATE, "objectSelector": {"matchExpressions": [{"key": "team", "operator": "NotIn",
                                                                  "values": ["a"]}]}}
    assert "x" not in kyverno.mutate({"spec": {"matchConstraints": sel, "mutations": m}}, pod)
    deployments = {"resourceRules": [{"apiGroups": ["apps"], "apiVersions": ["v1"], "operations": ["CREATE"],
                                      "resources": ["deployments"]}]}
    assert "x" not in kyverno.mutate({"spec": {"matchConstraints": deployments, "mutations": m}}, pod)


def test_apply_configuration_is_not_guessed():
    pol = _mpol(mutations=[{"patchType": "ApplyConfiguration", "applyConfiguration": {"expression": "Object{}"}}])
    with pytest.raises(ValueError, match="ApplyConfiguration"):
        kyverno.mutate(pol, {"metadata": {}, "spec": {"containers": []}})


def test_validation_error_refuses_like_failure_policy_fail():
    vpol = {"apiVersion": "policies.kyverno.io/v1", "kind": "ValidatingPolicy", "metadata": {"name": "v"},
            "spec": {"matchConstraints": POD_CREATE, "validations": [
                {"expression": "object.spec.nope == 1", "message": "[r] needs nope"},
                {"expression": "true", "message": "[ok] never"}]}}
    (msg,) = kyverno.denials(vpol, {"metadata": {}, "spec": {"containers": []}})
    assert msg.startswith("[r] needs nope") and "evaluation error" in msg


def test_prefetch_gives_each_expression_its_own_result_and_skips_on_an_error():
    pod = {"metadata": {"labels": {"a": "1"}}, "spec": {"nodeSelector": {"pool": "p2"}, "containers": [{"name": "c"}]}}
    exprs = ["object.spec.nodeSelector['pool'] == 'p1'", "object.spec.nodeSelector['pool'] == 'p2'",
             "size(object.spec.containers)", "object.metadata.labels.a"]
    alone = [cel.evaluate(e, object=pod) for e in exprs]
    b = cel.bind(object=pod)
    cel.prefetch(b, exprs)
    assert [b.results[e] for e in exprs] == alone == [False, True, 1, "1"]
    bad = "object.spec.missing.field == 1"                     # no such key: an evaluation error
    b2 = cel.bind(object=pod)
    cel.prefetch(b2, [exprs[0], bad])
    assert b2.results == {}                                     # nothing stored: each is evaluated on its own
    assert cel.evaluate(exprs[0], b2) is False
    with pytest.raises(cel.CelError):
        cel.evaluate(bad, b2)


def test_a_jsonpatch_value_reads_like_message_to_dict():
    from google.protobuf import json_format, struct_pb2
    for data in [{"a": [1, 2.5, "x", None, True, {"b": []}], "c": {}}, [1, 2], "s", 3, 3.5, None, False, 1e20]:
        value = json_format.ParseDict(data, struct_pb2.Value())
        assert cel._json_value(value) == cel._number(json_format.MessageToDict(value)) == data
    value = struct_pb2.Value(number_value=float("inf"))
    for read in (cel._json_value, json_format.MessageToDict):
        with pytest.raises(ValueError):
            read(value)


# ---------------------------------------------------------------- the effective pod's fast paths (issue 19)
def test_copy_doc_gives_what_deepcopy_gives_sharing_included():
    import copy

    shared = {"name": "x", "value": "1"}
    doc = {"a": [shared, shared, {"b": shared}], "n": 1, "f": 2.5, "t": True, "z": None, "s": "str",
           "tup": ({"k": [1]}, 2), 3: ["int key"], "nested": [[{"d": {}}], []]}
    for original in (doc, [doc, doc], "s", 7, None, []):
        got, want = jsonpatch.copy_doc(original), copy.deepcopy(original)
        assert repr(got) == repr(want)                       # same values, same key order
    got = jsonpatch.copy_doc(doc)
    assert got["a"][0] is got["a"][1] is got["a"][2]["b"] and got["a"][0] is not shared    # shared once, as deepcopy
    assert got["tup"] == doc["tup"] and got["tup"][0] is not doc["tup"][0]                   # tuple: deepcopy's path
    got["a"][0]["value"] = "2"
    assert shared["value"] == "1"                            # a copy: the original is untouched


def test_apply_in_place_without_copies_puts_the_given_values_in():
    value = {"name": "A", "value": "1"}
    ops = [{"op": "add", "path": "/env/-", "value": value}]
    kept = jsonpatch.apply_in_place({"env": []}, ops, copy_values=False)
    copied = jsonpatch.apply_in_place({"env": []}, ops)
    assert kept == copied == {"env": [value]}
    assert kept["env"][0] is value and copied["env"][0] is not value


def test_prefetch_list_is_built_once_per_list_and_never_served_for_another():
    a, b = ("object.spec.x == 1", "object.spec.y == 2"), ("object.spec.x == 1", "object.spec.y == 3")
    assert cel._list_expression(a) is cel._list_expression(a)
    assert cel._list_expression(a) != cel._list_expression(b)
    cases = [({"spec": {"x": 1, "y": 2}}, {a: [True, True], b: [True, False]}),
             ({"spec": {"x": 0, "y": 3}}, {a: [False, False], b: [False, True]})]
    for pod, want in cases:
        for exprs in (a, b):
            bnd = cel.bind(object=pod)
            cel.prefetch(bnd, list(exprs))
            assert [bnd.results[e] for e in exprs] == [cel.evaluate(e, object=pod) for e in exprs] == want[exprs]


def _policies_of_three_pools():
    """Three pools' rendered fabric MutatingPolicies (multi-pool: each also selects its pool), then hand-written
    ones the plain-shape path does not take (spec.variables, an object selector, a mutation that patches nothing,
    a policy for Deployments only)."""
    import dataclasses

    from multinode import checks, fabric, stackfile
    raw, secrets, _ = stackfile.read_stack_file(stackfile.stack_path("aws-dev"))
    cfg = checks.load(raw, secrets)
    base = fabric.profile_for(cfg, cfg.node_pools[0])
    pols = [kyverno.mutating_policy(dataclasses.replace(base, pool=f"p{i}", node_selector={"pool": f"p{i}"}),
                                    multi_pool=True) for i in range(3)]
    add_label = "[JSONPatch{op: 'add', path: '/metadata/annotations', value: {'seen': string(variables.n)}}]"
    pols.insert(1, _mpol(variables=[{"name": "n", "expression": "size(object.spec.containers)"}],
                         mutations=[{"patchType": "JSONPatch", "jsonPatch": {"expression": add_label}}]))
    sel = {**POD_CREATE, "objectSelector": {"matchLabels": {"team": "a"}}}
    pols.append({**_mpol(), "spec": {"matchConstraints": sel, "matchConditions": [
        {"name": "gpu", "expression": "object.spec.containers.exists(c, has(c.resources))"}], "mutations": [
        {"patchType": "JSONPatch", "jsonPatch": {"expression": "[]"}},
        {"patchType": "JSONPatch", "jsonPatch": {
            "expression": "[JSONPatch{op: 'add', path: '/metadata/labels/patched', value: 'yes'}]"}}]}})
    deployments = {"resourceRules": [{"apiGroups": ["apps"], "apiVersions": ["v1"], "operations": ["CREATE"],
                                      "resources": ["deployments"]}]}
    pols.append({**_mpol(), "spec": {"matchConstraints": deployments, "mutations": [
        {"patchType": "JSONPatch", "jsonPatch": {"expression": "[JSONPatch{op: 'add', path: '/x', value: 1}]"}}]}})
    return pols


def _templates():
    gpu = {"name": "t", "image": "i", "resources": {"limits": {"nvidia.com/gpu": "8"}},
           "env": [{"name": "NCCL_NET", "value": "Socket"}, {"name": "A", "value": "1"}]}
    out = []
    for pool in ("p0", "p1", "p2", "elsewhere"):
        for labels in ({"multinode.dev/fabric": "enabled"}, {"multinode.dev/fabric": "enabled", "team": "a"}, {}):
            out.append({"metadata": {"labels": dict(labels)},
                        "spec": {"nodeSelector": {"pool": pool}, "containers": [dict(gpu), {"name": "side"}]}})
    bare = {"name": "b", "resources": {"limits": {"nvidia.com/gpu": 4}, "requests": {"cpu": "1"}},
            "securityContext": {"capabilities": {"add": ["SYS_PTRACE"]}}}
    out.append({"metadata": {"labels": {"multinode.dev/fabric": "enabled"}, "annotations": {"k": "v"}},
                "spec": {"nodeSelector": {"pool": "p2"}, "containers": [bare], "volumes": [{"name": "v"}]}})
    return out


def test_effective_pod_plain_path_gives_what_the_policies_give_one_by_one():
    """apply_policies_to_template reads plain-shape policies once (effective_pod._Reading), shares the pod's
    bindings between policies and patches with CEL's values uncopied; each template comes out as the reference
    (kyverno.mutate, policy after policy, the general code) gives it: same values, same key order."""
    from multinode.manifests import effective_pod
    pols = _policies_of_three_pools()
    prepared = effective_pod.Prepared(pols)
    plain = [r is not None for r in prepared.readings]
    assert plain == [True, False, True, True, True]          # the variables policy takes the general path
    for template in _templates():
        pod = {"apiVersion": "v1", "kind": "Pod", **template}
        for p in pols:
            pod = kyverno.mutate(p, pod)
        want = {"metadata": pod["metadata"], "spec": pod["spec"]}
        before = repr(template)
        assert repr(effective_pod.apply_policies_to_template(template, pols, prepared)) == repr(want)
        assert repr(effective_pod.apply_policies_to_template(template, pols)) == repr(want)    # a fresh Prepared
        assert repr(template) == before                      # the template itself is not changed
    # the cases differ: the fabric lands only on a labelled pod of a fabric pool
    outs = [effective_pod.apply_policies_to_template(t, pols, prepared) for t in _templates()]
    efa = ["vpc.amazonaws.com/efa" in o["spec"]["containers"][0]["resources"]["limits"] for o in outs]
    assert efa[0] and not efa[2] and not efa[9]
    # a container's own NCCL_NET is kept (never rewritten: require-fabric refuses it instead); the last template
    # sets none and gets the fabric's
    nccl = [[e["value"] for e in o["spec"]["containers"][0].get("env", []) if e["name"] == "NCCL_NET"] for o in outs]
    assert nccl[:-1] == [["Socket"]] * (len(outs) - 1) and nccl[-1] == ["AWS Libfabric"]


def test_reads_spec_only_is_conservative():
    from multinode.manifests.effective_pod import reads_spec_only
    assert reads_spec_only("object.spec.containers.filter(c, has(c.env)).map(c, c.name)")
    assert reads_spec_only("has(object.spec) ? [object.spec.x] : []") and reads_spec_only("[]")
    for reads_more in ["object.metadata.labels", "object.?spec", "object .spec", "object.specs", "has(object)",
                       "cel.bind(o, object, o.spec)", "[1].map(object, object.spec)", "'object'",
                       "object.spec.x + object.metadata.name", "// object\n[]", "object.spec_x"]:
        assert not reads_spec_only(reads_more), reads_more


def test_patched_key_follows_the_operations_and_gives_up_on_copy_and_move():
    from multinode.manifests.effective_pod import patched_key, projection
    spec = (("spec",),)
    k = projection({"spec": {"a": 1}}, spec)
    add = [{"op": "add", "path": "/spec/b", "value": 2}]
    assert patched_key(k, add) == patched_key(k, add) != patched_key(k, [{"op": "add", "path": "/spec/b", "value": 3}])
    assert patched_key(k, add) != k and patched_key(None, add) is None
    assert patched_key(k, [{"op": "copy", "from": "/metadata/x", "path": "/spec/x"}]) is None
    assert patched_key(k, [{"op": "move", "from": "/spec/a", "path": "/spec/c"}]) is None
    assert projection({"spec": {"a": 1}}, spec) != projection({"spec": {"a": 1.0}}, spec) != projection(
        {"spec": {"a": True}}, spec)
    assert projection({"spec": {"a": 1, "b": 2}}, spec) != projection({"spec": {"b": 2, "a": 1}}, spec)   # key order
    assert projection({}, spec) != projection({"spec": None}, spec) != projection([], spec)


def test_kept_patches_serve_a_pod_with_the_same_spec_and_no_other():
    """Prepared.patches: a JSONPatch expression is evaluated once per distinct value of what it reads (read_paths):
    the fabric ones read object.spec.containers (a master and a worker differing in a label share them, another
    GPU count is evaluated afresh), the role one reads a label (evaluated once per role). Each result is what a
    fresh Prepared (no kept patches) gives."""
    from multinode.manifests import effective_pod
    pols = _policies_of_three_pools()
    role = "[JSONPatch{op: 'add', path: '/metadata/labels/seen-role', value: object.metadata.labels.role}]"
    pols.append(_mpol(mutations=[{"patchType": "JSONPatch", "jsonPatch": {"expression": role}}]))
    gpu = {"name": "t", "image": "i", "resources": {"limits": {"nvidia.com/gpu": "8"}}}

    def template(role, gpus="8", pool="p1"):
        return {"metadata": {"labels": {"multinode.dev/fabric": "enabled", "role": role}},
                "spec": {"nodeSelector": {"pool": pool},
                         "containers": [{**gpu, "resources": {"limits": {"nvidia.com/gpu": gpus}}}]}}

    evaluated: list[str] = []
    real = cel._evaluate

    def counting(expression, *rest):
        evaluated.append(expression)
        return real(expression, *rest)

    prepared = effective_pod.Prepared(pols)
    fabric_exprs = {m["jsonPatch"]["expression"] for m in pols[2]["spec"]["mutations"]}     # pool p1's policy
    assert all(effective_pod.reads_spec_only(e) for e in fabric_exprs)
    cases = [template("master"), template("worker"), template("worker", gpus="4"), template("master", pool="p2")]
    got = []
    try:
        cel._evaluate = counting
        for t in cases:
            evaluated.clear()
            got.append(effective_pod.apply_policies_to_template(t, pols, prepared))
            seen = set(evaluated)
            fresh = effective_pod.apply_policies_to_template(t, pols, effective_pod.Prepared(pols))
            assert repr(got[-1]) == repr(fresh)
            # reads the role label: evaluated once per role (cases 2 and 3 repeat the roles of 1 and 0)
            assert (role in seen) == (t is cases[0] or t is cases[1])
            if t is cases[1]:
                assert not fabric_exprs & seen, "the worker's fabric patches are the master's"
            elif t is cases[2]:
                assert fabric_exprs <= seen, "another spec: evaluated afresh"
    finally:
        cel._evaluate = real
    for t, g in zip(cases, got, strict=True):          # the kept patches were not changed by the pods they served
        assert repr(effective_pod.apply_policies_to_template(t, pols, prepared)) == repr(g)
    assert [g["metadata"]["labels"]["seen-role"] for g in got] == ["master", "worker", "worker", "master"]
    res = [g["spec"]["containers"][0]["resources"]["limits"] for g in got]
    assert res[0] == res[1] != res[2]                                   # 4 GPUs: half the fabric devices
    assert got[0]["spec"]["containers"][0]["env"] is not got[1]["spec"]["containers"][0]["env"]   # not shared


def test_convertible_says_what_the_engine_binds():
    nested = {"a": [{"b": "é", "c": None, "d": 1.5, "e": True, "f": -(2 ** 63)}], "g": {}}
    binds = [nested, 2 ** 63 - 1, -(2 ** 63), "naïve", float("nan"), [], {"k": [[[]]]}]
    refused = [2 ** 70, -(2 ** 63) - 1, "\ud800", (1, 2), {1, 2}, object(), {"k": {"x": (1,)}}]
    for v in binds:
        assert cel.convertible(v)
        assert cel.evaluate("object.spec.a", object={"spec": {"a": 1}, "x": v}) == 1
    for v in refused:
        assert not cel.convertible(v)
        with pytest.raises(cel.CelError):                    # the engine refuses it, whatever the expression reads
            cel.evaluate("object.spec.a", object={"spec": {"a": 1}, "x": v})
    deep: dict = {}
    node = deep
    for _ in range(3000):                                   # effective_pod counts on the engine binding this deep
        node["a"] = {}
        node = node["a"]
    assert not cel.convertible(deep) and cel.evaluate("object.spec.a", object={"spec": {"a": 1}, "x": deep}) == 1
    assert cel.convertible([{"v": [1]}], depth=97) and not cel.convertible([{"v": [1]}], depth=98)   # 3 levels


def test_a_pod_that_does_not_bind_is_not_served_kept_patches():
    """A pod whose metadata holds a value CEL cannot bind fails every expression (the policy refuses it); a
    patch kept for a pod with the same spec must not hide that (a policy without matchConditions evaluates
    nothing else on the pod)."""
    from multinode.manifests import effective_pod
    expr = "[JSONPatch{op: 'add', path: '/spec/x', value: size(object.spec.containers)}]"
    pols = [_mpol(mutations=[{"patchType": "JSONPatch", "jsonPatch": {"expression": expr}}])]
    spec = {"containers": [{"name": "c"}]}
    good = {"metadata": {"labels": {"role": "master"}}, "spec": spec}
    bad = {"metadata": {"labels": {"role": "worker"}, "annotations": {"n": 2 ** 70}}, "spec": spec}
    prepared = effective_pod.Prepared(pols)
    assert effective_pod.apply_policies_to_template(good, pols, prepared)["spec"]["x"] == 1
    assert prepared.patches                                  # kept for this spec
    for p in (prepared, effective_pod.Prepared(pols)):
        with pytest.raises(cel.CelError):
            effective_pod.apply_policies_to_template(bad, pols, p)


def test_a_patch_that_makes_one_pod_unbindable_is_not_hidden_by_kept_patches():
    """A label-reading mutation puts a value CEL cannot bind back (a double past int64 reads back as a Python int)
    into one pod only; the spec-only mutation after it fails on that pod as it does without kept patches (the key
    follows the operations applied, so the other pod's kept patch is not this pod's)."""
    from multinode.manifests import effective_pod
    big = ("object.metadata.labels.role == 'worker' ? [JSONPatch{op: 'add', path: '/metadata/labels/n', "
           "value: 1e20}] : []")
    size = "[JSONPatch{op: 'add', path: '/spec/x', value: size(object.spec.containers)}]"
    pols = [_mpol(mutations=[{"patchType": "JSONPatch", "jsonPatch": {"expression": e}} for e in (big, size)])]
    spec = {"containers": [{"name": "c"}]}
    master, worker = ({"metadata": {"labels": {"role": r}}, "spec": spec} for r in ("master", "worker"))
    prepared = effective_pod.Prepared(pols)
    assert effective_pod.apply_policies_to_template(master, pols, prepared)["spec"]["x"] == 1
    for p in (prepared, effective_pod.Prepared(pols)):
        with pytest.raises(cel.CelError):
            effective_pod.apply_policies_to_template(worker, pols, p)


def test_read_paths_follow_selects_and_stop_at_calls_and_anything_else():
    from multinode.manifests.effective_pod import read_paths
    assert read_paths("object.metadata.?labels[?'a/b'].orValue('') == 'x'") == (("metadata", "labels", "a/b"),)
    assert read_paths('object.spec["k"] + object.spec.?x') == (("spec", "k"), ("spec", "x"))
    assert read_paths("object.spec.containers.filter(c, c.name == 'a')") == (("spec", "containers"),)
    assert read_paths("object.spec.containers.filter // why\n (c, true)") == (("spec", "containers"),)
    assert read_paths("object.spec.containers.size()") == (("spec", "containers"),)
    assert read_paths("has(object.spec.x)") == (("spec", "x"),)
    assert read_paths("[]") == ()
    whole = [("object.spec[variables.k]", ("spec",)), ("object.spec .x", ("spec",)), ("object. spec", ()),
             ("string(object)", ()), ("object.metadata.labels['a\\'b']", ("metadata", "labels")),
             ("object.spec.containers[0].name", ("spec", "containers"))]
    for expr, path in whole:
        assert read_paths(expr) == (path,), expr
    # a macro variable or bind name `object` and the word in a string read the whole pod too
    assert () in read_paths("[1].map(object, object.x)") and () in read_paths("cel.bind(object, 1, object)")
    assert read_paths("'object' == 'x'") == ((),)


def test_projection_tells_missing_from_not_a_map_from_a_value():
    from multinode.manifests.effective_pod import projection
    p = (("spec", "nodeSelector", "pool"),)
    pods = [{"spec": {"nodeSelector": {"pool": "a"}}}, {"spec": {"nodeSelector": {"pool": "b"}}},
            {"spec": {"nodeSelector": {}}}, {"spec": {}}, {}, {"spec": {"nodeSelector": ["pool"]}},
            {"spec": {"nodeSelector": "pool"}}, {"spec": {"nodeSelector": {"pool": 1}}},
            {"spec": {"nodeSelector": {"pool": "1"}}}]
    keys = [projection(pod, p) for pod in pods]
    assert len(set(keys)) == len(pods)
    assert projection({"spec": {"nodeSelector": {"pool": "a"}, "other": 1}, "metadata": {"x": 1}}, p) == keys[0]


def test_kept_condition_results_serve_pods_that_read_the_same_and_no_other():
    """Prepared.bind: the pools' matchConditions are evaluated once per distinct (fabric label, node selector...)
    they read; a pod that reads something else is evaluated afresh, a pod that does not bind fails as without
    kept results, and every result equals a fresh Prepared's."""
    from multinode.manifests import effective_pod
    pols = _policies_of_three_pools()
    prepared = effective_pod.Prepared(pols)
    evaluated: list[str] = []
    real = cel._evaluate

    def counting(expression, *rest):
        evaluated.append(expression)
        return real(expression, *rest)

    def template(workload, pool="p1", fabric="enabled", team="b", **meta):
        return {"metadata": {"labels": {"multinode.dev/fabric": fabric, "workload": workload, "team": team}, **meta},
                "spec": {"nodeSelector": {"pool": pool}, "containers": [{"name": "t", "resources": {
                    "limits": {"nvidia.com/gpu": "8"}}}]}}

    def conditions_evaluated():
        return [e for e in evaluated if e.startswith("[(")]       # the prefetch list of the conditions

    try:
        cel._evaluate = counting
        for t, fresh_conditions in [(template("a"), True), (template("b"), False), (template("c", pool="p2"), True),
                                    (template("d", pool="p2"), False), (template("e", fabric="no"), True),
                                    (template("f", fabric="no"), False), (template("g", team="a"), False)]:
            evaluated.clear()
            got = effective_pod.apply_policies_to_template(t, pols, prepared)
            assert bool(conditions_evaluated()) is fresh_conditions, t
            assert repr(got) == repr(effective_pod.apply_policies_to_template(t, pols, effective_pod.Prepared(pols)))
        # a pod that matches no policy and does not bind: only the pools' policies, so nothing but their
        # conditions is evaluated on it (all kept from the pod before)
        pools_only = [p for p in pols if p["metadata"]["name"].startswith("multinode-fabric-")]
        bad = template("x", pool="elsewhere")
        bad["metadata"]["labels"]["n"] = 2 ** 70                 # a label no condition reads
        for p in (effective_pod.Prepared(pools_only),) * 2:
            effective_pod.apply_policies_to_template(template("h", pool="elsewhere"), pools_only, p)
            with pytest.raises(cel.CelError):
                effective_pod.apply_policies_to_template(bad, pools_only, p)
    finally:
        cel._evaluate = real


def test_objects_from_cel_have_their_keys_in_one_order_on_every_run():
    # a Struct (a JSONPatch's value) and a CEL map iterate in hash order, which changed from one plan to the next
    # (gcp-dev's effective tcpxo-daemon sidecar: env before or after args); their keys come out sorted
    keys = ["name", "image", "restartPolicy", "command", "args", "env", "volumeMounts", "startupProbe",
            "securityContext", "imagePullPolicy", "ports", "resources", "workingDir"]
    lit = "{" + ", ".join(f"'{k}': {i}" for i, k in enumerate(keys)) + "}"
    patch = cel.evaluate(f"JSONPatch{{op: 'add', path: '/x', value: {{'c': {lit}, 'b': [{lit}]}}}}")
    assert list(patch["value"]) == ["b", "c"]
    assert list(patch["value"]["c"]) == sorted(keys) and list(patch["value"]["b"][0]) == sorted(keys)
    assert patch["value"]["c"]["name"] == 0 and patch["value"]["c"]["workingDir"] == 12
    plain = cel.evaluate(lit)
    assert list(plain) == sorted(keys)
    assert cel.evaluate("{2: 'x', 1: 'y'}") == {1: "y", 2: "x"}


def test_the_pod_admission_checks_takes_the_written_pods_fabric_patches():
    """admission.findings evaluates each pod with requests defaulted from limits (SetDefaults_Pod), which changes
    only the init containers of a rendered preflight pod; the fabric expressions read object.spec.containers, so
    that pod takes the patches kept for the written one (no CEL evaluation), and the result is a fresh Prepared's."""
    from multinode import admission
    from multinode.manifests import effective_pod
    pols = _policies_of_three_pools()
    fabric_exprs = {m["jsonPatch"]["expression"] for m in pols[2]["spec"]["mutations"]}     # pool p1's policy
    gpu = {"limits": {"nvidia.com/gpu": "8"}, "requests": {"nvidia.com/gpu": "8"}}
    init = {"name": "preflight", "image": "i", "resources": {"limits": {"nvidia.com/gpu": "8", "x.io/nic": "1"}}}
    written = {"metadata": {"labels": {"multinode.dev/fabric": "enabled"}},
               "spec": {"nodeSelector": {"pool": "p1"}, "initContainers": [init],
                        "containers": [{"name": "t", "image": "i", "resources": gpu}]}}
    defaulted = effective_pod.jsonpatch.copy_doc(written)
    defaulted["spec"]["initContainers"][0]["resources"]["requests"] = admission.defaulted_requests(init)
    assert defaulted != written
    prepared = effective_pod.Prepared(pols)
    evaluated: list[str] = []
    real = cel._evaluate

    def counting(expression, *rest):
        evaluated.append(expression)
        return real(expression, *rest)
    try:
        cel._evaluate = counting
        first = effective_pod.apply_policies_to_template(written, pols, prepared)
        assert fabric_exprs <= set(evaluated)
        evaluated.clear()
        second = effective_pod.apply_policies_to_template(defaulted, pols, prepared)
        assert not fabric_exprs & set(evaluated), "served from the written pod's kept patches"
    finally:
        cel._evaluate = real
    fresh = effective_pod.apply_policies_to_template(defaulted, pols, effective_pod.Prepared(pols))
    assert repr(second) == repr(fresh) and second["spec"]["containers"] == first["spec"]["containers"]
    assert second["spec"]["containers"][0]["env"] is not first["spec"]["containers"][0]["env"]     # copied


def test_one_condition_shared_by_every_pool_is_kept_and_a_kept_pod_is_not_converted():
    """Every pool's fabric policy has the same multi-node-pod condition, so prefetch (two or more) evaluates none:
    Prepared.keep keeps the result matching evaluated, and the next pod that reads the same takes it without
    being converted to CEL for it (cel.bind_later). A pod that reads another label value is evaluated afresh;
    every result equals a fresh Prepared's."""
    import dataclasses

    from multinode import checks, fabric, stackfile
    from multinode.manifests import effective_pod
    raw, secrets, _ = stackfile.read_stack_file(stackfile.stack_path("aws-dev"))
    cfg = checks.load(raw, secrets)
    base = fabric.profile_for(cfg, cfg.node_pools[0])
    pols = [kyverno.mutating_policy(dataclasses.replace(base, pool=f"p{i}")) for i in range(2)]
    prepared = effective_pod.Prepared(pols)
    assert len(set(prepared.conditions)) == 1
    condition = prepared.conditions[0]
    evaluated: list[str] = []
    converted: list[int] = []
    real, real_activation = cel._evaluate, cel.Bindings.activation

    def counting(expression, *rest):
        evaluated.append(expression)
        return real(expression, *rest)

    def activation(self):
        if self._activation is None:
            converted.append(1)
        return real_activation.fget(self)

    def template(workload, fabric="enabled"):
        return {"metadata": {"labels": {"multinode.dev/fabric": fabric, "workload": workload}},
                "spec": {"containers": [{"name": workload, "resources": {"limits": {"nvidia.com/gpu": "8"}}}]}}
    try:
        cel._evaluate = counting
        cel.Bindings.activation = property(activation)
        for t, fresh in [(template("a"), True), (template("b"), False), (template("c", "no"), True),
                         (template("d", "no"), False), (template("e"), False)]:
            evaluated.clear()
            converted.clear()
            got = effective_pod.apply_policies_to_template(t, pols, prepared)
            assert (condition in evaluated) is fresh, t
            # converted for the condition only when it is evaluated (the mutations bind the pod they patch themselves)
            assert len(converted) == (1 if fresh else 0), t
            cel._evaluate = real
            assert repr(got) == repr(effective_pod.apply_policies_to_template(t, pols, effective_pod.Prepared(pols)))
            cel._evaluate = counting
    finally:
        cel._evaluate = real
        cel.Bindings.activation = real_activation
