"""mpirun on a Kubeflow MPIJob (kubeflow.org/v2beta1, mpi-operator v0.8): training (`engine: mpirun`) or
NVIDIA NIM multi-node (`engine: nim`, the NIM guide's fallback where LeaderWorkerSet is unavailable).

The shape is the one the mpi-operator examples and the NIM Helm chart use (kubeflow/mpi-operator
examples/v2beta1; NVIDIA/nim-deploy helm/nim-llm templates/multi_node_deployment.yaml, MPIJob branch):
- a Launcher pod with no GPUs that runs `mpirun` (and so holds the job's logs): it starts nothing on its
  own node, so it carries neither GPUs nor the fabric label (the fabric policies leave it alone);
- `Worker` replicas = the workload's `nodes`, each with the GPUs of one node, running sshd;
- `slotsPerWorker` = GPUs per node and `mpirun -n gpusPerNode x workers`: one rank per GPU;
- `launcherCreationPolicy: WaitForWorkersReady`: mpirun starts once every worker's sshd is up.
The SSH key pair: mpi-operator generates one Secret per MPIJob and mounts it on every pod
(`sshAuthMountPath`); the v2beta1 API has no field to name an existing key Secret (the chart's
`multiNode.existingSSHSecret` applies to its LeaderWorkerSet branch only).

Ranks started over ssh do not inherit the worker pod's env, and the launcher has no fabric env of its
own. So each worker writes the fabric env Kyverno injected into *its* pod (NCCL_*, FI_*, UCX_*, ...:
whatever multinode/fabric.py defines, by prefix) to RANK_ENV_FILE before it starts sshd, and every rank
sources that file before it execs the program. The workload's own env is forwarded from the launcher
with `mpirun -x NAME` (the chart forwards NIM's env the same way).
The mpi-operator is not one of this project's add-ons: install it on the cluster (docs/workloads.md).
"""
from __future__ import annotations

import shlex
from typing import Any

from ... import images, upgrades
from ...config import StackConfig, Workload
from . import common as c
from . import training

# env name prefixes each worker hands to its ranks (the fabric env comes from the Kyverno policies)
FORWARD_PREFIXES = ("NCCL_", "FI_", "UCX_", "OMPI_MCA_btl", "LD_LIBRARY_PATH", "CUDA_", "PATH")
RANK_ENV_FILE = "/tmp/multinode-rank-env.sh"
SSHD = ["/usr/sbin/sshd", "-De"]

# Labels mpi-operator puts on the pods it creates (kubeflow common job labels, mpi-operator
# pkg/controller/mpi_job_controller.go): the NIM Service selects worker 0, where rank 0 serves.
JOB_NAME_LABEL = "training.kubeflow.org/job-name"
REPLICA_TYPE_LABEL = "training.kubeflow.org/replica-type"
REPLICA_INDEX_LABEL = "training.kubeflow.org/replica-index"

# NIM env the chart forwards from the launcher to every rank with -x (nim-deploy helm/nim-llm
# templates/multi_node_deployment.yaml, commit bb84c40, May 2025), plus the parallel sizes this project
# also sets on LWS (lws.py _nim) so the policy pack can read them.
NIM_FORWARDED = ("NIM_CACHE_PATH", "NGC_API_KEY", "NIM_SERVER_PORT", "NIM_NUM_COMPUTE_NODES", "HF_HOME",
                 "NGC_HOME", "NUMBA_CACHE_DIR", "OUTLINES_CACHE_DIR", "NIM_MULTI_NODE",
                 "NIM_TENSOR_PARALLEL_SIZE", "NIM_PIPELINE_PARALLEL_SIZE")
# What the chart execs under mpirun for NIM images newer than 1.1.2 (nim-llm _helpers.tpl
# "nim-llm.multiNodeExec", same commit).
NIM_MULTI_NODE_EXEC = "/opt/nim/start-mpi-cluster.sh"



def nim_service_name(w: Workload) -> str:
    """The Service of a NIM MPIJob's OpenAI endpoint (workload names are at most 40 characters: 44 here)."""
    return f"{w.name}-api"

def forward_env_snippet(extra_names: list[str]) -> str:
    """Bash that builds MPI_FORWARD="-x NAME ..." from the current env (prefix match) + extra names: for a
    launcher that is itself a fabric pod (nccl_test.py's Volcano mpi job)."""
    pattern = "|".join(FORWARD_PREFIXES + ("HF_", "CHECKPOINT_DIR", "RESUME_FROM"))
    names = " ".join(extra_names)
    return (
        'MPI_FORWARD=""\n'
        f"for v in $(env | cut -d= -f1 | grep -E '^({pattern})' | sort -u) {names}; do "
        'MPI_FORWARD="$MPI_FORWARD -x $v"; done\n'
    )


