"""Training with mpirun / Horovod on a Kubeflow MPIJob (kubeflow.org/v2beta1, mpi-operator v0.8).

The launcher runs as a worker too (`runLauncherAsWorker`), so every pod holds the same GPUs and carries
the fabric label; `slotsPerWorker` = GPUs per pod puts one rank per GPU. Ranks started over ssh do not
inherit the pod's env, so mpirun forwards (-x) the fabric env Kyverno injected into the launcher
(NCCL_*, FI_*, ... : whatever multinode/fabric.py defines) plus the workload's own env names.
The mpi-operator is not one of this project's add-ons: install it on the cluster (docs/workloads.md).
"""
from __future__ import annotations

from typing import Any

from ...config import StackConfig, Workload
from . import common as c
from . import training

# env name prefixes forwarded to remote ranks (fabric env comes from the Kyverno policies)
FORWARD_PREFIXES = ("NCCL_", "FI_", "UCX_", "OMPI_MCA_btl", "LD_LIBRARY_PATH", "CUDA_", "HF_", "CHECKPOINT_DIR",
                    "RESUME_FROM", "PATH")


def forward_env_snippet(extra_names: list[str]) -> str:
    """Bash that builds MPI_FORWARD="-x NAME ..." from the current env (prefix match) + extra names."""
    pattern = "|".join(FORWARD_PREFIXES)
    names = " ".join(extra_names)
    return (
        'MPI_FORWARD=""\n'
        f"for v in $(env | cut -d= -f1 | grep -E '^({pattern})' | sort -u) {names}; do "
        'MPI_FORWARD="$MPI_FORWARD -x $v"; done\n'
    )


def build(cfg: StackConfig, w: Workload) -> c.WorkloadManifests:
    gpn = cfg.gpus_per_node(w)
    secrets = c.model_secrets(cfg, w)
    ranks = w.nodes * gpn
    env = training.env(cfg, w, secrets)
    forward = [e["name"] for e in env if not e["name"].startswith(("CHECKPOINT_DIR", "HF_"))]
    run = " ".join([w.script or ""] + list(w.script_args))
    launcher_script = (
        forward_env_snippet(forward)
        + f"exec mpirun --allow-run-as-root -np {ranks} --bind-to none --map-by slot "
          f"$MPI_FORWARD {' '.join(w.extra_args)} {run}\n")

    def template(role: str, command: list[str]) -> dict[str, Any]:
        cont = c.container("mpi", c.image(w), command=command, env=env, gpus=gpn, mounts=c.volume_mounts(cfg))
        spec = c.pod_spec(cfg, w, [cont], secrets=secrets,
                          scheduler_name="volcano" if cfg.addons.volcano.enabled else None)
        return {"metadata": {"labels": c.fabric_labels(w, role)}, "spec": spec}

    specs: dict[str, Any] = {
        "Launcher": {"replicas": 1, "restartPolicy": "OnFailure",
                     "template": template("launcher", c.shell(launcher_script))},
    }
    if w.nodes > 1:
        specs["Worker"] = {"replicas": w.nodes - 1, "restartPolicy": "OnFailure",
                           "template": template("worker", ["/usr/sbin/sshd", "-De"])}
    run_policy: dict[str, Any] = {"backoffLimit": w.max_retry, "cleanPodPolicy": "Running"}
    if cfg.addons.volcano.enabled:
        # mpi-operator creates a Volcano PodGroup when started with --gang-scheduling=volcano
        run_policy["schedulingPolicy"] = {"minAvailable": w.nodes, "queue": c.volcano_queue(cfg, w)}
    job = {
        "apiVersion": "kubeflow.org/v2beta1", "kind": "MPIJob", "metadata": c.metadata(w),
        "spec": {"slotsPerWorker": gpn, "runLauncherAsWorker": True, "mpiImplementation": "OpenMPI",
                 "launcherCreationPolicy": "WaitForWorkersReady", "runPolicy": run_policy,
                 "mpiReplicaSpecs": specs},
    }
    return c.WorkloadManifests(w.name, w.kind, w.namespace, [job], secrets)
