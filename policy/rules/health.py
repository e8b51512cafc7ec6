"""Gangs avoid bad nodes (issue 34): no gang pod tolerates a node health taint.

A quarantined node (NVSentinel cordons it by default; Kubernetes marks a cordon as node.kubernetes.io/unschedulable)
or a node the lifecycle controller marks not-ready / unreachable must not take, or keep, a gang pod: one bad node
stalls the whole gang. The keys and their sources live in multinode/health.py. A toleration with an empty key and
operator Exists tolerates every taint, these included. A not-ready / unreachable toleration of at most 300 s is
Kubernetes' own default for every pod (DefaultTolerationSeconds) and is not reported.
"""
from __future__ import annotations

from collections.abc import Iterator

from multinode import health

from .. import objects
from ..engine import MANDATORY, Context, Resource, Rule

RULE = "gang-pods-tolerate-no-health-taint"


def check_no_health_toleration(res: Resource, ctx: Context) -> Iterator[str]:
    if not res.is_k8s:
        return
    for g in objects.gangs(res.props, res.name):
        for role in g.gpu_roles:
            keys = health.tolerated_health_taints(health.pod_spec_tolerations(role.spec))
            if not keys:
                continue
            what = ", ".join("every taint (operator Exists with no key)" if k == "*" else k for k in keys)
            yield (f"{res.label}: the {role.name} pods of {g.name} tolerate {what}: a node quarantined for a GPU or "
                   f"fabric fault (cordoned, tainted) or NotReady would still take or keep a gang pod, and one bad "
                   f"node stalls the whole gang. Remove the toleration (tolerate only the keys you mean, e.g. "
                   f"nvidia.com/gpu; health taints: {', '.join(health.HEALTH_TAINTS)}); docs/preflight.md")
            break


RULES = [
    Rule(RULE,
         "No pod of a gang tolerates a node health taint (node.kubernetes.io/unschedulable, nvidia.com/gpu-error, "
         "node.kubernetes.io/not-ready or unreachable beyond Kubernetes' 300 s default), nor every taint "
         "(operator Exists with no key): a quarantined or failed node never joins or keeps a gang.",
         MANDATORY, check_no_health_toleration),
]
