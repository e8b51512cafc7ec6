"""The DynamoGraphDeployment rules of policy/rules_dynamo.py, run by the engine like every other rule.

rules_dynamo holds the checks as pure functions of the DGD props (both served versions, v1alpha1
`spec.services` and v1beta1 `spec.components`) plus the machine's GPUs per node. This module adapts
each of its `RULES` into an engine `Rule`, so `evaluate(records, cfg)` (plan) and `policies()`
(CrossGuard) run them on any `kubernetes:nvidia.com/<v1alpha1|v1beta1>:DynamoGraphDeployment`.

The machine comes from where the GPU components land, read like the other resource rules do
(Context.machine_for): the pod's own instance-type / multinode.dev/machine labels, else the one
stack node pool whose labels its node selector matches (known in plan, not under preview). When
the GPU components of one DGD land on different machines, or on none the rules can name, the
machine is None and the per-machine rule is skipped (never guessed).

The fabric-label rule follows the pack's `multinode-pod-fabric-label`: mandatory, only for
components with multinode.nodeCount > 1 (a multi-node pod without the label gets no fabric and
NCCL falls back to TCP), and silent when the stack turns the fabric off.
"""
from __future__ import annotations

from typing import Any, Dict, Iterator, Mapping, Optional

from .. import objects
from . import dynamo as rd
from ..engine import ADVISORY, MANDATORY, Context, Resource, Rule

_LEVEL = {rd.MANDATORY: MANDATORY, rd.ADVISORY: ADVISORY}
FABRIC_RULE = "dynamo-multinode-fabric-label"


def dgd_props(res: Resource) -> Optional[Dict[str, Any]]:
    """The DGD's props, or None for anything else. apiVersion/kind come from the props, else from the
    type token (kubernetes:nvidia.com/v1beta1:DynamoGraphDeployment) when a provider leaves them out."""
    props = dict(res.props)
    if "kind" not in props or "apiVersion" not in props:
        parts = res.type.split(":")
        if len(parts) == 3 and parts[0] == "kubernetes":
            props.setdefault("apiVersion", parts[1])
            props.setdefault("kind", parts[2])
    return props if rd.is_dgd(props) else None


def _pod_spec(props: Mapping[str, Any], comp: rd.Component) -> Dict[str, Any]:
    """The pod spec of one component: v1beta1 podTemplate.spec, v1alpha1 extraPodSpec."""
    spec = props.get("spec") or {}
    if comp.version == "v1alpha1":
        svc = objects.get(spec, "services", comp.name, default={}) or {}
        return (svc.get("extraPodSpec") or {}) if isinstance(svc, dict) else {}
    index = int(comp.where[comp.where.index("[") + 1:-1])
    return objects.get(spec, "components", index, "podTemplate", "spec", default={}) or {}


def machine_gpus(props: Mapping[str, Any], ctx: Context) -> Optional[int]:
    """GPUs per node of the one machine every GPU component of the DGD lands on (None: not known)."""
    found = set()
    for comp in rd.components(props):
        if not comp.gpus_per_node:
            continue
        for sel in objects.Role(comp.name, 1, {"spec": _pod_spec(props, comp)}).selectors():
            m, _ = ctx.machine_for(sel)
            found.add(m.gpus if m is not None else None)
    if len(found) != 1:
        return None
    return next(iter(found))


def _adapt(rule: rd.DgdRule) -> Rule:
    def check(res: Resource, ctx: Context) -> Iterator[str]:
        props = dgd_props(res)
        if props is None:
            return
        if rule.name == FABRIC_RULE and not ctx.fabric_enabled():
            return
        yield from rule.check(props, machine_gpus(props, ctx))
    check.__name__ = f"check_{rule.name.replace('-', '_')}"
    return Rule(rule.name, rule.description, _LEVEL[rule.enforcement], check, remediation=rule.remediation)


RULES = [_adapt(r) for r in rd.RULES]
