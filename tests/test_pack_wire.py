"""Issue 35: policy/wire.py (pulumi_policy's conversion of a resource's properties once per request, not once per
policy; CRD schemas not converted) changes no answer of the pack's servicer. bench/pack_equivalence.py compares the
AnalyzeResponses with and without it; here on the example stacks that carry the big CRDs, a fleet stack, the CRD
edge cases and hostile objects (every family of it with MULTINODE_LONG_TESTS=1), and the comparison is shown to
catch a wrong memo."""
from __future__ import annotations

import copy
import sys
from pathlib import Path
from typing import Any

import pytest
from google.protobuf import json_format, struct_pb2
from pulumi.runtime import rpc
from pulumi.runtime.proto import analyzer_pb2 as pb
from pulumi_policy import deserialize, proxy
from pulumi_policy import policy as pp

from tests.conftest import LONG_TESTS, sized

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "bench"))

import pack_equivalence as eq  # noqa: E402


@pytest.fixture(autouse=True)
def _wire_off_afterwards():
    """Every test leaves pulumi_policy as it found it (no test of another file sees the wrapped servicer)."""
    from policy import wire
    yield
    wire.uninstall()


def _literal_token_job() -> pb.AnalyzeRequest:
    props = struct_pb2.Struct()
    props.update({"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": "leaky", "namespace": "multinode"},
                  "spec": {"template": {"metadata": {}, "spec": {"restartPolicy": "Never", "containers": [
                      {"name": "c", "image": "busybox:1.36",
                       "env": [{"name": "HF_TOKEN", "value": "hf_plaintext"}]}]}}}})
    return pb.AnalyzeRequest(type="kubernetes:batch/v1:Job", properties=props, urn="urn:job", name="leaky")


def _stack(name: str) -> tuple[list[pb.AnalyzeRequest], pb.AnalyzeStackRequest]:
    import pack_bench
    per, whole = pack_bench.requests(name)
    per.append(_literal_token_job())
    whole.resources.append(pb.AnalyzerResource(type=per[-1].type, properties=per[-1].properties, urn="urn:job",
                                               name="leaky"))
    return per, whole


@pytest.mark.parametrize("stack", ["existing-dev", "dynamo-dev", "fleet-dev"])
def test_the_same_answers_with_and_without_wire(stack):
    per, whole = _stack(stack)
    diffs, diagnostics = eq.differences(stack, per, whole)
    assert diffs == []
    assert diagnostics >= 1, "a violation (the literal token) is among the compared answers"


def test_the_same_answers_on_crd_edge_cases_and_hostile_objects():
    for name, (per, whole) in {"crd": eq.crd_edge_requests(),
                               "hostile": eq.hostile_requests(sized(40, 150), seed=35)}.items():
        diffs, diagnostics = eq.differences(name, per, whole)
        assert diffs == [] and diagnostics >= 1, name


@pytest.mark.skipif(not LONG_TESTS, reason="every stack file of the tests (~5 min): MULTINODE_LONG_TESTS=1 or "
                    "python bench/pack_equivalence.py")
def test_the_same_answers_on_every_stack_file_of_the_tests(capsys):
    assert eq.main([]) == 0, capsys.readouterr().out


def test_the_comparison_catches_a_memo_that_mixes_up_resources(monkeypatch):
    """Planted defect: a memo keyed on the step alone hands every resource of a request the first one's properties.
    The corpus stack has a stack rule's finding (checkpoint-storage-rwx), which the defect loses."""
    import pack_bench

    from policy import wire

    def careless(memo, kind, arg, compute, *extra):
        if kind not in memo:
            memo[kind] = (arg, compute())
        return memo[kind][1]
    per, whole = pack_bench.requests("pvc-rwo-mounted-by-gang", eq.ROOT / "tests/corpus/pvc-rwo-mounted-by-gang.yaml")
    assert eq.differences("as is", per, whole) == ([], 1)
    monkeypatch.setattr(wire, "once", careless)
    diffs, _ = eq.differences("planted", per, whole)
    assert any("AnalyzeStack" in d for d in diffs)


