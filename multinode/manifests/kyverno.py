"""Kyverno ClusterPolicies (kyverno.io/v1) that give multi-node pods their fabric, generated from a
FabricProfile, plus a small Python evaluator for the JMESPath the policies use (so tests and
`effective_pod` compute exactly what Kyverno computes).

One policy per node pool whose machine has a fabric. Each has these rules:
  1. `pod-fabric`: pod-level patch (annotations, volumes, native sidecars).
  2. `gpu-container-fabric`: foreach container whose nvidia.com/gpu limit is > 0: device resource
     (GPUs x devices-per-GPU, rounded up, computed in JMESPath), env incl. the NCCL_NET pin, volume
     mounts, capabilities (added to the container's own capabilities.add, each once), extra resources,
     and cpu/memory requests sized per GPU (added only where the container requests none: the `+(name)`
     add-if-absent anchor). Containers without GPUs get nothing.
  3. `require-fabric`: validate (Enforce) that every GPU container now has the device resource and
     the NCCL_NET pin; a pod that slipped through without them is refused (fail closed).
  4. `require-fabric-pool`: stack-wide, with NO pool precondition: a matched pod with a GPU container
     whose spec.nodeSelector names none of the stack's fabric pools (no nodeSelector, an unknown pool,
     or a pool chosen only through nodeAffinity) is refused. Rules 1-3 pick their pool from
     spec.nodeSelector, so without this rule such a pod would be neither mutated nor refused. Every
     per-pool policy carries the same rule (identical in each), so each policy fails closed on its own.
     nodeAffinity is deliberately not read: a pod must name its pool with spec.nodeSelector.
Matching: every Pod CREATE that carries the label multinode.dev/fabric=enabled, whatever owns it
(LWS leader and workers, Grove cliques, Volcano/Indexed jobs, MPIJob launcher/workers), and pods
annotated nmp.nvidia.com/enable-multi-node-networking: "true" (NeMo). No owner-kind filter.
Webhook: failurePolicy Fail, timeoutSeconds from fabric.webhookTimeoutSeconds (the non-deprecated
spec.webhookConfiguration form; Kyverno >= 1.13 per the CRD's field descriptions).
"""
from __future__ import annotations

from typing import Any, Dict, List, Optional, Tuple

import jmespath
from jmespath import functions as jfunctions

from .. import pools
from ..config import StackConfig
from ..fabric import FabricProfile, profile_for

API_VERSION = "kyverno.io/v1"
GPU_RESOURCE = "nvidia.com/gpu"

# JMESPath (inside {{ }}) over one container `element`.
GPU_COUNT_EXPR = f'to_number(element.resources.limits."{GPU_RESOURCE}" || \'0\')'
NCCL_NET_EXPR = "element.env[?name=='NCCL_NET'].value | [0] || ''"


def device_count_expr(profile: FabricProfile) -> str:
    """devices = ceil(gpus x devices_per_node / gpus_per_node): the container's share of the node."""
    return (f"to_string(ceil(divide(multiply({GPU_COUNT_EXPR}, `{profile.devices_per_node}`), "
            f"`{profile.gpus_per_node}`)))")


EXISTING_CAPS_EXPR = "element.securityContext.capabilities.add || `[]`"


def capabilities_add_expr(capabilities: List[str]) -> str:
    """JMESPath for the container's capabilities.add after the patch: the list it already has, then each
    of ours that is not in it (kept once). A strategic merge REPLACES this list (no merge key), so the
    patch must carry the union; plain JMESPath, no variables: `[list, list, ...][]` flattens the parts,
    and `!contains(have, 'X') && `["X"]` || `[]`` is ["X"] when X is absent, else []."""
    parts = [EXISTING_CAPS_EXPR]
    for cap in capabilities:
        parts.append(f"(!contains({EXISTING_CAPS_EXPR}, '{cap}') && `[\"{cap}\"]` || `[]`)")
    return "[" + ", ".join(parts) + "][]"


def per_gpu_request_expr(amount: int, unit: str) -> str:
    """JMESPath for `amount` x the container's GPUs, as a quantity string (e.g. "144", "1536Gi")."""
    number = f"to_string(multiply({GPU_COUNT_EXPR}, `{amount}`))"
    return f"join('', [{number}, '{unit}'])" if unit else number


def device_present_expr(profile: FabricProfile) -> str:
    return f'element.resources.limits."{profile.device_resource}" || \'\''


def policy_name(profile: FabricProfile) -> str:
    return f"multinode-fabric-{profile.pool}"[:63].rstrip("-")


