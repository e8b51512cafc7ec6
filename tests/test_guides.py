"""Issue 18: one stack per guide example (tests/guides/Pulumi.<name>.yaml) plans clean, every rendered
custom resource validates against its upstream CRD, and the guide's fields are asserted one by one. The
expected values are written here from the guide's own YAML, with its source next to them."""
from __future__ import annotations

import shlex
from pathlib import Path
from typing import Any

import pytest

from multinode import plan as mplan
from multinode.schema_check import validate_object

GUIDES = Path(__file__).resolve().parent / "guides"
_CACHE: dict[str, mplan.PlanResult] = {}


def planned(name: str, tmp_path_factory: pytest.TempPathFactory) -> mplan.PlanResult:
    if name not in _CACHE:
        out = tmp_path_factory.mktemp(name)
        _CACHE[name] = mplan.plan(name, out, GUIDES / f"Pulumi.{name}.yaml")
    return _CACHE[name]


def find(res: mplan.PlanResult, kind: str, name: str | None = None) -> dict[str, Any]:
    hits = [o for o in res.k8s_objects if o.get("kind") == kind
            and (name is None or o["metadata"]["name"] == name)]
    assert len(hits) == 1, [(o.get("kind"), o["metadata"].get("name")) for o in res.k8s_objects]
    return hits[0]


def script(container: dict[str, Any]) -> str:
    cmd = container["command"]
    assert cmd[:2] == ["/bin/bash", "-c"], cmd
    return cmd[2]


def env_of(container: dict[str, Any]) -> dict[str, Any]:
    return {e["name"]: e.get("value", e.get("valueFrom")) for e in container.get("env", [])}


STACKS = sorted(p.name[len("Pulumi."):-len(".yaml")] for p in GUIDES.glob("Pulumi.*.yaml"))


@pytest.mark.parametrize("name", STACKS)
def test_guide_stack_plans_clean_and_validates(name, tmp_path_factory):
    res = planned(name, tmp_path_factory)
    assert res.exit_code == mplan.EXIT_OK, res.error or res.violations
    assert [v for v in res.violations if v["enforcementLevel"] == "mandatory"] == []
    assert res.placement is None or res.placement.fits, res.placement.findings      # issue 31: exit agrees
    for obj in res.k8s_objects:
        assert validate_object(obj) == [], (obj["kind"], obj["metadata"].get("name"))


# ------------------------------------------------------------------ NIM on MPIJob
# NVIDIA/nim-deploy helm/nim-llm templates/multi_node_deployment.yaml (MPIJob branch) and values.yaml,
# commit bb84c40 (2025-05-12), with the values of tests/guides/Pulumi.nim-mpijob.yaml:
#   multiNode.workers: 2, multiNode.gpusPerNode: 8, model.openaiPort: 8000
NIM_WORKERS, NIM_GPUS_PER_NODE, NIM_PORT = 2, 8, 8000