def test_each_conversion_runs_once_per_resource_and_request(monkeypatch):
    from policy import wire
    per, whole = _stack("existing-dev")
    calls = {"dict": 0, "deserialize": 0, "proxy": 0}
    real_dict, real_des, real_proxy = (json_format.MessageToDict, deserialize.deserialize_properties,
                                       proxy.unknown_checking_proxy)
    monkeypatch.setattr(json_format, "MessageToDict",
                        lambda *a, **k: calls.__setitem__("dict", calls["dict"] + 1) or real_dict(*a, **k))
    monkeypatch.setattr(pp, "deserialize_properties",
                        lambda *a, **k: calls.__setitem__("deserialize", calls["deserialize"] + 1) or real_des(*a, **k))
    monkeypatch.setattr(pp, "unknown_checking_proxy",
                        lambda *a: calls.__setitem__("proxy", calls["proxy"] + 1) or real_proxy(*a))
    assert wire.install()
    assert wire.install() is False                              # installing twice is a no-op
    sv = eq.servicer()
    sv.AnalyzeStack(whole, None)
    n = len(whole.resources)
    # MessageToDict: a resource's properties and its provider's (pulumi_policy converts both), CRDs in _prefill
    assert calls["dict"] <= 2 * n and calls["deserialize"] <= 2 * n and calls["proxy"] <= 2 * n, calls
    for r in per:
        sv.Analyze(r, None)
    assert calls["proxy"] <= 4 * n, calls                     # not 14 resource policies x resources
    wire.uninstall()
    assert pp.json_format is json_format and pp._PolicyAnalyzerServicer.Analyze.__name__ == "Analyze"


def test_options_provider_and_gangs_are_read_once_per_request(monkeypatch):
    """Issue 47: pulumi_policy builds a resource's options and provider for every policy again, and each rule read
    the workload's gangs and pod specs itself; under wire each is built once per resource and request (the pack's
    findings stay the same: the tests above)."""
    from policy import objects, wire
    per, whole = _stack("existing-dev")
    calls = {"options": 0, "provider": 0, "gangs": 0, "named": 0}
    real_opts, real_prov = pp._PolicyAnalyzerServicer._get_resource_options, \
        pp._PolicyAnalyzerServicer._get_provider_resource
    monkeypatch.setattr(pp._PolicyAnalyzerServicer, "_get_resource_options", lambda self, r: calls.__setitem__(
        "options", calls["options"] + 1) or real_opts(self, r))
    monkeypatch.setattr(pp._PolicyAnalyzerServicer, "_get_provider_resource", lambda self, r: calls.__setitem__(
        "provider", calls["provider"] + 1) or real_prov(self, r))
    readers = {k: (lambda f: lambda *a: calls.__setitem__("gangs", calls["gangs"] + 1) or f(*a))(f)
               for k, f in objects.READERS.items()}
    monkeypatch.setattr(objects, "READERS", readers)
    real_walk = objects._pod_specs_at       # named_pod_specs walks an object from its root (path "")
    monkeypatch.setattr(objects, "_pod_specs_at", lambda o, path: calls.__setitem__(
        "named", calls["named"] + (path == "")) or real_walk(o, path))
    assert wire.install()
    sv = eq.servicer()
    workloads = [r for r in per if objects.kind_of(json_format.MessageToDict(r.properties)) in objects.READERS]
    assert len(workloads) >= 3
    for r in per:
        sv.Analyze(r, None)
    n = len(per)
    assert calls["options"] == n and calls["provider"] == n, calls            # not once per resource policy
    assert calls["gangs"] == len(workloads), calls                           # each workload's gangs read once
    assert calls["named"] <= n, calls
    calls.update(options=0, provider=0, gangs=0)
    sv.AnalyzeStack(whole, None)
    assert calls["options"] == len(whole.resources) == calls["provider"], calls   # not once per stack policy
    assert calls["gangs"] <= len(workloads), calls
    wire.uninstall()
    assert pp._PolicyAnalyzerServicer._get_provider_resource is not None
    assert "lambda" in pp._PolicyAnalyzerServicer._get_resource_options.__qualname__    # the test's own, restored