def _match() -> Dict[str, Any]:
    base = {"kinds": ["Pod"], "operations": ["CREATE"]}
    return {"any": [
        {"resources": {**base, "selector": {"matchLabels": {pools.FABRIC_POD_LABEL: pools.FABRIC_POD_LABEL_VALUE}}}},
        {"resources": {**base, "annotations": {pools.NEMO_ANNOTATION: "true"}}},
    ]}


def _pool_preconditions(profile: FabricProfile, multi_pool: bool) -> Optional[Dict[str, Any]]:
    """With several pools, a policy applies only to pods that select its pool's nodes."""
    if not multi_pool or not profile.node_selector:
        return None
    return {"all": [{"key": f'{{{{ request.object.spec.nodeSelector."{k}" || \'\' }}}}',
                     "operator": "Equals", "value": v}
                    for k, v in sorted(profile.node_selector.items())]}


def _node_selector_expr(selector: Dict[str, str]) -> str:
    """JMESPath that is true when the pod's spec.nodeSelector carries every label of `selector`."""
    parts = [f'request.object.spec.nodeSelector."{k}" == \'{v}\'' for k, v in sorted(selector.items())]
    return "(" + " && ".join(parts) + ")"


def fabric_pool_expr(profiles: List[FabricProfile]) -> str:
    """JMESPath that is true when the pod's nodeSelector selects one of these pools (a boolean, never null)."""
    return " || ".join(_node_selector_expr(p.node_selector) for p in profiles)


def _pool_hint(p: FabricProfile) -> str:
    sel = ", ".join(f"{k}: {v}" for k, v in sorted(p.node_selector.items()))
    return f"pool {p.pool!r} ({p.machine}, {p.kind}): nodeSelector {{{sel}}}"


def require_fabric_pool_rule(profiles: List[FabricProfile]) -> Optional[Dict[str, Any]]:
    """Stack-wide validate rule: a fabric-labelled (or NeMo-annotated) pod with a GPU container must select
    one of the stack's fabric pools with spec.nodeSelector. None when a fabric pool has no node selector
    (config refuses that: then any node would match and the rule could not say which labels to use)."""
    fabric = [p for p in profiles if p.enabled]
    if not fabric or any(not p.node_selector for p in fabric):
        return None
    return {
        "name": "require-fabric-pool",
        "match": _match(),
        "validate": {
            "failureAction": "Enforce",
            "message": (f"multi-node pod with a container that requests {GPU_RESOURCE} must select one of this "
                        f"stack's fabric node pools with spec.nodeSelector: "
                        f"{'; '.join(_pool_hint(p) for p in fabric)}. Its nodeSelector is missing or names no "
                        f"fabric pool (nodeAffinity is not read: the fabric injection picks the pool from "
                        f"spec.nodeSelector), so it would run without the fabric and is refused"),
            "foreach": [{
                "list": "request.object.spec.containers",
                "preconditions": _gpu_precondition(),
                "deny": {"conditions": {"any": [
                    {"key": f"{{{{ {fabric_pool_expr(fabric)} }}}}", "operator": "Equals", "value": False}]}},
            }],
        },
    }


def _gpu_precondition() -> Dict[str, Any]:
    return {"all": [{"key": f"{{{{ {GPU_COUNT_EXPR} }}}}", "operator": "GreaterThan", "value": 0}]}


def container_patch(profile: FabricProfile) -> Dict[str, Any]:
    """The strategic-merge patch for one GPU container (`element`)."""
    c: Dict[str, Any] = {"name": "{{ element.name }}"}
    if profile.env:
        c["env"] = [{"name": k, "value": v} for k, v in profile.env.items()]
    if profile.volume_mounts:
        c["volumeMounts"] = [dict(m) for m in profile.volume_mounts]
    limits: Dict[str, Any] = {}
    if profile.device_resource:
        limits[profile.device_resource] = f"{{{{ {device_count_expr(profile)} }}}}"
    limits.update(profile.extra_resources)
    resources: Dict[str, Any] = {}
    if limits:
        resources["limits"] = limits
    if profile.requests_per_gpu:
        # `+(cpu)`: Kyverno's add-if-not-present anchor, so a container that states its own request keeps it.
        resources["requests"] = {f"+({name})": f"{{{{ {per_gpu_request_expr(amount, unit)} }}}}"
                                 for name, (amount, unit) in sorted(profile.requests_per_gpu.items())}
    if resources:
        c["resources"] = resources
    if profile.capabilities:
        # Union with the container's own capabilities.add (a strategic merge would replace the list).
        c["securityContext"] = {"capabilities": {"add": f"{{{{ {capabilities_add_expr(profile.capabilities)} }}}}"}}
    return c


