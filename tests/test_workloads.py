"""Workload manifests: schema validity, gang shape, engine flags, torchrun world size, checkpoints, secrets."""
from __future__ import annotations

import json
import re
import shlex
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

sys.path.insert(0, str(Path(__file__).parent))
import workload_fixtures as F  # noqa: E402

from multinode import pools  # noqa: E402
from multinode.errors import ConfigError  # noqa: E402
from multinode.manifests import workloads as W  # noqa: E402
from multinode.manifests.workloads import common, grove, lws, training  # noqa: E402
from multinode.schema_check import validate_object, validate_pod_template  # noqa: E402


@pytest.fixture(scope="module")
def cfg():
    return F.load()


@pytest.fixture(scope="module")
def built(cfg) -> dict[str, W.WorkloadManifests]:
    return {w.name: W.build(cfg, w) for w in cfg.workloads}


def workload(cfg, name):
    return next(w for w in cfg.workloads if w.name == name)


def obj(m: W.WorkloadManifests, kind: str) -> dict[str, Any]:
    hits = [o for o in m.objects if o["kind"] == kind]
    assert len(hits) == 1, f"{m.name}: expected one {kind}, got {len(hits)}"
    return hits[0]


def pod_templates(o: dict[str, Any]) -> Iterator[tuple[str, dict[str, Any], int]]:
    """(where, pod template {metadata, spec}, pod count) for every pod template inside an object."""
    k, s = o["kind"], o.get("spec", {})
    if k == "LeaderWorkerSet":
        t = s["leaderWorkerTemplate"]
        yield "leader", t["leaderTemplate"], 1
        yield "worker", t["workerTemplate"], t["size"] - 1
    elif k == "PodCliqueSet":
        for cl in s["template"]["cliques"]:
            yield cl["name"], {"metadata": {"labels": cl.get("labels", {})}, "spec": cl["spec"]["podSpec"]}, \
                cl["spec"]["replicas"]
    elif k == "Job" and o["apiVersion"].startswith("batch.volcano.sh"):
        for t in s["tasks"]:
            yield t["name"], t["template"], t["replicas"]
    elif k == "Job":
        yield "rank", s["template"], s["completions"]
    elif k == "MPIJob":
        for role, r in s["mpiReplicaSpecs"].items():
            yield role, r["template"], r["replicas"]
    elif k == "ClusterTrainingRuntime":      # Kubeflow Trainer v2: the trainer job runs mlPolicy.numNodes pods
        for job in s["template"]["spec"]["replicatedJobs"]:
            yield job["name"], job["template"]["spec"]["template"], s["mlPolicy"]["numNodes"]
    elif k == "DynamoGraphDeployment":       # v1beta1: one pod per node of each component's instance
        for comp in s["components"]:
            yield comp["name"], comp["podTemplate"], comp.get("multinode", {}).get("nodeCount", 1)


def gpu_templates(m: W.WorkloadManifests):
    for o in m.objects:
        for where, t, n in pod_templates(o):
            res = [c.get("resources", {}) for c in t["spec"]["containers"]]
            if any(common.GPU_RESOURCE in r.get("limits", {}) for r in res):
                yield where, t, n


def command_text(container: dict[str, Any]) -> str:
    return " ".join(container.get("command", []) + container.get("args", []))


# ------------------------------------------------------------------ schemas we did not write
def test_every_kind_is_covered(built):
    assert {m.kind for m in built.values()} == set(W.BUILDERS)


def test_every_object_validates_against_its_upstream_schema(built):
    for m in built.values():
        for o in m.objects:
            assert validate_object(o) == [], (m.name, o["kind"])


def test_every_pod_template_inside_a_custom_resource_validates_strictly(built):
    seen = 0
    for m in built.values():
        for o in m.objects:
            for where, t, _ in pod_templates(o):
                assert validate_pod_template(t) == [], (m.name, o["kind"], where)
                seen += 1
    assert seen >= 14


def test_validation_would_catch_a_broken_field(built):
    lws_obj = json.loads(json.dumps(obj(built["llama-vllm"], "LeaderWorkerSet")))
    lws_obj["spec"]["leaderWorkerTemplate"]["restartPolicy"] = "RestartEverything"
    assert validate_object(lws_obj)
    t = json.loads(json.dumps(lws_obj["spec"]["leaderWorkerTemplate"]["workerTemplate"]))
    t["spec"]["containers"][0]["gpus"] = 8
    assert validate_pod_template(t)


