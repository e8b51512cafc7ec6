"""The pack: every rule of policy/rules/, run two ways (the rule vocabulary is policy/engine.py).

* `evaluate(records, cfg)` -- the offline `plan`: records are multinode.recording Registration dicts
  (keys type, name, urn, inputs, protect, retainOnDelete...). Returns violation dicts with keys
  policy, enforcementLevel, resource, type, urn, message.
* `policies()` -- the CrossGuard pack: each rule becomes a pulumi_policy ResourceValidationPolicy or
  StackValidationPolicy whose validate() calls the same function (the stack config is not available
  under `pulumi preview`; the rules then derive what they can from the props alone).

Moved out of engine.py so the rules can import the engine's types while this module imports the
rules: no import cycle between the engine and the rules.
"""
from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from typing import Any

from . import objects, wire
from .config import DISABLED, PolicyConfig
from .engine import ADVISORY, MANDATORY, Context, Resource, Rule, Violation, build_context, plain
from .rules import RULES


def all_rules() -> list[Rule]:
    return list(RULES)


def unreadable_message(rule: Rule, label: str, err: BaseException) -> str:
    """The finding for an object a rule could not read. Names the error's type only: its text may quote a value."""
    return (f"{label}: the policy pack could not read this object for rule {rule.name} ({type(err).__name__}: a "
            f"field has a type or shape the rule does not expect), so nothing was checked; it is reported "
            f"instead of passed: fix the object against its Kubernetes / CRD schema")


def resource_findings(rule: Rule, res: Resource, ctx: Context) -> list[str]:
    """A resource rule's messages for one resource. Last resort: the readers are total (objects.mapping / seq /
    text); a rule that still raises reports the object as unreadable at the rule's level, never passes it."""
    try:
        return list(rule.check(res, ctx))
    except Exception as e:  # noqa: BLE001 - see docstring
        return [unreadable_message(rule, res.label, e)]


def stack_findings(rule: Rule, resources: list[Resource], ctx: Context) -> list[tuple[Resource | None, str]]:
    """A stack rule's (resource, message) pairs. If the rule raises, each resource is tried alone to find the
    unreadable ones; they are reported as findings and the rule runs again on the rest."""
    try:
        return list(rule.check(resources, ctx))
    except Exception as e:  # noqa: BLE001 - see resource_findings
        first = e
    out: list[tuple[Resource | None, str]] = []
    readable: list[Resource] = []
    for r in resources:
        try:
            list(rule.check([r], ctx))
            readable.append(r)
        except Exception as e:  # noqa: BLE001
            out.append((r, unreadable_message(rule, r.label, e)))
    try:
        out.extend(rule.check(readable, ctx))
    except Exception as e:  # noqa: BLE001 - only several objects together break it: report the stack
        out.append((None, unreadable_message(rule, "stack", e)))
    if not out:
        out.append((None, unreadable_message(rule, "stack", first)))
    return out


def run_rules(resources: list[Resource], ctx: Context, rules: list[Rule] | None = None,
              levels: Mapping[str, str] | None = None) -> list[Violation]:
    """Every rule's violations. `levels`: rule -> level from the team's policy config (policy/config.py); a rule
    set to `disabled` is not run, as CrossGuard does not run a disabled policy."""
    out: list[Violation] = []
    for rule in rules or all_rules():
        level = (levels or {}).get(rule.name, rule.level)
        if level == DISABLED:
            continue
        if rule.scope == "resource":
            for r in resources:
                for msg in resource_findings(rule, r, ctx):
                    out.append(Violation(rule.name, level, r.label, r.type, r.urn, _naming(r.label, msg)))
        else:
            for found, msg in stack_findings(rule, resources, ctx):
                label = found.label if found else "stack"
                out.append(Violation(rule.name, level, label, found.type if found else "",
                                     found.urn if found else "", _naming(label, msg) if found else msg))
    return out


def _naming(label: str, message: str) -> str:
    """A message that names its object exactly once. Rules start their messages with the object's label,
    because under `pulumi preview` CrossGuard shows only the Pulumi URN next to the message; a message
    that does not gets the label here, so readers of `message` never add it a second time."""
    return message if message.startswith(label) else f"{label}: {message}"


def evaluate(records: Iterable[Mapping[str, Any]], cfg: Any = None,
             settings: dict[str, Any] | None = None, placement: Any = None,
             policy_config: PolicyConfig | None = None) -> list[dict[str, str]]:
    """The offline entry point (`plan`): every rule over the recorded registrations. `placement`: plan's
    multinode.placement.Simulated of this stack, for stack-fits-node-pools to reuse (else it simulates).
    `policy_config`: the team's policy config file (levels and settings; `settings` given here win)."""
    resources = [Resource.from_record(r) for r in records]
    merged = {k: dict(v) for k, v in (policy_config.settings if policy_config else {}).items()}
    for k, v in (settings or {}).items():
        merged[k] = {**merged.get(k, {}), **dict(v or {})}
    ctx = build_context(cfg, resources, merged)
    ctx.resource_rules_see_pools = True
    ctx.placement = placement
    with objects.kept_gangs():                 # each workload's gangs read once, not once per rule
        return [v.as_dict() for v in run_rules(resources, ctx, levels=policy_config.levels if policy_config else None)]


# ------------------------------------------------------------------ CrossGuard adapter
CRD_TYPE = "kubernetes:apiextensions.k8s.io/v1:CustomResourceDefinition"


