"""Disaggregated inference on Grove (grove.io/v1alpha1 PodCliqueSet), the shape Dynamo deploys:
a frontend clique plus prefill and decode roles; a role that spans nodes is a PodCliqueScalingGroup of a
leader clique (1 pod) and a worker clique (nodes - 1 pods), scaled by the role's `replicas`.

Gang rules (field notes: "a worker clique with minAvailable: 1 defeating the gang"):
- every GPU clique has minAvailable = its replicas, so a multi-node engine is admitted whole or not at all;
- each scaling-group replica is its own gang (leader + all workers); the group's minAvailable is 1: the
  service needs one whole prefill and one whole decode instance, more are added as whole gangs.

Start order is explicit (cliqueStartupType CliqueStartupTypeExplicit + startsAfter): the workers of a role
start first (they only wait for the leader's Ray head / rendezvous and carry no readiness probe), the
leader after its workers (its readiness needs every worker joined, so the reverse order would deadlock),
the frontend after both leaders.

KAI-Scheduler places the gangs: every pod names `schedulerName: kai-scheduler` and the PodCliqueSet
carries the queue label `kai.scheduler/queue` (KAI v0.13 values.yaml `queueLabelKey`; KAI docs
"Configuring Workloads for KAI Scheduler"). Without addons.kai (issue 18: optional in the Dynamo guide)
the pods name no scheduler, so Grove's always-enabled default-scheduler backend and the Kubernetes
default scheduler place them, with no gang (config advisory; Grove docs/installation.md).
Leader addresses use the env Grove injects:
GROVE_PCSG_NAME, GROVE_PCSG_INDEX, GROVE_HEADLESS_SERVICE, GROVE_PCLQ_POD_INDEX (Grove docs
"environment variables"; Dynamo's Grove multinode deployer builds the same host names).
"""
from __future__ import annotations

from typing import Any

from ...config import Role, StackConfig, Workload
from ...resolved import gang
from . import common as c

KAI_SCHEDULER = "kai-scheduler"
KAI_QUEUE_LABEL = "kai.scheduler/queue"
RAY_PORT = 6379
DIST_PORT = 29500
LEADER, WORKER = "ldr", "wkr"


def _leader_host(role: str) -> str:
    return f"$(GROVE_PCSG_NAME)-$(GROVE_PCSG_INDEX)-{role}-{LEADER}-0.$(GROVE_HEADLESS_SERVICE)"


def _engine_command(cfg: StackConfig, w: Workload, role: str, mode: str | None, nodes: int,
                    tp: int, pp: int, leader: bool) -> list[str]:
    engine = w.engine or "vllm"
    mode_args = ["--disaggregation-mode", mode] if mode else []
    if engine == "vllm":
        run = (["python3", "-m", "dynamo.vllm", "--model", w.model or "", "--tensor-parallel-size", str(tp),
                "--pipeline-parallel-size", str(pp)] + mode_args + list(w.extra_args))
        if nodes == 1:
            return run
        # Ray across the role's pods: head on the leader, workers block in `ray start` (Dynamo's Grove layout)
        if leader:
            return c.shell(f"ray start --head --port={RAY_PORT} && exec " + " ".join(run))
        return c.shell(f"until ray start --address={_leader_host(role)}:{RAY_PORT} --block; do sleep 5; done")
    if engine == "sglang":
        run = (["python3", "-m", "dynamo.sglang", "--model-path", w.model or "", "--tp", str(tp)]
               + (["--pp-size", str(pp)] if pp > 1 else []) + mode_args + list(w.extra_args))
        if nodes == 1:
            return run
        rank = "0" if leader else "$((GROVE_PCLQ_POD_INDEX + 1))"
        return c.shell(" ".join(run) + f" --dist-init-addr {_leader_host(role)}:{DIST_PORT}"
                                       f" --nnodes {nodes} --node-rank {rank}")
    # trtllm: single-node roles only (config check); multi-node TRT-LLM needs an MPI launcher
    return (["python3", "-m", "dynamo.trtllm", "--model-path", w.model or "", "--tensor-parallel-size", str(tp)]
            + (["--disaggregation-mode", mode] if mode else []) + list(w.extra_args))


def _clique(name: str, role_name: str, replicas: int, spec: dict[str, Any], lbls: dict[str, str],
            starts_after: list[str] | None = None) -> dict[str, Any]:
    clique_spec: dict[str, Any] = {"roleName": role_name, "replicas": replicas,
                                   # the whole clique or nothing: never a partial multi-node engine
                                   "minAvailable": replicas, "podSpec": spec}
    if starts_after:
        clique_spec["startsAfter"] = starts_after
    return {"name": name, "labels": lbls, "spec": clique_spec}


