"""Kyverno CEL policies (policies.kyverno.io/v1) that give multi-node pods their fabric, generated from each pool's
FabricProfile, and their evaluation (the effective pod `plan` writes is what these policies' CEL computes).

Why the CEL types: the Kyverno 1.19 chart calls the kyverno.io/v1 ClusterPolicy deprecated and to be removed
(kyverno/kyverno#17701, #17708: v1.20 stops executing it). MutatingPolicy and ValidatingPolicy are served as v1
since Kyverno 1.17.0 (CRDs at v1.19.0 in schemas/kyverno/).

1. MutatingPolicy `multinode-fabric-<pool>`, one per node pool with a fabric. Every mutation is
   `patchType: JSONPatch` (RFC 6902), one operation per GPU container (or one per pod), applied in order, each on
   the pod the one before produced. JSONPatch and not ApplyConfiguration: an apply configuration may not set an
   atomic list (the MutatingPolicy CRD's applyConfiguration description), and a container's
   securityContext.capabilities.add is one (k8s.io/api core/v1: listType=atomic); the fabric must add to it.
   Per container whose nvidia.com/gpu limit is > 0:
   - the fabric device resource: ceil(GPUs x devices_per_node / gpus_per_node), in integer CEL;
   - each env var: replaced where the container has one of that name, else added; except NCCL_NET (the transport
     pin), added only where the container sets none: a container's own NCCL_NET is kept, and require-fabric
     refuses the pod unless it is the fabric's value (a user override is denied, not silently rewritten);
   - each volume mount: replaced where one has the same mountPath, else added;
   - each capability: added to capabilities.add only when absent (the container's own list is kept);
   - cpu / memory requests sized per GPU, each only where the container requests none;
   - extra resources (hugepages) as limits.
   Per pod: the profile's annotations, volumes and init containers (native sidecars; replaced by name, else added),
   and on OCI the Multus networks annotation with one entry per fabric device the pod requests.
   Reach (matchConditions): a Pod CREATE carrying the label multinode.dev/fabric=enabled or NeMo's annotation
   nmp.nvidia.com/enable-multi-node-networking: "true"; with several pools also selecting this pool with
   spec.nodeSelector. No owner filter: pods LWS, Volcano, Grove, Jobs, MPIJob or a user create are all Pod CREATEs.
2. ValidatingPolicy `multinode-fabric-checks`, one per stack (fail closed, after every mutation: the API server
   calls validating webhooks after the mutating ones), on every Pod CREATE with a GPU container:
   - require-fabric-pool: a fabric-labelled (or NeMo-annotated) pod must select one of the stack's fabric pools
     with spec.nodeSelector (nodeAffinity is not read: the injection picks its pool from nodeSelector);
   - require-fabric (per pool): such a pod on that pool has, in every GPU container, the device resource and the
     NCCL_NET pin; a pod the injection missed is refused instead of running NCCL over TCP;
   - require-fabric-label-on-fabric-pool: a GPU pod selecting a fabric pool carries the fabric label, NeMo's
     annotation, or the opt-out label multinode.dev/single-node=true. Limit: admission sees the pod before
     scheduling, so a GPU pod with no nodeSelector that the scheduler puts on a fabric node is not caught here
     (the pools' nvidia.com/gpu taint and the policy pack's workload-matches-node-pool cover the stack's objects).
Both: failurePolicy Fail (a CEL error refuses the pod), spec.autogen.podControllers.controllers: [] - Kyverno
generates rules for Deployments, Jobs, CronJobs... unless the list is set, and an empty list means none
(kyverno/kyverno pkg/cel/policies/*/autogen: nil -> autogen.AllConfigs); the pods themselves are what must be
mutated, whoever creates them. Admission only (no background scan: the fabric is injected at creation).
Webhook timeout from fabric.webhookTimeoutSeconds. Readiness: `pulumi.com/waitFor:
jsonpath={.status.conditionStatus.ready}=true` (WAIT_FOR_READY), and workloads depend on the policies.
Every expression is type-checked as the Kubernetes CEL environment does it (celtypes.py: the Pod's declared types,
homogeneous literals) by the pack's rule kyverno-cel-compiles, and Kyverno's own CLI runs every rendered policy in
`make conformance` (conformance/kyverno). Only a real cluster confirms the webhook timing.
"""
from __future__ import annotations

