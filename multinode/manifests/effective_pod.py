"""The pod Kubernetes runs after the Kyverno fabric policy has mutated it, computed in Python.

`apply_profile` builds the same ClusterPolicy `kyverno.cluster_policy` emits and applies its
strategic-merge patches to the pod the way Kyverno does: the per-container patch is evaluated with
the same JMESPath (device count = ceil(GPUs x devices-per-node / GPUs-per-node)) for each container
whose nvidia.com/gpu limit is > 0, and merged with Kubernetes' strategic-merge keys for Pods
(containers/initContainers/volumes by name, env by name, volumeMounts by mountPath; maps merge;
other lists are replaced; a `+(name)` key is Kyverno's add-if-not-present anchor). capabilities.add is such a
list: the policy's value for it is a JMESPath union of the container's own list and the fabric's capabilities
(kyverno.capabilities_add_expr), evaluated here exactly as for the device count, so user capabilities are kept
and ours appear once.
`plan` writes the result per workload role.
"""
from __future__ import annotations

import copy
from typing import Any

from ..fabric import FabricProfile
from . import kyverno

# Strategic-merge list keys for the Pod fields the policies patch (k8s.io/api core/v1 patchMergeKey).
_MERGE_KEYS = {"containers": "name", "initContainers": "name", "volumes": "name", "env": "name",
               "volumeMounts": "mountPath", "ports": "containerPort"}


def _anchor(key: Any) -> str | None:
    """The field name of Kyverno's add-if-not-present anchor `+(name)`, else None."""
    if isinstance(key, str) and key.startswith("+(") and key.endswith(")"):
        return key[2:-1]
    return None


def _strip_anchors(value: Any) -> Any:
    """A patch subtree added where the target has nothing: anchors become plain keys."""
    if isinstance(value, dict):
        return {(_anchor(k) or k): _strip_anchors(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_strip_anchors(v) for v in value]
    return copy.deepcopy(value)


def _merge(target: Any, patch: Any, field: str | None = None) -> Any:
    if isinstance(target, dict) and isinstance(patch, dict):
        merged = dict(target)
        for k, v in patch.items():
            name = _anchor(k)
            if name is not None:                      # +(name): add only when the target has no such field
                if name not in target:
                    merged[name] = _strip_anchors(v)
                continue
            merged[k] = _merge(target.get(k), v, k) if k in target else _strip_anchors(v)
        return merged
    if isinstance(target, list) and isinstance(patch, list) and field in _MERGE_KEYS:
        key = _MERGE_KEYS[field]
        out: list[Any] = [copy.deepcopy(x) for x in target]
        index = {x.get(key): i for i, x in enumerate(out) if isinstance(x, dict)}
        for item in patch:
            i = index.get(item.get(key)) if isinstance(item, dict) else None
            if i is None:
                out.append(_strip_anchors(item))
            else:
                out[i] = _merge(out[i], item)
        return out
    return copy.deepcopy(patch)


def apply_policy_to_pod(pod: dict[str, Any], policy: dict[str, Any]) -> dict[str, Any]:
    """Apply a fabric ClusterPolicy's mutate rules to a Pod dict (apiVersion/kind/metadata/spec)."""
    if not kyverno.matches(policy, pod):
        return copy.deepcopy(pod)
    out = copy.deepcopy(pod)
    for rule in policy["spec"]["rules"]:
        m = rule.get("mutate")
        if not m:
            continue
        if "preconditions" in rule and not kyverno.conditions_hold(rule["preconditions"], {"request": {"object": out}}):
            continue
        if "patchStrategicMerge" in m:
            # Kyverno substitutes {{ }} variables in a pod-level patch too (e.g. the Multus networks count)
            out = _merge(out, kyverno.substitute(m["patchStrategicMerge"], {"request": {"object": out}}))
        for fe in m.get("foreach", []):
            elements = kyverno.evaluate(fe["list"], {"request": {"object": out}}) or []
            for element in elements:
                data = {"request": {"object": out}, "element": element}
                if "preconditions" in fe and not kyverno.conditions_hold(fe["preconditions"], data):
                    continue
                out = _merge(out, kyverno.substitute(fe["patchStrategicMerge"], data))
    return out


def apply_profile_to_template(template: dict[str, Any], profile: FabricProfile,
                              webhook_timeout_seconds: int = 15) -> dict[str, Any]:
    """A pod template ({metadata, spec}) after the profile's policy: metadata and spec."""
    if not profile.enabled:
        return copy.deepcopy(template)
    policy = kyverno.cluster_policy(profile, webhook_timeout_seconds)
    pod = {"apiVersion": "v1", "kind": "Pod", "metadata": copy.deepcopy(template.get("metadata") or {}),
           "spec": copy.deepcopy(template.get("spec") or {})}
    mutated = apply_policy_to_pod(pod, policy)
    return {"metadata": mutated["metadata"], "spec": mutated["spec"]}


def apply_profile(pod_spec: dict[str, Any], profile: FabricProfile) -> dict[str, Any]:
    """The pod spec after the fabric policy, for a pod carrying the fabric label."""
    from ..pools import FABRIC_POD_LABEL, FABRIC_POD_LABEL_VALUE
    template = {"metadata": {"labels": {FABRIC_POD_LABEL: FABRIC_POD_LABEL_VALUE}}, "spec": pod_spec}
    spec: dict[str, Any] = apply_profile_to_template(template, profile)["spec"]
    return spec
