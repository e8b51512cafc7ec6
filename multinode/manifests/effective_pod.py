"""The pod Kubernetes runs after the Kyverno fabric MutatingPolicy has mutated it, computed by evaluating the
policy itself: its matchConditions and each JSONPatch mutation's CEL (multinode.manifests.cel, cel-cpp), the
operations applied with RFC 6902 semantics (multinode.manifests.jsonpatch), each mutation on the pod the one
before produced (kyverno.mutate). There is no second copy of the fabric logic here: change an expression in the
rendered policy and the effective pod changes with it. `plan` writes the result per workload role, from the
policies the stack renders.
"""
from __future__ import annotations

import copy
import re
from typing import Any

from ..fabric import FabricProfile
from . import cel, jsonpatch, kyverno


def apply_policy_to_pod(pod: dict[str, Any], policy: dict[str, Any]) -> dict[str, Any]:
    """A Pod dict (apiVersion/kind/metadata/spec) after one MutatingPolicy (unchanged when it does not match)."""
    return kyverno.mutate(policy, pod)


class Prepared:
    """A list of policies with what does not depend on the pod worked out once: the CEL MutatingPolicies that
    take Pod CREATEs, in order, the matchConditions they share (evaluated at once per pod, cel.prefetch), and
    per policy its reading (_Reading) when it has the plain shape a plan renders."""

    def __init__(self, policies: list[dict[str, Any]]) -> None:
        self.policies = policies
        self.mutating = [p for p in policies
                         if kyverno.is_cel_policy(p, kyverno.MUTATING_KIND) and kyverno.selects_pod_creates(p)]
        # all of them, also on a pod a policy patched (only the later policies' are needed then, but each
        # distinct list is compiled once: ~1.3 ms each, one per pool, more than evaluating the whole list costs)
        self.conditions = kyverno.shared_conditions(self.mutating)
        self.readings = [_Reading.of(p) for p in self.mutating]
        # (JSONPatch expression, key of what it reads) -> its operations: see _Reading.mutate. Per Prepared, so
        # per plan.
        self.patches: dict[tuple[str, Any], list[Any]] = {}
        # each shared condition with the paths of the pod it reads, and (condition, what they hold) -> its result
        self.condition_paths = {e: read_paths(e) for e in self.conditions}
        self.condition_results: dict[tuple[str, Any], Any] = {}
        # the bindings bind() last made whose conditions were not all kept, with their keys (see keep)
        self._unkept: tuple[Any, dict[str, tuple[str, Any]]] | None = None

    def bind(self, pod: dict[str, Any], binds: bool) -> Any:
        """kyverno.pod_bindings(pod, self.conditions), with the conditions' results kept per plan: a condition's
        value is a function of what the paths it reads hold (read_paths, projection) when the pod binds (`binds`:
        cel.convertible holds for it), and every pod of a pool asks the same (its fabric label, its pool's node
        selector). When each one's result is kept, none is evaluated (and the pod is not converted to CEL: the
        bindings convert it only if asked to evaluate); else all are, in the one list prefetch compiles when there
        are two or more, and kept, or, one alone, as matching evaluates it (keep)."""
        self._unkept = None
        if not self.conditions or not binds:
            return kyverno.pod_bindings(pod, self.conditions)
        bindings = kyverno.pod_bindings(pod, later=True)
        read: dict[tuple[tuple[str, ...], ...], tuple[Any, ...]] = {}
        keys: dict[str, tuple[str, Any]] = {}
        for e, paths in self.condition_paths.items():
            what = read.get(paths)
            if what is None:
                what = read[paths] = projection(pod, paths)
            keys[e] = (e, what)
        kept = self.condition_results
        if all(k in kept for k in keys.values()):
            bindings.results.update((e, kept[k]) for e, k in keys.items())
            return bindings
        cel.prefetch(bindings, self.conditions)
        self._unkept = (bindings, keys)
        self.keep(bindings)
        return bindings

    def keep(self, bindings: Any) -> None:
        """Keep the shared conditions' results evaluated so far on `bindings` (from bind): prefetch evaluates none
        when the policies share one condition (every pool's policy has the same multi-node-pod condition), and
        matching then evaluates it on its own."""
        if self._unkept is not None and self._unkept[0] is bindings:
            kept, keys = self.condition_results, self._unkept[1]
            kept.update((k, bindings.results[e]) for e, k in keys.items() if e in bindings.results)