def test_shell_words_are_split_once_per_text_and_give_a_new_list_each_time(monkeypatch):
    import shlex

    from policy import objects
    splits = []
    real = objects._SHELL_TOKEN

    class Counting:
        def findall(self, text):
            splits.append(text)
            return real.findall(text)
    monkeypatch.setattr(objects, "_SHELL_TOKEN", Counting())
    text = "torchrun --rdzv_conf='is_host=1' \\\n  train.py --tag \"a b\""
    first = objects._shell_words(text)
    first.append("changed")
    assert objects._shell_words(text) == shlex.split(text) == ["torchrun", "--rdzv_conf=is_host=1", "\n",
                                                               "train.py", "--tag", "a b"]
    assert splits == [text]                     # the second ask (a Volcano worker after its master) is kept


def _crd_struct(spec_edit=None, **top) -> struct_pb2.Struct:
    schema = {"openAPIV3Schema": {"type": "object", "properties": {"spec": {"type": "object"}}}}
    doc = {"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
           "metadata": {"name": "things.example.com"},
           "spec": {"group": "example.com", "names": {"kind": "Thing"}, "scope": "Namespaced",
                    "versions": [{"name": "v1", "served": True, "storage": True, "schema": schema}]}}
    if spec_edit:
        spec_edit(doc["spec"])
    doc.update(top)
    s = struct_pb2.Struct()
    s.update(doc)
    return s


def test_a_crd_loses_only_its_schemas_and_only_where_pack_drops_them_too():
    from policy import wire
    full = _crd_struct()
    before = full.SerializeToString()
    short = wire.without_crd_schemas(full)
    assert full.SerializeToString() == before                   # the request is not modified
    got = json_format.MessageToDict(short)
    want = json_format.MessageToDict(full)
    del want["spec"]["versions"][0]["schema"]
    assert got == want
    # where policy/pack.py _crd_props would fall back to the whole object, the whole object is converted
    unknown = rpc.UNKNOWN
    for edit, top in [(None, {"status": unknown}), (lambda s: s.update(scope=unknown), {}),
                      (lambda s: s.update(versions=unknown), {}), (lambda s: s["versions"].append(unknown), {}),
                      (lambda s: s["versions"][0].update(served=unknown), {}),
                      (lambda s: s.update(versions={"v1": {}}), {}), (lambda s: s["versions"].append("v2"), {}),
                      (lambda s: s["versions"][0].pop("schema"), {}), (None, {"spec": [1]})]:
        assert wire.without_crd_schemas(_crd_struct(edit, **top)) is None, (edit, top)
    # an unknown schema is still a schema: dropped like any other
    assert wire.without_crd_schemas(_crd_struct(lambda s: s["versions"][0].update(schema=unknown))) is not None


def test_no_rule_changes_the_resources_it_reads():
    """Under the analyzer the rules of one request share one Resource per resource (policy/pack.py, as offline):
    a rule that modified one would change what the next rule sees. Every rule on the example stacks' resources,
    each resource compared with a copy taken before."""
    import pack_bench

    from policy import pack
    from policy.engine import Resource, build_context
    for stack in ("existing-dev", "dynamo-dev", "fleet-dev", "gcp-dev"):
        _, whole = pack_bench.requests(stack)
        resources = [Resource(type=r.type, name=r.name, urn=r.urn, props=json_format.MessageToDict(r.properties))
                     for r in whole.resources]
        assert _changed_by_rules(resources, pack.all_rules(), build_context(None, resources)) == [], stack


def _changed_by_rules(resources, rules, ctx):
    from policy import pack
    before = copy.deepcopy([r.props for r in resources])
    changed = []
    for rule in rules:
        if rule.scope == "resource":
            for r in resources:
                pack.resource_findings(rule, r, ctx)
        else:
            pack.stack_findings(rule, resources, ctx)
        now = [r.props for r in resources]
        if now != before:
            changed.append(rule.name)
            before = copy.deepcopy(now)
    return changed


