"""Once per resource and request, not once per policy: pulumi_policy's conversion of a resource's properties.

pulumi_policy 1.21.0's `_PolicyAnalyzerServicer.Analyze` / `AnalyzeStack` (pulumi_policy/policy.py:971, 1031) convert
a resource's properties inside their loop over policies: `json_format.MessageToDict(request.properties)`, then
`deserialize_properties(...)`, then `unknown_checking_proxy(...)` (a proxy per dict and list, each copying its
path), for every policy again. With 14 resource policies and 15 stack policies that was ~85% of the pack's CPU
under the analyzer protocol (cProfile, bench/pack_bench.py --profile, existing-dev; docs/deploy-speed.md).

`install()` makes each of the three steps answer once per request for the same input object:
* the servicer's `Analyze` and `AnalyzeStack` run with a memo of their own (thread-local: the gRPC server runs
  requests on a pool of threads; the memo lives exactly as long as one request, so nothing leaks between
  requests or stacks);
* inside a request, `MessageToDict(m)`, `deserialize_properties(d)` and `unknown_checking_proxy(d)` are keyed on
  the identity of their argument (the memo holds the argument, so its id is not reused while the memo lives):
  the same protobuf message gives the same dict, that dict the same deserialized dict, that the same proxy. A
  request is not modified while it is served, and the servicer builds new objects from these without changing
  them, so the result is the one the uncached call gives;
* the resource's options and provider (`_get_resource_options`, `_get_provider_resource`, which both calls also
  build per policy) are kept the same way, keyed on the request's (or the AnalyzeStack resource's) message: every
  policy gets the same PolicyResourceOptions and PolicyProviderResource objects, which the rules only read;
* the servicer's `Analyze` and `AnalyzeStack` themselves are ours (`_analyze`, `_analyze_stack`, issue 47): the
  same loop over the policies with pulumi_policy's own helpers, but the resource's parts taken once before it, and
  the stack's PolicyResource objects (parent, dependencies and property dependencies linked) built once per
  AnalyzeStack instead of once per stack policy (19 policies x 1,003 resources: ~30% of AnalyzeStack's CPU);
  tests/test_pack_wire.py compares both with pulumi_policy's methods field by field;
* the request's objects are dropped before the collector is turned back on (gc_paused), so its next collection
  does not walk them;
* outside those two calls (`Configure` reads its config with MessageToDict; `Remediate` deserializes with
  `proxy_secrets`) everything is pulumi_policy's own code.

What this shares: every policy of one request gets the same proxy object as `args.props`. Our validators
(policy/pack.py) only read it (through `plain()`, which builds new dicts and lists), and policy/pack.py memoizes
its own `Resource` per proxy the same way (`request_memo()`): the rules then share one Resource per resource, as
they already do in the offline `plan` (pack.evaluate runs every rule over the same list). A rule must not
modify the resources it reads (tests/test_pack_wire.py checks every rule on the example stacks).

Used by policy/__main__.py only (the offline plan never goes through pulumi_policy's servicer). If pulumi_policy
ever lacks one of the attributes, install() changes nothing and returns False: the pack is then only slower.
tests/test_pack_wire.py compares every response with and without it over example, guide and corpus stacks.
"""
from __future__ import annotations

import contextlib
import functools
import gc
import threading
from collections.abc import Callable, Iterator
from typing import Any

from google.protobuf import json_format

_state = threading.local()
_PATCHED = ("json_format", "deserialize_properties", "unknown_checking_proxy")
# what _analyze_stack uses of pulumi_policy.policy (1.21.0): without any of them install() changes nothing
_SERVICER_NEEDS = ("_get_resource_options", "_get_provider_resource", "_configure_runtime_settings",
                   "_get_enforcement_level", "_create_report_violation", "_get_policy_config",
                   "_map_enforcement_level")
