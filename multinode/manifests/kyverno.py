"""Kyverno ClusterPolicies (kyverno.io/v1) that give multi-node pods their fabric, generated from a
FabricProfile, plus a small Python evaluator for the JMESPath the policies use (so tests and
`effective_pod` compute exactly what Kyverno computes).

One policy per node pool whose machine has a fabric. Each has these rules:
  1. `pod-fabric`: pod-level patch (annotations, volumes, native sidecars).
     `pod-device-networks` (OCI): the Multus networks annotation with one entry per fabric device the
     pod's GPU containers request (device_networks_expr), only on pods that request some.
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
  5. `require-fabric-label-on-fabric-pool`: stack-wide, the other side of rule 4 (fail closed outside the
     stack): EVERY Pod CREATE, whoever wrote it, with a GPU container whose spec.nodeSelector selects one
     of the stack's fabric pools is refused unless it carries the fabric label (or NeMo's annotation), or
     the explicit single-node opt-out label multinode.dev/single-node=true. Without it a multi-node pod
     created outside the stack (kubectl, another operator) on a fabric pool got no fabric and ran NCCL over
     TCP in silence. Limit: admission sees the pod before scheduling, so a GPU pod with no nodeSelector that
     the scheduler later puts on a fabric node is not caught here (the pools' nvidia.com/gpu taint and the
     policy pack's workload-matches-node-pool cover the stack's own objects).
Matching (rules 1-4): every Pod CREATE that carries the label multinode.dev/fabric=enabled, whatever owns it
(LWS leader and workers, Grove cliques, Volcano/Indexed jobs, MPIJob launcher/workers), and pods
annotated nmp.nvidia.com/enable-multi-node-networking: "true" (NeMo). No owner-kind filter.
Webhook: failurePolicy Fail, timeoutSeconds from fabric.webhookTimeoutSeconds (the non-deprecated
spec.webhookConfiguration form; Kyverno >= 1.13 per the CRD's field descriptions).
Readiness: each policy carries `pulumi.com/waitFor: condition=Ready` (pulumi-kubernetes >= 4.18 generic
await): `pulumi up` waits until Kyverno reports the policy Ready (the CRD's READY column reads
status.conditions[type=Ready]; Kyverno sets it once the policy's rules are programmed into its admission
webhooks), and the workloads depend on the policies, so no workload pod is created before the webhook that
must mutate or refuse it is served. Only a real cluster can confirm the timing.
"""
from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar, cast

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


def capabilities_add_expr(capabilities: list[str]) -> str:
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


def pod_device_count_expr(profile: FabricProfile) -> str:
    """JMESPath over the pod (`request.object`): fabric devices all its containers request, each container's
    share rounded up exactly as device_count_expr rounds it (containers without GPUs add 0)."""
    per_container = (f'ceil(divide(multiply(to_number(resources.limits."{GPU_RESOURCE}" || \'0\'), '
                     f'`{profile.devices_per_node}`), `{profile.gpus_per_node}`))')
    return f"sum(request.object.spec.containers[].{per_container})"


NETWORKS_ANNOTATION = "k8s.v1.cni.cncf.io/networks"


def device_networks_expr(profile: FabricProfile) -> str:
    """JMESPath for the Multus annotation: `profile.device_network` once per device the pod requests, comma
    separated. JMESPath has no repeat, so the policy carries the list for a whole node (devices_per_node
    entries) and keeps its first n entries with Kyverno's truncate(string, number): n entries of a name of
    length L are n x (L + 1) - 1 characters. A pod asking for more devices than a node has is unschedulable
    anyway (the device plugin advertises devices_per_node); it gets the whole-node list."""
    name = profile.device_network or ""
    full = ",".join([name] * profile.devices_per_node)
    return f"truncate('{full}', subtract(multiply({pod_device_count_expr(profile)}, `{len(name) + 1}`), `1`))"


def device_networks_rule_body(profile: FabricProfile) -> dict[str, Any] | None:
    """Mutate: set the pod's Multus networks to one entry per fabric device it requests (only pods that
    request some; the annotation replaces any list the pod brought, as the static annotation did)."""
    if not profile.device_network or not profile.device_resource:
        return None
    return {
        "preconditions": {"all": [{"key": f"{{{{ {pod_device_count_expr(profile)} }}}}",
                                   "operator": "GreaterThan", "value": 0}]},
        "mutate": {"patchStrategicMerge": {"metadata": {"annotations": {
            NETWORKS_ANNOTATION: f"{{{{ {device_networks_expr(profile)} }}}}"}}}},
    }