def test_nim_mpijob_matches_the_chart(tmp_path_factory):
    res = planned("nim-mpijob", tmp_path_factory)
    job = find(res, "MPIJob", "llama-405b-nim")
    spec = job["spec"]
    specs = spec["mpiReplicaSpecs"]
    # chart: `slotsPerWorker: {{ multiNode.gpusPerNode }}`, `launcherCreationPolicy: WaitForWorkersReady`
    assert spec["slotsPerWorker"] == NIM_GPUS_PER_NODE
    assert spec["launcherCreationPolicy"] == "WaitForWorkersReady"
    # chart: `sshAuthMountPath: {{ nim-llm.sshDir }}` = /root/.ssh for a root pod
    assert spec["sshAuthMountPath"] == "/root/.ssh"
    # chart: `runPolicy.cleanPodPolicy: None`, not kept: a failed job's workers would hold their nodes and, under the
    # gang's budget, refuse every drain of them (the cluster box's day two; docs/workloads.md): Running
    assert spec["runPolicy"]["cleanPodPolicy"] == "Running"
    # chart: Launcher replicas 1; Worker replicas multiNode.workers
    assert specs["Launcher"]["replicas"] == 1
    assert specs["Worker"]["replicas"] == NIM_WORKERS
    assert spec["runLauncherAsWorker"] is False
    launcher = specs["Launcher"]["template"]["spec"]["containers"][0]
    worker = specs["Worker"]["template"]["spec"]["containers"][0]
    # chart: the launcher gets only multiNode.mpiJob.launcherResources (empty): no GPUs
    assert "nvidia.com/gpu" not in str(launcher.get("resources", {}))
    # chart: workers get resources.limits.nvidia.com/gpu = gpusPerNode
    assert worker["resources"]["limits"]["nvidia.com/gpu"] == str(NIM_GPUS_PER_NODE)
    # chart: `mpirun --allow-run-as-root -n {{ mul gpusPerNode workers }} -bind-to none -map-by slot -x ...`
    toks = shlex.split(script(launcher).replace("exec ", "", 1))
    assert toks[:2] == ["mpirun", "--allow-run-as-root"]
    assert toks[toks.index("-n") + 1] == str(NIM_GPUS_PER_NODE * NIM_WORKERS)
    assert toks[toks.index("-bind-to") + 1] == "none" and toks[toks.index("-map-by") + 1] == "slot"
    forwarded = {toks[i + 1] for i, t in enumerate(toks) if t == "-x"}
    # chart: the -x list (every NIM env name the chart forwards from the launcher)
    assert {"NIM_CACHE_PATH", "NGC_API_KEY", "NIM_SERVER_PORT", "NIM_NUM_COMPUTE_NODES", "HF_HOME",
            "NGC_HOME", "NUMBA_CACHE_DIR", "OUTLINES_CACHE_DIR"} <= forwarded
    # chart: multiNodeExec for NIM > 1.1.2 is /opt/nim/start-mpi-cluster.sh
    assert toks[-1] == "/opt/nim/start-mpi-cluster.sh"
    env = env_of(launcher)
    # chart: NIM_NUM_COMPUTE_NODES = multiNode.workers, NIM_SERVER_PORT = model.openaiPort,
    # NUMBA_CACHE_DIR=/tmp/numba, OUTLINES_CACHE_DIR=/tmp/outlines, NGC_API_KEY from the NGC secret's NGC_API_KEY
    assert env["NIM_NUM_COMPUTE_NODES"] == str(NIM_WORKERS)
    assert env["NIM_SERVER_PORT"] == str(NIM_PORT)
    assert env["NUMBA_CACHE_DIR"] == "/tmp/numba" and env["OUTLINES_CACHE_DIR"] == "/tmp/outlines"
    assert env["NGC_API_KEY"]["secretKeyRef"]["key"] == "NGC_API_KEY"
    assert env["NGC_HOME"] == env["NIM_CACHE_PATH"] + "/ngc"
    assert env["HF_HOME"] == env["NIM_CACHE_PATH"] + "/huggingface"
    # chart worker: host key into the ssh-confs emptyDir, then `sshd -De -f .../.sshd_config -h .../hostkey.rsa`
    ws = script(worker)
    assert "/usr/bin/ssh-keygen -f /ssh-confs/hostkey.rsa -N '' -t rsa" in ws
    assert ws.rstrip().endswith("/usr/sbin/sshd -De -f /ssh-confs/.sshd_config -h /ssh-confs/hostkey.rsa")
    assert {"name": "ssh-confs", "mountPath": "/ssh-confs"} in worker["volumeMounts"]
    assert {"name": "ssh-confs", "emptyDir": {}} in specs["Worker"]["template"]["spec"]["volumes"]
    # chart: terminationGracePeriodSeconds 60 on both roles
    for role in ("Launcher", "Worker"):
        assert specs[role]["template"]["spec"]["terminationGracePeriodSeconds"] == 60
    # no automatic restart (docs/workloads.md): the MPIJob default restartPolicy Never, backoffLimit 0
    assert specs["Launcher"]["restartPolicy"] == specs["Worker"]["restartPolicy"] == "Never"
    assert spec["runPolicy"]["backoffLimit"] == 0