_INSTANCE_NEEDS = ("_PolicyAnalyzerServicer__policies", "_PolicyAnalyzerServicer__policy_pack_name",
                   "_PolicyAnalyzerServicer__policy_pack_version", "_PolicyAnalyzerServicer__stack_tags")
_MODULE_NEEDS = ("PolicyResource", "StackValidationArgs", "StackValidationPolicy", "EnforcementLevel",
                 "ResourceValidationArgs", "ResourceValidationPolicy",
                 "UnknownValueError", "_NotApplicableError", "isawaitable", "asyncio", "proto")
_originals: dict[str, Any] = {}


def request_memo() -> dict[Any, Any] | None:
    """The memo of the analyzer request this thread is serving, or None (offline plan, tests, other calls)."""
    return getattr(_state, "memo", None)


def once(memo: dict[Any, Any], kind: str, arg: Any, compute: Callable[[], Any], *extra: Any) -> Any:
    """compute() once per (kind, the object `arg`, extra) in this memo. The memo keeps `arg` alive, so an id in
    it always names the same object."""
    key = (kind, id(arg), *extra)
    hit = memo.get(key)
    if hit is not None and hit[0] is arg:
        return hit[1]
    value = compute()
    memo[key] = (arg, value)
    return value


CRD_TYPE = "kubernetes:apiextensions.k8s.io/v1:CustomResourceDefinition"


def _unknown(value: Any) -> bool:
    """A protobuf Value that pulumi_policy's proxy would raise UnknownValueError on (an unknown sentinel)."""
    from pulumi_policy.proxy import _is_unknown
    return value.WhichOneof("kind") == "string_value" and bool(_is_unknown(value.string_value))


def without_crd_schemas(props: Any) -> Any:
    """A copy of a CRD's properties (a protobuf Struct) without its versions' OpenAPI schemas, or None when
    policy/pack.py `_crd_props` would not drop them the same way. No rule reads a CRD's schema: _crd_props drops
    them before the rules see the CRD (tests/test_policy_rules.py, every rule with and without them), so dropping
    them before the conversion gives the rules the same object, without converting ~6,000 values of each LWS or
    Grove CRD three times. None (the whole conversion then runs) whenever _crd_props would take its fallback, the
    whole props: an unknown value at the top, in spec, in spec.versions or a version's field; or a spec / versions
    / version that is not a map / list / map."""
    fields = props.fields
    if "spec" not in fields or any(_unknown(v) for v in fields.values()):
        return None
    spec = fields["spec"]
    if spec.WhichOneof("kind") != "struct_value" or "versions" not in spec.struct_value.fields or \
            any(_unknown(v) for v in spec.struct_value.fields.values()):
        return None
    versions = spec.struct_value.fields["versions"]
    if versions.WhichOneof("kind") != "list_value":
        return None
    for v in versions.list_value.values:
        if v.WhichOneof("kind") != "struct_value" or \
                any(_unknown(x) for k, x in v.struct_value.fields.items() if k != "schema"):
            return None
    out = type(props)()
    out.CopyFrom(props)
    changed = False
    for v in out.fields["spec"].struct_value.fields["versions"].list_value.values:
        if "schema" in v.struct_value.fields:
            del v.struct_value.fields["schema"]
            changed = True
    return out if changed else None


def _prefill(memo: dict[Any, Any], resources: Any) -> None:
    """The dict of each CRD's properties, without their schemas (without_crd_schemas), put where MessageToDict's
    memo finds it."""
    for r in resources:
        if r.type == CRD_TYPE:
            props = r.properties
            short = without_crd_schemas(props)
            if short is not None:
                memo[("dict", id(props))] = (props, json_format.MessageToDict(short))


_gc_lock = threading.Lock()
_gc_paused = [0, False]          # requests being served, whether the first of them turned the collector off


