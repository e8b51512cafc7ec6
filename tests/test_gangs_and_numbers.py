"""Gang rules for pod groups joined by annotation and Indexed Jobs (policy/rules/gangs.py), the Indexed Job
renderer's gang scheduling, and the config checks on numbers (multinode/numbers.py)."""
from __future__ import annotations

import pytest

from multinode import checks
from multinode import config as mconfig
from multinode.manifests.workloads import indexed_job as ij
from tests import policy_fixtures as F
from tests.test_policy_rules import run


def only(objs, rule, node_count=2):
    out = run(objs, node_count=node_count)
    others = [v for v in out if v["policy"] != rule and v["enforcementLevel"] == "mandatory"]
    assert not others, others
    return [v["message"] for v in out if v["policy"] == rule]


# ------------------------------------------------------------------ pod groups joined by annotation
def test_volcano_pod_group_joined_by_annotation_must_hold_the_whole_group():
    job = F.indexed_job(gang="volcano")
    assert only([job, F.pod_group(min_member=2)], "pod-group-min-member") == []
    (msg,) = only([job, F.pod_group(min_member=1)], "pod-group-min-member")
    assert msg.startswith("PodGroup research/byo-indexed: minMember 1, but the pods that join it by "
                          "scheduling.k8s.io/group-name (Job research/byo-indexed (2)) are 2")
    assert "set minMember 2" in msg
    (msg,) = only([job, F.pod_group(min_member=3)], "pod-group-min-member")
    assert "only 2 pods join it" in msg and "set minMember 2" in msg


def test_kai_pod_group_joined_by_annotation_counts_every_template_that_joins_it():
    a = F.indexed_job(name="a", gang=None)
    b = F.indexed_job(name="b", gang=None)
    for j in (a, b):
        j["spec"]["template"]["spec"]["schedulerName"] = "kai-scheduler"
        j["spec"]["template"]["metadata"]["annotations"] = {"pod-group-name": "shared"}
    out = [v["message"] for v in run([a, b, F.pod_group("shared", 2, kai=True)], node_count=4)
           if v["policy"] == "pod-group-min-member"]
    assert len(out) == 1 and "(Job research/a (2) + Job research/b (2)) are 4" in out[0]


def test_kai_batch_min_member_must_equal_parallelism():
    job = F.indexed_job()
    job["metadata"]["annotations"]["kai.scheduler/batch-min-member"] = "1"
    (msg,) = only([job], "pod-group-min-member")
    assert "kai.scheduler/batch-min-member 1, but the Job runs 2 pods at once" in msg and 'set it to "2"' in msg


def test_multi_node_indexed_job_without_a_gang_scheduler_is_refused():
    (msg,) = only([F.indexed_job(gang=None)], "indexed-job-gang-scheduled")
    assert "2 indexed pods x 8 GPUs are not gang-scheduled (schedulerName default-scheduler" in msg
    assert only([F.indexed_job(gang="kai")], "indexed-job-gang-scheduled") == []
    assert only([F.indexed_job(gang="volcano"), F.pod_group()], "indexed-job-gang-scheduled") == []
    one = F.indexed_job(gang=None, pods=1, cmd=F.TORCHRUN.replace("--nnodes=2", "--nnodes=1"))
    assert only([one], "indexed-job-gang-scheduled") == []                                  # one pod: no gang


# ------------------------------------------------------------------ the renderer
def _indexed_stack(**addons):
    raw = {k.split(":", 1)[1]: v for k, v in F.existing_stack([], 4, addons=addons or None)["config"].items()}
    raw["kubeconfig"] = "k"
    raw["workloads"] = [{"name": "tr", "kind": "indexed-job", "engine": "torchrun", "nodePool": "gpu", "nodes": 2,
                         "script": "/workspace/train.py", "namespace": "multinode"}]
    raw["storage"]["namespace"] = "multinode"
    return raw