def test_nim_mpijob_fabric_and_service(tmp_path_factory):
    res = planned("nim-mpijob", tmp_path_factory)
    specs = find(res, "MPIJob")["spec"]["mpiReplicaSpecs"]
    # only the GPU workers ask for the fabric; the launcher runs no rank
    assert specs["Worker"]["template"]["metadata"]["labels"]["multinode.dev/fabric"] == "enabled"
    assert "multinode.dev/fabric" not in specs["Launcher"]["template"]["metadata"]["labels"]
    # every rank sources the fabric env its worker saved before exec'ing the NIM entrypoint
    launcher = specs["Launcher"]["template"]["spec"]["containers"][0]
    assert "bash -c '. /tmp/multinode-rank-env.sh; exec \"$@\"' rank" in script(launcher)
    assert script(specs["Worker"]["template"]["spec"]["containers"][0]).startswith(
        "export -p | grep -E '^declare -x (NCCL_|FI_|")
    # not the MPIJob's name: the operator's own worker Service has it (mpijob.nim_service_name)
    assert not [o for o in res.k8s_objects if o["kind"] == "Service" and o["metadata"]["name"] == "llama-405b-nim"]
    svc = find(res, "Service", "llama-405b-nim-api")
    assert svc["spec"]["selector"] == {"training.kubeflow.org/job-name": "llama-405b-nim",
                                       "training.kubeflow.org/replica-type": "worker",
                                       "training.kubeflow.org/replica-index": "0"}
    assert svc["spec"]["ports"] == [{"name": "http", "port": NIM_PORT, "targetPort": NIM_PORT}]


# ------------------------------------------------------------------ the torchrun / DeepSpeed recipe
# kubernetes.recipes/recipes/ai/multi-node-training-kubernetes, "PyTorch DDP with torchrun": an Indexed Job
#   completions: 4, parallelism: 4, completionMode: Indexed
#   template.spec.subdomain: <headless Service>, setHostnameAsFQDN: true
#   torchrun --nnodes=4 --nproc_per_node=8 --node_rank=$(JOB_COMPLETION_INDEX) --rdzv_backend=c10d
#            --rdzv_endpoint=<job>-0.<subdomain>:29400 train.py ...
# and its DeepSpeed config mounted as one file via subPath.
RECIPE_NODES, RECIPE_GPUS, RECIPE_PORT = 4, 8, 29400


def _torchrun(text: str) -> list[str]:
    return shlex.split(text[text.index("torchrun"):].splitlines()[0])


def _flag(args: list[str], name: str) -> str:
    return next(a.split("=", 1)[1] for a in args if a.startswith(name + "="))


def test_torchrun_recipe_indexed_job(tmp_path_factory):
    res = planned("torchrun-recipe", tmp_path_factory)
    job = find(res, "Job", "llm-finetune")
    svc = find(res, "Service", "llm-finetune")
    spec, pod = job["spec"], job["spec"]["template"]["spec"]
    assert spec["completionMode"] == "Indexed"
    assert spec["completions"] == spec["parallelism"] == RECIPE_NODES
    assert pod["subdomain"] == svc["metadata"]["name"]
    assert pod["setHostnameAsFQDN"] is True
    # the headless Service on the rendezvous port
    assert svc["spec"]["clusterIP"] == "None"
    assert svc["spec"]["ports"] == [{"name": "rdzv", "port": RECIPE_PORT, "targetPort": RECIPE_PORT}]
    assert svc["spec"]["selector"] == {"batch.kubernetes.io/job-name": "llm-finetune"}
    args = _torchrun(script(pod["containers"][0]))
    assert _flag(args, "--nnodes") == str(RECIPE_NODES)
    assert _flag(args, "--nproc_per_node") == str(RECIPE_GPUS)
    assert _flag(args, "--node_rank") == "$JOB_COMPLETION_INDEX"
    assert _flag(args, "--rdzv_backend") == "c10d"
    assert _flag(args, "--rdzv_endpoint") == f"llm-finetune-0.{pod['subdomain']}:{RECIPE_PORT}"
    assert not any(a.startswith(("--master_addr", "--master_port")) for a in args)
    assert args[args.index("--deepspeed_config") + 1] == "/etc/multinode/deepspeed/ds_config.json"


def test_torchrun_recipe_deepspeed_file_and_numbers(tmp_path_factory):
    import json
    res = planned("torchrun-recipe", tmp_path_factory)
    pod = find(res, "Job", "llm-finetune")["spec"]["template"]["spec"]
    mount = next(m for m in pod["containers"][0]["volumeMounts"] if m["name"] == "deepspeed")
    assert mount == {"name": "deepspeed", "mountPath": "/etc/multinode/deepspeed/ds_config.json",
                     "subPath": "ds_config.json", "readOnly": True}
    cm = find(res, "ConfigMap", "llm-finetune-deepspeed")
    ds = json.loads(cm["data"]["ds_config.json"])
    # `reduce_bucket_size: 5e8` in the stack file: a number, and a whole one (DeepSpeed's int fields)
    assert ds["zero_optimization"]["reduce_bucket_size"] == 500000000
    assert isinstance(ds["zero_optimization"]["reduce_bucket_size"], int)
    assert ds["zero_optimization"]["stage3_prefetch_bucket_size"] == 500000000


