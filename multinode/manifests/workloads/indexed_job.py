"""Training without Volcano: an Indexed batch/v1 Job (one pod per node, completion index = node rank)
behind a headless Service, torchrun with the c10d rendezvous at pod 0, the shape of the Kubernetes
multi-node training recipe (kubernetes.recipes/recipes/ai/multi-node-training-kubernetes):
`--node_rank=$JOB_COMPLETION_INDEX --rdzv_backend=c10d --rdzv_endpoint=<job>-0.<subdomain>:29400`,
`subdomain` + `setHostnameAsFQDN: true`, and a headless Service on the rendezvous port (the recipe's fix
for "workers not finding each other").

Indexed Job pods get the host name `<job>-<index>` and, with `subdomain` = the headless Service, the DNS
name `<job>-<index>.<service>`; the index is in JOB_COMPLETION_INDEX (Kubernetes docs: Job, completion
mode Indexed). A failed rank makes the others fail on their next collective; the Job recreates each failed
index (backoffLimit counts every pod failure, so it allows maxRetry failures of the whole group).

Gang: torchrun waits for every rank, so a half-placed Job holds GPUs and never starts. The pods are
admitted whole by the stack's gang scheduler (config check: a multi-node indexed-job needs one):
- Volcano (addons.volcano): a scheduling.volcano.sh/v1beta1 PodGroup with minMember = nodes, joined by the
  pod annotation scheduling.k8s.io/group-name and schedulerName volcano (Volcano's
  KubeGroupNameAnnotationKey; volcano.sh/docs "PodGroup"). Volcano then creates no PodGroup of its own.
- else KAI (addons.kai): schedulerName kai-scheduler and the Job annotation kai.scheduler/batch-min-member =
  nodes; KAI's pod grouper otherwise gives a plain Job minMember 1 (KAI docs/batch/README.md "Standard
  Jobs"). The annotation comes from KAI-Scheduler PR #1308; that the pinned KAI release reads it is not
  verified here (only a cluster confirms it).
"""
from __future__ import annotations

from typing import Any

from ...config import StackConfig, Workload
from . import common as c
from . import training

VOLCANO_GROUP_ANNOTATION = "scheduling.k8s.io/group-name"
KAI_MIN_MEMBER_ANNOTATION = "kai.scheduler/batch-min-member"


def gang_scheduler(cfg: StackConfig) -> str:
    """volcano | kai | "" (none in the stack)."""
    if cfg.addons.volcano.enabled:
        return "volcano"
    if cfg.addons.kai.enabled:
        return "kai"
    return ""


def build(cfg: StackConfig, w: Workload) -> c.WorkloadManifests:
    gpn = cfg.gpus_per_node(w)
    secrets = c.model_secrets(cfg, w)
    endpoint = f"{w.name}-0.{w.name}:{training.C10D_PORT}"
    script = training.launch_script(cfg, w, endpoint, node_rank="$JOB_COMPLETION_INDEX")
    cont = c.with_requests(c.container(
        "trainer", c.image(cfg, w), command=c.shell(script), env=training.env(cfg, w, secrets), gpus=gpn,
        mounts=c.volume_mounts(cfg) + c.dataset_mount(w) + training.deepspeed_mount(w),
        ports=[{"name": "rdzv", "containerPort": training.C10D_PORT}]), w)
    gang = gang_scheduler(cfg)
    spec = c.pod_spec(cfg, w, [cont], secrets=secrets, restart_policy="Never",
                      extra_volumes=training.deepspeed_volume(w),
                      scheduler_name={"volcano": "volcano", "kai": "kai-scheduler"}.get(gang))
    spec["subdomain"] = w.name
    spec["setHostnameAsFQDN"] = True      # the recipe's: the pod's hostname is its <job>-<i>.<subdomain>... name
    pod_meta: dict[str, Any] = {"labels": c.fabric_labels(w, "rank")}
    job_meta = c.metadata(w)
    extra: list = []
    if gang == "volcano":
        pod_meta["annotations"] = {VOLCANO_GROUP_ANNOTATION: w.name}
        extra.append({"apiVersion": "scheduling.volcano.sh/v1beta1", "kind": "PodGroup", "metadata": c.metadata(w),
                      "spec": {"minMember": w.nodes, "queue": c.volcano_queue(cfg, w)}})
    elif gang == "kai":
        job_meta["annotations"] = {KAI_MIN_MEMBER_ANNOTATION: str(w.nodes)}
        from .grove import KAI_QUEUE_LABEL
        job_meta["labels"][KAI_QUEUE_LABEL] = w.queue or (cfg.queues[0].name if cfg.queues else "default")
    job: dict[str, Any] = {
        "apiVersion": "batch/v1", "kind": "Job", "metadata": job_meta,
        "spec": {
            "completionMode": "Indexed",
            "completions": w.nodes,
            "parallelism": w.nodes,
            "backoffLimit": w.max_retry * w.nodes,
            "template": {"metadata": pod_meta, "spec": spec},
        },
    }
    svc = c.service(w, w.name, {"batch.kubernetes.io/job-name": w.name},
                    [{"name": "rdzv", "port": training.C10D_PORT, "targetPort": training.C10D_PORT}],
                    headless=True)
    objects = [o for o in (training.deepspeed_configmap(w),) if o] + extra + [svc, job]
    return c.WorkloadManifests(w.name, w.kind, w.namespace, objects, secrets)
