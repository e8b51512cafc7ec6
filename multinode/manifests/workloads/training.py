"""torchrun command lines and the checkpoint convention, shared by the Volcano and Indexed-Job trainers.

Checkpoint convention (the training script's side of the contract, documented in docs/workloads.md):
- CHECKPOINT_DIR (on the RWX volume, one folder per workload) holds `step-<N>/` folders; rank 0 writes a
  new one, then atomically points the `latest` symlink at it; other ranks never write there.
- RESUME_FROM is set at start to the folder `latest` points to, when it exists, so a restarted pod (or
  the whole job after a restart) resumes from the newest complete checkpoint instead of step 0.
"""
from __future__ import annotations

import json
import shlex
from typing import Any

from ...config import StackConfig, Workload
from ...numbers import whole_numbers
from . import common as c

RDZV_PORT = 29500
# torchrun's c10d rendezvous port (torch.distributed.elastic: the c10d backend's default port 29400); the
# Kubernetes multi-node training recipe (kubernetes.recipes/recipes/ai/multi-node-training-kubernetes)
# rendezvous at `<job>-0.<subdomain>:29400`.
C10D_PORT = 29400
# Which pod hosts the c10d rendezvous's TCP store. Left to itself, torchrun's c10d backend decides by comparing the
# endpoint's host with this machine's host name and, failing that, with the addresses the host resolves to
# (pytorch/pytorch@0fb4165e torch/distributed/elastic/rendezvous/c10d_rendezvous_backend.py _create_tcp_store,
# utils.py _matches_machine_hostname). On Kubernetes neither holds at start: with setHostnameAsFQDN the pod's host
# name is `<job>-0.<svc>.<ns>.svc.<domain>`, not the endpoint's `<job>-0.<svc>`, and the pod's own DNS record
# appears only once the EndpointSlice controller has seen its IP, which can be after the launcher asked. Then no
# pod hosts the store, every launcher waits for it (read_timeout, 60 s) and fails with RendezvousConnectionError
# (torchrun-recipe's preflight on real nodes did). The backend's `is_host` option settles it ("needed if ... the
# rendezvous endpoint ... does not match the FQDN of the machine": create_backend's docstring, same file; in
# PyTorch 1.13 too): the pod whose own host name is the endpoint host's first label hosts it. Every pod we render
# behind such an endpoint has that host name (Indexed Job `<job>-<i>`, Volcano's svc plugin `<job>-<task>-<i>`, LWS
# `<lws>-<group>` for the leader); bash sets HOSTNAME to the kernel's host name when the environment has none.
STORE_HOST_VAR = "RDZV_IS_HOST"


def store_host_lines(host: str) -> str:
    """Shell lines that set $RDZV_IS_HOST to 1 on the pod the rendezvous endpoint's host names, else 0 (host: a
    name, or a shell expansion such as $LWS_LEADER_ADDRESS)."""
    v = STORE_HOST_VAR
    return (f'RDZV_HOST="{host}"\n'
            f'if [ "${{HOSTNAME%%.*}}" = "${{RDZV_HOST%%.*}}" ]; then {v}=1; else {v}=0; fi\n')


DEEPSPEED_MOUNT = "/etc/multinode/deepspeed"
DEEPSPEED_FILE = "ds_config.json"
DEEPSPEED_PATH = f"{DEEPSPEED_MOUNT}/{DEEPSPEED_FILE}"


def world_size(cfg: StackConfig, w: Workload) -> int:
    return w.nodes * cfg.gpus_per_node(w)


def torchrun_args(cfg: StackConfig, w: Workload, rdzv_endpoint: str, node_rank: str | None = None,
                  max_restarts: int = 0, static: bool = False) -> list[str]:
    """torchrun: --nnodes = pods, --nproc_per_node = GPUs per pod, the c10d rendezvous at `rdzv_endpoint`
    (host:port), which assigns ranks and lets a restarted pod rejoin (elastic agent, --max_restarts).
    With a node rank (Indexed Job, as the Kubernetes multi-node training recipe writes it): the pod's
    completion index is passed as --node_rank too, so rank 0 is the pod the endpoint names.
    `static`: torchrun's static rendezvous (--node_rank, --master_addr/--master_port at the endpoint), the one
    Kubeflow Trainer v2's torch plugin sets up with its PET_* variables (trainjob)."""
    args = ["torchrun", f"--nnodes={w.nodes}", f"--nproc_per_node={cfg.gpus_per_node(w)}"]
    if static:
        host, _, port = rdzv_endpoint.rpartition(":")
        args += [f"--node_rank={node_rank}", f"--master_addr={host}", f"--master_port={port}"]
    else:
        if node_rank is not None:
            args.append(f"--node_rank={node_rank}")
        args += ["--rdzv_backend=c10d", f"--rdzv_endpoint={rdzv_endpoint}", f"--rdzv_id={w.name}",
                 f"--rdzv_conf=is_host=${STORE_HOST_VAR}", f"--max_restarts={max_restarts}"]
    args.append(w.script or "train.py")
    args += list(w.script_args)
    if w.deepspeed_config is not None:
        args += ["--deepspeed", "--deepspeed_config", DEEPSPEED_PATH]
    return args


def launch_script(cfg: StackConfig, w: Workload, rdzv_endpoint: str, node_rank: str | None = None,
                  max_restarts: int = 0, static: bool = False) -> str:
    """Resume-from-latest, then exec torchrun (so signals reach it and its exit code is the pod's); with the c10d
    rendezvous, the pod the endpoint names hosts its store (store_host_lines)."""
    cmd = " ".join(a if "$" in a else shlex.quote(a)
                   for a in torchrun_args(cfg, w, rdzv_endpoint, node_rank, max_restarts, static))
    return (
        'mkdir -p "$CHECKPOINT_DIR"\n'
        'if [ -e "$CHECKPOINT_DIR/latest" ]; then export RESUME_FROM="$(readlink -f "$CHECKPOINT_DIR/latest")"; '
        'echo "resuming from $RESUME_FROM"; fi\n'
        + ("" if static else store_host_lines(rdzv_endpoint.rpartition(":")[0]))
        + f"exec {cmd}\n"
    )


def env(cfg: StackConfig, w: Workload, secrets: list[c.SecretRef]) -> list[dict[str, Any]]:
    return ([{"name": "CHECKPOINT_DIR", "value": c.checkpoint_dir(cfg, w)},
             {"name": "HF_HOME", "value": c.model_cache_dir(cfg)}]
            + c.secret_envs(secrets) + c.plain_env(w.env))


def deepspeed_configmap(w: Workload) -> dict[str, Any] | None:
    if w.deepspeed_config is None:
        return None
    return c.configmap(w, f"{w.name}-deepspeed", {DEEPSPEED_FILE: json.dumps(whole_numbers(w.deepspeed_config),
                                                                             indent=1, sort_keys=True)})


def deepspeed_volume(w: Workload) -> list[dict[str, Any]]:
    if w.deepspeed_config is None:
        return []
    return [{"name": "deepspeed", "configMap": {"name": f"{w.name}-deepspeed"}}]


def deepspeed_mount(w: Workload) -> list[dict[str, Any]]:
    if w.deepspeed_config is None:
        return []
    # The recipe's shape: the one file, mounted with subPath (a subPath mount never sees later ConfigMap
    # edits; a job reads its config once at start, and a changed config is a new job).
    return [{"name": "deepspeed", "mountPath": DEEPSPEED_PATH, "subPath": DEEPSPEED_FILE, "readOnly": True}]
