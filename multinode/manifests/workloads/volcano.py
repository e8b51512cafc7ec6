"""Training on Volcano (batch.volcano.sh/v1alpha1 Job): a master task (rank-0 pod) and a worker task
(the other nodes - 1 pods), each pod running torchrun with --nproc_per_node = its GPUs and the c10d
rendezvous at the master pod.

- minAvailable = every pod: the gang is admitted whole or waits (no half-started training holding GPUs).
- plugins: `svc` (headless Service + pod host names `<job>-<task>-<i>.<job>`), `env`, and `pytorch`
  (MASTER_ADDR `<job>-master-0.<job>`, MASTER_PORT, WORLD_SIZE, RANK; volcano-sh/volcano
  pkg/controllers/job/plugins/distributed-framework/pytorch). torchrun's rendezvous endpoint is that
  same master address, spelled out so the command does not depend on the plugin's env order.
- recovery, finest first (Volcano actions: RestartTask restarts only the task's pods; RestartJob all):
  a worker pod failed or evicted -> RestartTask on the worker task; the master keeps the c10d store, its
  torchrun agent re-forms the group when the new workers join (--max_restarts = maxRetry).
  The master pod failed or evicted -> RestartJob: the rendezvous store dies with it, so restarting the
  whole job is the only way. Master TaskCompleted -> CompleteJob. maxRetry bounds the restarts.
"""
from __future__ import annotations

from typing import Any

from ...config import StackConfig, Workload
from . import common as c
from . import training

MASTER, WORKER = "master", "worker"


def master_host(w: Workload) -> str:
    return f"{w.name}-{MASTER}-0.{w.name}"


def build(cfg: StackConfig, w: Workload) -> c.WorkloadManifests:
    gpn = cfg.gpus_per_node(w)
    secrets = c.model_secrets(cfg, w)
    endpoint = f"{master_host(w)}:{training.RDZV_PORT}"
    script = training.launch_script(cfg, w, endpoint, max_restarts=w.max_retry)
    env = training.env(cfg, w, secrets)

    def template(role: str) -> dict[str, Any]:
        cont = c.with_requests(c.container(
            "trainer", c.image(cfg, w), command=c.shell(script), env=env, gpus=gpn,
            mounts=c.volume_mounts(cfg) + c.dataset_mount(w) + training.deepspeed_mount(w),
            ports=[{"name": "rdzv", "containerPort": training.RDZV_PORT}]), w)
        spec = c.pod_spec(cfg, w, [cont], secrets=secrets, restart_policy="Never",
                          extra_volumes=training.deepspeed_volume(w))
        return {"metadata": {"labels": c.fabric_labels(w, role)}, "spec": spec}

    failed = ["PodFailed", "PodEvicted"]

    def restart(action: str) -> dict[str, Any]:
        # recoveryTimeout (issue 18): Volcano's policy `timeout`, "the grace period for controller to take
        # actions; default nil (take action immediately)" (volcano.sh/apis batch/v1alpha1 LifecyclePolicy):
        # a pod that comes back within it costs no restart.
        pol: dict[str, Any] = {"events": failed, "action": action}
        if w.recovery_timeout:
            pol["timeout"] = w.recovery_timeout
        return pol

    tasks: list[dict[str, Any]] = [{
        "name": MASTER, "replicas": 1, "minAvailable": 1, "template": template(MASTER),
        "policies": [restart("RestartJob"), {"event": "TaskCompleted", "action": "CompleteJob"}],
    }]
    if w.nodes > 1:
        tasks.append({
            "name": WORKER, "replicas": w.nodes - 1, "minAvailable": w.nodes - 1, "template": template(WORKER),
            "policies": [restart("RestartTask")],
        })
    spec: dict[str, Any] = {
        "schedulerName": "volcano",
        "queue": c.volcano_queue(cfg, w),
        "minAvailable": w.nodes,
        "maxRetry": w.max_retry,
        "plugins": {"svc": [], "env": [],
                    "pytorch": [f"--master={MASTER}", f"--worker={WORKER}", f"--port={training.RDZV_PORT}"]},
        "tasks": tasks,
    }
    if w.priority_class_name:
        # job priority (Volcano "how to configure priorityclass for job": tasks without their own class
        # take the job's, PreemptionPolicy included)
        spec["priorityClassName"] = w.priority_class_name
    if w.network_topology:
        spec["networkTopology"] = {"mode": w.network_topology.mode,
                                   "highestTierAllowed": w.network_topology.highest_tier_allowed}
    job = {"apiVersion": "batch.volcano.sh/v1alpha1", "kind": "Job", "metadata": c.metadata(w), "spec": spec}
    objects = [o for o in (training.deepspeed_configmap(w),) if o] + [job]
    return c.WorkloadManifests(w.name, w.kind, w.namespace, objects, secrets)
