"""Multi-node inference on LeaderWorkerSet (leaderworkerset.x-k8s.io/v1): vLLM, SGLang or NIM.

One LWS group = one model instance over `nodes` pods (size = nodes); `replicas` groups serve data
parallel. Leader and workers request the same GPUs and carry the fabric label, so every pod of the
gang, leader included, gets the same fabric from the Kyverno policies.

Upstream facts used here (LWS v0.10.0, see schemas/PROVENANCE.md):
- LWS injects LWS_LEADER_ADDRESS, LWS_GROUP_SIZE, LWS_WORKER_INDEX into every pod and labels each
  pod `leaderworkerset.sigs.k8s.io/worker-index` (LWS docs: reference/labels-annotations-and-
  environment-variables.md).
- With the LWS controller configured `gangSchedulingManagement.schedulerProvider: volcano`, LWS creates
  one Volcano PodGroup per group with minMember = size (startupPolicy LeaderCreated) and takes the queue
  from the LWS annotation `scheduling.volcano.sh/queue-name`; pods must name `schedulerName: volcano`
  (kubernetes-sigs/lws pkg/schedulerprovider/volcano_provider.go).
"""
from __future__ import annotations

from typing import Any

from ... import upgrades
from ...config import StackConfig, Workload
from . import common as c

WORKER_INDEX_LABEL = "leaderworkerset.sigs.k8s.io/worker-index"
LWS_NAME_LABEL = "leaderworkerset.sigs.k8s.io/name"
VOLCANO_QUEUE_ANNOTATION = "scheduling.volcano.sh/queue-name"
# LWS exclusive placement (kubernetes-sigs/lws v0.10.0 api/leaderworkerset/v1/leaderworkerset_types.go,
# site docs concepts "Exclusive LWS to Topology Placement"): a 1:1 group (or subgroup) to topology domain
# placement, done by LWS with pod affinity to its leader's domain and anti-affinity to other groups'.
EXCLUSIVE_TOPOLOGY_ANNOTATION = "leaderworkerset.sigs.k8s.io/exclusive-topology"
SUBGROUP_EXCLUSIVE_TOPOLOGY_ANNOTATION = "leaderworkerset.sigs.k8s.io/subgroup-exclusive-topology"
# The label LWS gives every pod of one group, one value per group (sigs.k8s.io/lws@v0.9.0
# api/leaderworkerset/v1/leaderworkerset_types.go:57 GroupUniqueHashLabelKey; the leader's by LWS's pod webhook,
# pkg/webhooks/pod_webhook.go:114-119, the workers' from the worker StatefulSet,
# pkg/controllers/pod_controller.go:402-411).
GROUP_KEY_LABEL = "leaderworkerset.sigs.k8s.io/group-key"
RAY_PORT = 6379
SGLANG_DIST_PORT = 20000


def _vllm(cfg: StackConfig, w: Workload, tp: int, pp: int, leader: bool) -> dict[str, Any]:
    """vLLM across nodes on a Ray cluster, the shape vLLM documents for LWS
    (docs.vllm.ai deployment/frameworks/lws): a Ray head on the leader, workers join at
    LWS_LEADER_ADDRESS, `vllm serve` on the leader with --tensor-parallel-size/--pipeline-parallel-size."""
    if leader:
        serve = ["vllm", "serve", w.model or "", "--host", "0.0.0.0", "--port", str(w.port),
                 "--tensor-parallel-size", str(tp), "--pipeline-parallel-size", str(pp),
                 "--distributed-executor-backend", "ray", "--download-dir", c.model_cache_dir(cfg)] + list(w.extra_args)
        script = (
            f"ray start --head --port={RAY_PORT}\n"
            # wait until every pod of the group has joined the Ray cluster, then serve
            "for i in $(seq 1 600); do\n"
            "  n=$(python3 -c 'import ray; ray.init(address=\"auto\", logging_level=\"ERROR\"); "
            "print(len([x for x in ray.nodes() if x[\"Alive\"]]))' 2>/dev/null || echo 0)\n"
            '  [ "$n" -ge "$LWS_GROUP_SIZE" ] && break; sleep 5\n'
            "done\n"
            "exec " + " ".join(_quote(a) for a in serve))
    else:
        script = (f"until ray start --address=$LWS_LEADER_ADDRESS:{RAY_PORT} --block; do\n"
                  "  echo waiting for the Ray head at $LWS_LEADER_ADDRESS; sleep 5\ndone")
    return {"command": c.shell(script), "env": [{"name": "HF_HOME", "value": c.model_cache_dir(cfg)}],
            "probes": c.http_probes("/health", w.port, w) if leader else None}