def test_master_addr_in_env_is_refused_before_any_resource(tmp_path):
    import yaml
    doc = yaml.safe_load((GUIDES / "Pulumi.torchrun-recipe.yaml").read_text())
    doc["config"]["multinode:workloads"][0]["env"] = {"MASTER_ADDR": "llm-finetune-0.llm-finetune",
                                                      "MASTER_PORT": "29400"}
    f = tmp_path / "Pulumi.bad.yaml"
    f.write_text(yaml.safe_dump(doc))
    res = mplan.plan("bad", tmp_path / "out", f)
    assert res.exit_code == mplan.EXIT_CONFIG and res.registrations == []
    assert "workloads[0].env.MASTER_ADDR" in res.error and "workloads[0].env.MASTER_PORT" in res.error
    assert "remove MASTER_ADDR" in res.error


# ------------------------------------------------------------------ MPIJob, the mpi-operator examples' shape
# kubeflow/mpi-operator examples/v2beta1/tensorflow-benchmarks/tensorflow-benchmarks.yaml (commit caa3c47):
#   slotsPerWorker: <GPUs per worker>, runPolicy.cleanPodPolicy: Running, Launcher replicas 1 with no GPU
#   resources, Worker replicas 2 with nvidia.com/gpu limits, mpirun --allow-run-as-root -np <workers x slots>
#   -bind-to none -map-by slot ... python scripts/tf_cnn_benchmarks/tf_cnn_benchmarks.py --model=resnet101
MPI_WORKERS, MPI_SLOTS = 2, 8


def test_mpijob_matches_the_operator_example(tmp_path_factory):
    res = planned("torchrun-recipe", tmp_path_factory)
    spec = find(res, "MPIJob", "horovod-bench")["spec"]
    specs = spec["mpiReplicaSpecs"]
    assert spec["slotsPerWorker"] == MPI_SLOTS
    assert spec["runPolicy"]["cleanPodPolicy"] == "Running"
    assert specs["Launcher"]["replicas"] == 1 and specs["Worker"]["replicas"] == MPI_WORKERS
    launcher = specs["Launcher"]["template"]["spec"]["containers"][0]
    worker = specs["Worker"]["template"]["spec"]["containers"][0]
    assert "resources" not in launcher
    assert worker["resources"]["limits"]["nvidia.com/gpu"] == str(MPI_SLOTS)
    text = script(launcher)
    line = next(ln for ln in text.splitlines() if "mpirun" in ln)
    toks = shlex.split(line.replace("exec ", "", 1))
    assert toks[:2] == ["mpirun", "--allow-run-as-root"]
    assert toks[toks.index("-n") + 1] == str(MPI_WORKERS * MPI_SLOTS)
    assert toks[toks.index("-bind-to") + 1] == "none" and toks[toks.index("-map-by") + 1] == "slot"
    assert toks[-5:] == ["python", "scripts/tf_cnn_benchmarks/tf_cnn_benchmarks.py", "--model=resnet101",
                         "--batch_size=64", "--variable_update=horovod"]


# ------------------------------------------------------------------ Volcano: recovery, priorities, topology
# volcano-sh/volcano v1.15.1 docs/user-guide:
#   how_to_use_job_policy.md: `events: PodEvicted, action: RestartJob, timeout: 10m`
#   how_to_configure_priorityclass_for_job.md: PriorityClass {value, preemptionPolicy} + Job spec.priorityClassName
#   how_to_use_network_topology_aware_scheduling.md: `networkTopology: {mode: hard, highestTierAllowed: 2}` and
#     the scheduler plugin `- name: network-topology-aware`
#   how_to_use_hypernode_auto_discovery.md: `source: label`, `networkTopologyTypes`, labels top to bottom
#     ending with kubernetes.io/hostname
# installer/helm/chart/volcano/config/volcano-scheduler.conf (v1.15.1): actions "enqueue, allocate, backfill"


def _volcano_values(res: mplan.PlanResult) -> dict[str, Any]:
    rel = next(r for r in res.registrations if r.type == "kubernetes:helm.sh/v3:Release"
               and r.inputs.get("chart") == "volcano")
    return rel.inputs["values"]


