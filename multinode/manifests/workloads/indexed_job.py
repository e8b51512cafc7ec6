"""Training without Volcano: an Indexed batch/v1 Job (one pod per node, completion index = node rank)
behind a headless Service, torchrun with the static rendezvous at pod 0.

Indexed Job pods get the host name `<job>-<index>` and, with `subdomain` = the headless Service, the DNS
name `<job>-<index>.<service>`; the index is in JOB_COMPLETION_INDEX (Kubernetes docs: Job, completion
mode Indexed). There is no gang scheduler here: pods start as nodes allow, and torchrun waits for all.
A failed rank makes the others fail on their next collective; the Job recreates each failed index
(backoffLimit counts every pod failure, so it allows maxRetry failures of the whole group).
"""
from __future__ import annotations

from typing import Any, Dict

from ...config import StackConfig, Workload
from . import common as c
from . import training


def build(cfg: StackConfig, w: Workload) -> c.WorkloadManifests:
    gpn = cfg.gpus_per_node(w)
    secrets = c.model_secrets(cfg, w)
    endpoint = f"{w.name}-0.{w.name}:{training.RDZV_PORT}"
    script = training.launch_script(cfg, w, endpoint, node_rank="$JOB_COMPLETION_INDEX")
    cont = c.container("trainer", c.image(w), command=c.shell(script), env=training.env(cfg, w, secrets),
                       gpus=gpn, mounts=c.volume_mounts(cfg) + training.deepspeed_mount(w),
                       ports=[{"name": "rdzv", "containerPort": training.RDZV_PORT}])
    spec = c.pod_spec(cfg, w, [cont], secrets=secrets, restart_policy="Never",
                      extra_volumes=training.deepspeed_volume(w))
    spec["subdomain"] = w.name
    job: Dict[str, Any] = {
        "apiVersion": "batch/v1", "kind": "Job", "metadata": c.metadata(w),
        "spec": {
            "completionMode": "Indexed",
            "completions": w.nodes,
            "parallelism": w.nodes,
            "backoffLimit": w.max_retry * w.nodes,
            "template": {"metadata": {"labels": c.fabric_labels(w, "rank")}, "spec": spec},
        },
    }
    svc = c.service(w, w.name, {"batch.kubernetes.io/job-name": w.name},
                    [{"name": "rdzv", "port": training.RDZV_PORT, "targetPort": training.RDZV_PORT}],
                    headless=True)
    objects = [o for o in (training.deepspeed_configmap(w),) if o] + [svc, job]
    return c.WorkloadManifests(w.name, w.kind, w.namespace, objects, secrets)