def test_indexed_job_renders_a_volcano_pod_group_or_the_kai_annotation():
    c = checks.load(_indexed_stack(), {"kubeconfig"})
    objs = ij.build(c, c.workloads[0]).objects
    pg = next(o for o in objs if o["kind"] == "PodGroup")
    job = next(o for o in objs if o["kind"] == "Job")
    assert pg["apiVersion"] == "scheduling.volcano.sh/v1beta1" and pg["spec"]["minMember"] == 2
    assert job["spec"]["template"]["metadata"]["annotations"] == {"scheduling.k8s.io/group-name": "tr"}
    assert job["spec"]["template"]["spec"]["schedulerName"] == "volcano"
    c = checks.load(_indexed_stack(volcano={"enabled": False}, kai={"enabled": True}), {"kubeconfig"})
    objs = ij.build(c, c.workloads[0]).objects
    job = next(o for o in objs if o["kind"] == "Job")
    assert not any(o["kind"] == "PodGroup" for o in objs)
    assert job["metadata"]["annotations"] == {"kai.scheduler/batch-min-member": "2"}
    assert job["spec"]["template"]["spec"]["schedulerName"] == "kai-scheduler"


def test_indexed_job_pod_group_validates_against_the_volcano_crd():
    from multinode import schema_check as validation
    c = checks.load(_indexed_stack(), {"kubeconfig"})
    for o in ij.build(c, c.workloads[0]).objects:
        assert validation.validate_object(o) == [], o["kind"]


def test_multi_node_indexed_job_without_volcano_or_kai_is_a_config_error():
    with pytest.raises(mconfig.ConfigError) as e:
        checks.load(_indexed_stack(volcano={"enabled": False}), {"kubeconfig"})
    assert "workloads[0].kind: indexed-job over 2 nodes needs a gang scheduler" in str(e.value)


# ------------------------------------------------------------------ numbers
def _training(**extra):
    raw = {k.split(":", 1)[1]: v for k, v in F.existing_stack([], 2)["config"].items()}
    raw["kubeconfig"] = "k"
    w = {"name": "t", "kind": "volcano-training", "engine": "deepspeed", "nodePool": "gpu", "nodes": 2,
         "script": "/workspace/train.py", "namespace": "multinode"}
    w.update(extra)
    raw["workloads"] = [w]
    raw["storage"]["namespace"] = "multinode"
    return raw


def _problems(raw):
    with pytest.raises(mconfig.ConfigError) as e:
        checks.load(raw, {"kubeconfig"})
    return [str(p) for p in e.value.problems]


def test_deepspeed_train_batch_size_identity():
    ds = {"train_batch_size": 64, "train_micro_batch_size_per_gpu": 2, "gradient_accumulation_steps": 4}
    (p,) = _problems(_training(deepspeedConfig=ds))
    assert p == ("workloads[0].deepspeedConfig.train_batch_size: 64, but train_micro_batch_size_per_gpu 2 x "
                 "gradient_accumulation_steps 4 x data-parallel size 16 (2 nodes x 8 GPUs) = 128; DeepSpeed refuses "
                 "to start: set train_batch_size 128")
    checks.load(_training(deepspeedConfig={**ds, "train_batch_size": 128}), {"kubeconfig"})
    checks.load(_training(deepspeedConfig={**ds, "train_batch_size": "auto"}), {"kubeconfig"})
    # model parallel: data-parallel size = 16 / (tp 2 x pp 2) = 4
    (p,) = _problems(_training(deepspeedConfig=ds, tensorParallel=2, pipelineParallel=2))
    assert "data-parallel size 4 (2 nodes x 8 GPUs / model parallel 4) = 32" in p


def _gcp(zone, reservation, region="us-central1"):
    raw = {"cloud": "gcp", "cluster": {"name": "c", "project": "p", "location": region},
           "nodePools": [{"name": "gpu", "machine": "a3-megagpu-8g", "nodeCount": 2, "zone": zone,
                          "capacityReservation": reservation}]}
    return raw