def test_the_mutation_check_catches_a_rule_that_writes():
    from policy import pack
    from policy.engine import Context, Resource, Rule
    sneaky = Rule("sneaky", "writes into what it reads", "mandatory",
                  lambda r, ctx: r.props.setdefault("metadata", {}).update(name="changed") or [])
    res = [Resource(type="kubernetes:core/v1:ConfigMap", name="c", props={"kind": "ConfigMap", "metadata": {}})]
    assert _changed_by_rules(res, [*pack.all_rules()[:2], sneaky], Context()) == ["sneaky"]


def test_compare_of_two_dumps_names_the_case_that_differs(tmp_path, capsys):
    import pickle
    same = pb.AnalyzeResponse().SerializeToString()
    one = pb.AnalyzeResponse(diagnostics=[pb.AnalyzeDiagnostic(policyName="p", message="m")]).SerializeToString()
    (tmp_path / "a").write_bytes(pickle.dumps({"stacks/x": ([same], same), "crd": ([same], same)}))
    (tmp_path / "b").write_bytes(pickle.dumps({"stacks/x": ([same], same), "crd": ([one], same)}))
    assert eq.compare(tmp_path / "a", tmp_path / "a") == 0
    assert eq.compare(tmp_path / "a", tmp_path / "b") == 1 and "['crd']" in capsys.readouterr().out


def _graph_request() -> pb.AnalyzeStackRequest:
    """Four resources with a parent, dependencies (one on a URN not in the stack), property dependencies and a
    duplicate URN (the later one wins in pulumi_policy's map)."""
    def res(urn: str, parent: str = "", deps: tuple[str, ...] = (), prop: dict[str, list[str]] | None = None,
            name: str = "") -> pb.AnalyzerResource:
        props = struct_pb2.Struct()
        props.update({"metadata": {"name": name or urn}, "n": 1})
        r = pb.AnalyzerResource(type="kubernetes:core/v1:ConfigMap", properties=props, urn=urn, name=name or urn,
                                parent=parent, dependencies=list(deps))
        for k, urns in (prop or {}).items():
            r.propertyDependencies[k].urns.extend(urns)
        return r
    return pb.AnalyzeStackRequest(resources=[
        res("urn:a"), res("urn:b", parent="urn:a", deps=("urn:a", "urn:gone")),
        res("urn:c", parent="urn:b", deps=("urn:b", "urn:a"), prop={"data": ["urn:a", "urn:gone", "urn:b"]}),
        res("urn:a", name="second-a"), res("urn:d", parent="urn:gone")])


def _graph_servicer(seen: list[Any]) -> Any:
    from policy.engine import plain
    """A servicer with three stack policies that record the stack they are given (one disabled by config, one that
    says it does not apply) and a resource policy."""
    def record(args: Any, report: Any) -> None:
        seen.append([(r.urn, r.name, r.parent.urn if r.parent else None, [d.urn for d in r.dependencies],
                      {k: [d.urn for d in v] for k, v in r.property_dependencies.items()}, plain(r.props),
                      args.get_config()) for r in args.resources])
        report("seen", "urn:b")

    def not_here(args: Any, report: Any) -> None:
        args.not_applicable("not here")
    policies = [pp.StackValidationPolicy(name="one", description="d1", validate=record),
                pp.ResourceValidationPolicy(name="res", description="r", validate=lambda a, rep: None),
                pp.StackValidationPolicy(name="off", description="d2", validate=record),
                pp.StackValidationPolicy(name="na", description="d3", validate=not_here),
                pp.StackValidationPolicy(name="two", description="d4", validate=record,
                                         enforcement_level=pp.EnforcementLevel.REMEDIATE)]
    sv = pp._PolicyAnalyzerServicer("graph", "1.0.0", policies, pp.EnforcementLevel.ADVISORY)
    conf = pb.ConfigureAnalyzerRequest()
    conf.policyConfig["off"].enforcementLevel = pb.DISABLED
    conf.policyConfig["two"].properties.update({"k": "v"})
    sv.Configure(conf, None)
    return sv