@contextlib.contextmanager
def gc_paused() -> Iterator[None]:
    """Python's cyclic garbage collector off while requests are served (process-wide: a counter for the gRPC
    server's concurrent threads), back on after the last. A request allocates its objects (dicts, lists, proxies)
    and keeps them to its end; with the collector on, each collection of the oldest generation walks every live
    object, the request's own included, so the cost of one AnalyzeStack grew faster than its resources (measured:
    ~half of AnalyzeStack's CPU at 975 resources, docs/deploy-speed.md). Nothing is leaked: what a request frees is
    freed by reference counting as before, and objects in cycles wait for the next collection after it."""
    with _gc_lock:
        if _gc_paused[0] == 0:
            _gc_paused[1] = gc.isenabled()
            gc.disable()
        _gc_paused[0] += 1
    try:
        yield
    finally:
        with _gc_lock:
            _gc_paused[0] -= 1
            if _gc_paused[0] == 0 and _gc_paused[1]:
                gc.enable()


def _scoped(method: Callable[..., Any], stack: bool) -> Callable[..., Any]:
    @functools.wraps(method)
    def serve(self: Any, request: Any, context: Any) -> Any:
        outer = request_memo()
        with gc_paused():
            _state.memo = {}
            try:
                _prefill(_state.memo, request.resources if stack else [request])
                return method(self, request, context)
            finally:
                # the request's objects are dropped while the collector is still off: what reference counting
                # frees then is gone before the collector runs again, so its next collection does not walk it
                _state.memo = outer
    setattr(serve, "_multinode_scoped", True)  # noqa: B010 - marks the wrapper (install twice: no-op)
    return serve


def _pulumi_policy() -> Any:
    """pulumi_policy.policy, whose module attributes (its own imports included) the servicer methods below use."""
    from pulumi_policy import policy
    return policy


def _analyze(self: Any, request: Any, context: Any) -> Any:
    """pulumi_policy's Analyze (policy.py:971-1029) with the resource's properties, options and provider taken once
    for the request, before the loop over the resource policies that pulumi_policy runs them in (the memo answered
    each of them once already; this skips its five lookups per policy). Everything else is pulumi_policy's own: its
    helpers, in the order its Analyze calls them; a policy without validate is reported not applicable as there."""
    pp = _pulumi_policy()
    if not all(hasattr(self, name) for name in _INSTANCE_NEEDS):      # another pulumi_policy: its own method
        return _originals["Analyze"](self, request, context)
    self._configure_runtime_settings()
    response = pp.proto.AnalyzeResponse()
    parts: tuple[Any, Any, Any] | None = None
    tags = self._PolicyAnalyzerServicer__stack_tags
    for policy in self._PolicyAnalyzerServicer__policies:
        level = self._get_enforcement_level(policy)
        if level == pp.EnforcementLevel.DISABLED or not isinstance(policy, pp.ResourceValidationPolicy):
            continue
        if not policy.has_validation():
            response.not_applicable.append(pp.proto.PolicyNotApplicable(
                policy_name=policy.name, reason="Policy does not implement validate"))
            continue
        if level == pp.EnforcementLevel.REMEDIATE:
            level = pp.EnforcementLevel.MANDATORY
        report = self._create_report_violation(response, policy.name, policy.description, level, policy.severity)
        if parts is None:
            parts = (pp.unknown_checking_proxy(pp.deserialize_properties(
                         pp.json_format.MessageToDict(request.properties))),
                     self._get_resource_options(request), self._get_provider_resource(request))
        args = pp.ResourceValidationArgs(request.type, parts[0], request.urn, request.name, parts[1], parts[2],
                                         self._get_policy_config(policy.name), tags)
        _validate(self, pp, policy, args, report, response)
    return response


