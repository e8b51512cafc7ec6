"""Training on Kubeflow Trainer v2 (trainer.kubeflow.org/v1alpha1): a TrainJob and its own
ClusterTrainingRuntime, torchrun on every node with the static rendezvous the trainer hands out.

Kubeflow Trainer v2 replaced PyTorchJob (training-operator v1) with TrainJob + a training runtime
(kubeflow/trainer v2.3.0, CRDs in schemas/training-operator/v2.3.0/): the runtime holds a JobSet
template; the TrainJob names the runtime and sets the per-job numbers. What we render:

- a ClusterTrainingRuntime `<namespace>-<name>` (cluster-scoped, so the namespace is in the name) for
  this workload alone, shaped like upstream's `torch-distributed` runtime (manifests/base/runtimes):
  `mlPolicy.torch`, one replicated job `node` labelled `trainer.kubeflow.org/trainjob-ancestor-step:
  trainer` (the torch plugin finds the trainer job by that label and injects PET_NNODES,
  PET_NPROC_PER_NODE, PET_NODE_RANK, PET_MASTER_ADDR, PET_MASTER_PORT into its container `node`).
  Unlike upstream's generic runtime it carries the whole pod: our fabric labels (the Kyverno fabric
  policies match them), node selector and tolerations of the pool, the RWX checkpoint volume, the
  secrets' env, the image and the launch script; a shared runtime could not, because TrainJob's
  runtimePatches only accept some pod fields (no resources, no scheduler name).
- gang scheduling: with Volcano, `podGroupPolicy.volcano` (the trainer creates a Volcano PodGroup whose
  minMember covers every node) and the queue as the template annotation
  `scheduling.volcano.sh/queue-name` (Trainer's Volcano docs); pods use schedulerName volcano. Without
  Volcano the config refuses a multi-node trainjob (a half-placed job would hold GPUs and never start).
- the TrainJob: runtimeRef to that runtime, `trainer.numNodes`, `trainer.numProcPerNode` (= GPUs per
  node) and `trainer.resourcesPerNode` (the GPUs), so the numbers the policy pack checks are on the
  TrainJob itself; the trainer overrides the runtime container's resources with resourcesPerNode (the
  same values here).

The controller comes from the add-on addons.trainer (chart kubeflow-trainer, with its JobSet
dependency; manifests/addons.py). Not verified here (no cluster): that the trainer accepts a runtime
carrying the full pod, and the PET_* names at v2.3.0 (read from upstream docs of v2.x).
"""
from __future__ import annotations

from typing import Any

from ...config import StackConfig, Workload
from . import common as c
from . import training

API = "trainer.kubeflow.org/v1alpha1"
NODE = "node"                                         # the trainer's replicated job and container name
ANCESTOR_LABEL = "trainer.kubeflow.org/trainjob-ancestor-step"
FRAMEWORK_LABEL = "trainer.kubeflow.org/framework"
VOLCANO_QUEUE_ANNOTATION = "scheduling.volcano.sh/queue-name"
# torchrun's static rendezvous from what the torch plugin injects (PET_* are also torchrun's own env names)
RDZV = "$PET_MASTER_ADDR:$PET_MASTER_PORT"


def runtime_name(w: Workload) -> str:
    return f"{w.namespace}-{w.name}"


def build(cfg: StackConfig, w: Workload) -> c.WorkloadManifests:
    gpn = cfg.gpus_per_node(w)
    secrets = c.model_secrets(cfg, w)
    script = training.launch_script(cfg, w, RDZV, node_rank="$PET_NODE_RANK", static=True)
    cont = c.with_requests(c.container(
        NODE, c.image(cfg, w), command=c.shell(script), env=training.env(cfg, w, secrets), gpus=gpn,
        mounts=c.volume_mounts(cfg) + c.dataset_mount(w) + training.deepspeed_mount(w),
        ports=[{"name": "rdzv", "containerPort": training.RDZV_PORT}]), w)
    volcano = cfg.addons.volcano.enabled
    spec = c.pod_spec(cfg, w, [cont], secrets=secrets, restart_policy="Never",
                      extra_volumes=training.deepspeed_volume(w), scheduler_name="volcano" if volcano else None)
    pod_meta: dict[str, Any] = {"labels": c.fabric_labels(w, NODE)}
    runtime_spec: dict[str, Any] = {
        "mlPolicy": {"numNodes": w.nodes, "torch": {}},
        "template": {"spec": {"replicatedJobs": [{
            "name": NODE,
            "template": {"metadata": {"labels": {ANCESTOR_LABEL: "trainer"}},
                         # as indexed-job: backoffLimit counts every pod failure of the Job's numNodes pods
                         "spec": {"backoffLimit": w.max_retry * w.nodes,
                                  "template": {"metadata": pod_meta, "spec": spec}}},
        }]}},
    }
    if volcano:
        runtime_spec["podGroupPolicy"] = {"volcano": {}}
        runtime_spec["template"]["metadata"] = {"annotations": {VOLCANO_QUEUE_ANNOTATION: c.volcano_queue(cfg, w)}}
    runtime = {"apiVersion": API, "kind": "ClusterTrainingRuntime",
               "metadata": {"name": runtime_name(w), "labels": {**c.labels(w), FRAMEWORK_LABEL: "torch"}},
               "spec": runtime_spec}
    job = {"apiVersion": API, "kind": "TrainJob", "metadata": c.metadata(w),
           "spec": {"runtimeRef": {"apiGroup": "trainer.kubeflow.org", "kind": "ClusterTrainingRuntime",
                                   "name": runtime_name(w)},
                    "trainer": {"numNodes": w.nodes, "numProcPerNode": gpn,
                                "resourcesPerNode": c.gpu_resources(gpn)}}}
    objects = [o for o in (training.deepspeed_configmap(w),) if o] + [runtime, job]
    return c.WorkloadManifests(w.name, w.kind, w.namespace, objects, secrets)