class _Reading:
    """A MutatingPolicy of the plain shape (no spec.variables; matchConditions and mutations lists of objects, each
    condition's `expression` a string, each mutation a JSONPatch whose `expression` is a string): its object
    selector, condition and mutation expressions read out once. kyverno.matches_selected and
    kyverno.mutate_matched_in_place read them from the policy per pod, through the general code that also serves
    spec.variables and malformed policies; for the plain shape they come to the same evaluations in the same order,
    so `apply_policies_to_template` takes this path (and the general one for any other policy)."""
    __slots__ = ("selector", "conditions", "mutations", "paths")

    def __init__(self, selector: Any, conditions: tuple[str, ...], mutations: tuple[str, ...]) -> None:
        self.selector = selector
        self.conditions = conditions
        self.mutations = mutations
        self.paths = tuple(read_paths(e) for e in mutations)

    @classmethod
    def of(cls, policy: dict[str, Any]) -> _Reading | None:
        spec = policy.get("spec")
        if not isinstance(spec, dict) or spec.get("variables"):
            return None
        conds, muts = spec.get("matchConditions") or [], spec.get("mutations") or []
        if not isinstance(conds, list) or not isinstance(muts, list):
            return None
        if not all(isinstance(c, dict) and isinstance(c.get("expression"), str) for c in conds):
            return None
        if not all(isinstance(m, dict) and m.get("patchType") == "JSONPatch" and isinstance(m.get("jsonPatch"), dict)
                   and isinstance(m["jsonPatch"].get("expression"), str) for m in muts):
            return None
        mc = spec.get("matchConstraints")
        selector = mc.get("objectSelector") if isinstance(mc, dict) else None
        return cls(selector if isinstance(selector, dict) else None, tuple(c["expression"] for c in conds),
                   tuple(m["jsonPatch"]["expression"] for m in muts))

    def matches(self, pod: dict[str, Any], bindings: Any) -> bool:
        """kyverno.matches_selected(policy, pod, bindings) for this policy (bindings: the pod's, not None)."""
        if self.selector is not None:
            labels = (pod.get("metadata") or {}).get("labels")
            if not kyverno.selector_matches(self.selector, labels if isinstance(labels, dict) else {}):
                return False
        results = bindings.results
        for e in self.conditions:
            if (results[e] if e in results else cel.evaluate(e, bindings)) is not True:
                return False
        return True

    def mutate(self, pod: dict[str, Any], patches: dict[tuple[str, Any], list[Any]], keys: dict[Any, Any],
               binds: bool) -> tuple[dict[str, Any], bool]:
        """kyverno.mutate_matched_in_place(policy, pod) for this policy: the pod the caller owns, patched in
        place, and whether it binds (cel.convertible: `binds` says so of the pod given; after a patch it still does
        when the values put in do). The patch values are fresh from CEL and read by nothing else (the bindings that
        cached them are dropped with the patch), so they go into the pod without a copy.

        A JSONPatch expression's operations are a function of what the paths it reads hold (read_paths,
        projection) when the pod binds: they are kept in `patches` under that key and a pod whose paths hold the
        same takes them from there (copied) without binding the pod to CEL again. `keys` (the caller's, per pod:
        read paths -> key) holds the keys taken so far, carried through each patch (patched_key) instead of taken
        afresh. Two pod templates of one workload (a Volcano master and worker) differ in a label only, and the
        pod admission checks (requests defaulted from limits) differs from the written one only where no fabric
        expression reads (init containers): the fabric policy's expressions read object.spec.containers.
        A pod that does not bind is neither served nor kept for: binding converts the whole pod, so a value CEL
        refuses anywhere in it, read or not, fails every expression, and a result kept for a pod with the same
        projection must not hide that."""
        bindings = None
        for expression, paths in zip(self.mutations, self.paths, strict=True):
            kept = key = None
            if binds:
                if paths in keys:
                    key = keys[paths]
                else:
                    key = keys[paths] = projection(pod, paths)
                if key is not None:
                    kept = patches.get((expression, key))
            if kept is not None:
                ops = kept
            else:
                if bindings is None:
                    bindings = kyverno.pod_bindings(pod)
                ops = cel.evaluate(expression, bindings)
                if not isinstance(ops, list):
                    raise cel.CelError("a JSONPatch expression must return a list of JSONPatch")
                if key is not None:
                    patches[(expression, key)] = kept = ops
            if ops:
                for p, k in keys.items():             # before the patch: the values go into the pod uncopied
                    keys[p] = patched_key(k, ops)
                # the pod still binds when the values put in do and nest at most ~20 deep (_PATCH_DEPTH): the pod
                # is checked to 100 levels, so after 140 patches it is at most 3,000 deep, which the engine binds
                binds = binds and cel.convertible(ops, depth=_PATCH_DEPTH)
                pod = jsonpatch.apply_in_place(pod, ops, copy_values=kept is not None)   # kept ones serve again
                bindings = None
        return pod, binds


_PATCH_DEPTH = 80               # cel.convertible(ops, depth=80): the values nest at most 20 deep
_OBJECT = re.compile(r"\bobject\b")
_SPEC = re.compile(r"\.spec\b")
_IDENT = r"[A-Za-z_][A-Za-z0-9_]*"
# one step of a read path: a field select (.f or .?f), or an index by a plain string literal ('k' or "k" in [..]
# or [?..], without escapes, so its text is the key)
_STEP = re.compile(r"\.\??(" + _IDENT + r")|\[\??(?:'([^'\\\n]*)'|\"([^\"\\\n]*)\")\]")
# after a member name: it is a call (`.filter(c, ...)`), spaces and comments between
_CALL = re.compile(r"(?:\s|//[^\n]*)*\(")