def test_capacity_reservation_in_another_zone_or_region_than_its_pool():
    ps = _problems(_gcp("us-central1-c", {"id": "projects/p/zones/us-central1-a/reservations/h100"}))
    assert any(p.startswith("nodePools[0].capacityReservation.zone: reservation projects/p/zones/us-central1-a/"
                            "reservations/h100 holds its capacity in us-central1-a, but node pool 'gpu' runs in zone "
                            "us-central1-c") for p in ps), ps
    ps = _problems(_gcp(None, {"id": "h100", "zone": "europe-west4-b"}))
    assert any("which is not in the cluster's region us-central1" in p for p in ps), ps


def test_reservation_in_the_pools_zone_is_accepted():
    from multinode import numbers
    c = mconfig.StackConfig.model_validate(
        _gcp("us-central1-c", {"id": "projects/p/zones/us-central1-c/reservations/h"}))
    assert numbers.reservation_problems(c) == []


def test_shm_above_the_nodes_memory_is_an_advisory_not_a_config_error():
    """Issue 31: the kubelet caps a memory-backed emptyDir at what the pod may use (calculateEmptyDirMemorySize) and
    the scheduler does not count it, so the stack loads and the advisory says what /dev/shm the pod gets."""
    raw = _training(shmSizeGi=64, gpusPerNode=4)
    raw["nodePools"] = [{"name": "gpu", "nodeCount": 2, "nodeSelector": {"a": "b"},
                         "machineSpec": {"name": "small", "gpus": 8, "fabric": "efa", "fabricNics": 8,
                                         "vcpus": 96, "memoryGib": 100}}]
    cfg = checks.load(raw, {"kubeconfig"})
    shm = [str(p) for p in checks.advisories(cfg) if p.path == "workloads[0].shmSizeGi"]
    assert shm == ["workloads[0].shmSizeGi: 64 GiB of memory-backed /dev/shm x 2 pods per node (4 of 8 GPUs each) = "
                   "128 GiB, but small (pool 'gpu') has 100 GiB, about 100 GiB allocatable after the system reserve; "
                   "the kubelet caps the volume at what the pod may use (its memory limit, else the node's allocatable "
                   "memory) and the scheduler does not count it, so /dev/shm will be smaller than asked: use "
                   "shmSizeGi 49 or less to say what you get"], shm


# ------------------------------------------------------------------ overrides
def _aws(**extra):
    from multinode import stackfile
    raw, secrets, _ = stackfile.read_stack_file(stackfile.stack_path("aws-dev"))
    raw = {k: mconfig.parse_raw_value(v) if k not in mconfig.SECRET_KEYS else v for k, v in raw.items()}
    raw.update(extra)
    return raw, secrets


def test_devices_per_gpu_contradicting_the_catalog_is_refused_unless_machine_spec():
    raw, secrets = _aws(fabric={"devicesPerGpu": 2})
    with pytest.raises(mconfig.ConfigError) as e:
        checks.load(raw, secrets)
    (p,) = [p for p in e.value.problems if p.path == "fabric.devicesPerGpu"]
    assert p.message.startswith("2 per GPU x 8 GPUs = 16 EFA interfaces per node, but p5.48xlarge (pool 'gpu') has 32")
    raw, secrets = _aws(fabric={"devicesPerGpu": 4})                      # = the catalog: accepted
    checks.load(raw, secrets)
    raw, secrets = _aws(fabric={"devicesPerGpu": 2})
    pool = raw["nodePools"][0]
    pool.pop("machine")
    pool["machineSpec"] = {"name": "p5-lab", "gpus": 8, "fabric": "efa", "fabricNics": 32}
    from multinode import overrides
    c = mconfig.StackConfig.model_validate(raw)
    assert overrides.devices_per_gpu_problems(c) == []                   # the spec is the fact