def pod_patch(profile: FabricProfile) -> Dict[str, Any]:
    patch: Dict[str, Any] = {}
    if profile.annotations:
        patch["metadata"] = {"annotations": dict(profile.annotations)}
    spec: Dict[str, Any] = {}
    if profile.volumes:
        spec["volumes"] = [dict(v) for v in profile.volumes]
    if profile.init_containers:
        spec["initContainers"] = [dict(c) for c in profile.init_containers]
    if spec:
        patch["spec"] = spec
    return patch


def deny_conditions(profile: FabricProfile) -> Dict[str, Any]:
    """A GPU container is refused if any of these holds (evaluated per container `element`)."""
    conds: List[Dict[str, Any]] = []
    if profile.device_resource:
        conds.append({"key": f"{{{{ {device_present_expr(profile)} }}}}", "operator": "Equals", "value": ""})
    if profile.nccl_net:
        conds.append({"key": f"{{{{ {NCCL_NET_EXPR} }}}}", "operator": "NotEquals", "value": profile.nccl_net})
    return {"any": conds}


def cluster_policy(profile: FabricProfile, webhook_timeout_seconds: int, multi_pool: bool = False,
                   fabric_pools: Optional[List[FabricProfile]] = None) -> Dict[str, Any]:
    """The pool's policy. fabric_pools: every fabric pool of the stack (for `require-fabric-pool`);
    default: this pool only."""
    pre = _pool_preconditions(profile, multi_pool)
    rules: List[Dict[str, Any]] = []

    def rule(name: str, body: Dict[str, Any]) -> Dict[str, Any]:
        r = {"name": name, "match": _match()}
        if pre:
            r["preconditions"] = pre
        r.update(body)
        return r

    pp = pod_patch(profile)
    if pp:
        rules.append(rule("pod-fabric", {"mutate": {"patchStrategicMerge": pp}}))
    rules.append(rule("gpu-container-fabric", {"mutate": {"foreach": [{
        "list": "request.object.spec.containers",
        "preconditions": _gpu_precondition(),
        "patchStrategicMerge": {"spec": {"containers": [container_patch(profile)]}},
    }]}}))
    what = " and ".join(x for x in [f"{profile.device_resource} devices" if profile.device_resource else "",
                                     f"NCCL_NET={profile.nccl_net}" if profile.nccl_net else ""] if x)
    if deny_conditions(profile)["any"]:
        rules.append(rule("require-fabric", {"validate": {
            "failureAction": "Enforce",
            "message": (f"multi-node pod on node pool {profile.pool!r} ({profile.machine}, fabric {profile.kind}): "
                        f"every container that requests {GPU_RESOURCE} must carry {what}; the fabric "
                        f"injection did not apply, so the pod is refused instead of running NCCL over TCP"),
            "foreach": [{
                "list": "request.object.spec.containers",
                "preconditions": _gpu_precondition(),
                "deny": {"conditions": deny_conditions(profile)},
            }],
        }}))
    pool_rule = require_fabric_pool_rule(fabric_pools if fabric_pools is not None else [profile])
    if pool_rule:
        rules.append(pool_rule)
    return {
        "apiVersion": API_VERSION,
        "kind": "ClusterPolicy",
        "metadata": {
            "name": policy_name(profile),
            "annotations": {
                "policies.kyverno.io/title": f"Inject the {profile.kind} fabric into multi-node pods",
                "policies.kyverno.io/subject": "Pod",
                "policies.kyverno.io/description": (
                    f"Pods labelled {pools.FABRIC_POD_LABEL}={pools.FABRIC_POD_LABEL_VALUE} or annotated "
                    f"{pools.NEMO_ANNOTATION}=true on pool {profile.pool} ({profile.machine}) get the fabric; "
                    f"GPU containers without it, and GPU pods whose nodeSelector names no fabric pool, "
                    f"are refused."),
            },
        },
        "spec": {
            "background": False,       # uses request.* variables; admission only
            "webhookConfiguration": {"failurePolicy": "Fail", "timeoutSeconds": webhook_timeout_seconds},
            "rules": rules,
        },
    }


def cluster_policies(cfg: StackConfig) -> List[Dict[str, Any]]:
    """One ClusterPolicy per node pool with a fabric (none when fabric.enabled is false)."""
    profiles = [profile_for(cfg, p) for p in cfg.node_pools]
    multi = len(cfg.node_pools) > 1
    fabric = [p for p in profiles if p.enabled]
    return [cluster_policy(p, cfg.fabric.webhook_timeout_seconds, multi, fabric) for p in fabric]