def test_volcano_job_recovery_priority_topology(tmp_path_factory):
    res = planned("volcano-llm-training", tmp_path_factory)
    job = find(res, "Job", "llama-pretrain")
    spec = job["spec"]
    assert job["apiVersion"] == "batch.volcano.sh/v1alpha1"
    assert spec["networkTopology"] == {"mode": "hard", "highestTierAllowed": 2}
    assert spec["priorityClassName"] == "training-high"
    assert spec["queue"] == "research"
    for task in spec["tasks"]:
        restart = [p for p in task["policies"] if p.get("action") in ("RestartJob", "RestartTask")]
        assert restart and all(p["timeout"] == "10m" and "PodEvicted" in p["events"] for p in restart)
    pcs = {o["metadata"]["name"]: o for o in res.k8s_objects if o["kind"] == "PriorityClass"}
    assert pcs["training-high"]["value"] == 1000
    assert pcs["training-high"]["preemptionPolicy"] == "PreemptLowerPriority"
    assert pcs["experiments"]["preemptionPolicy"] == "Never" and pcs["experiments"]["value"] == 10
    queue = find(res, "Queue", "research")
    assert queue["spec"]["priority"] == 10 and queue["spec"]["weight"] == 2


def test_volcano_scheduler_and_discovery_values(tmp_path_factory):
    import yaml
    res = planned("volcano-llm-training", tmp_path_factory)
    custom = _volcano_values(res)["custom"]
    sched = yaml.safe_load(custom["scheduler_config_override"])
    # the chart's actions with preempt before backfill (addons.volcano.preemption)
    assert sched["actions"] == "enqueue, allocate, preempt, backfill"
    names = [p["name"] for tier in sched["tiers"] for p in tier["plugins"]]
    # the chart's plugins, all kept, plus network-topology-aware
    assert names == ["priority", "gang", "conformance", "overcommit", "drf", "predicates", "proportion",
                     "nodeorder", "binpack", "network-topology-aware"]
    disc = custom["controller_config_override"]["networkTopologyDiscovery"]
    assert disc == [{"source": "label", "enabled": True, "config": {"networkTopologyTypes": {"aws-3-tier": [
        {"nodeLabel": "topology.k8s.aws/network-node-layer-1"},
        {"nodeLabel": "topology.k8s.aws/network-node-layer-2"},
        {"nodeLabel": "topology.k8s.aws/network-node-layer-3"},
        {"nodeLabel": "kubernetes.io/hostname"}]}}}]
    # the tiers come from the labels: no per-pool HyperNode beside them
    assert not [o for o in res.k8s_objects if o["kind"] == "HyperNode"]


def test_default_scheduler_config_is_the_charts(tmp_path_factory):
    # no topology asked and no preemption: the chart's own config (no override)
    res = planned("nim-mpijob", tmp_path_factory)
    assert "scheduler_config_override" not in _volcano_values(res).get("custom", {})


@pytest.mark.parametrize("edit, key, words", [
    (lambda w, d: w.update(networkTopology={"mode": "hard", "highestTierAllowed": 1}),
     "workloads[0].networkTopology.mode", "use mode soft"),
    (lambda w, d: w.update(recoveryTimeout="ten minutes"), "workloads[0].recoveryTimeout", "'10m'"),
    (lambda w, d: w.update(priorityClassName="urgent"), "workloads[0].priorityClassName",
     "define it under priorityClasses"),
])
def test_volcano_option_errors_name_the_key(tmp_path, edit, key, words):
    import yaml
    doc = {"config": {
        "multinode:cloud": "existing", "multinode:cluster": {"name": "lab"},
        "multinode:kubeconfig": {"secure": "v1:c2VjcmV0"},
        "multinode:fabric": {"kind": "efa"},
        "multinode:nodePools": [{"name": "gpu", "machine": "p5.48xlarge", "nodeCount": 2,
                                 "nodeSelector": {"node.kubernetes.io/instance-type": "p5.48xlarge"}}],
        "multinode:storage": {"kind": "existing", "existingStorageClass": "efs-sc", "sizeGib": 100},
        "multinode:workloads": [{"name": "t", "kind": "volcano-training", "engine": "torchrun",
                                 "nodePool": "gpu", "nodes": 2, "script": "train.py"}]}}
    edit(doc["config"]["multinode:workloads"][0], doc)
    f = tmp_path / "Pulumi.bad.yaml"
    f.write_text(yaml.safe_dump(doc))
    res = mplan.plan("bad", tmp_path / "out", f)
    assert res.exit_code == mplan.EXIT_CONFIG and res.registrations == [], res.error
    assert key in res.error and words in res.error