def _validate(self: Any, pp: Any, policy: Any, args: Any, report: Any, response: Any) -> None:
    """One policy's validate, awaited on an event loop of its own when it returns an awaitable; a policy that read an
    unknown value (preview) gets pulumi_policy's advisory diagnostic, one that says it does not apply its
    not-applicable answer, as pulumi_policy's Analyze and AnalyzeStack report them."""
    try:
        result = policy.validate(args, report)
        if pp.isawaitable(result):
            loop = pp.asyncio.new_event_loop()
            loop.run_until_complete(pp.asyncio.Task(result, loop=loop))
            loop.close()
    except pp.UnknownValueError as e:
        name = self._PolicyAnalyzerServicer__policy_pack_name
        version = self._PolicyAnalyzerServicer__policy_pack_version
        response.diagnostics.append(pp.proto.AnalyzeDiagnostic(
            policyName=policy.name, policyPackName=name, policyPackVersion=version,
            message=(f"can't run policy '{policy.name}' from policy pack '{name}@v{version}' during preview: "
                     f"{e.message}"),
            urn="", description=policy.description,
            enforcementLevel=self._map_enforcement_level(pp.EnforcementLevel.ADVISORY)))
    except pp._NotApplicableError as e:
        response.not_applicable.append(pp.proto.PolicyNotApplicable(policy_name=policy.name, reason=e.reason or ""))


def _stack_resources(servicer: Any, request: Any) -> list[Any]:
    """The stack's resources as pulumi_policy's PolicyResource objects, parent, dependencies and property
    dependencies linked to each other within the list: what pulumi_policy 1.21.0's AnalyzeStack builds for each stack
    policy again (policy.py:1049-1087), built here once for the request."""
    pp = _pulumi_policy()
    built: list[tuple[Any, Any]] = []
    by_urn: dict[str, Any] = {}
    for r in request.resources:
        props = pp.unknown_checking_proxy(pp.deserialize_properties(pp.json_format.MessageToDict(r.properties)))
        res = pp.PolicyResource(r.type, props, r.urn, r.name, servicer._get_resource_options(r),
                                servicer._get_provider_resource(r), None, [], {})
        built.append((res, r))
        by_urn[res.urn] = res          # a later resource of the same URN wins, as in pulumi_policy's map
    for res, r in built:
        if r.parent in by_urn:         # pulumi_policy tests `parent is not None`: a protobuf string is never None
            res.parent = by_urn[r.parent]
        res.dependencies.extend(by_urn[d] for d in r.dependencies if d in by_urn)
        for key, urns in r.propertyDependencies.items():
            res.property_dependencies[key] = [by_urn[d] for d in urns.urns if d in by_urn]
    return [res for res, _ in built]


def _analyze_stack(self: Any, request: Any, context: Any) -> Any:
    """pulumi_policy's AnalyzeStack with the stack's resources built once per request (_stack_resources) rather than
    once per stack policy; every policy gets its own list of the same PolicyResource objects (the rules only read
    them: tests/test_pack_wire.py). Levels, violations, not-applicable answers and the diagnostic for an unknown
    value are pulumi_policy's own (its helpers, called as its AnalyzeStack calls them)."""
    pp = _pulumi_policy()
    if not all(hasattr(self, name) for name in _INSTANCE_NEEDS):      # another pulumi_policy: its own method
        return _originals["AnalyzeStack"](self, request, context)
    self._configure_runtime_settings()
    response = pp.proto.AnalyzeResponse()
    resources: list[Any] | None = None
    for policy in self._PolicyAnalyzerServicer__policies:
        level = self._get_enforcement_level(policy)
        if level == pp.EnforcementLevel.DISABLED or not isinstance(policy, pp.StackValidationPolicy):
            continue
        if level == pp.EnforcementLevel.REMEDIATE:
            level = pp.EnforcementLevel.MANDATORY
        report = self._create_report_violation(response, policy.name, policy.description, level, policy.severity)
        if resources is None:
            resources = _stack_resources(self, request)
        args = pp.StackValidationArgs(list(resources), self._get_policy_config(policy.name),
                                      self._PolicyAnalyzerServicer__stack_tags)
        _validate(self, pp, policy, args, report, response)
    return response


