"""The node health taints a gang must never tolerate, with their sources (issue 34). Pure.

A multi-node gang is as healthy as its worst node. What keeps a bad node out of a gang is a taint (or a cordon) on
the node and a pod that does not tolerate it. The keys:

  node.kubernetes.io/unschedulable   NoSchedule. A cordon (node.spec.unschedulable = true) is mirrored as this taint
      by the node lifecycle controller (k8s.io/kubernetes@v1.33.13 pkg/controller/nodelifecycle/
      node_lifecycle_controller.go:552). NVSentinel's fault quarantine CORDONS by default: every rule set of its
      chart sets `cordon.shouldCordon: true` and leaves `taint:` commented out (NVIDIA/NVSentinel@1197f6a8
      distros/kubernetes/nvsentinel/charts/fault-quarantine/values.yaml:106-115, lines counted in the stored
      copy). So with NVSentinel's defaults, this is the key a quarantined GPU node carries.
      (DaemonSet pods tolerate it by design: k8s.io/kubernetes@v1.33.13 pkg/controller/daemon/util/
      daemonset_util.go:90; they are node agents, not gang members.)
  nvidia.com/gpu-error               NoSchedule. The taint NVSentinel's chart documents, commented out, for a rule
      set that taints (same file, line 115: key "nvidia.com/gpu-error", value "fatal"). Refused too, so a stack that
      turns NVSentinel's taint on is covered.
  node.kubernetes.io/not-ready, node.kubernetes.io/unreachable   NoExecute, put on by the node lifecycle controller
      when the kubelet stops reporting (k8s.io/api@v0.33.13 core/v1/well_known_taints.go:22,27). The
      DefaultTolerationSeconds admission plugin gives EVERY pod that does not say otherwise a toleration of both for
      300 s (k8s.io/kubernetes@v1.33.13 plugin/pkg/admission/defaulttolerationseconds/admission.go:35-39,67-70).
      For a gang that means: a node that goes NotReady keeps its gang pod bound for 5 minutes before eviction; the
      other pods of the gang sit blocked in their collective meanwhile (NCCL waits on the dead peer until its own
      timeout), then the controller restarts the gang (LWS recreates the group; Volcano restarts the job). That
      default is Kubernetes', not ours: our pods add no toleration for either key, and a pod that tolerates them
      longer (or forever: no tolerationSeconds) is refused by the pack.

Tolerating is checked the way the scheduler matches (k8s.io/api core/v1 toleration.go ToleratesTaint): an empty key
with operator Exists tolerates every taint, whatever its effect.
"""
from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

UNSCHEDULABLE = "node.kubernetes.io/unschedulable"
NOT_READY = "node.kubernetes.io/not-ready"
UNREACHABLE = "node.kubernetes.io/unreachable"
NVSENTINEL_GPU_ERROR = "nvidia.com/gpu-error"

HEALTH_TAINTS: dict[str, str] = {
    UNSCHEDULABLE: "a cordoned node (NVSentinel's fault quarantine cordons by default: NVIDIA/NVSentinel@1197f6a8 "
                   "distros/kubernetes/nvsentinel/charts/fault-quarantine/values.yaml:106-109; the cordon is "
                   "mirrored as this taint by k8s.io/kubernetes@v1.33.13 pkg/controller/nodelifecycle/"
                   "node_lifecycle_controller.go:552)",
    NVSENTINEL_GPU_ERROR: "NVSentinel's documented quarantine taint (same values.yaml:113-115, commented out by "
                          "default)",
    NOT_READY: "the node lifecycle controller: kubelet not Ready (k8s.io/api@v0.33.13 core/v1/"
               "well_known_taints.go:22)",
    UNREACHABLE: "the node lifecycle controller: node unreachable (k8s.io/api@v0.33.13 core/v1/"
                 "well_known_taints.go:27)",
}
# Kubernetes' own default (DefaultTolerationSeconds admission plugin): every pod tolerates these for 300 s
DEFAULT_TOLERATION_SECONDS = 300
DEFAULT_TOLERATED = (NOT_READY, UNREACHABLE)


def tolerated_health_taints(tolerations: Iterable[Any]) -> list[str]:
    """The health taint keys these tolerations tolerate ('*' for a toleration of every taint), in order.

    A not-ready/unreachable toleration whose tolerationSeconds is at most Kubernetes' default (300 s) is what every
    pod gets anyway and is not reported; a longer or unbounded one is."""
    out: list[str] = []
    for t in tolerations:
        if not isinstance(t, Mapping):
            continue
        key = t.get("key")
        op = t.get("operator") or "Equal"
        if not key:
            if op == "Exists":
                out.append("*")
            continue
        if key not in HEALTH_TAINTS:
            continue
        seconds = t.get("tolerationSeconds")
        if key in DEFAULT_TOLERATED and isinstance(seconds, int) and not isinstance(seconds, bool) \
                and seconds <= DEFAULT_TOLERATION_SECONDS:
            continue
        out.append(str(key))
    return list(dict.fromkeys(out))


def pod_spec_tolerations(spec: Mapping[str, Any]) -> list[Any]:
    tol = spec.get("tolerations")
    return list(tol) if isinstance(tol, list) else []