def _sglang(cfg: StackConfig, w: Workload, tp: int, pp: int, leader: bool) -> dict[str, Any]:
    """SGLang multi-node (docs.sglang.io references/multi_node_deployment): every node runs
    `sglang.launch_server` with --tp, --nnodes, --node-rank and --dist-init-addr at the leader; the node
    rank comes from the LWS worker-index label through the downward API."""
    args = ["python3", "-m", "sglang.launch_server", "--model-path", w.model or "",
            "--tp", str(tp), "--nnodes", str(w.nodes), "--node-rank", "$(NODE_RANK)",
            "--dist-init-addr", f"$(LWS_LEADER_ADDRESS):{SGLANG_DIST_PORT}",
            "--host", "0.0.0.0", "--port", str(w.port), "--download-dir", c.model_cache_dir(cfg)]
    if pp > 1:
        args += ["--pp-size", str(pp)]
    args += list(w.extra_args)
    env = [c.label_env("NODE_RANK", WORKER_INDEX_LABEL), {"name": "HF_HOME", "value": c.model_cache_dir(cfg)}]
    return {"command": args, "env": env, "probes": c.http_probes("/health", w.port, w) if leader else None}


def _nim(cfg: StackConfig, w: Workload, tp: int, pp: int, leader: bool) -> dict[str, Any]:
    """NVIDIA NIM multi-node on LWS (NIM LLM docs "Multi-Node Deployment"; the NIM env names as NVIDIA
    Run:ai's distributed-inference NIM guide sets them): NIM_MULTI_NODE=1, the parallel sizes, the number
    of nodes, NIM_LEADER_ROLE, and NIM_NODE_RANK from the LWS worker-index label. Readiness at
    /v1/health/ready. The image's own entrypoint starts the leader or the worker."""
    env = [
        {"name": "NIM_MULTI_NODE", "value": "1"},
        {"name": "NIM_TENSOR_PARALLEL_SIZE", "value": str(tp)},
        {"name": "NIM_PIPELINE_PARALLEL_SIZE", "value": str(pp)},
        {"name": "NIM_NUM_COMPUTE_NODES", "value": str(w.nodes)},
        {"name": "NIM_LEADER_ROLE", "value": "1" if leader else "0"},
        c.label_env("NIM_NODE_RANK", WORKER_INDEX_LABEL),
        {"name": "NIM_CACHE_PATH", "value": f"{c.model_cache_dir(cfg)}/nim"},
        {"name": "NIM_SERVER_PORT", "value": str(w.port)},
    ]
    command = list(w.worker_command) if w.worker_command and not leader else None
    return {"command": command, "env": env, "probes": nim_probes(w) if leader else None}


# The chart's livenessProbe (NVIDIA/nim-deploy helm/nim-llm values.yaml, commit bb84c40: path /v1/health/live,
# initialDelaySeconds 15, timeoutSeconds 1, periodSeconds 10, successThreshold 1, failureThreshold 3).
NIM_LIVENESS_PATH = "/v1/health/live"
NIM_LIVENESS = {"initialDelaySeconds": 15, "periodSeconds": 10, "timeoutSeconds": 1, "successThreshold": 1,
                "failureThreshold": 3}


def nim_probes(w: Workload) -> dict[str, Any] | None:
    """The leader's probes: startup + readiness at /v1/health/ready as before, each of the chart's three
    switchable by workloads[].probes (config refuses the switches that would hide a failed group)."""
    want = w.probes
    probes = c.http_probes("/v1/health/ready", w.port, w)
    if want is not None:
        if not want.startup:
            del probes["startupProbe"]
        if not want.readiness:
            del probes["readinessProbe"]
        if want.liveness:
            probes["livenessProbe"] = {"httpGet": {"path": NIM_LIVENESS_PATH, "port": w.port}, **NIM_LIVENESS}
    return probes or None


ENGINES = {"vllm": _vllm, "sglang": _sglang, "nim": _nim}


def _quote(arg: str) -> str:
    import shlex
    return shlex.quote(arg)