# ------------------------------------------------------------------ gang shape
def test_every_gpu_pod_of_a_gang_requests_identical_gpus_and_carries_the_fabric_label(cfg, built):
    for m in built.values():
        w = workload(cfg, m.name)
        templates = list(gpu_templates(m))
        assert templates, m.name
        for where, t, pods in templates:
            for c in t["spec"]["containers"]:
                res = c["resources"]
                assert res["requests"] == res["limits"], (m.name, where)
            # a Grove role spans nodes when it has a worker clique, a Dynamo component when its pod count
            # (multinode.nodeCount) is above 1; every other kind always does here
            names = {x for x, _, _ in templates}
            multi = (m.kind != "grove-inference" or f"{where.rsplit('-', 1)[0]}-wkr" in names) and (
                m.kind != "dynamo" or pods > 1)
            if multi:
                assert t["metadata"]["labels"][pools.FABRIC_POD_LABEL] == pools.FABRIC_POD_LABEL_VALUE, (m.name, where)
            assert t["spec"]["nodeSelector"] == pools.node_selector(cfg, cfg.pool(w.node_pool))


def test_lws_leader_and_workers_match(cfg, built):
    for name in ("llama-vllm", "llama-sglang", "llama-nim"):
        w = workload(cfg, name)
        o = obj(built[name], "LeaderWorkerSet")
        t = o["spec"]["leaderWorkerTemplate"]
        leader, worker = t["leaderTemplate"]["spec"], t["workerTemplate"]["spec"]
        gpus = str(cfg.gpus_per_node(w))
        for spec in (leader, worker):
            assert spec["containers"][0]["resources"]["limits"][common.GPU_RESOURCE] == gpus
            assert spec["schedulerName"] == "volcano"
        assert t["size"] == w.nodes
        assert o["spec"]["replicas"] == w.replicas
        assert t["restartPolicy"] == "RecreateGroupOnPodRestart"
        assert o["metadata"]["annotations"][lws.VOLCANO_QUEUE_ANNOTATION] == "research"
        assert t["leaderTemplate"]["metadata"]["labels"][pools.FABRIC_POD_LABEL] == \
            t["workerTemplate"]["metadata"]["labels"][pools.FABRIC_POD_LABEL] == "enabled"


def test_lws_without_volcano_uses_the_default_scheduler():
    raw = F.raw_config([F.WORKLOADS[0]])
    raw["addons"]["volcano"] = {"enabled": False}
    c2 = F.checks.load(raw, F.SECRET_KEYS)
    o = obj(W.build(c2, c2.workloads[0]), "LeaderWorkerSet")
    assert "annotations" not in o["metadata"]
    assert "schedulerName" not in o["spec"]["leaderWorkerTemplate"]["workerTemplate"]["spec"]


def test_startup_probe_covers_the_model_download(cfg, built):
    w = workload(cfg, "llama-vllm")
    lws_obj = obj(built["llama-vllm"], "LeaderWorkerSet")
    c = lws_obj["spec"]["leaderWorkerTemplate"]["leaderTemplate"]["spec"]["containers"][0]
    probe = c["startupProbe"]
    assert probe["periodSeconds"] * probe["failureThreshold"] >= w.startup_timeout_minutes * 60
    assert c["readinessProbe"]["httpGet"]["path"] == "/health"
    nim = obj(built["llama-nim"], "LeaderWorkerSet")["spec"]["leaderWorkerTemplate"]["leaderTemplate"]["spec"]
    assert nim["containers"][0]["readinessProbe"]["httpGet"]["path"] == "/v1/health/ready"


def test_shm_is_a_memory_emptydir_sized_from_config(cfg, built):
    w = workload(cfg, "llama-vllm")
    for _, t, _ in gpu_templates(built["llama-vllm"]):
        shm = next(v for v in t["spec"]["volumes"] if v["name"] == common.SHM_VOLUME)
        assert shm["emptyDir"] == {"medium": "Memory", "sizeLimit": f"{w.shm_size_gi}Gi"}
        assert {"name": common.SHM_VOLUME, "mountPath": "/dev/shm"} in t["spec"]["containers"][0]["volumeMounts"]