def test_the_stack_built_once_is_the_stack_pulumi_policy_builds_per_policy():
    """policy/wire.py's AnalyzeStack builds the stack's PolicyResources once per request; each stack policy must see
    what pulumi_policy's own AnalyzeStack gives it: the same resources, parents, dependencies and property
    dependencies (URNs outside the stack dropped, a duplicate URN resolved to the later resource), config, levels,
    violations and not-applicable answers."""
    from policy import wire
    answers = {}
    for on in (False, True):
        (wire.install if on else wire.uninstall)()
        seen: list[Any] = []
        response = _graph_servicer(seen).AnalyzeStack(_graph_request(), None)
        answers[on] = (seen, response.SerializeToString(deterministic=True))
        if on:
            assert pp._PolicyAnalyzerServicer.AnalyzeStack.__name__ == "_analyze_stack"
    assert answers[True] == answers[False]
    seen, _ = answers[True]
    assert len(seen) == 2 and seen[0][2][:6] == ("urn:c", "urn:c", "urn:b", ["urn:b", "urn:a"],
                                                 {"data": ["urn:a", "urn:b"]}, {"metadata": {"name": "urn:c"}, "n": 1})
    assert seen[0][1][2] == "urn:a" and seen[0][4][2] is None and not seen[0][0][6] and seen[1][1][6] == {"k": "v"}


def test_analyze_with_the_parts_taken_once_answers_as_pulumi_policy_does():
    """policy/wire.py's Analyze takes the properties, options and provider once per request; every resource policy
    must get what pulumi_policy's own Analyze gives it, and the response must be the same: levels (a disabled one
    not run, remediate reported as mandatory), config, a remediation-only policy reported not applicable, a policy
    that says it does not apply, and the advisory for a policy that reads an unknown value."""
    from policy import wire
    from policy.engine import plain
    seen: list[Any] = []

    def record(args: Any, report: Any) -> None:
        seen.append((args.resource_type, args.urn, args.name, plain(args.props), args.get_config(),
                     bool(args.opts.protect), args.opts.parent, dict(args.stack_tags) if hasattr(args, "stack_tags")
                     else None))
        report("seen")

    def reads_unknown(args: Any, report: Any) -> None:
        report(str(args.props["later"]))

    def not_here(args: Any, report: Any) -> None:
        args.not_applicable("not here")
    policies = [pp.ResourceValidationPolicy(name="one", description="d1", validate=record),
                pp.ResourceValidationPolicy(name="fix-only", description="d2", remediate=lambda a: None),
                pp.ResourceValidationPolicy(name="off", description="d3", validate=record),
                pp.ResourceValidationPolicy(name="na", description="d4", validate=not_here),
                pp.ResourceValidationPolicy(name="unknown", description="d5", validate=reads_unknown),
                pp.StackValidationPolicy(name="stack", description="d6", validate=lambda a, r: None),
                pp.ResourceValidationPolicy(name="two", description="d7", validate=record,
                                            enforcement_level=pp.EnforcementLevel.REMEDIATE)]
    props = struct_pb2.Struct()
    props.update({"metadata": {"name": "cm"}, "data": {"a": "b"}, "later": rpc.UNKNOWN})
    request = pb.AnalyzeRequest(type="kubernetes:core/v1:ConfigMap", properties=props, urn="urn:cm", name="cm",
                                options=pb.AnalyzerResourceOptions(protect=True, parent="urn:parent"))
    answers = {}
    for on in (False, True):
        (wire.install if on else wire.uninstall)()
        seen.clear()
        sv = pp._PolicyAnalyzerServicer("graph", "1.0.0", policies, pp.EnforcementLevel.ADVISORY)
        conf = pb.ConfigureAnalyzerRequest()
        conf.policyConfig["off"].enforcementLevel = pb.DISABLED
        conf.policyConfig["two"].properties.update({"k": "v"})
        sv.Configure(conf, None)
        response = sv.Analyze(request, None)
        answers[on] = (list(seen), response.SerializeToString(deterministic=True))
        if on:
            assert pp._PolicyAnalyzerServicer.Analyze.__name__ == "_analyze"
            assert [d.policyName for d in response.diagnostics] == ["one", "unknown", "two"]
            assert sorted(n.policy_name for n in response.not_applicable) == ["fix-only", "na"]
    assert answers[True] == answers[False]
    assert [s[4] for s in answers[True][0]] == [{}, {"k": "v"}] and answers[True][0][0][5] is True