def build(cfg: StackConfig, w: Workload) -> c.WorkloadManifests:
    tp, pp = cfg.tensor_parallel(w), w.pipeline_parallel
    gpn = cfg.gpus_per_node(w)
    engine = ENGINES[w.engine or "vllm"]
    secrets = c.model_secrets(cfg, w, want_hf=w.engine != "nim", want_ngc=w.engine == "nim")
    volcano = cfg.addons.volcano.enabled
    img = c.image(cfg, w)
    gp = w.group_placement
    # Under Volcano the whole-group placement is rendered as pod affinity, not LWS's annotation: see
    # group_exclusive_affinity for why (LWS would wait for a leader Volcano's gang never binds).
    whole_group_by_affinity = volcano and gp is not None and gp.sub_group_size is None

    def template(role: str) -> dict[str, Any]:
        leader = role == "leader"
        e = engine(cfg, w, tp, pp, leader)
        env: list[dict[str, Any]] = list(e["env"]) + c.secret_envs(secrets) + c.plain_env(w.env)
        ports = [{"name": "http", "containerPort": w.port}] if leader else None
        cont = c.container(w.engine or "engine", img, command=e["command"], env=env, gpus=gpn,
                           mounts=c.volume_mounts(cfg), ports=ports, probes=e["probes"])
        spec = c.pod_spec(cfg, w, [cont], secrets=secrets, scheduler_name="volcano" if volcano else None)
        if whole_group_by_affinity:
            spec["affinity"] = group_exclusive_affinity(w.name, gp.topology_key)   # type: ignore[union-attr]
        return {"metadata": {"labels": c.fabric_labels(w, role)}, "spec": spec}

    meta = c.metadata(w)
    annotations: dict[str, str] = {}
    if volcano:
        annotations[VOLCANO_QUEUE_ANNOTATION] = c.volcano_queue(cfg, w)
    if gp is not None and gp.sub_group_size is not None:
        annotations[SUBGROUP_EXCLUSIVE_TOPOLOGY_ANNOTATION] = gp.topology_key
    elif gp is not None and not whole_group_by_affinity:
        annotations[EXCLUSIVE_TOPOLOGY_ANNOTATION] = gp.topology_key
    if annotations:
        meta["annotations"] = annotations
    lwt: dict[str, Any] = {
        "size": w.nodes,
        # any pod failure recreates the whole group: a TP/PP group cannot lose one member and go on
        "restartPolicy": "RecreateGroupOnPodRestart",
        "leaderTemplate": template("leader"),
        "workerTemplate": template("worker"),
    }
    if gp is not None and gp.sub_group_size is not None:
        lwt["subGroupPolicy"] = {"subGroupSize": gp.sub_group_size}
    lws = {
        "apiVersion": "leaderworkerset.x-k8s.io/v1", "kind": "LeaderWorkerSet", "metadata": meta,
        "spec": {
            "replicas": w.replicas,
            # LeaderCreated: leader and workers are created together, so a Volcano gang of `size` can form.
            "startupPolicy": "LeaderCreated",
            # surge whole groups into the pool's spare nodes, else replace one group at a time
            # (multinode/upgrades.py: plan reports the order)
            "rolloutStrategy": upgrades.rollout_strategy(upgrades.lws_rollout(cfg, w)),
            "leaderWorkerTemplate": lwt,
        },
    }
    svc = c.service(w, leader_service_name(w), {LWS_NAME_LABEL: w.name, c.ROLE_LABEL: "leader"},
                    [{"name": "http", "port": w.port, "targetPort": w.port}])
    hpa = autoscaler(w)
    return c.WorkloadManifests(w.name, w.kind, w.namespace, [lws, svc] + ([hpa] if hpa else []), secrets,
                               hpa_scaled=[w.name] if hpa else [])


def leader_service_name(w: Workload) -> str:
    """The client Service on the leaders: `<name>-leader`, as LWS's own examples name theirs
    (sigs.k8s.io/lws@v0.10.0 docs/examples/vllm/GPU/lws.yaml:81, sglang/lws.yaml:94). Never the set's own name: LWS
    names its headless Service after the set (pkg/controllers/leaderworkerset_controller.go:214-215, the leader
    StatefulSet's serviceName :848, so the pods' subdomain) and creates it only when no Service has that name
    (pkg/utils/controller/controller_utils.go:33-65 CreateHeadlessServiceIfNotExists: a Get, and a Create only on
    NotFound). A ClusterIP Service of ours there publishes no per-pod DNS record, so LWS_LEADER_ADDRESS
    (`<set>-<group>.<subdomain>.<namespace>`, pkg/utils/pod/pod_utils.go:143-146) never resolves: Ray workers and
    the NCCL preflight wait for ever. Workload names are at most 40 characters: 47 here."""
    return f"{w.name}-leader"


