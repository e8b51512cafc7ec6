"""Plain-dict builders for the model workloads, one module per kind:

  lws-inference     lws.py          LeaderWorkerSet + leader Service (vLLM, SGLang, NIM)
  grove-inference   grove.py        Grove PodCliqueSet (frontend, prefill, decode) + frontend Service
  volcano-training  volcano.py      Volcano Job (master + worker tasks, torchrun)
  indexed-job       indexed_job.py  Indexed batch Job + headless Service (torchrun)
  mpijob            mpijob.py       Kubeflow MPIJob v2beta1 (mpirun / Horovod)
  trainjob          trainjob.py     Kubeflow Trainer v2 TrainJob + its ClusterTrainingRuntime (torchrun)
  nccl-test         nccl_test.py    Volcano Job running nccl-tests all_reduce_perf + verdict ConfigMap
  dynamo            dynamo.py       NVIDIA Dynamo DynamoGraphDeployment (the operator renders the pods)

`build(cfg, workload)` returns a `WorkloadManifests` (objects in apply order + the Secrets to create
from Pulumi secrets). Nothing here imports Pulumi.
"""
from __future__ import annotations

from collections.abc import Callable

from ...config import StackConfig, Workload
from ..jsonpatch import copy_doc
from . import common as c
from . import disruption, dynamo, grove, indexed_job, lws, mpijob, nccl_test, preflight, trainjob, volcano
from .common import SecretRef, WorkloadManifests
from .nccl_test import parse_verdict

BUILDERS: dict[str, Callable[[StackConfig, Workload], WorkloadManifests]] = {
    "lws-inference": lws.build,
    "grove-inference": grove.build,
    "volcano-training": volcano.build,
    "indexed-job": indexed_job.build,
    "mpijob": mpijob.build,
    "trainjob": trainjob.build,
    "nccl-test": nccl_test.build,
    "dynamo": dynamo.build,
}

__all__ = ["BUILDERS", "build", "parse_verdict", "SecretRef", "WorkloadManifests"]


def build(cfg: StackConfig, w: Workload) -> WorkloadManifests:
    builder = BUILDERS.get(w.kind)
    if builder is None:
        raise ValueError(f"workload kind {w.kind!r} has no builder (known: {', '.join(BUILDERS)})")
    out = builder(cfg, w)
    if w.env_from:
        _add_env_from(out.objects, c.env_from(w))
    # one PodDisruptionBudget per gang, so a node drain takes one pod of it at a time (disruption.py)
    out.objects = list(out.objects) + disruption.budgets(cfg, w, list(out.objects))
    # issue 34: DCGM diagnostics and an NCCL all-reduce before a multi-node gang starts (preflight.py)
    out.objects = preflight.apply(cfg, w, out.objects)
    # independent copies: builders share small dicts (env lists, labels) between pod templates
    # (copy_doc: copy.deepcopy's result, faster on JSON-like data)
    out.objects = [copy_doc(o) for o in out.objects]
    return out


def _add_env_from(objects: list[dict], sources: list[dict]) -> None:
    """workloads[].envFrom on every container of every pod template the builder rendered (a Dynamo service's
    mainContainer included): the same Secrets and ConfigMaps on the leader, the workers and every role."""
    from ...podspecs import pod_specs
    for obj in objects:
        for ref in pod_specs(obj):
            if ref.where.endswith(".extraPodSpec"):
                main = _extra_pod_spec(obj, ref.where)
                targets = [main.get("mainContainer")] + list(main.get("containers") or [])
            else:
                targets = list(ref.spec.get("containers") or [])
            for cont in targets:
                if isinstance(cont, dict):
                    cont["envFrom"] = [*cont.get("envFrom", []), *[dict(s) for s in sources]]


def _extra_pod_spec(obj: dict, where: str) -> dict:
    """The object's own extraPodSpec at `where` (pod_specs yields a copy of it with mainContainer folded in)."""
    import re
    node: object = obj
    for part in re.findall(r"[^.\[\]]+|\[\d+\]", where):
        node = node[int(part[1:-1])] if part.startswith("[") else node[part]   # type: ignore[index]
    return node  # type: ignore[return-value]