import copy
from typing import Any

from .. import pools
from ..config import StackConfig
from ..fabric import FabricProfile, profile_for
from . import cel, jsonpatch

API_VERSION = "policies.kyverno.io/v1"
MUTATING_KIND = "MutatingPolicy"
VALIDATING_KIND = "ValidatingPolicy"
GPU_RESOURCE = "nvidia.com/gpu"
NETWORKS_ANNOTATION = "k8s.v1.cni.cncf.io/networks"
CHECKS_POLICY = "multinode-fabric-checks"
SINGLE_NODE_RULE = "require-fabric-label-on-fabric-pool"
POOL_RULE = "require-fabric-pool"
FABRIC_RULE = "require-fabric"


# ------------------------------------------------------------------------------------ CEL building blocks
def _q(s: str) -> str:
    return cel.literal(s)


def gpus(c: str) -> str:
    """CEL: the container's nvidia.com/gpu limit as an int (0 when it has none), read with Kubernetes' CEL quantity
    library (k8s.io/apiserver pkg/cel/library/quantity.go; in Kyverno's CEL environment, kyverno/kyverno@v1.19.0
    pkg/cel/compiler/env.go `library.Quantity()`): `quantity(...).asInteger()` reads every canonical form the API
    server hands a webhook ("8", "1k", "2Ki"), where int() read only plain digits (issue 32). The webhook sees
    quantities as strings, so the default is the string '0'; `string()` keeps a number given to the Kyverno CLI
    (which reads manifests as written, `8`) readable too, and is the identity on the typed Pod's string (issue 27:
    `orValue(0)` would pin int's overload where `object` is typed, celtypes.py). A GPU limit that is not whole makes
    asInteger fail, and the policy fails closed."""
    return f"quantity(string({c}.?resources.?limits[?{_q(GPU_RESOURCE)}].orValue('0'))).asInteger()"


def any_gpu_container() -> str:
    """CEL: some container of the pod requests nvidia.com/gpu, in any of its lists: containers, initContainers
    (native sidecars among them) and ephemeralContainers (issue 32: a GPU request only in a sidecar skipped the
    checks). Three `exists`: the lists hold different types (Container, EphemeralContainer)."""
    return " || ".join(f"object.spec{'.' if f == 'containers' else '.?'}{f}"
                       f"{'' if f == 'containers' else '.orValue([])'}.exists(c, {gpus('c')} > 0)"
                       for f in ("containers", "initContainers", "ephemeralContainers"))


def devices(profile: FabricProfile, c: str) -> str:
    """CEL: the container's share of the node's fabric devices, rounded up (integer division)."""
    n, g = profile.devices_per_node, profile.gpus_per_node
    return f"(({gpus(c)} * {n} + {g} - 1) / {g})"


def _label_is(key: str, value: str) -> str:
    return f"object.metadata.?labels[?{_q(key)}].orValue('') == {_q(value)}"


def fabric_pod_expr() -> str:
    """CEL: the pod carries the fabric label or NeMo's multi-node annotation."""
    return (f"({_label_is(pools.FABRIC_POD_LABEL, pools.FABRIC_POD_LABEL_VALUE)} || "
            f"object.metadata.?annotations[?{_q(pools.NEMO_ANNOTATION)}].orValue('') == 'true')")


def selects_pool_expr(selector: dict[str, str]) -> str:
    """CEL: the pod's spec.nodeSelector carries every label of the pool's selector."""
    parts = [f"object.spec.?nodeSelector[?{_q(k)}].orValue('') == {_q(v)}" for k, v in sorted(selector.items())]
    return "(" + " && ".join(parts) + ")"


def fabric_pool_expr(profiles: list[FabricProfile]) -> str:
    """CEL: the pod selects one of these pools."""
    return "(" + " || ".join(selects_pool_expr(p.node_selector) for p in profiles) + ")"


GPU_CONTAINERS = f"object.spec.containers.filter(c, {gpus('c')} > 0)"
CONTAINER_PATH = "'/spec/containers/' + string(object.spec.containers.map(x, x.name).indexOf(c.name))"