def device_present_expr(profile: FabricProfile) -> str:
    return f'element.resources.limits."{profile.device_resource}" || \'\''


def policy_name(profile: FabricProfile) -> str:
    return f"multinode-fabric-{profile.pool}"[:63].rstrip("-")


def _match() -> dict[str, Any]:
    base = {"kinds": ["Pod"], "operations": ["CREATE"]}
    return {"any": [
        {"resources": {**base, "selector": {"matchLabels": {pools.FABRIC_POD_LABEL: pools.FABRIC_POD_LABEL_VALUE}}}},
        {"resources": {**base, "annotations": {pools.NEMO_ANNOTATION: "true"}}},
    ]}


def _pool_preconditions(profile: FabricProfile, multi_pool: bool) -> dict[str, Any] | None:
    """With several pools, a policy applies only to pods that select its pool's nodes."""
    if not multi_pool or not profile.node_selector:
        return None
    return {"all": [{"key": f'{{{{ request.object.spec.nodeSelector."{k}" || \'\' }}}}',
                     "operator": "Equals", "value": v}
                    for k, v in sorted(profile.node_selector.items())]}


def _node_selector_expr(selector: dict[str, str]) -> str:
    """JMESPath that is true when the pod's spec.nodeSelector carries every label of `selector`."""
    parts = [f'request.object.spec.nodeSelector."{k}" == \'{v}\'' for k, v in sorted(selector.items())]
    return "(" + " && ".join(parts) + ")"


def fabric_pool_expr(profiles: list[FabricProfile]) -> str:
    """JMESPath that is true when the pod's nodeSelector selects one of these pools (a boolean, never null)."""
    return " || ".join(_node_selector_expr(p.node_selector) for p in profiles)


def _pool_hint(p: FabricProfile) -> str:
    sel = ", ".join(f"{k}: {v}" for k, v in sorted(p.node_selector.items()))
    return f"pool {p.pool!r} ({p.machine}, {p.kind}): nodeSelector {{{sel}}}"


def require_fabric_pool_rule(profiles: list[FabricProfile]) -> dict[str, Any] | None:
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


SINGLE_NODE_RULE = "require-fabric-label-on-fabric-pool"


def require_fabric_label_rule(profiles: list[FabricProfile]) -> dict[str, Any] | None:
    """Stack-wide validate rule: any GPU pod whose spec.nodeSelector selects a fabric pool carries the fabric
    label (or NeMo's annotation) or the single-node opt-out label; else it is refused (module docstring, 5)."""
    fabric = [p for p in profiles if p.enabled]
    if not fabric or any(not p.node_selector for p in fabric):
        return None
    base = {"kinds": ["Pod"], "operations": ["CREATE"]}
    return {
        "name": SINGLE_NODE_RULE,
        "match": {"any": [{"resources": dict(base)}]},
        "exclude": {"any": [
            {"resources": {**base, "selector": {"matchLabels": {
                pools.FABRIC_POD_LABEL: pools.FABRIC_POD_LABEL_VALUE}}}},
            {"resources": {**base, "selector": {"matchLabels": {
                pools.SINGLE_NODE_POD_LABEL: pools.SINGLE_NODE_POD_LABEL_VALUE}}}},
            {"resources": {**base, "annotations": {pools.NEMO_ANNOTATION: "true"}}},
        ]},
        "preconditions": {"all": [{"key": f"{{{{ {fabric_pool_expr(fabric)} }}}}", "operator": "Equals",
                                   "value": True}]},
        "validate": {
            "failureAction": "Enforce",
            "message": (f"a pod with a container that requests {GPU_RESOURCE} selects a fabric node pool "
                        f"({'; '.join(_pool_hint(p) for p in fabric)}) but carries neither the label "
                        f"{pools.FABRIC_POD_LABEL}={pools.FABRIC_POD_LABEL_VALUE} (a pod that works with pods on "
                        f"other nodes: the fabric is injected) nor {pools.SINGLE_NODE_POD_LABEL}="
                        f"{pools.SINGLE_NODE_POD_LABEL_VALUE} (it runs on one node and needs no fabric); a "
                        f"multi-node pod without the fabric would run NCCL over TCP in silence, so it is "
                        f"refused: add one of the two labels"),
            "foreach": [{
                "list": "request.object.spec.containers",
                "preconditions": _gpu_precondition(),
                "deny": {"conditions": {"all": [
                    {"key": f"{{{{ {GPU_COUNT_EXPR} }}}}", "operator": "GreaterThan", "value": 0}]}},
            }],
        },
    }


def _gpu_precondition() -> dict[str, Any]:
    return {"all": [{"key": f"{{{{ {GPU_COUNT_EXPR} }}}}", "operator": "GreaterThan", "value": 0}]}


