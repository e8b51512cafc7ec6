"""service-name-not-taken-by-controller: no Service of the stack takes the name a gang controller gives its own Service.

- LeaderWorkerSet: LWS names its headless Service after the set (sigs.k8s.io/lws@v0.10.0
  pkg/controllers/leaderworkerset_controller.go:214-215; the leader StatefulSet's serviceName, :848, so the pods'
  subdomain) and creates it only when no Service has that name (pkg/utils/controller/controller_utils.go:33-65
  CreateHeadlessServiceIfNotExists: Get, Create only on NotFound). A Service of ours under that name keeps
  LWS's out: `$(LWS_LEADER_ADDRESS)` (`<set>-<group>.<set>.<namespace>`, pkg/utils/pod/pod_utils.go:143-146)
  has no DNS record, and the workers wait for a leader they never find. LWS's examples name the client Service
  `<set>-leader` (docs/examples/vllm/GPU/lws.yaml:81), as multinode renders it (manifests/workloads/lws.py).
- MPIJob: the MPI operator names its Service for the workers after the MPIJob (kubeflow/mpi-operator@v0.8.0
  pkg/controller/mpi_job_controller.go:1384-1390) and, finding one it does not own, stops the job before any pod
  (:907-918, event ErrResourceExists). multinode renders a NIM MPIJob's endpoint as `<name>-api`.
Hand-written Services count the same as ours: the rule reads every Service and every set / job of the stack.
"""
from __future__ import annotations

from collections.abc import Iterator

from .. import objects
from ..engine import MANDATORY, Context, Resource, Rule

SERVICE = ("", "Service")
OWNERS = {
    ("leaderworkerset.x-k8s.io", "LeaderWorkerSet"): (
        "LWS creates its headless Service (the pods' subdomain) under the set's name only when that name is free, "
        "so LWS_LEADER_ADDRESS would never resolve", "leader"),
    ("kubeflow.org", "MPIJob"): (
        "the MPI operator names its own Service for the workers after the MPIJob and stops a job whose Service it "
        "does not own (ErrResourceExists), creating no pod", "api"),
}


def _key(props: dict) -> tuple[str, str]:
    return (str(objects.get(props, "metadata", "namespace") or "default"),
            str(objects.get(props, "metadata", "name") or ""))


def check_service_names(resources: list[Resource], ctx: Context) -> Iterator[tuple[Resource | None, str]]:
    owned: dict[tuple[str, str], tuple[str, str, str]] = {}
    for r in resources:
        if r.is_k8s and r.kind in OWNERS:
            ns, name = _key(r.props)
            if name:
                owned[(ns, name)] = (r.kind[1], *OWNERS[r.kind])
    if not owned:
        return
    for r in resources:
        if not (r.is_k8s and r.kind == SERVICE):
            continue
        ns, name = _key(r.props)
        hit = owned.get((ns, name))
        if hit is None:
            continue
        kind, why, suffix = hit
        yield r, (f"{r.label}: metadata.name {name!r} is the name of the {kind} {ns}/{name}: {why}. Rename the "
                  f"Service (metadata.name, e.g. {name}-{suffix}) and point its clients at the new name")


RULES = [
    Rule("service-name-not-taken-by-controller",
         "No Service has the name of a LeaderWorkerSet or MPIJob in its namespace: LWS's headless Service and the "
         "MPI operator's worker Service take that name (issue 40).",
         MANDATORY, check_service_names, scope="stack"),
]
