"""The pod Kubernetes runs after the Kyverno fabric MutatingPolicy has mutated it, computed by evaluating the
policy itself: its matchConditions and each JSONPatch mutation's CEL (multinode.manifests.cel, cel-cpp), the
operations applied with RFC 6902 semantics (multinode.manifests.jsonpatch), each mutation on the pod the one
before produced (kyverno.mutate). There is no second copy of the fabric logic here: change an expression in the
rendered policy and the effective pod changes with it. `plan` writes the result per workload role, from the
policies the stack renders.
"""
from __future__ import annotations

import copy
from typing import Any

from ..fabric import FabricProfile
from . import kyverno


def apply_policy_to_pod(pod: dict[str, Any], policy: dict[str, Any]) -> dict[str, Any]:
    """A Pod dict (apiVersion/kind/metadata/spec) after one MutatingPolicy (unchanged when it does not match)."""
    return kyverno.mutate(policy, pod)


class Prepared:
    """A list of policies with what does not depend on the pod worked out once: the CEL MutatingPolicies that
    take Pod CREATEs, in order, and the matchConditions they share (evaluated at once per pod, cel.prefetch)."""

    def __init__(self, policies: list[dict[str, Any]]) -> None:
        self.policies = policies
        self.mutating = [p for p in policies
                         if kyverno.is_cel_policy(p, kyverno.MUTATING_KIND) and kyverno.selects_pod_creates(p)]
        self.conditions = kyverno.shared_conditions(self.mutating)


def apply_policies_to_template(template: dict[str, Any], policies: list[dict[str, Any]],
                               prepared: Prepared | None = None) -> dict[str, Any]:
    """A pod template ({metadata, spec}) after every MutatingPolicy in `policies`, in order. `prepared`: the
    same policies' Prepared, kept by a caller applying them to many templates."""
    prepared = prepared if prepared is not None and prepared.policies is policies else Prepared(policies)
    pod: dict[str, Any] = {"apiVersion": "v1", "kind": "Pod",
                           "metadata": copy.deepcopy(template.get("metadata") or {}),
                           "spec": copy.deepcopy(template.get("spec") or {})}
    bindings = None           # the pod's CEL bindings, shared by the policies until one patches the pod
    for policy in prepared.mutating:
        # the same as pod = kyverno.mutate(policy, pod), without its copy per policy: `pod` is this function's own
        # copy (made above), so a policy that does not match leaves it as it is and one that does patches it
        if bindings is None:
            bindings = kyverno.pod_bindings(pod, prepared.conditions)
        if kyverno.matches_selected(policy, pod, bindings):
            pod = kyverno.mutate_matched_in_place(policy, pod)
            bindings = None
    return {"metadata": pod["metadata"], "spec": pod["spec"]}


class TemplateMemo:
    """apply_policies_to_template for one list of policies, each distinct template evaluated once. `plan` asks for
    the same pod twice (admission.findings checks every pod spec after the policies, write_effective_pods writes
    the fabric ones); one memo per plan makes the second ask free. The key is the repr of the template's metadata
    and spec (what apply_policies_to_template reads): it keeps key order and types, so only a template that would
    give the very same output hits. A template whose evaluation raises is not stored (the next ask raises again).
    The result is shared between the callers: read it, do not change it."""

    def __init__(self, policies: list[dict[str, Any]]) -> None:
        self.policies = policies
        self._prepared = Prepared(policies)
        self._done: dict[str, dict[str, Any]] = {}

    def apply(self, template: dict[str, Any]) -> dict[str, Any]:
        key = repr((template.get("metadata") or {}, template.get("spec") or {}))
        out = self._done.get(key)
        if out is None:
            out = self._done[key] = apply_policies_to_template(template, self.policies, self._prepared)
        return out


def apply_profile_to_template(template: dict[str, Any], profile: FabricProfile,
                              webhook_timeout_seconds: int = 15) -> dict[str, Any]:
    """A pod template after the MutatingPolicy rendered for this profile's pool (no pool condition)."""
    if not profile.enabled:
        return copy.deepcopy(template)
    return apply_policies_to_template(template, [kyverno.mutating_policy(profile, webhook_timeout_seconds)])


def apply_profile(pod_spec: dict[str, Any], profile: FabricProfile) -> dict[str, Any]:
    """The pod spec after the fabric policy, for a pod carrying the fabric label."""
    from ..pools import FABRIC_POD_LABEL, FABRIC_POD_LABEL_VALUE
    template = {"metadata": {"labels": {FABRIC_POD_LABEL: FABRIC_POD_LABEL_VALUE}}, "spec": pod_spec}
    spec: dict[str, Any] = apply_profile_to_template(template, profile)["spec"]
    return spec