# ------------------------------------------------------------------------------------------
# Python evaluation of the Kyverno JMESPath subset used above
# ------------------------------------------------------------------------------------------
class KyvernoFunctions(jfunctions.Functions):
    """The Kyverno JMESPath extensions these policies use (numbers only), with Kyverno's names."""

    @jfunctions.signature({"types": ["number"]}, {"types": ["number"]})
    def _func_multiply(self, a, b):
        return a * b

    @jfunctions.signature({"types": ["number"]}, {"types": ["number"]})
    def _func_divide(self, a, b):
        if b == 0:
            raise ZeroDivisionError("divide by zero")
        return a / b


_OPTIONS = jmespath.Options(custom_functions=KyvernoFunctions())


def evaluate(expression: str, data: Dict[str, Any]) -> Any:
    """Evaluate one JMESPath expression (without the {{ }}) the way Kyverno would."""
    result = jmespath.search(expression, data, options=_OPTIONS)
    if isinstance(result, float) and result.is_integer():
        result = int(result)
    return result


def substitute(value: Any, data: Dict[str, Any]) -> Any:
    """Kyverno variable substitution for values that are exactly one `{{ expr }}` (or plain text)."""
    if isinstance(value, str) and value.startswith("{{") and value.endswith("}}"):
        return evaluate(value[2:-2].strip(), data)
    if isinstance(value, dict):
        return {k: substitute(v, data) for k, v in value.items()}
    if isinstance(value, list):
        return [substitute(v, data) for v in value]
    return value


def _condition_holds(cond: Dict[str, Any], data: Dict[str, Any]) -> bool:
    key = substitute(cond["key"], data)
    value = cond["value"]
    op = cond["operator"]
    if op == "Equals":
        return key == value
    if op == "NotEquals":
        return key != value
    if op == "GreaterThan":
        return float(key) > float(value)
    raise ValueError(f"operator {op} not supported by this evaluator")


def conditions_hold(block: Dict[str, Any], data: Dict[str, Any]) -> bool:
    """Kyverno condition block semantics: all of `all` and at least one of `any` (when present)."""
    ok = True
    if "all" in block:
        ok = all(_condition_holds(c, data) for c in block["all"])
    if ok and "any" in block:
        ok = any(_condition_holds(c, data) for c in block["any"])
    return ok


def denials(policy: Dict[str, Any], pod: Dict[str, Any]) -> List[Tuple[str, str]]:
    """(rule name, container name) for every container a validate rule of the policy refuses in `pod`.
    A pod the policy does not match, or whose rule preconditions fail, is refused by nothing."""
    out: List[Tuple[str, str]] = []
    if not matches(policy, pod):
        return out
    for r in policy["spec"]["rules"]:
        v = r.get("validate")
        if not v:
            continue
        if "preconditions" in r and not conditions_hold(r["preconditions"], {"request": {"object": pod}}):
            continue
        for fe in v["foreach"]:
            elements = evaluate(fe["list"], {"request": {"object": pod}}) or []
            for element in elements:
                data = {"request": {"object": pod}, "element": element}
                if not conditions_hold(fe["preconditions"], data):
                    continue
                if conditions_hold(fe["deny"]["conditions"], data):
                    out.append((r["name"], element.get("name", "?")))
    return out


def denied_containers(policy: Dict[str, Any], pod: Dict[str, Any]) -> List[str]:
    """Names of containers the policy's validate rules would refuse in `pod` (a Pod dict), each once."""
    out: List[str] = []
    for _, name in denials(policy, pod):
        if name not in out:
            out.append(name)
    return out


def matches(policy: Dict[str, Any], pod: Dict[str, Any]) -> bool:
    """Would the policy's `match` (label selector or annotation) select this Pod CREATE?"""
    meta = pod.get("metadata") or {}
    labels, annotations = meta.get("labels") or {}, meta.get("annotations") or {}
    for rule in policy["spec"]["rules"][:1]:
        for f in rule["match"]["any"]:
            res = f["resources"]
            sel = (res.get("selector") or {}).get("matchLabels")
            if sel and all(labels.get(k) == v for k, v in sel.items()):
                return True
            ann = res.get("annotations")
            if ann and all(annotations.get(k) == v for k, v in ann.items()):
                return True
    return False


__all__ = ["cluster_policy", "cluster_policies", "container_patch", "pod_patch", "device_count_expr",
           "capabilities_add_expr", "evaluate", "substitute", "denied_containers", "denials", "matches", "require_fabric_pool_rule",
           "fabric_pool_expr"]