def _patch(op: str, path: str, value: str) -> str:
    return f"JSONPatch{{op: {_q(op)}, path: {path}, value: {value}}}"


def _upsert(owner: str, owner_path: str, field: str, key: str, item: dict[str, Any]) -> str:
    """CEL for one JSONPatch that puts `item` into the list `owner.field` (JSON pointer `owner_path` + '/field'):
    the list with just the item when there is none, the item in place of the entry with the same `key`, else
    appended."""
    lst, kv, lit = f"{owner}.{field}", _q(str(item[key])), cel.literal(item)
    base, slash = f"{owner_path} + '/{field}'", _q("/")
    return (f"!has({lst}) ? {_patch('add', base, '[' + lit + ']')} : "
            f"{lst}.exists(x, x.{key} == {kv}) ? "
            f"{_patch('replace', f'{base} + {slash} + string({lst}.map(x, x.{key}).indexOf({kv}))', lit)} : "
            f"{_patch('add', base + ' + ' + _q('/-'), lit)}")


def _append(owner: str, owner_path: str, field: str, item: dict[str, Any]) -> str:
    """CEL for one JSONPatch that appends `item` to the list `owner.field` (the list with just the item when there
    is none)."""
    base, lit = f"{owner_path} + '/{field}'", cel.literal(item)
    return (f"!has({owner}.{field}) ? {_patch('add', base, '[' + lit + ']')} : "
            f"{_patch('add', base + ' + ' + _q('/-'), lit)}")


def _per_gpu_container(what: str, op: str, condition: str = "") -> str:
    cond = f"{gpus('c')} > 0" + (f" && {condition}" if condition else "")
    return f"// {what}\nobject.spec.containers.filter(c, {cond}).map(c, {op})"


def _mutation(expression: str) -> dict[str, Any]:
    return {"patchType": "JSONPatch", "jsonPatch": {"expression": expression}}


def container_mutations(profile: FabricProfile) -> list[dict[str, Any]]:
    """The per-GPU-container mutations of the pool's MutatingPolicy (module docstring, 1)."""
    out: list[str] = []
    limits = f"{CONTAINER_PATH} + '/resources/limits/'"
    if profile.device_resource:
        out.append(_per_gpu_container(
            f"{profile.device_resource}: ceil(GPUs x {profile.devices_per_node} / {profile.gpus_per_node})",
            _patch("add", f"{limits} + {_q(jsonpatch.escape(profile.device_resource))}",
                   f"string({devices(profile, 'c')})")))
    for resource, quantity in sorted(profile.extra_resources.items()):
        out.append(_per_gpu_container(f"limit {resource}", _patch(
            "add", f"{limits} + {_q(jsonpatch.escape(resource))}", cel.literal(quantity))))
    for k, v in profile.env.items():
        if k == "NCCL_NET":
            # the transport pin is added, never overwritten: a container that sets its own NCCL_NET keeps it, and
            # require-fabric then refuses the pod unless it is the fabric's value (fail closed, not a silent fix)
            absent = f"!c.?env.orValue([]).exists(e, e.name == {_q(k)})"
            out.append(_per_gpu_container(f"env {k} (only where the container sets none)",
                                          _append("c", CONTAINER_PATH, "env", {"name": k, "value": v}), absent))
            continue
        out.append(_per_gpu_container(f"env {k}", _upsert("c", CONTAINER_PATH, "env", "name",
                                                          {"name": k, "value": v})))
    for m in profile.volume_mounts:
        out.append(_per_gpu_container(f"volumeMount {m['mountPath']}",
                                      _upsert("c", CONTAINER_PATH, "volumeMounts", "mountPath", dict(m))))
    for cap in profile.capabilities:
        sc = f"{CONTAINER_PATH} + '/securityContext'"
        op = (f"!has(c.securityContext) ? {_patch('add', sc, cel.literal({'capabilities': {'add': [cap]}}))} : "
              f"!has(c.securityContext.capabilities) ? "
              f"{_patch('add', sc + ' + ' + _q('/capabilities'), cel.literal({'add': [cap]}))} : "
              f"!has(c.securityContext.capabilities.add) ? "
              f"{_patch('add', sc + ' + ' + _q('/capabilities/add'), cel.literal([cap]))} : "
              f"{_patch('add', sc + ' + ' + _q('/capabilities/add/-'), _q(cap))}")
        out.append(_per_gpu_container(f"capability {cap} (kept once, the container's own list kept)", op,
                                      f"!({_q(cap)} in c.?securityContext.?capabilities.?add.orValue([]))"))
    for name, (amount, unit) in sorted(profile.requests_per_gpu.items()):
        value = f"string({gpus('c')} * {amount})" + (f" + {_q(unit)}" if unit else "")
        req = f"{CONTAINER_PATH} + '/resources/requests'"
        op = (f"!has(c.resources.requests) ? {_patch('add', req, '{' + _q(name) + ': ' + value + '}')} : "
              f"{_patch('add', req + ' + ' + _q('/' + jsonpatch.escape(name)), value)}")
        out.append(_per_gpu_container(f"request {name}: {amount}{unit} per GPU, only where the container states none",
                                      op, f"!({_q(name)} in c.?resources.?requests.orValue({{}}))"))
    return [_mutation(e) for e in out]


