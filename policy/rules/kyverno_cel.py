"""Kyverno CEL policies compile where they will run: in the Kubernetes CEL environment, typed.

A MutatingPolicy or ValidatingPolicy whose CEL the Kubernetes environment refuses is worse than none: with
`failurePolicy: Fail` every pod it matches is refused at admission (a run-time error) or the policy never
becomes Ready (a compile error), and the fabric is not injected. An untyped evaluation does not see it
(issue 27: `orValue(0)` on a string quantity, heterogeneous map literals). The check is
multinode.manifests.celtypes: the Pod's declared types and cel-go's homogeneous aggregate literals; Kyverno's own
CLI runs the same policies in `make conformance`.
"""
from __future__ import annotations

from collections.abc import Iterator

from multinode.manifests import celtypes

from ..engine import MANDATORY, Context, Resource, Rule

NAME = "kyverno-cel-compiles"
_KINDS = {"MutatingPolicy", "ValidatingPolicy", "NamespacedMutatingPolicy", "NamespacedValidatingPolicy"}


def check_cel_compiles(res: Resource, ctx: Context) -> Iterator[str]:
    props = res.props
    if not res.is_k8s or props.get("kind") not in _KINDS \
            or not str(props.get("apiVersion", "")).startswith("policies.kyverno.io/"):
        return
    for path, problem in celtypes.policy_problems(props):
        yield (f"{res.label}: {path} {problem}. Kubernetes (Kyverno compiles these policies with its CEL "
               f"environment) would refuse it: with failurePolicy Fail the pods it matches are not created")


RULES = [
    Rule(NAME,
         "Every CEL expression of a Kyverno MutatingPolicy / ValidatingPolicy type-checks in the Kubernetes CEL "
         "environment: against the Pod's declared types (quantities are strings) and with homogeneous list and "
         "map literals.",
         MANDATORY, check_cel_compiles),
]
