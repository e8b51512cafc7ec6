"""Admission check: the part of the Kubernetes API server's pod validation our pods can break.

Schemas (kubernetes-validate, the CRDs) accept pod specs the API server still refuses when the pod is
created: hugepages without cpu or memory, an extended resource whose request differs from its limit,
a mount that names no volume... This module runs those rules, offline, on every pod spec a stack
renders and on the pods after the fabric policies mutate them. Each rule is a small function that
cites the Kubernetes function it mirrors in kubernetes/kubernetes pkg/apis/core/validation/
validation.go (the messages quoted are upstream's), except `env-var-set-once`: upstream only warns
(pkg/api/pod/warnings.go, "hides previous definition of ..."), yet the last value silently wins, so a
second copy of e.g. NCCL_NET would undo the fabric pin: we refuse it.

What the API server validates is the Pod after defaulting: pkg/apis/core/v1/defaults.go SetDefaults_Pod
copies every limit that has no request into requests ("If limits are specified, but requests are not,
default requests to limits"); `defaulted_requests` does the same before the resource rules run. (A pod
template inside a Deployment is validated without that defaulting; defaulting only adds requests equal
to their limits, so the Pod-level check refuses everything the template-level one would.)

Entry point for `plan`: `findings(k8s_objects)` -> violation dicts (policy, enforcementLevel, resource,
message, ...) naming the object, the pod spec inside it, the container and the rule.
"""
from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from decimal import Decimal
from typing import Any

from . import quantity as quantities
from .podspecs import PodSpecRef, pod_specs

VALIDATION_GO = "kubernetes/kubernetes pkg/apis/core/validation/validation.go"

# Rule names (the finding's policy is `pod-admission/<rule>`).
RESOURCE_NAME = "resource-name"
RESOURCE_QUANTITY = "resource-quantity"
EXTENDED_REQUEST_EQUALS_LIMIT = "extended-request-equals-limit"
REQUEST_WITHIN_LIMIT = "request-within-limit"
HUGEPAGES_NEED_CPU_OR_MEMORY = "hugepages-require-cpu-or-memory"
UNIQUE_PORT_NAMES = "unique-port-names"
MOUNT_NAMES_A_VOLUME = "mount-names-a-volume"
UNIQUE_MOUNT_PATHS = "unique-mount-paths"
ENV_VAR_SET_ONCE = "env-var-set-once"
CONTAINERS_REQUIRED = "containers-required"
UNIQUE_CONTAINER_NAMES = "unique-container-names"
UNIQUE_VOLUME_NAMES = "unique-volume-names"

# --------------------------------------------------------------------------------- quantities
def parse_quantity(value: Any) -> Decimal | None:
    """A Kubernetes resource.Quantity ("8", "500m", "5120Mi", "1e3", 8) as a Decimal; None if malformed or out of
    range. One parser for the project: multinode/quantity.py (Kubernetes' format, bounded work and range)."""
    return quantities.parse_or_none(value)


# --------------------------------------------------------------------------------- resource names
# pkg/apis/core/helper/helpers.go: the names these predicates test.
_STANDARD_CONTAINER_RESOURCES = {"cpu", "memory", "ephemeral-storage"}
_QUALIFIED_NAME = re.compile(r"^([a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*/)?"
                             r"[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?\Z")


def is_hugepages(name: str) -> bool:
    """helper.IsHugePageResourceName: `hugepages-<size>`."""
    return name.startswith("hugepages-")


def is_native(name: str) -> bool:
    """helper.IsNativeResource: no domain, or a name containing "kubernetes.io/" (IsPrefixedNativeResource)."""
    return "/" not in name or "kubernetes.io/" in name


def overcommit_allowed(name: str) -> bool:
    """helper.IsOvercommitAllowed: native and not hugepages (cpu, memory, ephemeral-storage). GPUs, EFA,
    RDMA devices (extended resources) and hugepages are not: their request must equal their limit."""
    return is_native(name) and not is_hugepages(name)


def is_extended(name: str) -> bool:
    """helper.IsExtendedResourceName: a qualified, non-native name not under the `requests.` quota prefix."""
    return not is_native(name) and not name.startswith("requests.") and bool(_QUALIFIED_NAME.match(name))


def _hugepage_size(name: str) -> Decimal | None:
    return parse_quantity(name[len("hugepages-"):]) if is_hugepages(name) else None


# --------------------------------------------------------------------------------- pod helpers
def _list(value: Any) -> list[dict[str, Any]]:
    return [x for x in value if isinstance(x, dict)] if isinstance(value, list) else []