def device_networks_expr(profile: FabricProfile) -> str:
    """CEL for the Multus annotation value: `profile.device_network` once per fabric device the pod's GPU containers
    request, comma separated (the whole-node list cut to n entries; a pod asking for more devices than a node has is
    unschedulable anyway and gets the whole-node list)."""
    name = profile.device_network or ""
    full = ",".join([name] * profile.devices_per_node)
    n = f"object.spec.containers.map(c, {devices(profile, 'c')}).sum()"
    return (f"({n} >= {profile.devices_per_node} ? {_q(full)} : "
            f"{_q(full)}.substring(0, {n} * {len(name) + 1} - 1))")


def pod_mutations(profile: FabricProfile) -> list[dict[str, Any]]:
    """The per-pod mutations: annotations, volumes, init containers (native sidecars), Multus networks."""
    out: list[str] = []

    def annotation_ops(key: str, value: str) -> str:
        path = _q("/metadata/annotations/" + jsonpatch.escape(key))
        return (f"[has(object.metadata.annotations) ? {_patch('add', path, value)} : "
                f"{_patch('add', _q('/metadata/annotations'), '{' + _q(key) + ': ' + value + '}')}]")

    for k, v in profile.annotations.items():
        out.append(f"// annotation {k}\n{annotation_ops(k, _q(v))}")
    for volume in profile.volumes:
        out.append(f"// volume {volume['name']}\n"
                   f"[{_upsert('object.spec', _q('/spec'), 'volumes', 'name', dict(volume))}]")
    for sidecar in profile.init_containers:
        out.append(f"// init container {sidecar['name']}\n"
                   f"[{_upsert('object.spec', _q('/spec'), 'initContainers', 'name', dict(sidecar))}]")
    if profile.device_network and profile.device_resource:
        n = f"object.spec.containers.map(c, {devices(profile, 'c')}).sum()"
        out.append(f"// {NETWORKS_ANNOTATION}: one {profile.device_network} per fabric device the pod requests\n"
                   f"{n} > 0 ? {annotation_ops(NETWORKS_ANNOTATION, device_networks_expr(profile))} : []")
    return [_mutation(e) for e in out]


def policy_name(profile: FabricProfile) -> str:
    return f"multinode-fabric-{profile.pool}"[:63].rstrip("-")


def _pod_create() -> dict[str, Any]:
    return {"resourceRules": [{"apiGroups": [""], "apiVersions": ["v1"], "operations": ["CREATE"],
                               "resources": ["pods"]}]}


def _common_spec(webhook_timeout_seconds: int) -> dict[str, Any]:
    return {
        "failurePolicy": "Fail",
        "webhookConfiguration": {"timeoutSeconds": webhook_timeout_seconds},
        # Pods only, whoever creates them: no rules generated for pod controllers (module docstring)
        "autogen": {"podControllers": {"controllers": []}},
        "evaluation": {"admission": {"enabled": True}, "background": {"enabled": False}},
    }