def _crd_props(props: Any) -> dict[str, Any]:
    """A CRD's props without its versions' OpenAPI schemas (~6,000 values for one of LWS's or Grove's CRDs, the
    bulk of what the pack converts on a stack that registers them): no rule reads a CRD's schema (objects.pod_
    templates does not walk CRDs; tests/test_policy_rules.py runs every rule on a CRD with and without it)."""
    spec = props["spec"] if "spec" in props else None
    if not isinstance(spec, Mapping) or "versions" not in spec:
        return dict(plain(props))
    out = {k: plain(props[k]) for k in props if k != "spec"}
    short = {k: plain(spec[k]) for k in spec if k != "versions"}
    versions = spec["versions"]
    short["versions"] = ([{k: plain(v[k]) for k in v if k != "schema"} if isinstance(v, Mapping) else plain(v)
                          for v in versions] if not isinstance(versions, (str, bytes)) else plain(versions))
    out["spec"] = short
    return out


def _resource_from_args(args: Any) -> Resource:
    """The Resource the rules read for one pulumi_policy args/PolicyResource. Under the analyzer (policy/wire.py
    installed) once per request per resource: every policy of a request gets the same props proxy, so the rules
    share one Resource per resource, as they do offline (evaluate)."""
    memo = wire.request_memo()
    if memo is None:
        return _convert(args)
    opts = getattr(args, "opts", None)
    res: Resource = wire.once(memo, "resource", args.props, lambda: _convert(args), args.resource_type,
                              getattr(args, "name", ""), getattr(args, "urn", ""),
                              bool(getattr(opts, "protect", False)))
    return res


def _convert(args: Any) -> Resource:
    opts = getattr(args, "opts", None)
    props: Any = None
    if args.resource_type == CRD_TYPE:
        try:
            props = _crd_props(args.props)
        except Exception:  # noqa: BLE001 - e.g. an unknown value at the top (preview): convert it whole
            props = None
    if props is None:
        props = plain(args.props)
    return Resource(type=args.resource_type, name=getattr(args, "name", ""), urn=getattr(args, "urn", ""),
                    props=props, protect=bool(getattr(opts, "protect", False)), retain_on_delete=None)


def _settings_from(rule: Rule, args: Any) -> dict[str, Any]:
    try:
        conf = dict(args.get_config() or {})
    except Exception:  # noqa: BLE001 - a pack without config
        conf = {}
    return {rule.name: conf}


def _request_kept() -> Any:
    """The objects.kept_gangs store of this analyzer request (None outside one: offline, tests): every policy of
    the request reads the same objects (one Resource per resource, _resource_from_args), so each workload's gangs
    and pod specs are read once per request, as pack.evaluate reads them once per plan."""
    memo = wire.request_memo()
    if memo is None:
        return None
    store = memo.get(("kept",))
    if store is None:
        store = memo[("kept",)] = objects.new_kept()
    return store


def resource_validator(rule: Rule) -> Callable[[Any, Callable[..., None]], None]:
    def validate(args: Any, report_violation: Callable[..., None]) -> None:
        res = _resource_from_args(args)
        ctx = Context(settings=_settings_from(rule, args))
        store = _request_kept()
        found = (resource_findings(rule, res, ctx) if store is None
                 else objects.call_kept(store, resource_findings, rule, res, ctx))
        for msg in found:
            report_violation(msg)
    return validate


def _stack_view(args: Any) -> tuple[list[Resource], Context]:
    """The stack's Resources and the context the stack rules read (node pools and Volcano derived from the
    resources; no settings). Under the analyzer (policy/wire.py) once per request: every stack policy of one
    AnalyzeStack gets the same resources (the same props proxies, in the same order), so it is keyed on those
    proxies and each rule gets its own copy of the list and a fresh Context around the shared pools."""
    memo = wire.request_memo()
    if memo is None:
        resources = [_resource_from_args(r) for r in args.resources]
        return resources, build_context(None, resources)
    props = tuple(r.props for r in args.resources)
    key = ("stack", tuple(map(id, props)))        # the memo keeps `props` alive: the ids name the same objects
    hit = memo.get(key)
    if hit is None:
        resources = [_resource_from_args(r) for r in args.resources]
        hit = memo[key] = (props, (resources, build_context(None, resources)))
    view: tuple[list[Resource], Context] = hit[1]
    return view


def stack_validator(rule: Rule) -> Callable[[Any, Callable[..., None]], None]:
    def validate(args: Any, report_violation: Callable[..., None]) -> None:
        shared, base = _stack_view(args)
        resources = list(shared)
        ctx = Context(None, list(base.pools), base.volcano, _settings_from(rule, args))
        store = _request_kept()
        found = (stack_findings(rule, resources, ctx) if store is None
                 else objects.call_kept(store, stack_findings, rule, resources, ctx))
        for r, msg in found:
            report_violation(msg, r.urn if r is not None and r.urn else None)
    return validate


def policies(rules: list[Rule] | None = None) -> list[Any]:
    """The rules as pulumi_policy policies (for policy/__main__.py; builds no PolicyPack)."""
    from pulumi_policy import EnforcementLevel, PolicyConfigSchema, ResourceValidationPolicy, StackValidationPolicy
    level = {MANDATORY: EnforcementLevel.MANDATORY, ADVISORY: EnforcementLevel.ADVISORY}
    out: list[Any] = []
    for rule in rules or all_rules():
        schema = PolicyConfigSchema(properties=rule.config) if rule.config else None
        if rule.scope == "resource":
            out.append(ResourceValidationPolicy(
                name=rule.name, description=rule.description, validate=resource_validator(rule),
                enforcement_level=level[rule.level], config_schema=schema, remediation_steps=rule.remediation or None))
        else:
            out.append(StackValidationPolicy(
                name=rule.name, description=rule.description, validate=stack_validator(rule),
                enforcement_level=level[rule.level], config_schema=schema, remediation_steps=rule.remediation or None))
    return out