def group_exclusive_affinity(lws_name: str, topology_key: str) -> dict[str, Any]:
    """LWS exclusive placement (one group per domain of `topology_key`, a domain holds no other group) for groups
    Volcano gang-schedules, as pod affinity rendered into both templates instead of LWS's annotation.

    Why not the annotation: with `exclusive-topology`, LWS creates a group's worker StatefulSet only once the
    leader pod is bound (sigs.k8s.io/lws@v0.9.0 pkg/controllers/pod_controller.go:161-166), and then pins the
    workers to the leader's domain by node selector. Under Volcano, LWS has already created the group's PodGroup
    with minMember = size for startupPolicy LeaderCreated (pkg/schedulerprovider/volcano_provider.go:58-83), and
    Volcano's gang plugin binds no pod of a job with fewer pods than minMember (volcano.sh/volcano@v1.14.1
    pkg/scheduler/plugins/gang/gang.go:83-91, "Not enough valid tasks for gang-scheduling"): the lone leader is never
    bound, the workers never come. The cluster box saw it ("pod group is not ready, 1 Pending, 2 minAvailable").
    LeaderReady (PodGroup minMember 1, volcano_provider.go:77-83) would start the leader alone and the workers
    only once the leader is Ready: no gang, and a NIM/vLLM leader is not Ready before its workers join.

    What is rendered: the terms LWS's pod webhook gives an exclusive leader (pkg/webhooks/pod_webhook.go:185-227
    SetExclusiveAffinities: required affinity to its own group's pods, required anti-affinity to pods of any
    other group, both on `topology_key`), on leader AND workers, with the group's value taken from the pod's
    own group-key label by `matchLabelKeys` / `mismatchLabelKeys`: the API server merges them into the selector
    when it creates the pod (k8s.io/kubernetes@v1.33.13 pkg/registry/core/pod/strategy.go:87-99 PrepareForCreate
    -> mutatePodAffinity :875-893; feature MatchLabelKeysInPodAffinity beta and on by default since 1.31, GA in
    1.33: pkg/features/kube_features.go:1496-1500), after the mutating webhooks that set the label. All `size`
    pods then exist at once and Volcano places the gang whole; its predicates plugin counts the pods it has
    already allocated in the session for inter-pod affinity (volcano.sh/volcano@v1.14.1
    pkg/scheduler/plugins/predicates/predicates.go:205-243 AllocateFunc adds each to its node info).
    The group-key label may not also be in a selector that names it in matchLabelKeys (API validation,
    pkg/apis/core/validation/validation.go:8142-8171): the affinity selects by the set's name label instead."""
    return {
        "podAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [{
            "labelSelector": {"matchLabels": {LWS_NAME_LABEL: lws_name}},
            "matchLabelKeys": [GROUP_KEY_LABEL],
            "topologyKey": topology_key,
        }]},
        "podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [{
            "labelSelector": {"matchExpressions": [{"key": GROUP_KEY_LABEL, "operator": "Exists"}]},
            "mismatchLabelKeys": [GROUP_KEY_LABEL],
            "topologyKey": topology_key,
        }]},
    }


def autoscaler(w: Workload) -> dict[str, Any] | None:
    """issue 31: the NIM chart's HPA (NVIDIA/nim-deploy helm/nim-llm templates/hpa.yaml, commit bb84c40):
    autoscaling/v2, scaleTargetRef the LeaderWorkerSet (LWS serves the scale subresource, so an HPA scales its
    groups), min/max replicas, the metrics as given, scaleDown.stabilizationWindowSeconds from
    scaleDownStabilizationSecs."""
    a = w.autoscaling
    if a is None:
        return None
    spec: dict[str, Any] = {
        "scaleTargetRef": {"apiVersion": "leaderworkerset.x-k8s.io/v1", "kind": "LeaderWorkerSet", "name": w.name},
        "minReplicas": a.min_replicas, "maxReplicas": a.max_replicas,
    }
    if a.metrics:
        spec["metrics"] = [dict(m) for m in a.metrics]
    if a.scale_down_stabilization_secs is not None:
        spec["behavior"] = {"scaleDown": {"stabilizationWindowSeconds": a.scale_down_stabilization_secs}}
    return {"apiVersion": "autoscaling/v2", "kind": "HorizontalPodAutoscaler", "metadata": c.metadata(w),
            "spec": spec}