def test_user_env_may_not_redefine_what_the_renderer_or_fabric_sets():
    raw, secrets = _aws()
    raw["workloads"][0]["env"] = {"FI_PROVIDER": "tcp", "MY_FLAG": "1"}
    with pytest.raises(mconfig.ConfigError) as e:
        checks.load(raw, secrets)
    (p,) = e.value.problems
    assert p.path == "workloads[0].env.FI_PROVIDER"
    assert "set by the fabric policy of pool 'gpu'" in p.message and "remove it" in p.message
    raw["workloads"][0]["env"] = {"MY_FLAG": "1"}
    checks.load(raw, secrets)


def test_policy_refuses_a_container_that_sets_one_variable_twice():
    job = F.indexed_job()
    c = job["spec"]["template"]["spec"]["containers"][0]
    c["env"] = [{"name": "NCCL_SOCKET_IFNAME", "value": "eth0"}, {"name": "NCCL_SOCKET_IFNAME", "value": "ens5"}]
    (msg,) = only([job], "env-defined-once")
    assert "container trainer: env: 'NCCL_SOCKET_IFNAME' is set more than once" in msg and "keep one entry" in msg
    c["env"] = c["env"][:1]
    assert only([job], "env-defined-once") == []


def test_user_env_may_not_redefine_the_nim_parallel_size_the_renderer_sets():
    raw, secrets = _aws()
    w = raw["workloads"][0]
    w.update(engine="nim", image="nvcr.io/nim/meta/llama-3.1-405b-instruct:1.0.0",
             env={"NIM_TENSOR_PARALLEL_SIZE": "4"})
    raw["ngcApiKey"] = "nvapi-placeholder"
    secrets = set(secrets) | {"ngcApiKey"}
    with pytest.raises(mconfig.ConfigError) as e:
        checks.load(raw, secrets)
    (p,) = e.value.problems
    assert p.path == "workloads[0].env.NIM_TENSOR_PARALLEL_SIZE"
    assert ("set by the lws-inference renderer (from nodes, gpusPerNode, tensorParallel and pipelineParallel)"
            in p.message)


# ------------------------------------------------------------------ gangs read once per pack run (issue 19)
def test_kept_gangs_serve_the_same_object_only_and_end_with_the_scope():
    from policy import objects
    lws, other = F.lws(size=2), F.lws(name="other", size=3, gpus=4)
    fresh = objects.gangs(lws, "x")
    with objects.kept_gangs():
        first, again = objects.gangs(lws, "x"), objects.gangs(lws, "x")
        assert first == again == fresh and first is not again           # the same gangs, a new list each time
        assert first[0] is again[0]                                      # read once
        assert objects.gangs(other, "x") == objects.gangs(other) != first   # another object: its own gangs
        assert objects.gangs(other, "x")[0].roles[1].pods == 2 and first[0].roles[1].pods == 1
        copy = {**lws, "metadata": {**lws["metadata"], "name": "copy"}}
        assert objects.gangs(copy, "x")[0].name != first[0].name            # an equal-looking object is read anew
        assert objects.gangs(lws, "y") == objects.gangs(lws, "x")
    lws["spec"]["leaderWorkerTemplate"]["size"] = 5                          # the scope is over: read anew
    assert objects.gangs(lws, "x")[0].roles[1].pods == 4


def test_the_pack_gives_the_same_findings_with_gangs_kept():
    """pack.evaluate reads gangs in kept_gangs(); the rules, run without it, find the very same."""
    from policy import engine, objects, pack
    from tests.test_policy_rules import cfg, rec
    objs = [F.lws(size=2), F.lws(name="big", size=9), F.volcano_job(min_available=1), F.indexed_job(pods=3)]
    records = [rec(o) for o in objs]
    kept = pack.evaluate(records, cfg())
    resources = [engine.Resource.from_record(r) for r in records]
    ctx = engine.build_context(cfg(), resources, None)
    ctx.resource_rules_see_pools = True
    assert objects._KEPT.get() is None
    assert kept == [v.as_dict() for v in pack.run_rules(resources, ctx)] and kept