class _MemoJsonFormat:
    """google.protobuf.json_format, except MessageToDict(message) once per message object within a request."""

    def __getattr__(self, name: str) -> Any:
        return getattr(json_format, name)

    def MessageToDict(self, message: Any, *args: Any, **kwargs: Any) -> Any:  # noqa: N802 - json_format's name
        memo = request_memo()
        if memo is None or args or kwargs:
            return json_format.MessageToDict(message, *args, **kwargs)
        return once(memo, "dict", message, lambda: json_format.MessageToDict(message))


def install() -> bool:
    """Memoize the three steps in pulumi_policy.policy for the servicer's Analyze/AnalyzeStack; True if done now
    (False: already installed, or pulumi_policy is not the version whose attributes this knows)."""
    from pulumi_policy import policy as pp
    servicer = getattr(pp, "_PolicyAnalyzerServicer", None)
    if servicer is None or any(not hasattr(pp, name) for name in _PATCHED) or \
            any(not hasattr(servicer, name) for name in _SERVICER_NEEDS) or \
            any(not hasattr(pp, name) for name in _MODULE_NEEDS) or \
            getattr(servicer.Analyze, "_multinode_scoped", False):
        return False
    _originals.update({name: getattr(pp, name) for name in _PATCHED})
    _originals["Analyze"], _originals["AnalyzeStack"] = servicer.Analyze, servicer.AnalyzeStack
    deserialize, proxy = _originals["deserialize_properties"], _originals["unknown_checking_proxy"]

    def deserialize_properties(props: Any, proxy_secrets: bool = False) -> Any:
        memo = request_memo()
        if memo is None or proxy_secrets:
            return deserialize(props, proxy_secrets)
        return once(memo, "deserialized", props, lambda: deserialize(props))

    def unknown_checking_proxy(props: Any) -> Any:
        memo = request_memo()
        if memo is None:
            return proxy(props)
        return once(memo, "proxy", props, lambda: proxy(props))

    # the resource's options and provider, which both calls build for every policy again (policy.py:1392, 1406):
    # once per request for the same request (or AnalyzeStack resource) message, as the properties are
    options, provider = servicer._get_resource_options, servicer._get_provider_resource
    _originals["_get_resource_options"], _originals["_get_provider_resource"] = options, provider

    def get_resource_options(self: Any, request: Any) -> Any:
        memo = request_memo()
        return options(self, request) if memo is None else once(memo, "options", request,
                                                                 lambda: options(self, request))

    def get_provider_resource(self: Any, request: Any) -> Any:
        memo = request_memo()
        return provider(self, request) if memo is None else once(memo, "provider", request,
                                                                  lambda: provider(self, request))

    servicer._get_resource_options = get_resource_options
    servicer._get_provider_resource = get_provider_resource
    setattr(pp, "json_format", _MemoJsonFormat())  # noqa: B010 - module attributes of pulumi_policy
    setattr(pp, "deserialize_properties", deserialize_properties)  # noqa: B010
    setattr(pp, "unknown_checking_proxy", unknown_checking_proxy)  # noqa: B010
    servicer.Analyze = _scoped(_analyze, stack=False)
    servicer.AnalyzeStack = _scoped(_analyze_stack, stack=True)
    return True


def uninstall() -> None:
    """Undo install() (tests compare the servicer with and without it)."""
    if not _originals:
        return
    from pulumi_policy import policy as pp
    for name in _PATCHED:
        setattr(pp, name, _originals[name])
    setattr(pp._PolicyAnalyzerServicer, "Analyze", _originals["Analyze"])  # noqa: B010 - see install()
    setattr(pp._PolicyAnalyzerServicer, "AnalyzeStack", _originals["AnalyzeStack"])  # noqa: B010
    for name in ("_get_resource_options", "_get_provider_resource"):
        setattr(pp._PolicyAnalyzerServicer, name, _originals[name])
    _originals.clear()