# What `pulumi up` waits for on each policy (the kubernetes provider's pulumi.com/waitFor, provider/v4@v4.25.0
# pkg/metadata/overrides.go: "jsonpath=" or "condition="). Kyverno 1.19 reports a CEL policy's readiness in
# status.conditionStatus: `ready: true` with conditions RBACPermissionsGranted and WebhookConfigured (seen on the
# box's Kyverno v1.19.0 admission controller, issue 29), not in status.conditions, so the provider's
# `condition=Ready` (which reads status.conditions) never held and `pulumi up` waited until its timeout.
WAIT_FOR_READY = "jsonpath={.status.conditionStatus.ready}=true"


def _annotations(title: str, description: str) -> dict[str, str]:
    return {
        "pulumi.com/waitFor": WAIT_FOR_READY,      # pulumi up waits until Kyverno serves the policy (docstring)
        "policies.kyverno.io/title": title,
        "policies.kyverno.io/subject": "Pod",
        "policies.kyverno.io/description": description,
    }


def mutating_policy(profile: FabricProfile, webhook_timeout_seconds: int = 15,
                    multi_pool: bool = False) -> dict[str, Any]:
    """The pool's MutatingPolicy. multi_pool: the stack has several pools, so the policy also requires the pod to
    select this pool."""
    conditions = [{"name": "multi-node-pod", "expression": fabric_pod_expr()}]
    if multi_pool and profile.node_selector:
        conditions.append({"name": f"selects-pool-{profile.pool}"[:63],
                           "expression": selects_pool_expr(profile.node_selector)})
    mutations = pod_mutations(profile) + container_mutations(profile)
    return {
        "apiVersion": API_VERSION,
        "kind": MUTATING_KIND,
        "metadata": {"name": policy_name(profile), "annotations": _annotations(
            f"Inject the {profile.kind} fabric into multi-node pods",
            f"Pods labelled {pools.FABRIC_POD_LABEL}={pools.FABRIC_POD_LABEL_VALUE} or annotated "
            f"{pools.NEMO_ANNOTATION}=true on pool {profile.pool} ({profile.machine}) get the fabric in every "
            f"GPU container.")},
        "spec": {
            **_common_spec(webhook_timeout_seconds),
            "matchConstraints": _pod_create(),
            "matchConditions": conditions,
            # every mutation is idempotent (replace by name / mountPath, capabilities and requests only when
            # absent), so a later webhook's change may safely re-run them
            "reinvocationPolicy": "IfNeeded",
            "mutations": mutations,
        },
    }


def _pool_hint(p: FabricProfile) -> str:
    sel = ", ".join(f"{k}: {v}" for k, v in sorted(p.node_selector.items()))
    return f"pool {p.pool!r} ({p.machine}, {p.kind}): nodeSelector {{{sel}}}"


def _has_fabric_expr(profile: FabricProfile) -> str:
    """CEL over a container `c`: it carries the pool's device resource and NCCL_NET pin."""
    parts = []
    if profile.device_resource:
        parts.append(f"{_q(profile.device_resource)} in c.?resources.?limits.orValue({{}})")
    if profile.nccl_net:
        parts.append(f"c.?env.orValue([]).exists(e, e.name == 'NCCL_NET' && "
                     f"e.?value.orValue('') == {_q(profile.nccl_net)})")
    return " && ".join(parts)