def container_patch(profile: FabricProfile) -> dict[str, Any]:
    """The strategic-merge patch for one GPU container (`element`)."""
    c: dict[str, Any] = {"name": "{{ element.name }}"}
    if profile.env:
        c["env"] = [{"name": k, "value": v} for k, v in profile.env.items()]
    if profile.volume_mounts:
        c["volumeMounts"] = [dict(m) for m in profile.volume_mounts]
    limits: dict[str, Any] = {}
    if profile.device_resource:
        limits[profile.device_resource] = f"{{{{ {device_count_expr(profile)} }}}}"
    limits.update(profile.extra_resources)
    resources: dict[str, Any] = {}
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


def pod_patch(profile: FabricProfile) -> dict[str, Any]:
    patch: dict[str, Any] = {}
    if profile.annotations:
        patch["metadata"] = {"annotations": dict(profile.annotations)}
    spec: dict[str, Any] = {}
    if profile.volumes:
        spec["volumes"] = [dict(v) for v in profile.volumes]
    if profile.init_containers:
        spec["initContainers"] = [dict(c) for c in profile.init_containers]
    if spec:
        patch["spec"] = spec
    return patch


def deny_conditions(profile: FabricProfile) -> dict[str, Any]:
    """A GPU container is refused if any of these holds (evaluated per container `element`)."""
    conds: list[dict[str, Any]] = []
    if profile.device_resource:
        conds.append({"key": f"{{{{ {device_present_expr(profile)} }}}}", "operator": "Equals", "value": ""})
    if profile.nccl_net:
        conds.append({"key": f"{{{{ {NCCL_NET_EXPR} }}}}", "operator": "NotEquals", "value": profile.nccl_net})
    return {"any": conds}