# NIM workers start sshd the chart's way: a host key generated into an emptyDir and a copy of the image's
# sshd_config beside it (nim-llm multi_node_deployment.yaml, MPIJob Worker command; root pods chown
# /var/run/sshd first). SSH_AUTH_DIR is the chart's sshDir for root, mpi-operator's sshAuthMountPath.
SSH_CONFS = "/ssh-confs"
SSH_AUTH_DIR = "/root/.ssh"


def backoff_limit(w: Workload) -> int:
    """runPolicy.backoffLimit (upgrades.mpijob_backoff_limit: day two's restart model reads the same value)."""
    return upgrades.mpijob_backoff_limit(w)


def worker_script(nim: bool = False) -> str:
    """Save the fabric env of this pod for the ranks ssh will start here, then run sshd."""
    pattern = "|".join(FORWARD_PREFIXES)
    save = f"export -p | grep -E '^declare -x ({pattern})' > {RANK_ENV_FILE}\n"
    if not nim:
        return save + f"exec {' '.join(SSHD)}\n"
    return (save + "chown root:root /var/run/sshd\n"
            f"cp /etc/ssh/sshd_config {SSH_CONFS}/.sshd_config\n"
            f"/usr/bin/ssh-keygen -f {SSH_CONFS}/hostkey.rsa -N '' -t rsa\n"
            f"exec {' '.join(SSHD)} -f {SSH_CONFS}/.sshd_config -h {SSH_CONFS}/hostkey.rsa\n")


def rank_command(argv: list[str]) -> str:
    """What mpirun starts on each slot: source the worker's fabric env, then exec the program."""
    inner = f". {RANK_ENV_FILE}; exec \"$@\""
    return f"bash -c {shlex.quote(inner)} rank " + " ".join(a if "$" in a else shlex.quote(a) for a in argv)


def mpirun_line(ranks: int, forwarded: list[str], argv: list[str], extra: list[str], mpirun: str = "mpirun") -> str:
    forward = " ".join(f"-x {n}" for n in forwarded)
    return (f"{mpirun} --allow-run-as-root -n {ranks} -bind-to none -map-by slot {forward} "
            f"{' '.join(extra)} {rank_command(argv)}").replace("  ", " ")


def _nim_env(cfg: StackConfig, w: Workload, tp: int, pp: int) -> list[dict[str, Any]]:
    """The NIM env of the chart's MPIJob branch (cache, port, node count) plus the parallel sizes."""
    cache = f"{c.model_cache_dir(cfg)}/nim"
    return [
        {"name": "NIM_MULTI_NODE", "value": "1"},
        {"name": "NIM_TENSOR_PARALLEL_SIZE", "value": str(tp)},
        {"name": "NIM_PIPELINE_PARALLEL_SIZE", "value": str(pp)},
        {"name": "NIM_NUM_COMPUTE_NODES", "value": str(w.nodes)},
        {"name": "NIM_CACHE_PATH", "value": cache},
        {"name": "NGC_HOME", "value": f"{cache}/ngc"},
        {"name": "HF_HOME", "value": f"{cache}/huggingface"},
        {"name": "NUMBA_CACHE_DIR", "value": "/tmp/numba"},
        {"name": "OUTLINES_CACHE_DIR", "value": "/tmp/outlines"},
        {"name": "NIM_SERVER_PORT", "value": str(w.port)},
    ]


