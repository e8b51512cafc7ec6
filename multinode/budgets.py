"""What the disruption controller makes of a PodDisruptionBudget over a gang, and the form that allows one
disruption of it, per owner (issue 40). Pure; imports nothing of ours, so the manifests
(manifests/workloads/disruption.py renders the budgets), multinode/upgrades.py (predicts the drains) and the pack
(policy/rules/disruption.py judges any budget) share it.

The disruption controller (k8s.io/kubernetes@v1.33.13 pkg/controller/disruption/disruption.go) counts maxUnavailable
and a percentage minAvailable against the summed scale of the selected pods' controllers (getExpectedPodCount :806,
getExpectedScale :848, each owner's scale once), found through finders() :266: ReplicationController, Deployment,
ReplicaSet, StatefulSet, else the owner's scale subresource (getScaleController :368; "<resource> does not implement
the scale subresource" :395 when it has none, "found no controllers for pod" :898) -- an error there makes sync()
call failSafe (:717, :971-987): disruptionsAllowed 0, condition DisruptionAllowed=False reason SyncFailed. An integer
minAvailable takes the selected pods as they are (expectedCount = len(pods), :830). updatePdbStatus :989-1000:
disruptionsAllowed = currentHealthy - desiredHealthy, 0 when negative or when expectedCount is 0.
Kubernetes' docs allow pods of other controllers only `.spec.minAvailable`, and only as an integer
(https://kubernetes.io/docs/tasks/run-application/configure-pdb/, "Arbitrary workloads and arbitrary selectors",
earlier "Arbitrary Controllers and Selectors").
"""
from __future__ import annotations

import math
import re
from dataclasses import dataclass
from typing import Any

# owners with a scale the controller finds (group/kind): the built-in finders, and custom resources whose CRD has a
# scale subresource among those this project reads (schemas/grove grove.io_podcliques.yaml; schemas/training-operator
# kubeflow.org_pytorchjobs.yaml: Worker replicas). Not: batch/v1 Job, batch.volcano.sh Job
# (schemas/volcano batch.volcano.sh_jobs.yaml), kubeflow.org MPIJob (schemas/mpi-operator), TrainJob (status only).
SCALE_OWNERS = frozenset({"apps/Deployment", "apps/ReplicaSet", "apps/StatefulSet", "/ReplicationController",
                          "grove.io/PodClique", "kubeflow.org/PyTorchJob"})
# workload kinds whose gang pods are owned by controllers without a scale: their budget is an integer minAvailable
JOB_LIKE_KINDS = ("volcano-training", "nccl-test", "indexed-job", "trainjob", "mpijob")
# owner of each workload kind's gang pods, as group/kind (lws: two StatefulSets, see owner_sets)
KIND_OWNER = {"volcano-training": "batch.volcano.sh/Job", "nccl-test": "batch.volcano.sh/Job",
              "indexed-job": "batch/Job", "trainjob": "batch/Job", "mpijob": "kubeflow.org/MPIJob",
              "grove-inference": "grove.io/PodClique", "dynamo": "grove.io/PodClique"}


@dataclass(frozen=True)
class PodSet:
    """Pods of one template that a budget selects, and the controller that owns them."""
    pods: int
    owner_kind: str            # group/kind as in SCALE_OWNERS: "batch/Job", "batch.volcano.sh/Job", "apps/StatefulSet"
    owner: str                 # which object of that kind (the controller adds each owner's scale once)
    scale: int | None = None   # the owner's replicas as its scale subresource reports them


def form_for(kind: str, pods: int) -> dict[str, Any]:
    """`budget()`'s keyword for one gang of `pods` pods of a workload kind: the integer min_available = pods - 1
    where the controller cannot count the owners' scale for one gang (Job-like owners; an LWS group), else none
    (maxUnavailable 1)."""
    if kind in JOB_LIKE_KINDS or kind == "lws-inference":
        return {"min_available": pods - 1}
    return {}


def owner_sets(kind: str, pods: int, groups: int = 1) -> list[PodSet]:
    """How the disruption controller sees one gang of `pods` pods of a workload kind (LWS: group 0 of `groups`)."""
    if kind == "lws-inference":
        return [PodSet(1, "apps/StatefulSet", "leaders", groups), PodSet(pods - 1, "apps/StatefulSet", "group-0",
                                                                        pods - 1)]
    owner = KIND_OWNER.get(kind, "batch/Job")
    return [PodSet(pods, owner, kind, pods if owner in SCALE_OWNERS else None)]


def spec_of(form: dict[str, Any]) -> dict[str, Any]:
    """The PodDisruptionBudget spec keys of a form_for() answer."""
    return {"minAvailable": form["min_available"]} if "min_available" in form else {"maxUnavailable": 1}


def _scaled(value: Any, total: int) -> int | None:
    """intstr.GetScaledValueFromIntOrPercent(value, total, roundUp=true); None where it returns an error."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    m = re.fullmatch(r"(\d+)%", str(value))
    return None if m is None else math.ceil(int(m.group(1)) * total / 100)


def allowed_when_whole(spec: dict[str, Any], sets: list[PodSet]) -> tuple[int, str]:
    """(status.disruptionsAllowed, why) the disruption controller writes for a budget over these pods, every one
    Ready (module docstring)."""
    pods = sum(s.pods for s in sets)
    max_unavailable, min_available = spec.get("maxUnavailable"), spec.get("minAvailable")
    if max_unavailable is None and min_available is None:
        return pods, "neither maxUnavailable nor minAvailable"
    if max_unavailable is None and isinstance(min_available, int) and not isinstance(min_available, bool):
        return max(0, pods - min_available), f"minAvailable {min_available} of its {pods} pods"
    form = f"maxUnavailable {max_unavailable}" if max_unavailable is not None else f"minAvailable {min_available}"
    no_scale = sorted({s.owner_kind for s in sets if s.owner_kind not in SCALE_OWNERS})
    if no_scale:
        return 0, (f"{form} is counted against the scale of the pods' controllers and {', '.join(no_scale)} has no "
                   f"scale subresource: the disruption controller fails to sync (DisruptionAllowed=False, reason "
                   f"SyncFailed)")
    expected = sum({s.owner: s.scale or 0 for s in sets}.values())
    scaled = _scaled(max_unavailable if max_unavailable is not None else min_available, expected)
    if scaled is None:
        return 0, f"{form} is neither an integer nor a percentage (SyncFailed)"
    desired = max(0, expected - scaled) if max_unavailable is not None else scaled
    allowed = max(0, pods - desired) if expected > 0 else 0
    return allowed, (f"{form} against its controllers' scale {expected} wants {desired} of its {pods} pods "
                     f"healthy")


def working_form(sets: list[PodSet]) -> str:
    """The budget form that allows exactly one disruption of these pods, whole, for their owners: the integer
    minAvailable always does; maxUnavailable 1 is named too where every owner has a scale and the budget selects all
    of its pods, except StatefulSets (an LWS group's leader StatefulSet holds every group's leader: a set scaled to
    two groups would leave maxUnavailable 1 no disruption)."""
    pods = sum(s.pods for s in sets)
    integer = f"the integer minAvailable: {pods - 1} (its {pods} pods - 1)"
    whole = sum({s.owner: s.scale or 0 for s in sets}.values()) == pods
    if whole and all(s.owner_kind in SCALE_OWNERS and s.owner_kind != "apps/StatefulSet" for s in sets):
        return f"maxUnavailable: 1 (or {integer})"
    return integer