def test_topology_rules_judge_the_stacks_volcano():
    from policy.engine import Resource, build_context
    from policy.rules import topology as rt
    job = {"apiVersion": "batch.volcano.sh/v1alpha1", "kind": "Job", "metadata": {"name": "j", "namespace": "n"},
           "spec": {"networkTopology": {"mode": "hard", "highestTierAllowed": 1}, "tasks": []}}

    def res(obj, t=None):
        return Resource(type=t or f"kubernetes:{obj['apiVersion']}:{obj['kind']}", name=obj["metadata"]["name"],
                        urn="u", props=obj)

    def release(custom):
        return Resource(type="kubernetes:helm.sh/v3:Release", name="volcano", urn="r",
                        props={"chart": "volcano", "values": {"custom": custom} if custom else {}})

    ctx = build_context(None, [])
    bare = [res(job), release({})]
    assert len(list(rt.check_hard_topology(bare, ctx))) == 1
    assert len(list(rt.check_topology_plugin(bare, ctx))) == 1
    hn = {"apiVersion": "topology.volcano.sh/v1alpha1", "kind": "HyperNode", "metadata": {"name": "h"}}
    assert list(rt.check_hard_topology(bare + [res(hn)], ctx)) == []
    disc = {"controller_config_override": {"networkTopologyDiscovery": [{"source": "label", "enabled": True}]},
            "scheduler_config_override": "tiers:\n- plugins:\n  - name: network-topology-aware\n"}
    ok = [res(job), release(disc)]
    assert list(rt.check_hard_topology(ok, ctx)) == [] and list(rt.check_topology_plugin(ok, ctx)) == []
    soft = dict(job, spec={"networkTopology": {"mode": "soft"}})
    assert list(rt.check_hard_topology([res(soft), release({})], ctx)) == []
    # Volcano not installed by the stack: the cluster's own config, nothing to judge
    assert list(rt.check_hard_topology([res(job)], ctx)) == [] and list(rt.check_topology_plugin([res(job)], ctx)) == []


# ------------------------------------------------------------------ NIM on LeaderWorkerSet + group placement
# NVIDIA/nim-deploy helm/nim-llm templates/multi_node_deployment.yaml (LWS branch, commit bb84c40):
#   spec.replicas: replicaCount (1); leaderWorkerTemplate.size: multiNode.workers (2);
#   restartPolicy: RecreateGroupOnPodRestart; NIM_NUM_COMPUTE_NODES = multiNode.workers;
#   NIM_SERVER_PORT = model.openaiPort (8000); GPUs per pod = resources.limits.nvidia.com/gpu (8)
# kubernetes-sigs/lws v0.10.0: annotation leaderworkerset.sigs.k8s.io/exclusive-topology: <node label key>;
#   subgroups: leaderWorkerTemplate.subGroupPolicy.subGroupSize + subgroup-exclusive-topology