# ------------------------------------------------------------------ engine flags agree with config
def _flag(args: list[str], flag: str) -> str:
    return args[args.index(flag) + 1]


def test_vllm_parallel_flags_and_ray_layout(cfg, built):
    w = workload(cfg, "llama-vllm")
    t = obj(built["llama-vllm"], "LeaderWorkerSet")["spec"]["leaderWorkerTemplate"]
    leader = command_text(t["leaderTemplate"]["spec"]["containers"][0])
    worker = command_text(t["workerTemplate"]["spec"]["containers"][0])
    serve = shlex.split(leader.split("exec ", 1)[1])
    assert _flag(serve, "--tensor-parallel-size") == str(cfg.tensor_parallel(w)) == "8"
    assert _flag(serve, "--pipeline-parallel-size") == str(w.pipeline_parallel) == "2"
    assert "ray start --head" in leader
    assert "ray start --address=$LWS_LEADER_ADDRESS" in worker and "vllm serve" not in worker


def test_sglang_flags_and_node_rank_from_the_worker_index_label(cfg, built):
    w = workload(cfg, "llama-sglang")
    t = obj(built["llama-sglang"], "LeaderWorkerSet")["spec"]["leaderWorkerTemplate"]
    for tmpl in (t["leaderTemplate"], t["workerTemplate"]):
        c = tmpl["spec"]["containers"][0]
        args = c["command"]
        assert _flag(args, "--tp") == str(cfg.tensor_parallel(w)) == "16"
        assert _flag(args, "--nnodes") == str(w.nodes)
        assert _flag(args, "--node-rank") == "$(NODE_RANK)"
        assert _flag(args, "--dist-init-addr").startswith("$(LWS_LEADER_ADDRESS):")
        rank = next(e for e in c["env"] if e["name"] == "NODE_RANK")
        assert rank["valueFrom"]["fieldRef"]["fieldPath"] == f"metadata.labels['{lws.WORKER_INDEX_LABEL}']"


def test_nim_env_agrees_with_config(cfg, built):
    w = workload(cfg, "llama-nim")
    t = obj(built["llama-nim"], "LeaderWorkerSet")["spec"]["leaderWorkerTemplate"]
    for role, tmpl in (("1", t["leaderTemplate"]), ("0", t["workerTemplate"])):
        env = {e["name"]: e for e in tmpl["spec"]["containers"][0]["env"]}
        assert env["NIM_MULTI_NODE"]["value"] == "1"
        assert env["NIM_TENSOR_PARALLEL_SIZE"]["value"] == str(cfg.tensor_parallel(w))
        assert env["NIM_PIPELINE_PARALLEL_SIZE"]["value"] == str(w.pipeline_parallel)
        assert env["NIM_NUM_COMPUTE_NODES"]["value"] == str(w.nodes)
        assert env["NIM_LEADER_ROLE"]["value"] == role
        assert env["NIM_NODE_RANK"]["valueFrom"]["fieldRef"]["fieldPath"] == \
            f"metadata.labels['{lws.WORKER_INDEX_LABEL}']"
        assert env["NGC_API_KEY"]["valueFrom"]["secretKeyRef"]["name"] == "llama-nim-ngc-api-key"
    assert {"name": "llama-nim-image-pull"} in t["leaderTemplate"]["spec"]["imagePullSecrets"]