def validations(fabric: list[FabricProfile], multi_pool: bool) -> list[dict[str, Any]]:
    """The ValidatingPolicy's checks (module docstring, 2); each message starts with its rule name."""
    out: list[dict[str, Any]] = []
    selectors_known = all(p.node_selector for p in fabric)
    hints = "; ".join(_pool_hint(p) for p in fabric)
    if selectors_known:
        out.append({"expression": f"!{fabric_pod_expr()} || {fabric_pool_expr(fabric)}", "message": (
            f"[{POOL_RULE}] multi-node pod with a container that requests {GPU_RESOURCE} must select one of this "
            f"stack's fabric node pools with spec.nodeSelector: {hints}. Its nodeSelector is missing or names no "
            f"fabric pool (nodeAffinity is not read: the fabric injection picks the pool from spec.nodeSelector), "
            f"so it would run without the fabric and is refused")})
    for p in fabric:
        has = _has_fabric_expr(p)
        if not has:
            continue
        scope = fabric_pod_expr() + (f" && {selects_pool_expr(p.node_selector)}"
                                     if multi_pool and p.node_selector else "")
        what = " and ".join(x for x in [f"{p.device_resource} devices" if p.device_resource else "",
                                         f"NCCL_NET={p.nccl_net}" if p.nccl_net else ""] if x)
        # the main containers and the native sidecars (initContainers with restartPolicy Always: they run beside
        # them for the pod's life); plain init containers finish before the collective starts
        sidecars = (f"object.spec.?initContainers.orValue([]).all(c, c.?restartPolicy.orValue('') != 'Always' || "
                    f"{gpus('c')} == 0 || ({has}))")
        out.append({"expression": f"!({scope}) || (object.spec.containers.all(c, {gpus('c')} == 0 || ({has})) && "
                                  f"{sidecars})",
                    "message": (f"[{FABRIC_RULE}] multi-node pod on node pool {p.pool!r} ({p.machine}, fabric "
                                f"{p.kind}): every container (and native sidecar) that requests {GPU_RESOURCE} must "
                                f"carry {what}; the "
                                f"fabric injection did not apply or a container sets NCCL_NET to another value, so "
                                f"the pod is refused instead of running NCCL over another transport")})
    if selectors_known:
        out.append({"expression": (f"{fabric_pod_expr()} || "
                                   f"{_label_is(pools.SINGLE_NODE_POD_LABEL, pools.SINGLE_NODE_POD_LABEL_VALUE)} || "
                                   f"!{fabric_pool_expr(fabric)}"), "message": (
            f"[{SINGLE_NODE_RULE}] a pod with a container that requests {GPU_RESOURCE} selects a fabric node pool "
            f"({hints}) but carries neither the label {pools.FABRIC_POD_LABEL}={pools.FABRIC_POD_LABEL_VALUE} (a pod "
            f"that works with pods on other nodes: the fabric is injected) nor {pools.SINGLE_NODE_POD_LABEL}="
            f"{pools.SINGLE_NODE_POD_LABEL_VALUE} (it runs on one node and needs no fabric); a multi-node pod "
            f"without the fabric would run NCCL over TCP in silence, so it is refused: add one of the two labels")})
    return out


def validating_policy(fabric: list[FabricProfile], webhook_timeout_seconds: int = 15,
                      multi_pool: bool = False) -> dict[str, Any] | None:
    """The stack's fail-closed checks over its fabric pools (None when there is nothing to check)."""
    checks = validations(fabric, multi_pool)
    if not checks:
        return None
    return {
        "apiVersion": API_VERSION,
        "kind": VALIDATING_KIND,
        "metadata": {"name": CHECKS_POLICY, "annotations": _annotations(
            "Refuse multi-node GPU pods without the fabric",
            "GPU pods labelled for the fabric must select a fabric pool and carry its devices and NCCL pin; GPU "
            "pods on a fabric pool must say whether they are multi-node.")},
        "spec": {
            **_common_spec(webhook_timeout_seconds),
            "matchConstraints": _pod_create(),
            "matchConditions": [{"name": "has-gpu-container", "expression": any_gpu_container()}],
            "validationActions": ["Deny"],
            "validations": checks,
        },
    }


def fabric_policies(cfg: StackConfig) -> list[dict[str, Any]]:
    """One MutatingPolicy per node pool with a fabric, then the stack's ValidatingPolicy (none when fabric.enabled
    is false)."""
    profiles = [profile_for(cfg, p) for p in cfg.node_pools]
    multi = len(cfg.node_pools) > 1
    fabric = [p for p in profiles if p.enabled]
    timeout = cfg.fabric.webhook_timeout_seconds
    out = [mutating_policy(p, timeout, multi) for p in fabric]
    checks = validating_policy(fabric, timeout, multi) if fabric else None
    return out + ([checks] if checks else [])


# ------------------------------------------------------------------------------------ evaluation
def is_cel_policy(obj: Any, kind: str) -> bool:
    return (isinstance(obj, dict) and obj.get("kind") == kind
            and str(obj.get("apiVersion", "")).startswith("policies.kyverno.io/"))