def cluster_policy(profile: FabricProfile, webhook_timeout_seconds: int, multi_pool: bool = False,
                   fabric_pools: list[FabricProfile] | None = None) -> dict[str, Any]:
    """The pool's policy. fabric_pools: every fabric pool of the stack (for `require-fabric-pool`);
    default: this pool only."""
    pre = _pool_preconditions(profile, multi_pool)
    rules: list[dict[str, Any]] = []

    def rule(name: str, body: dict[str, Any]) -> dict[str, Any]:
        r = {"name": name, "match": _match()}
        if pre:
            r["preconditions"] = pre
        r.update(body)
        return r

    pp = pod_patch(profile)
    if pp:
        rules.append(rule("pod-fabric", {"mutate": {"patchStrategicMerge": pp}}))
    nets = device_networks_rule_body(profile)
    if nets:
        r = rule("pod-device-networks", nets)
        if pre:              # the pool's preconditions and the device count must both hold
            r["preconditions"] = {"all": pre["all"] + nets["preconditions"]["all"]}
        rules.append(r)
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
    label_rule = require_fabric_label_rule(fabric_pools if fabric_pools is not None else [profile])
    if label_rule:
        rules.append(label_rule)
    return {
        "apiVersion": API_VERSION,
        "kind": "ClusterPolicy",
        "metadata": {
            "name": policy_name(profile),
            "annotations": {
                # pulumi up waits for Kyverno to report the policy Ready (its webhook is served); see above
                "pulumi.com/waitFor": "condition=Ready",
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


def cluster_policies(cfg: StackConfig) -> list[dict[str, Any]]:
    """One ClusterPolicy per node pool with a fabric (none when fabric.enabled is false)."""
    profiles = [profile_for(cfg, p) for p in cfg.node_pools]
    multi = len(cfg.node_pools) > 1
    fabric = [p for p in profiles if p.enabled]
    return [cluster_policy(p, cfg.fabric.webhook_timeout_seconds, multi, fabric) for p in fabric]


# ------------------------------------------------------------------------------------------
# Python evaluation of the Kyverno JMESPath subset used above
# ------------------------------------------------------------------------------------------
_F = TypeVar("_F", bound=Callable[..., Any])


def _signature(*types: dict[str, list[str]]) -> Callable[[_F], _F]:
    """jmespath's `signature` decorator with a type (jmespath ships no type information)."""
    return cast(Callable[[_F], _F], jfunctions.signature(*types))


class KyvernoFunctions(jfunctions.Functions):
    """The Kyverno JMESPath extensions these policies use (numbers only), with Kyverno's names."""

    @_signature({"types": ["number"]}, {"types": ["number"]})
    def _func_multiply(self, a: float, b: float) -> float:
        return a * b

    @_signature({"types": ["number"]}, {"types": ["number"]})
    def _func_subtract(self, a: float, b: float) -> float:
        return a - b

    @_signature({"types": ["string"]}, {"types": ["number"]})
    def _func_truncate(self, s: str, length: float) -> str:
        # Kyverno: the first `length` characters; a negative length gives "" (kyverno/kyverno#2856)
        return s[:max(0, int(length))]

    @_signature({"types": ["number"]}, {"types": ["number"]})
    def _func_divide(self, a: float, b: float) -> float:
        if b == 0:
            raise ZeroDivisionError("divide by zero")
        return a / b


_OPTIONS = jmespath.Options(custom_functions=KyvernoFunctions())


def evaluate(expression: str, data: dict[str, Any]) -> Any:
    """Evaluate one JMESPath expression (without the {{ }}) the way Kyverno would."""
    result = jmespath.search(expression, data, options=_OPTIONS)
    if isinstance(result, float) and result.is_integer():
        result = int(result)
    return result


def substitute(value: Any, data: dict[str, Any]) -> Any:
    """Kyverno variable substitution for values that are exactly one `{{ expr }}` (or plain text)."""
    if isinstance(value, str) and value.startswith("{{") and value.endswith("}}"):
        return evaluate(value[2:-2].strip(), data)
    if isinstance(value, dict):
        return {k: substitute(v, data) for k, v in value.items()}
    if isinstance(value, list):
        return [substitute(v, data) for v in value]
    return value


def _condition_holds(cond: dict[str, Any], data: dict[str, Any]) -> bool:
    key = substitute(cond["key"], data)
    value = cond["value"]
    op = cond["operator"]
    if op == "Equals":
        return bool(key == value)
    if op == "NotEquals":
        return bool(key != value)
    if op == "GreaterThan":
        try:
            return float(key) > float(value)
        except (TypeError, ValueError):      # a missing or non-numeric value is not greater
            return False
    raise ValueError(f"operator {op} not supported by this evaluator")


def conditions_hold(block: dict[str, Any], data: dict[str, Any]) -> bool:
    """Kyverno condition block semantics: all of `all` and at least one of `any` (when present)."""
    ok = True
    if "all" in block:
        ok = all(_condition_holds(c, data) for c in block["all"])
    if ok and "any" in block:
        ok = any(_condition_holds(c, data) for c in block["any"])
    return ok


def denials(policy: dict[str, Any], pod: dict[str, Any]) -> list[tuple[str, str]]:
    """(rule name, container name) for every container a validate rule of the policy refuses in `pod`.
    A pod the policy does not match, or whose rule preconditions fail, is refused by nothing."""
    out: list[tuple[str, str]] = []
    for r in policy["spec"]["rules"]:
        v = r.get("validate")
        if not v or not rule_matches(r, pod):
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


def denied_containers(policy: dict[str, Any], pod: dict[str, Any]) -> list[str]:
    """Names of containers the policy's validate rules would refuse in `pod` (a Pod dict), each once."""
    out: list[str] = []
    for _, name in denials(policy, pod):
        if name not in out:
            out.append(name)
    return out


def _filter_selects(f: dict[str, Any], labels: dict[str, Any], annotations: dict[str, Any]) -> bool:
    """One match/exclude resource filter on a Pod CREATE: its label selector and annotations (all given must
    hold; a filter with neither selects every Pod)."""
    res = f["resources"]
    sel = (res.get("selector") or {}).get("matchLabels") or {}
    ann = res.get("annotations") or {}
    return all(labels.get(k) == v for k, v in sel.items()) and all(annotations.get(k) == v for k, v in ann.items())


def rule_matches(rule: dict[str, Any], pod: dict[str, Any]) -> bool:
    """Would this rule's `match` select the Pod CREATE and its `exclude` (if any) not exclude it?"""
    meta = pod.get("metadata")
    meta = meta if isinstance(meta, dict) else {}
    labels, annotations = meta.get("labels"), meta.get("annotations")
    labels = labels if isinstance(labels, dict) else {}
    annotations = annotations if isinstance(annotations, dict) else {}
    if not any(_filter_selects(f, labels, annotations) for f in rule["match"]["any"]):
        return False
    return not any(_filter_selects(f, labels, annotations) for f in (rule.get("exclude") or {}).get("any", []))


def matches(policy: dict[str, Any], pod: dict[str, Any]) -> bool:
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
           "capabilities_add_expr", "evaluate", "substitute", "denied_containers", "denials", "matches",
           "require_fabric_pool_rule",
           "fabric_pool_expr", "require_fabric_label_rule", "rule_matches", "SINGLE_NODE_RULE"]