def read_paths(expression: str) -> tuple[tuple[str, ...], ...]:
    """The paths of the pod a CEL expression can read: for each occurrence of the word `object` in its text, the
    fields and string keys selected from it straight after (object.metadata.?labels[?'k'] reads ('metadata',
    'labels', 'k')). A member call ends the path before its name (object.spec.containers.map(...) reads ('spec',
    'containers'): all of it), and so does anything else (an index by a computed value, a space, a comment).
    An occurrence that selects nothing (object passed whole, a macro variable or cel.bind name `object`, the
    word in a string or a comment) reads () = the whole pod. Reading more than the expression does is safe: the
    expression's value is a function of what these paths hold (projection) when the pod binds, since the other
    variables of a plain-shape policy are the same for every pod (see reads_spec_only)."""
    out: dict[tuple[str, ...], None] = {}
    for m in _OBJECT.finditer(expression):
        path: list[str] = []
        pos = m.end()
        while (step := _STEP.match(expression, pos)) is not None:
            field, single, double = step.groups()
            if field is not None and _CALL.match(expression, step.end()):
                break
            path.append(field if field is not None else single if single is not None else double)
            pos = step.end()
        out[tuple(path)] = None
    return tuple(out)


def projection(pod: Any, paths: tuple[tuple[str, ...], ...]) -> tuple[Any, ...]:
    """An exact key of what the paths read in the pod: per path the repr of the value at its end, or where it
    stops, (depth,) for a missing key and (depth, repr) for a value that is not a map (a select into it fails by
    what it is)."""
    out: list[Any] = []
    for path in paths:
        node = pod
        for i, k in enumerate(path):
            if type(node) is not dict:
                out.append((i, repr(node)))
                break
            if k not in node:
                out.append((i,))
                break
            node = node[k]
        else:
            out.append((len(path), repr(node)))
    return tuple(out)


def reads_spec_only(expression: str) -> bool:
    """True when the CEL expression can read nothing of the pod but object.spec: every occurrence of the word
    `object` in its text (strings and comments included) is followed at once by `.spec` as a whole word.
    Conservative: `object.?spec`, `object .spec`, `has(object.metadata)`, `cel.bind(o, object, ...)`, `map(object,
    ...)` or 'object' in a string all say False. The other variables a plain-shape policy sees are the same for
    every pod (request: a Pod CREATE; oldObject and namespaceObject null; no spec.variables), so such an
    expression's value is a function of the pod's spec."""
    return all(_SPEC.match(expression, m.end()) for m in _OBJECT.finditer(expression))


def patched_key(key: Any, ops: list[Any]) -> Any:
    """The key of what some paths of the pod hold (projection) after `ops` were applied to a pod whose paths held
    what `key` says: what a path holds after a JSON patch is a function of what it held before and the operations
    (an operation elsewhere leaves it as it was, one on the path's parent or the whole document sets it from its
    value), except a copy or move, whose value may come from another path: then None (the key is taken afresh).
    Taken before the operations are applied (their values then become part of the pod); one that is not an object
    fails the patch. Binding: a pod that binds and then takes the same operations as the pod a patch was kept for
    still binds when it reaches that key (the values the operations put in bound in the other pod)."""
    if key is None or any(not isinstance(op, dict) or op.get("op") in ("copy", "move") for op in ops):
        return None
    return (key, repr(ops))


def apply_policies_to_template(template: dict[str, Any], policies: list[dict[str, Any]],
                               prepared: Prepared | None = None) -> dict[str, Any]:
    """A pod template ({metadata, spec}) after every MutatingPolicy in `policies`, in order. `prepared`: the
    same policies' Prepared, kept by a caller applying them to many templates."""
    prepared = prepared if prepared is not None and prepared.policies is policies else Prepared(policies)
    pod: dict[str, Any] = {"apiVersion": "v1", "kind": "Pod",
                           "metadata": jsonpatch.copy_doc(template.get("metadata") or {}),
                           "spec": jsonpatch.copy_doc(template.get("spec") or {})}
    bindings = None           # the pod's CEL bindings, shared by the policies until one patches the pod
    keys: dict[Any, Any] = {}  # read paths -> the key of what they hold in the pod (see _Reading.mutate)
    # the pod binds to CEL (cel.convertible), checked once here and carried through the patches (_Reading.mutate)
    binds = cel.convertible(pod)
    for i, policy in enumerate(prepared.mutating):
        # the same as pod = kyverno.mutate(policy, pod), without its copy per policy: `pod` is this function's own
        # copy (made above), so a policy that does not match leaves it as it is and one that does patches it
        if bindings is None:
            bindings = prepared.bind(pod, binds)
        reading = prepared.readings[i]
        if reading is not None:
            matched = reading.matches(pod, bindings)
            prepared.keep(bindings)
            if matched:
                pod, binds = reading.mutate(pod, prepared.patches, keys, binds)
                bindings = None
        else:
            matched = kyverno.matches_selected(policy, pod, bindings)
            prepared.keep(bindings)
            if matched:
                pod = kyverno.mutate_matched_in_place(policy, pod)
                bindings, keys = None, {}
                binds = cel.convertible(pod)
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