def selector_matches(selector: Any, labels: dict[str, Any]) -> bool:
    """metav1.LabelSelector semantics (matchLabels and matchExpressions In/NotIn/Exists/DoesNotExist)."""
    if not isinstance(selector, dict):
        return True
    if any(labels.get(k) != v for k, v in (selector.get("matchLabels") or {}).items()):
        return False
    for e in selector.get("matchExpressions") or []:
        key, op, values = e.get("key"), e.get("operator"), e.get("values") or []
        if op == "In" and labels.get(key) not in values:
            return False
        if op == "NotIn" and key in labels and labels.get(key) in values:
            return False
        if op == "Exists" and key not in labels:
            return False
        if op == "DoesNotExist" and key in labels:
            return False
    return True


def _rules_select_pod_create(rules: Any) -> bool:
    for r in rules if isinstance(rules, list) else []:
        if not isinstance(r, dict):
            continue
        groups, res, ops = r.get("apiGroups") or [], r.get("resources") or [], r.get("operations") or []
        if (("" in groups or "*" in groups) and ("pods" in res or "*" in res)
                and ("CREATE" in ops or "*" in ops)):
            return True
    return False


def matches(policy: dict[str, Any], pod: dict[str, Any], bindings: Any = None) -> bool:
    """Would this CEL policy act on the Pod CREATE: its matchConstraints (resource rules, exclusions, object
    selector) and all its matchConditions. A matchCondition that errors raises CelError (failurePolicy Fail
    refuses the pod then). `bindings`: pod_bindings(pod), shared by the caller across policies (used unless this
    policy declares spec.variables, which it binds itself)."""
    spec = policy.get("spec") or {}
    if not _constraints_select(spec, pod):
        return False
    return matches_selected(policy, pod, bindings)


def matches_selected(policy: dict[str, Any], pod: dict[str, Any], bindings: Any = None) -> bool:
    """matches() for a policy already known to select Pod CREATEs (selects_pod_creates): the object selector
    and the matchConditions."""
    spec = policy.get("spec") or {}
    labels = (pod.get("metadata") or {}).get("labels")
    if not selector_matches((spec.get("matchConstraints") or {}).get("objectSelector"),
                             labels if isinstance(labels, dict) else {}):
        return False
    if spec.get("matchConditions") and (bindings is None or spec.get("variables")):
        bindings = _variables(spec, pod)
    return _conditions_hold(spec, bindings)


def selects_pod_creates(policy: dict[str, Any]) -> bool:
    """The policy's resource rules take Pod CREATE and its exclusions do not (the part of matchConstraints
    that does not depend on the pod)."""
    return _rules_take_pod_creates(policy.get("spec") or {})


def _rules_take_pod_creates(spec: dict[str, Any]) -> bool:
    mc = spec.get("matchConstraints") or {}
    return _rules_select_pod_create(mc.get("resourceRules")) and not _rules_select_pod_create(
        mc.get("excludeResourceRules"))


def _constraints_select(spec: dict[str, Any], pod: dict[str, Any]) -> bool:
    if not _rules_take_pod_creates(spec):
        return False
    mc = spec.get("matchConstraints") or {}
    labels = (pod.get("metadata") or {}).get("labels")
    return selector_matches(mc.get("objectSelector"), labels if isinstance(labels, dict) else {})


def _conditions_hold(spec: dict[str, Any], bindings: Any) -> bool:
    return all(cel.evaluate(c["expression"], bindings) is True for c in spec.get("matchConditions") or [])


def shared_conditions(policies: list[dict[str, Any]]) -> list[str]:
    """The matchCondition expressions of the policies that declare no spec.variables (those evaluate on the
    pod's shared bindings), in order."""
    return [c["expression"] for p in policies if isinstance(p, dict) for spec in [p.get("spec") or {}]
            if isinstance(spec, dict) and not spec.get("variables")
            for c in spec.get("matchConditions") or [] if isinstance(c, dict) and isinstance(c.get("expression"), str)]