def test_nim_lws_matches_the_chart_and_keeps_groups_in_one_domain(tmp_path_factory):
    res = planned("nim-lws", tmp_path_factory)
    lws = find(res, "LeaderWorkerSet", "llama-405b-nim")
    spec, lwt = lws["spec"], lws["spec"]["leaderWorkerTemplate"]
    assert spec["replicas"] == 1 and lwt["size"] == NIM_WORKERS
    assert lwt["restartPolicy"] == "RecreateGroupOnPodRestart"
    for role in ("leaderTemplate", "workerTemplate"):
        cont = lwt[role]["spec"]["containers"][0]
        env = env_of(cont)
        assert env["NIM_NUM_COMPUTE_NODES"] == str(NIM_WORKERS) and env["NIM_SERVER_PORT"] == str(NIM_PORT)
        assert cont["resources"]["limits"]["nvidia.com/gpu"] == str(NIM_GPUS_PER_NODE)
    # Volcano gangs the group here (addons.volcano on by default), so the exclusive placement is pod affinity in
    # both templates, not LWS's annotation (with it LWS waits for a leader Volcano's gang never binds: lws.py
    # group_exclusive_affinity). The cluster box binds this stack's gang as placement.json says.
    assert "leaderworkerset.sigs.k8s.io/exclusive-topology" not in lws["metadata"]["annotations"]
    key = "topology.k8s.aws/network-node-layer-3"
    for role in ("leaderTemplate", "workerTemplate"):
        assert lwt[role]["spec"]["schedulerName"] == "volcano"
        aff = lwt[role]["spec"]["affinity"]
        (near,) = aff["podAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]
        (far,) = aff["podAntiAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]
        assert near == {"labelSelector": {"matchLabels": {"leaderworkerset.sigs.k8s.io/name": "llama-405b-nim"}},
                        "matchLabelKeys": ["leaderworkerset.sigs.k8s.io/group-key"], "topologyKey": key}
        assert far == {"labelSelector": {"matchExpressions": [{"key": "leaderworkerset.sigs.k8s.io/group-key",
                                                               "operator": "Exists"}]},
                       "mismatchLabelKeys": ["leaderworkerset.sigs.k8s.io/group-key"], "topologyKey": key}
    assert "subGroupPolicy" not in lwt
    assert validate_object(lws) == []


def test_nim_lws_without_volcano_keeps_lws_exclusive_placement(tmp_path):
    """Without a gang scheduler the LWS annotation works as LWS documents (the leader is bound alone, then its
    workers follow it into its domain): it stays, and no affinity is rendered."""
    import yaml
    doc = yaml.safe_load((GUIDES / "Pulumi.nim-lws.yaml").read_text())
    doc["config"]["multinode:addons"] = {"volcano": {"enabled": False}}
    f = tmp_path / "Pulumi.novc.yaml"
    f.write_text(yaml.safe_dump(doc))
    res = mplan.plan("novc", tmp_path / "out", f)
    assert res.exit_code in (mplan.EXIT_OK, mplan.EXIT_POLICY), res.error
    lws = find(res, "LeaderWorkerSet")
    assert lws["metadata"]["annotations"]["leaderworkerset.sigs.k8s.io/exclusive-topology"] == \
        "topology.k8s.aws/network-node-layer-3"
    lwt = lws["spec"]["leaderWorkerTemplate"]
    assert all("affinity" not in lwt[r]["spec"] and "schedulerName" not in lwt[r]["spec"]
               for r in ("leaderTemplate", "workerTemplate"))


def test_lws_subgroup_placement_and_its_errors(tmp_path):
    import yaml
    doc = yaml.safe_load((GUIDES / "Pulumi.nim-lws.yaml").read_text())
    w = doc["config"]["multinode:workloads"][0]
    w.update(nodes=4, pipelineParallel=4, groupPlacement={"topologyKey": "example.com/rack", "subGroupSize": 2})
    f = tmp_path / "Pulumi.sub.yaml"
    f.write_text(yaml.safe_dump(doc))
    res = mplan.plan("sub", tmp_path / "out", f)
    assert res.exit_code == mplan.EXIT_OK, res.error or res.violations
    lws = find(res, "LeaderWorkerSet")
    assert lws["metadata"]["annotations"]["leaderworkerset.sigs.k8s.io/subgroup-exclusive-topology"] == \
        "example.com/rack"
    assert "leaderworkerset.sigs.k8s.io/exclusive-topology" not in lws["metadata"]["annotations"]
    # subgroups: LWS's webhook gives every pod its subgroup affinity at creation, no waiting on the leader
    # (sigs.k8s.io/lws@v0.9.0 pkg/controllers/pod_controller.go:161-166 checks only exclusive-topology): no
    # affinity of ours
    assert all("affinity" not in lws["spec"]["leaderWorkerTemplate"][r]["spec"]
               for r in ("leaderTemplate", "workerTemplate"))
    assert lws["spec"]["leaderWorkerTemplate"]["subGroupPolicy"] == {"subGroupSize": 2}
    assert validate_object(lws) == []
    w["groupPlacement"] = {"topologyKey": "not a key!", "subGroupSize": 5}
    f.write_text(yaml.safe_dump(doc))
    bad = mplan.plan("sub", tmp_path / "out2", f)
    assert bad.exit_code == mplan.EXIT_CONFIG and bad.registrations == []
    assert "workloads[0].groupPlacement.topologyKey" in bad.error
    assert "workloads[0].groupPlacement.subGroupSize" in bad.error and "use one of 1, 2, 3, 4" in bad.error


# ------------------------------------------------------------------ Dynamo DGD with and without KAI
# ai-dynamo/dynamo docs/kubernetes/deployment/multinode-deployment.md: Grove (+ KAI-Scheduler, optional)
# or LWS + Volcano; the DGD annotation nvidia.com/kai-scheduler-queue names the KAI queue.
# ai-dynamo/grove docs/installation.md "Supported Schedulers": KAI-Scheduler gang-schedules PodGangs.


def _dynamo_values(res: mplan.PlanResult) -> dict[str, Any]:
    rel = next(r for r in res.registrations if r.type == "kubernetes:helm.sh/v3:Release"
               and r.inputs.get("chart") == "dynamo-platform")
    return rel.inputs["values"]


@pytest.mark.parametrize("name, kai", [("dynamo-grove-kai", True), ("dynamo-grove-nokai", False)])
def test_dynamo_dgd_with_and_without_kai(tmp_path_factory, name, kai):
    res = planned(name, tmp_path_factory)
    assert res.exit_code == mplan.EXIT_OK, res.error
    dgd = find(res, "DynamoGraphDeployment", "llama-405b-dynamo")
    ann = dgd["metadata"].get("annotations", {})
    assert ("nvidia.com/kai-scheduler-queue" in ann) is kai
    assert ann.get("nvidia.com/kai-scheduler-queue", "dynamo") == "dynamo"
    assert "nvidia.com/enable-grove" not in ann                  # Grove orchestrates in both
    g = _dynamo_values(res)["global"]
    assert g["grove"] == {"install": False, "enabled": True}
    assert g["kai-scheduler"] == {"install": False, "enabled": kai}
    releases = {r.inputs.get("chart") for r in res.registrations if r.type == "kubernetes:helm.sh/v3:Release"}
    assert any("kai-scheduler" in str(c) for c in releases) is kai
    advisory = [a for a in res.advisories if "addons.kai.enabled" in a]
    assert bool(advisory) is (not kai)
    if not kai:
        assert "does not gang-schedule" in advisory[0] and "llama-405b-dynamo" in advisory[0]


def test_grove_workload_without_kai_names_no_kai_scheduler(tmp_path):
    from multinode import checks
    from multinode.manifests.workloads import build
    from tests import workload_fixtures as WF
    raw = WF.raw_config([w for w in WF.WORKLOADS if w["kind"] == "grove-inference"],
                        addons={"grove": {"enabled": True}, "kai": {"enabled": False}})
    cfg = checks.load(raw, {"kubeconfig", "hfToken", "ngcApiKey", "imagePullSecret"})
    out = build(cfg, cfg.workloads[0])
    pcs = next(o for o in out.objects if o["kind"] == "PodCliqueSet")
    assert "kai.scheduler/queue" not in pcs["metadata"]["labels"]
    assert "kai-scheduler" not in str(pcs)


def test_mpijob_script_with_its_interpreter_is_split_into_words():
    from multinode import checks
    from multinode.manifests.workloads import build
    from tests import workload_fixtures as WF
    raw = WF.raw_config([w for w in WF.WORKLOADS if w["name"] == "train-mpi"])
    cfg = checks.load(raw, {"kubeconfig", "hfToken", "ngcApiKey", "imagePullSecret"})
    job = next(o for o in build(cfg, cfg.workloads[0]).objects if o["kind"] == "MPIJob")
    text = script(job["spec"]["mpiReplicaSpecs"]["Launcher"]["template"]["spec"]["containers"][0])
    line = next(ln for ln in text.splitlines() if "mpirun" in ln)
    # the fixture's script is "python3 /workspace/train_hvd.py": two words after the rank wrapper
    assert shlex.split(line)[-2:] == ["python3", "/workspace/train_hvd.py"]


def test_gang_whole_fix_for_an_mpijob_whose_launcher_waits_for_workers():
    # mpi-operator creates a WaitForWorkersReady launcher after the workers are Ready, so the suggested gang
    # is the workers alone; otherwise workers + launcher (mpi-operator's default minMember, podgroup.go)
    from tests import policy_fixtures as F
    from tests.test_policy_rules import run
    job = F.mpijob()
    job["spec"]["runPolicy"]["schedulingPolicy"] = {"minAvailable": 1}
    assert "set minAvailable 3" in run([job], "gang-whole")[0]["message"]
    job["spec"]["launcherCreationPolicy"] = "WaitForWorkersReady"
    assert "set minAvailable 2" in run([job], "gang-whole")[0]["message"]