# ------------------------------------------------------------------ Grove
def test_grove_gangs_stay_whole_and_start_in_order(cfg, built):
    w = workload(cfg, "ds-grove")
    pcs = obj(built["ds-grove"], "PodCliqueSet")
    tmpl = pcs["spec"]["template"]
    assert pcs["metadata"]["labels"][grove.KAI_QUEUE_LABEL] == "research"
    assert tmpl["cliqueStartupType"] == "CliqueStartupTypeExplicit"
    cliques = {c["name"]: c for c in tmpl["cliques"]}
    for c in cliques.values():
        assert c["spec"]["minAvailable"] == c["spec"]["replicas"], c["name"]
        assert c["spec"]["podSpec"]["schedulerName"] == grove.KAI_SCHEDULER
    for role_name, role in (("prefill", w.disaggregated.prefill), ("decode", w.disaggregated.decode)):
        assert cliques[f"{role_name}-wkr"]["spec"]["replicas"] == role.nodes - 1
        assert cliques[f"{role_name}-ldr"]["spec"]["startsAfter"] == [f"{role_name}-wkr"]
        group = next(g for g in tmpl["podCliqueScalingGroups"] if g["name"] == role_name)
        assert group["cliqueNames"] == [f"{role_name}-wkr", f"{role_name}-ldr"]
        assert group["replicas"] == role.replicas
        # per-role tp flag and the pool's GPUs
        ldr = cliques[f"{role_name}-ldr"]["spec"]["podSpec"]["containers"][0]
        assert f"--tensor-parallel-size {role.tensor_parallel}" in command_text(ldr)
        assert f"--disaggregation-mode {role_name}" in command_text(ldr)
    assert set(cliques["frontend"]["spec"]["startsAfter"]) == {"prefill-ldr", "decode-ldr"}
    assert "resources" not in cliques["frontend"]["spec"]["podSpec"]["containers"][0]


# ------------------------------------------------------------------ training
def _torchrun(text: str) -> list[str]:
    return shlex.split(text[text.index("torchrun"):].splitlines()[0])


def _opt(args: list[str], name: str) -> str:
    return next(a.split("=", 1)[1] for a in args if a.startswith(name + "="))


@pytest.mark.parametrize("name", ["train-volcano", "train-indexed"])
def test_torchrun_world_size_matches_the_pods(cfg, built, name):
    w = workload(cfg, name)
    templates = list(gpu_templates(built[name]))
    pods = sum(n for _, _, n in templates)
    for _, t, _ in templates:
        c = t["spec"]["containers"][0]
        args = _torchrun(command_text(c))
        nnodes, nproc = int(_opt(args, "--nnodes")), int(_opt(args, "--nproc_per_node"))
        assert nproc == int(c["resources"]["limits"][common.GPU_RESOURCE])
        assert nnodes == pods == w.nodes
        assert nnodes * nproc == training.world_size(cfg, w) == 16


def test_volcano_job_gang_recovery_and_topology(cfg, built):
    w = workload(cfg, "train-volcano")
    job = obj(built["train-volcano"], "Job")
    s = job["spec"]
    assert s["minAvailable"] == sum(t["replicas"] for t in s["tasks"]) == w.nodes
    assert all(t["minAvailable"] == t["replicas"] for t in s["tasks"])
    assert set(s["plugins"]) == {"pytorch", "svc", "env"}
    assert s["queue"] == "research" and s["schedulerName"] == "volcano" and s["maxRetry"] == w.max_retry
    assert s["networkTopology"] == {"mode": "soft", "highestTierAllowed": 1}
    tasks = {t["name"]: t for t in s["tasks"]}
    worker_actions = {(tuple(p.get("events", [p.get("event")])), p["action"]) for p in tasks["worker"]["policies"]}
    assert worker_actions == {(("PodFailed", "PodEvicted"), "RestartTask")}
    master_actions = {p["action"] for p in tasks["master"]["policies"]}
    assert master_actions == {"RestartJob", "CompleteJob"}
    # rendezvous at the master pod's stable name (svc plugin: <job>-<task>-<index>.<job>)
    args = _torchrun(command_text(tasks["worker"]["template"]["spec"]["containers"][0]))
    assert _opt(args, "--rdzv_endpoint") == f"{w.name}-master-0.{w.name}:{training.RDZV_PORT}"
    assert _opt(args, "--max_restarts") == str(w.max_retry)
    # DeepSpeed config from a ConfigMap, mounted read-only
    cm = obj(built["train-volcano"], "ConfigMap")
    assert json.loads(cm["data"][training.DEEPSPEED_FILE]) == w.deepspeed_config
    assert "--deepspeed_config" in args


