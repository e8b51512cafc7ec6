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

from typing import Any, Callable, Dict, Iterable, List, Mapping, Optional

from .engine import (ADVISORY, MANDATORY, Context, Resource, Rule, Violation, build_context,
                     plain)
from .rules import RULES


def all_rules() -> List[Rule]:
    return list(RULES)


def run_rules(resources: List[Resource], ctx: Context, rules: Optional[List[Rule]] = None) -> List[Violation]:
    out: List[Violation] = []
    for rule in rules or all_rules():
        if rule.scope == "resource":
            for r in resources:
                for msg in rule.check(r, ctx):
                    out.append(Violation(rule.name, rule.level, r.label, r.type, r.urn, _naming(r.label, msg)))
        else:
            for r, msg in rule.check(resources, ctx):
                label = r.label if r else "stack"
                out.append(Violation(rule.name, rule.level, label, r.type if r else "", r.urn if r else "",
                                     _naming(label, msg) if r else msg))
    return out


def _naming(label: str, message: str) -> str:
    """A message that names its object exactly once. Rules start their messages with the object's label,
    because under `pulumi preview` CrossGuard shows only the Pulumi URN next to the message; a message
    that does not gets the label here, so readers of `message` never add it a second time."""
    return message if message.startswith(label) else f"{label}: {message}"


def evaluate(records: Iterable[Mapping[str, Any]], cfg: Any = None,
             settings: Optional[Dict[str, Any]] = None) -> List[Dict[str, str]]:
    """The offline entry point (`plan`): every rule over the recorded registrations."""
    resources = [Resource.from_record(r) for r in records]
    ctx = build_context(cfg, resources, settings)
    ctx.resource_rules_see_pools = True
    return [v.as_dict() for v in run_rules(resources, ctx)]


# ------------------------------------------------------------------ CrossGuard adapter
def _resource_from_args(args: Any) -> Resource:
    opts = getattr(args, "opts", None)
    return Resource(type=args.resource_type, name=getattr(args, "name", ""), urn=getattr(args, "urn", ""),
                    props=plain(args.props), protect=bool(getattr(opts, "protect", False)), retain_on_delete=None)


def _settings_from(rule: Rule, args: Any) -> Dict[str, Any]:
    try:
        conf = dict(args.get_config() or {})
    except Exception:  # noqa: BLE001 - a pack without config
        conf = {}
    return {rule.name: conf}


def resource_validator(rule: Rule) -> Callable[[Any, Callable[..., None]], None]:
    def validate(args: Any, report_violation: Callable[..., None]) -> None:
        res = _resource_from_args(args)
        ctx = Context(settings=_settings_from(rule, args))
        for msg in rule.check(res, ctx):
            report_violation(msg)
    return validate


def stack_validator(rule: Rule) -> Callable[[Any, Callable[..., None]], None]:
    def validate(args: Any, report_violation: Callable[..., None]) -> None:
        resources = [_resource_from_args(r) for r in args.resources]
        ctx = build_context(None, resources, _settings_from(rule, args))
        for r, msg in rule.check(resources, ctx):
            report_violation(msg, r.urn if r is not None and r.urn else None)
    return validate


def policies(rules: Optional[List[Rule]] = None) -> List[Any]:
    """The rules as pulumi_policy policies (for policy/__main__.py; builds no PolicyPack)."""
    from pulumi_policy import (EnforcementLevel, PolicyConfigSchema, ResourceValidationPolicy,
                               StackValidationPolicy)
    level = {MANDATORY: EnforcementLevel.MANDATORY, ADVISORY: EnforcementLevel.ADVISORY}
    out: List[Any] = []
    for rule in rules or all_rules():
        schema = PolicyConfigSchema(properties=rule.config) if rule.config else None
        common = dict(name=rule.name, description=rule.description, enforcement_level=level[rule.level],
                      config_schema=schema, remediation_steps=rule.remediation or None)
        if rule.scope == "resource":
            out.append(ResourceValidationPolicy(validate=resource_validator(rule), **common))
        else:
            out.append(StackValidationPolicy(validate=stack_validator(rule), **common))
    return out