def build(cfg: StackConfig, w: Workload) -> c.WorkloadManifests:
    gpn = cfg.gpus_per_node(w)
    nim = w.engine == "nim"
    secrets = c.model_secrets(cfg, w, want_hf=not nim, want_ngc=nim)
    ranks = w.nodes * gpn
    volcano = cfg.addons.volcano.enabled
    if nim:
        env = _nim_env(cfg, w, cfg.tensor_parallel(w), w.pipeline_parallel) + c.secret_envs(secrets) \
            + c.plain_env(w.env)
        forwarded = [n for n in NIM_FORWARDED if any(e["name"] == n for e in env)] + list(w.env)
        argv = [NIM_MULTI_NODE_EXEC]
        launcher_script = f"exec {mpirun_line(ranks, forwarded, argv, list(w.extra_args))}\n"
    else:
        env = training.env(cfg, w, secrets)
        forwarded = [e["name"] for e in env]
        # where the image facts place mpirun (multinode/images.py); PATH's when they say nothing
        mpirun = images.program(c.image(cfg, w), "mpirun") or "mpirun"
        # `script` may carry its interpreter ("python3 /workspace/train.py"): one word per argument
        argv = shlex.split(w.script or "") + list(w.script_args)
        launcher_script = (
            'mkdir -p "$CHECKPOINT_DIR"\n'
            'if [ -e "$CHECKPOINT_DIR/latest" ]; then export RESUME_FROM="$(readlink -f "$CHECKPOINT_DIR/latest")"; '
            'fi\nMAYBE_RESUME=""; [ -n "${RESUME_FROM:-}" ] && MAYBE_RESUME="-x RESUME_FROM"\n'
            + f"exec {mpirun_line(ranks, forwarded, argv, ['$MAYBE_RESUME'] + list(w.extra_args), mpirun)}\n")

    def template(role: str, command: list[str], gpus: int) -> dict[str, Any]:
        worker_nim = nim and role == "worker"
        ports = [{"name": "http", "containerPort": w.port}] if worker_nim else None
        mounts = c.volume_mounts(cfg) + ([{"name": "ssh-confs", "mountPath": SSH_CONFS}] if worker_nim else [])
        mounts += c.dataset_mount(w)
        cont = c.container("nim" if nim else "mpi", c.image(cfg, w), command=command, env=env, gpus=gpus,
                           mounts=mounts, ports=ports)
        if gpus:
            c.with_requests(cont, w)        # the ranks; the launcher runs none
        spec = c.pod_spec(cfg, w, [cont], secrets=secrets, scheduler_name="volcano" if volcano else None,
                          extra_volumes=[{"name": "ssh-confs", "emptyDir": {}}] if worker_nim else None)
        if nim:
            spec["terminationGracePeriodSeconds"] = 60      # the chart's, on both roles
        # the launcher runs no rank: no GPUs, no fabric (the fabric policies select labelled pods only)
        labels = c.fabric_labels(w, role) if gpus and w.nodes > 1 else c.labels(w, role)
        if gpus and w.nodes == 1:
            labels = c.single_node_labels(w, role)
        return {"metadata": {"labels": labels}, "spec": spec}

    # NIM: no automatic restart. The chart sets no restartPolicy (Never, the MPIJob default); a serving NIM on
    # MPIJob that fails stays failed until redeployed (the chart's values: "MPIJob is a batch-type resource that is
    # not designed with service stability in mind"). The chart's cleanPodPolicy None is not kept: after the job
    # fails its workers (sshd) would stay Running and Ready, holding their GPU nodes, and the gang's budget
    # (minAvailable over pods nobody recreates) would then refuse every drain of those nodes; Running makes the
    # operator delete them once the job has failed (kubeflow/mpi-operator@v0.8.0
    # pkg/controller/mpi_job_controller.go:625-633). Found by the cluster box's day two on nim-mpijob.
    restart = "Never" if nim else "OnFailure"
    specs: dict[str, Any] = {
        "Launcher": {"replicas": 1, "restartPolicy": restart,
                     "template": template("launcher", c.shell(launcher_script), 0)},
        "Worker": {"replicas": w.nodes, "restartPolicy": restart,
                   "template": template("worker", c.shell(worker_script(nim)), gpn)},
    }
    run_policy: dict[str, Any] = {"backoffLimit": backoff_limit(w), "cleanPodPolicy": "Running"}
    if volcano:
        # mpi-operator (--gang-scheduling=volcano) makes a PodGroup with this minMember. Its default is
        # workers + 1 (pkg/controller/podgroup.go); with WaitForWorkersReady the launcher pod is created
        # only after every worker is Ready, so a gang that counted it would never form: count the workers.
        run_policy["schedulingPolicy"] = {"minAvailable": w.nodes, "queue": c.volcano_queue(cfg, w)}
    job_spec: dict[str, Any] = {"slotsPerWorker": gpn, "runLauncherAsWorker": False, "mpiImplementation": "OpenMPI",
                                "launcherCreationPolicy": "WaitForWorkersReady", "runPolicy": run_policy,
                                "mpiReplicaSpecs": specs}
    if nim:
        job_spec["sshAuthMountPath"] = SSH_AUTH_DIR
    job = {"apiVersion": "kubeflow.org/v2beta1", "kind": "MPIJob", "metadata": c.metadata(w), "spec": job_spec}
    objects: list[dict[str, Any]] = [job]
    if nim:
        # rank 0 (the OpenAI server) runs on worker 0: -map-by slot fills the first host's slots first. Not named
        # after the MPIJob: the operator names its own Service for the workers so (kubeflow/mpi-operator@v0.8.0
        # pkg/controller/mpi_job_controller.go:1384-1390) and stops the job, creating no pod, when a Service of
        # that name is not its own (:907-918, ErrResourceExists; found by the cluster box on nim-mpijob).
        objects.append(c.service(w, nim_service_name(w), {JOB_NAME_LABEL: w.name, REPLICA_TYPE_LABEL: "worker",
                                             REPLICA_INDEX_LABEL: "0"},
                                 [{"name": "http", "port": w.port, "targetPort": w.port}]))
    return c.WorkloadManifests(w.name, w.kind, w.namespace, objects, secrets)