def _map(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def defaulted_requests(container: dict[str, Any]) -> dict[str, Any]:
    """requests after SetDefaults_Pod (pkg/apis/core/v1/defaults.go): each limit without a request is
    copied into requests."""
    res = _map(container.get("resources"))
    requests = dict(_map(res.get("requests")))
    for k, v in _map(res.get("limits")).items():
        requests.setdefault(k, v)
    return requests


def all_containers(spec: dict[str, Any]) -> list[dict[str, Any]]:
    return _list(spec.get("initContainers")) + _list(spec.get("containers"))


# --------------------------------------------------------------------------------- container rules
# Each takes (container, pod spec) and returns the problems as strings (empty: admitted).
ContainerRule = Callable[[dict[str, Any], dict[str, Any]], list[str]]


def check_resource_names(c: dict[str, Any], spec: dict[str, Any]) -> list[str]:
    """validateContainerResourceName: "must be a standard resource for containers" (no domain: cpu,
    memory, ephemeral-storage, hugepages-*) / "doesn't follow extended resource name standard"."""
    out = []
    res = _map(c.get("resources"))
    for where in ("limits", "requests"):
        for name in _map(res.get(where)):
            if "/" not in name:
                if name not in _STANDARD_CONTAINER_RESOURCES and not is_hugepages(name):
                    out.append(f"resources.{where}.{name}: must be a standard resource for containers")
            elif not is_native(name) and not is_extended(name):
                out.append(f"resources.{where}.{name}: doesn't follow extended resource name standard")
    return out


def check_resource_quantities(c: dict[str, Any], spec: dict[str, Any]) -> list[str]:
    """ValidateResourceQuantityValue (must parse, "must be greater than or equal to 0", extended resources
    "must be an integer") and validateResourceQuantityHugePageValue ("is not positive integer multiple
    of" the page size)."""
    out = []
    res = _map(c.get("resources"))
    for where in ("limits", "requests"):
        for name, raw in _map(res.get(where)).items():
            q = parse_quantity(raw)
            path = f"resources.{where}.{name}"
            if q is None:
                out.append(f"{path}: {raw!r} is not a quantity")
                continue
            if q < 0:
                out.append(f"{path}: {raw}: must be greater than or equal to 0")
            if is_extended(name) and q != q.to_integral_value():
                out.append(f"{path}: {raw}: must be an integer")
            size = _hugepage_size(name)
            if size and q % size != 0:
                out.append(f"{path}: {raw} is not positive integer multiple of {name}")
    return out


def check_extended_request_equals_limit(c: dict[str, Any], spec: dict[str, Any]) -> list[str]:
    """validateResourceRequirements, for resources where IsOvercommitAllowed is false (extended resources
    such as nvidia.com/gpu or vpc.amazonaws.com/efa, and hugepages): a request needs a limit ("Limit must
    be set for non overcommitable resources") and must equal it ("must be equal to <name> limit of ...")."""
    out = []
    limits = _map(_map(c.get("resources")).get("limits"))
    for name, raw in defaulted_requests(c).items():
        if overcommit_allowed(name):
            continue
        if name not in limits:
            out.append(f"resources.limits.{name}: Limit must be set for non overcommitable resources "
                       f"(requested {raw})")
            continue
        req, lim = parse_quantity(raw), parse_quantity(limits[name])
        if req is not None and lim is not None and req != lim:
            out.append(f"resources.requests.{name}: {raw}: must be equal to {name} limit of {limits[name]}")
    return out


def check_request_within_limit(c: dict[str, Any], spec: dict[str, Any]) -> list[str]:
    """validateResourceRequirements, overcommittable resources (cpu, memory, ephemeral-storage):
    "must be less than or equal to <name> limit of ..."."""
    out = []
    limits = _map(_map(c.get("resources")).get("limits"))
    for name, raw in defaulted_requests(c).items():
        if not overcommit_allowed(name) or name not in limits:
            continue
        req, lim = parse_quantity(raw), parse_quantity(limits[name])
        if req is not None and lim is not None and req > lim:
            out.append(f"resources.requests.{name}: {raw}: must be less than or equal to {name} limit of "
                       f"{limits[name]}")
    return out


def check_hugepages_need_cpu_or_memory(c: dict[str, Any], spec: dict[str, Any]) -> list[str]:
    """validateResourceRequirements: a container with hugepages in its limits or requests and neither cpu
    nor memory in either is Forbidden: "HugePages require cpu or memory"."""
    res = _map(c.get("resources"))
    names = set(_map(res.get("limits"))) | set(_map(res.get("requests")))
    huge = sorted(n for n in names if is_hugepages(n))
    if huge and not names & {"cpu", "memory"}:
        return [f"resources: HugePages require cpu or memory (it requests {', '.join(huge)} and neither cpu "
                f"nor memory)"]
    return []


def _repeated(items: list[dict[str, Any]], key: str) -> list[str]:
    """Each text value of `key` that an earlier item already has, in order. A value of another type is
    unreadable: the schema check refuses it, so it is skipped here (never hashed, never a crash)."""
    seen: set[str] = set()
    out = []
    for item in items:
        value = item.get(key)
        if not isinstance(value, str) or not value:
            continue
        if value in seen:
            out.append(value)
        seen.add(value)
    return out


def check_unique_port_names(c: dict[str, Any], spec: dict[str, Any]) -> list[str]:
    """validateContainerPorts: a named port appears once per container (field.Duplicate)."""
    return [f"ports: Duplicate value: port name {n!r}" for n in _repeated(_list(c.get("ports")), "name")]


def check_mounts_name_a_volume(c: dict[str, Any], spec: dict[str, Any]) -> list[str]:
    """ValidateVolumeMounts: every volumeMounts[].name must name one of the pod's volumes (IsMatchedVolume;
    field.NotFound)."""
    volumes: set[str] = {v["name"] for v in _list(spec.get("volumes")) if isinstance(v.get("name"), str)}
    return [f"volumeMounts: Not found: {m.get('name')!r} (mounted at {m.get('mountPath')}) is not one of the "
            f"pod's volumes {sorted(volumes)}"
            for m in _list(c.get("volumeMounts")) if isinstance(m.get("name"), str) and m["name"] not in volumes]


def check_unique_mount_paths(c: dict[str, Any], spec: dict[str, Any]) -> list[str]:
    """ValidateVolumeMounts: each mountPath once per container ("must be unique")."""
    return [f"volumeMounts: mountPath {p!r}: must be unique"
            for p in _repeated(_list(c.get("volumeMounts")), "mountPath")]


def check_env_set_once(c: dict[str, Any], spec: dict[str, Any]) -> list[str]:
    """Ours, stricter than upstream: pkg/api/pod/warnings.go only warns ("hides previous definition of
    ...") and the kubelet keeps the last value, so a duplicated NCCL_NET or FI_PROVIDER silently overrides
    the fabric's. Refused here so the value a pod runs with is the one it states once."""
    return [f"env: {n!r} is set more than once (the API server only warns; the last value wins)"
            for n in _repeated(_list(c.get("env")), "name")]


CONTAINER_RULES: dict[str, ContainerRule] = {
    RESOURCE_NAME: check_resource_names,
    RESOURCE_QUANTITY: check_resource_quantities,
    EXTENDED_REQUEST_EQUALS_LIMIT: check_extended_request_equals_limit,
    REQUEST_WITHIN_LIMIT: check_request_within_limit,
    HUGEPAGES_NEED_CPU_OR_MEMORY: check_hugepages_need_cpu_or_memory,
    UNIQUE_PORT_NAMES: check_unique_port_names,
    MOUNT_NAMES_A_VOLUME: check_mounts_name_a_volume,
    UNIQUE_MOUNT_PATHS: check_unique_mount_paths,
    ENV_VAR_SET_ONCE: check_env_set_once,
}


# --------------------------------------------------------------------------------- pod rules
# Each takes the pod spec and returns (container name or "", problem) pairs.
PodRule = Callable[[dict[str, Any]], list[tuple[str, str]]]


def check_containers_required(spec: dict[str, Any]) -> list[tuple[str, str]]:
    """validateContainers: an empty containers list is Required."""
    return [] if _list(spec.get("containers")) else [("", "containers: Required value")]


def check_unique_container_names(spec: dict[str, Any]) -> list[tuple[str, str]]:
    """validateContainers and validateInitContainers: names unique across containers and initContainers
    (native sidecars included; field.Duplicate)."""
    containers = _list(spec.get("containers")) + _list(spec.get("initContainers"))
    return [(n, f"name: Duplicate value: {n!r} (containers and initContainers share names)")
            for n in _repeated(containers, "name")]


def check_unique_volume_names(spec: dict[str, Any]) -> list[tuple[str, str]]:
    """ValidateVolumes: each volume name once (field.Duplicate)."""
    return [("", f"volumes: Duplicate value: {n!r}") for n in _repeated(_list(spec.get("volumes")), "name")]


POD_RULES: dict[str, PodRule] = {
    CONTAINERS_REQUIRED: check_containers_required,
    UNIQUE_CONTAINER_NAMES: check_unique_container_names,
    UNIQUE_VOLUME_NAMES: check_unique_volume_names,
}

RULES = tuple(POD_RULES) + tuple(CONTAINER_RULES)


@dataclass(frozen=True)
class Finding:
    rule: str
    container: str     # "" for a pod-level rule
    detail: str


def check_pod_spec(spec: dict[str, Any]) -> list[Finding]:
    """Every rule on one pod spec (containers and initContainers)."""
    out: list[Finding] = []
    for rule, fn in POD_RULES.items():
        out += [Finding(rule, c, d) for c, d in fn(spec)]
    for c in all_containers(spec):
        for crule, cfn in CONTAINER_RULES.items():
            out += [Finding(crule, str(c.get("name", "?")), d) for d in cfn(c, spec)]
    return out


# --------------------------------------------------------------------------------- finding pod specs
# multinode/podspecs.py (imports nothing of ours: config and credentials use it too)


def _fabric_policies(objects: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The Kyverno MutatingPolicies the stack renders (the fabric injection, and any a user wrote), in apply order.
    Legacy kyverno.io/v1 ClusterPolicies are not evaluated here (the policy pack reads their device counts)."""
    from .manifests import kyverno
    return [o for o in objects if kyverno.is_cel_policy(o, kyverno.MUTATING_KIND)]


def effective_spec(ref: PodSpecRef, policies: list[dict[str, Any]], memo: Any = None) -> dict[str, Any] | None:
    """The pod spec after the rendered fabric policies mutate the Pod (None when none applies): computed
    by evaluating the policies' CEL (manifests.effective_pod), not a copy of their logic. `memo`: an
    effective_pod.TemplateMemo of these policies, shared with plan's effective-pod writer (the result is then
    shared too: read only)."""
    from .manifests.effective_pod import apply_policies_to_template
    # the webhook sees the Pod after SetDefaults_Pod (requests from limits). Only the containers lists and the
    # containers and resources that get requests are copied: apply_policies_to_template copies the template
    # before it patches it, and the rest of `spec` is read here, never changed.
    spec = dict(ref.spec)
    for key in ("initContainers", "containers"):
        if not isinstance(spec.get(key), list):
            continue
        containers = spec[key] = list(spec[key])
        for i, c in enumerate(containers):
            if isinstance(c, dict) and isinstance(c.get("resources"), dict) and _map(c["resources"].get("limits")):
                c = containers[i] = {**c, "resources": dict(c["resources"])}
                c["resources"]["requests"] = defaulted_requests(c)
    template = {"metadata": ref.metadata, "spec": spec}
    out = memo.apply(template) if memo is not None else apply_policies_to_template(template, policies)
    return out["spec"] if out["spec"] != spec else None


def object_label(obj: dict[str, Any]) -> str:
    meta = _map(obj.get("metadata"))
    ns = f"{meta['namespace']}/" if meta.get("namespace") else ""
    return f"{obj.get('kind', '?')} {ns}{meta.get('name', '?')}"


def findings(objects: list[dict[str, Any]], memo: Any = None) -> list[dict[str, Any]]:
    """Mandatory violations for every pod spec of the rendered objects and for each pod after the fabric
    policies: one per (object, pod spec, container, rule, problem). `memo`: an effective_pod.TemplateMemo of
    the objects' MutatingPolicies (plan shares one with its effective-pod writer), else none is kept."""
    policies = _fabric_policies(objects)
    if memo is not None and memo.policies != policies:
        memo = None               # a memo of other policies would give other pods: evaluate these
    out: list[dict[str, Any]] = []
    for obj in objects:
        for ref in pod_specs(obj):
            variants = [("", ref.spec)]
            try:
                eff = effective_spec(ref, policies, memo)
            except (AttributeError, KeyError, TypeError, ValueError):
                # a field of a type the fabric policy cannot read (the API server refuses such a pod, and the
                # schema check names the field): check the pod as written only
                eff = None
            if eff is not None:
                variants.append((" after the fabric policy", eff))
            seen = set()
            for suffix, spec in variants:
                for f in check_pod_spec(spec):
                    if (f.rule, f.container, f.detail) in seen:
                        continue          # the same problem before and after injection: report it once
                    seen.add((f.rule, f.container, f.detail))
                    if f.rule == ENV_VAR_SET_ONCE and not suffix:
                        continue          # in the object itself: the pack's env-defined-once reports it
                    who = f"container {f.container!r}" if f.container else "pod"
                    out.append({
                        "policy": f"pod-admission/{f.rule}", "enforcementLevel": "mandatory",
                        "resource": object_label(obj), "type": obj.get("kind", ""), "urn": "",
                        "rule": f.rule, "container": f.container, "podSpec": ref.where + suffix,
                        "message": (f"{ref.where}{suffix}, {who}: {f.detail}. The API server would refuse "
                                    f"this pod (rule {f.rule}; {VALIDATION_GO})"
                                    if f.rule != ENV_VAR_SET_ONCE else
                                    f"{ref.where}{suffix}, {who}: {f.detail} (rule {f.rule})"),
                    })
    return out