def roles(cfg: StackConfig, w: Workload) -> dict[str, Role]:
    """prefill/decode from `disaggregated`, else one aggregated `engine` role from the workload itself."""
    if w.disaggregated:
        return {"prefill": w.disaggregated.prefill, "decode": w.disaggregated.decode}
    return {"engine": Role(nodes=w.nodes, gpus_per_node=w.gpus_per_node, tensor_parallel=w.tensor_parallel,
                           pipeline_parallel=w.pipeline_parallel, replicas=w.replicas)}


def role_parallelism(cfg: StackConfig, w: Workload, role: Role) -> dict[str, int]:
    g = gang("", role, cfg.machine(cfg.pool(w.node_pool)).gpus)     # the defaults: multinode/resolved.py
    return {"gpus": g.gpus_per_node, "tp": g.tensor_parallel, "pp": g.pipeline_parallel, "nodes": g.nodes}


def build(cfg: StackConfig, w: Workload) -> c.WorkloadManifests:
    kai = cfg.addons.kai.enabled
    scheduler = KAI_SCHEDULER if kai else None
    secrets = c.model_secrets(cfg, w)
    img = c.image(cfg, w)
    base_env = ([{"name": "HF_HOME", "value": c.model_cache_dir(cfg)}] + c.secret_envs(secrets)
                + c.plain_env(w.env))
    cliques: list[dict[str, Any]] = []
    groups: list[dict[str, Any]] = []
    leaders: list[str] = []
    for role_name, role in roles(cfg, w).items():
        p = role_parallelism(cfg, w, role)
        mode = role_name if w.disaggregated else None
        members = []
        worker_clique = f"{role_name}-{WORKER}"
        leader_clique = f"{role_name}-{LEADER}"
        for leader in (False, True):
            if not leader and p["nodes"] == 1:
                continue
            name = leader_clique if leader else worker_clique
            cmd = _engine_command(cfg, w, role_name, mode, p["nodes"], p["tp"], p["pp"], leader)
            cont = c.container("main", img, command=cmd, env=base_env, gpus=p["gpus"],
                               mounts=c.volume_mounts(cfg))
            spec = c.pod_spec(cfg, w, [cont], secrets=secrets, scheduler_name=scheduler)
            role_label = f"{role_name}-leader" if leader else f"{role_name}-worker"
            # multi-node roles run NCCL across nodes; disaggregated roles move the KV cache between nodes
            spans_nodes = p["nodes"] > 1 or w.disaggregated is not None
            lbls = c.fabric_labels(w, role_label) if spans_nodes else c.single_node_labels(w, role_label)
            cliques.append(_clique(name, role_label, 1 if leader else p["nodes"] - 1, spec, lbls,
                                   [worker_clique] if leader and p["nodes"] > 1 else None))
            members.append(name)
        leaders.append(leader_clique)
        groups.append({"name": role_name, "cliqueNames": members, "replicas": role.replicas,
                       "minAvailable": 1})

    frontend_cmd = ["python3", "-m", "dynamo.frontend", "--http-port", str(w.port)]
    fe = c.container("main", img, command=frontend_cmd, env=c.plain_env(w.env),
                     ports=[{"name": "http", "containerPort": w.port}])
    fe_spec = c.pod_spec(cfg, w, [fe], secrets=secrets, scheduler_name=scheduler, with_data=False,
                         gpu_pool=False)
    cliques.insert(0, _clique("frontend", "frontend", 1, fe_spec, c.labels(w, "frontend"), leaders))

    meta = c.metadata(w)
    if kai:
        meta["labels"][KAI_QUEUE_LABEL] = w.queue or (cfg.queues[0].name if cfg.queues else "default")
    pcs = {
        "apiVersion": "grove.io/v1alpha1", "kind": "PodCliqueSet", "metadata": meta,
        "spec": {"replicas": 1, "template": {
            "cliqueStartupType": "CliqueStartupTypeExplicit",
            "cliques": cliques,
            "podCliqueScalingGroups": groups,
        }},
    }
    svc = c.service(w, w.name, {c.WORKLOAD_LABEL: w.name, c.ROLE_LABEL: "frontend"},
                    [{"name": "http", "port": w.port, "targetPort": w.port}])
    return c.WorkloadManifests(w.name, w.kind, w.namespace, [pcs, svc], secrets)