def pod_bindings(pod: dict[str, Any], conditions: list[str] | None = None, later: bool = False) -> Any:
    """The CEL bindings of a Pod CREATE for a policy without spec.variables: converted once, shareable by every
    such policy's conditions while the pod is unchanged (cel.bind). `conditions` (shared_conditions of the
    policies about to be matched) are evaluated at once (cel.prefetch). `later`: converted at the first
    evaluation (cel.bind_later)."""
    bindings = _variables({}, pod, later)
    if conditions:
        cel.prefetch(bindings, conditions)
    return bindings


def _variables(spec: dict[str, Any], pod: dict[str, Any], later: bool = False) -> Any:
    """The CEL bindings (cel.bind) of object / oldObject / request, and spec.variables evaluated in order (each
    may use the ones before)."""
    data: dict[str, Any] = {"object": pod, "oldObject": None,
                            "request": {"operation": "CREATE", "kind": {"group": "", "version": "v1", "kind": "Pod"}},
                            "variables": {}, "namespaceObject": None}
    values: dict[str, Any] = {}
    for v in spec.get("variables") or []:
        values[v["name"]] = cel.evaluate(v["expression"], **{**data, "variables": values})
    data["variables"] = values
    return cel.bind_later(**data) if later else cel.bind(**data)


def mutate(policy: dict[str, Any], pod: dict[str, Any]) -> dict[str, Any]:
    """The Pod after a MutatingPolicy (a new dict; the pod unchanged when the policy does not match): each
    JSONPatch mutation's expression evaluated on the pod the mutations before produced, its operations applied
    with RFC 6902 semantics. ApplyConfiguration mutations are not evaluated here (ValueError)."""
    if not matches(policy, pod):
        return copy.deepcopy(pod)
    return mutate_matched_in_place(policy, copy.deepcopy(pod))


def mutate_matched_in_place(policy: dict[str, Any], out: dict[str, Any]) -> dict[str, Any]:
    """mutate() for a Pod the caller owns and has already seen `matches` (the match is not evaluated again and
    the pod is not copied): patched in place and returned. On an error the pod may be partly patched; the caller
    discards it. Lets a chain of policies (effective_pod) copy the pod once instead of once per policy."""
    spec = policy.get("spec") or {}
    bindings = None
    for m in spec.get("mutations") or []:
        if m.get("patchType") != "JSONPatch":
            raise ValueError(f"MutatingPolicy {(policy.get('metadata') or {}).get('name')}: patchType "
                             f"{m.get('patchType')!r} is not evaluated by plan (only JSONPatch)")
        if bindings is None:
            bindings = _variables(spec, out)
        ops = cel.evaluate(m["jsonPatch"]["expression"], bindings)
        if not isinstance(ops, list):
            raise cel.CelError("a JSONPatch expression must return a list of JSONPatch")
        if ops:
            out = jsonpatch.apply_in_place(out, ops)    # `out` is the caller's own pod; CEL values are fresh
            bindings = None                             # the next mutation sees the patched pod
    return out


def denials(policy: dict[str, Any], pod: dict[str, Any]) -> list[str]:
    """Messages of the ValidatingPolicy's validations that refuse this Pod CREATE (empty: admitted). A validation
    whose expression errors refuses too (failurePolicy Fail)."""
    spec = policy.get("spec") or {}
    if not _constraints_select(spec, pod):
        return []
    bindings = _variables(spec, pod)
    if not _conditions_hold(spec, bindings):
        return []
    out: list[str] = []
    for v in spec.get("validations") or []:
        try:
            ok = cel.evaluate(v["expression"], bindings) is True
        except cel.CelError as e:
            ok, v = False, {**v, "message": f"{v.get('message', '')} (evaluation error: {e})"}
        if not ok:
            out.append(str(v.get("message") or v["expression"]))
    return out


def refused_by(policy: dict[str, Any], pod: dict[str, Any]) -> list[str]:
    """Rule names ([name] message prefix) of the validations refusing the pod."""
    return [m[1:m.index("]")] if m.startswith("[") and "]" in m else m for m in denials(policy, pod)]


__all__ = ["fabric_policies", "mutating_policy", "validating_policy", "mutate", "denials", "refused_by",
           "matches", "is_cel_policy", "fabric_pod_expr", "fabric_pool_expr", "device_networks_expr",
           "SINGLE_NODE_RULE", "POOL_RULE", "FABRIC_RULE", "CHECKS_POLICY", "API_VERSION"]