def test_indexed_job_node_rank_from_completion_index(cfg, built):
    w = workload(cfg, "train-indexed")
    job = obj(built["train-indexed"], "Job")
    svc = obj(built["train-indexed"], "Service")
    assert job["spec"]["completionMode"] == "Indexed"
    assert job["spec"]["completions"] == job["spec"]["parallelism"] == w.nodes
    assert svc["spec"]["clusterIP"] == "None"
    assert job["spec"]["template"]["spec"]["subdomain"] == svc["metadata"]["name"]
    args = _torchrun(command_text(job["spec"]["template"]["spec"]["containers"][0]))
    assert _opt(args, "--node_rank") == "$JOB_COMPLETION_INDEX"
    # issue 18: the recipe's c10d rendezvous at pod 0 on 29400 (was a static --master_addr on 29500)
    assert _opt(args, "--rdzv_backend") == "c10d"
    assert _opt(args, "--rdzv_endpoint") == f"{w.name}-0.{w.name}:{training.C10D_PORT}"
    assert not any(a.startswith("--master_addr") for a in args)


def test_mpijob_ranks_fill_every_gpu(cfg, built):
    w = workload(cfg, "train-mpi")
    s = obj(built["train-mpi"], "MPIJob")["spec"]
    # issue 18: the guides' shape, a launcher without GPUs and Worker replicas = nodes
    pods = s["mpiReplicaSpecs"]["Worker"]["replicas"]
    assert s["runLauncherAsWorker"] is False and pods == w.nodes
    launcher = command_text(s["mpiReplicaSpecs"]["Launcher"]["template"]["spec"]["containers"][0])
    np_ = int(re.search(r"-n (\d+)", launcher).group(1))
    assert np_ == s["slotsPerWorker"] * pods == w.nodes * cfg.gpus_per_node(w)
    assert s["runPolicy"]["schedulingPolicy"]["minAvailable"] == w.nodes


# ------------------------------------------------------------------ checkpoints on the RWX volume
def test_checkpoint_volume_is_mounted_read_write_on_every_rank(cfg, built):
    claim = common.claim_name(cfg)
    for m in built.values():
        if m.kind == "nccl-test":
            continue
        for where, t, _ in gpu_templates(m):
            vol = next(v for v in t["spec"]["volumes"] if v["name"] == common.DATA_VOLUME)
            assert vol["persistentVolumeClaim"] == {"claimName": claim, "readOnly": False}, (m.name, where)
            for c in t["spec"]["containers"]:
                mount = next(x for x in c["volumeMounts"] if x["name"] == common.DATA_VOLUME)
                assert mount["mountPath"] == cfg.storage.mount_path and mount.get("readOnly") is False


def test_training_checkpoint_convention(cfg, built):
    for name in ("train-volcano", "train-indexed"):
        w = workload(cfg, name)
        for _, t, _ in gpu_templates(built[name]):
            c = t["spec"]["containers"][0]
            env = {e["name"]: e.get("value") for e in c["env"]}
            assert env["CHECKPOINT_DIR"] == f"{cfg.storage.mount_path}/checkpoints/{w.name}"
            assert 'RESUME_FROM="$(readlink -f "$CHECKPOINT_DIR/latest")"' in command_text(c)


# ------------------------------------------------------------------ config checks
def _problems(workloads, **over) -> str:
    with pytest.raises(ConfigError) as e:
        F.load(workloads, **over)
    return str(e.value)


def test_secrets_in_workload_env_are_refused():
    w = dict(F.WORKLOADS[0], env={"HF_TOKEN": "abc"})
    msg = _problems([w])
    assert "workloads[0].env.HF_TOKEN" in msg and "hfToken" in msg and "abc" not in msg


def test_namespace_must_hold_the_checkpoint_claim():
    msg = _problems([dict(F.WORKLOADS[0], namespace="other")])
    assert "workloads[0].namespace" in msg and "'multinode'" in msg


def test_nim_needs_an_ngc_key_and_an_image():
    raw = F.raw_config([dict(F.WORKLOADS[2], image=None)])
    del raw["ngcApiKey"]
    with pytest.raises(ConfigError) as e:
        F.checks.load(raw, F.SECRET_KEYS)
    assert "ngcApiKey" in str(e.value) and "workloads[0].image" in str(e.value)


def test_mpijob_needs_its_script():
    assert "workloads[0].script" in _problems([dict(F.WORKLOADS[6], script=None)])
