"""Issue 31: a user's first week. Each test writes the stack a user would write (from a guide's own YAML or a
vendor's docs) and plans it as they would, then asserts what `plan` decides."""
from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from multinode import plan as mplan
from tests import policy_fixtures as F

CORPUS = Path(__file__).resolve().parent / "corpus"


def stack_doc(name: str = "mpijob-np") -> dict[str, Any]:
    """A valid existing-cluster stack file (2 x p5.48xlarge, EFA) from the corpus, its manifests removed."""
    doc = yaml.safe_load((CORPUS / f"{name}.yaml").read_text())
    doc["config"].pop("multinode:manifests", None)
    return doc


def plan_doc(doc: dict[str, Any], tmp_path: Path, name: str = "user") -> mplan.PlanResult:
    f = tmp_path / f"Pulumi.{name}.yaml"
    f.write_text(yaml.safe_dump(doc))
    return mplan.plan(name, tmp_path / "build", f)


def mandatory(res: mplan.PlanResult) -> list[dict[str, Any]]:
    return [v for v in res.violations if v["enforcementLevel"] == "mandatory"]


# ------------------------------------------------------------------ every "does not fit" is a finding
def mpijob_with_gpu_launcher() -> dict[str, Any]:
    """mpi-operator v2beta1: the launcher is its own pod; here it asks 8 GPUs on the same machine as the workers."""
    job = F.mpijob(np=16)
    launcher = job["spec"]["mpiReplicaSpecs"]["Launcher"]["template"]["spec"]
    launcher["containers"][0]["resources"] = {"limits": {"nvidia.com/gpu": 8}}
    launcher["nodeSelector"] = {"node.kubernetes.io/instance-type": "p5.48xlarge"}
    return job


def test_mpijob_launcher_with_gpus_counts_and_a_gang_larger_than_the_pool_fails_plan(tmp_path):
    doc = stack_doc()
    doc["config"]["multinode:manifests"] = F.with_budgets([mpijob_with_gpu_launcher()])  # launcher + 2 workers
    res = plan_doc(doc, tmp_path)
    assert res.placement is not None and not res.placement.fits
    assert "does not fit" in "\n".join(mplan.placement.table(res.placement))
    found = [v for v in mandatory(res) if v["policy"] == "stack-fits-node-pools"]
    assert len(found) == 1 and "byo-nccl (3) needs 3 nodes" in found[0]["message"], res.violations
    assert res.exit_code == mplan.EXIT_POLICY

    # the same job on a pool of 3 nodes fits: the launcher's node is the third one
    doc["config"]["multinode:nodePools"][0]["nodeCount"] = 3
    res = plan_doc(doc, tmp_path, "user3")
    assert res.placement.fits and res.exit_code == mplan.EXIT_OK, res.violations


# ------------------------------------------------------------------ the team's policy config (CrossGuard's format)
GUIDES = Path(__file__).resolve().parent / "guides"
GUIDE_JOB = GUIDES / "Pulumi.torchrun-guide-indexed-job.yaml"


def test_training_guide_indexed_job_refused_without_the_team_config(tmp_path):
    """The guide's plain Indexed Job (default scheduler) copied where there is no policy-config.json: refused."""
    f = tmp_path / GUIDE_JOB.name
    f.write_text(GUIDE_JOB.read_text())
    res = mplan.plan("torchrun-guide-indexed-job", tmp_path / "build", f)
    assert res.exit_code == mplan.EXIT_POLICY
    # the guide has no PodDisruptionBudget either: advisory for a batch gang since issue 40 (it was mandatory)
    assert sorted(v["policy"] for v in mandatory(res)) == ["indexed-job-gang-scheduled"], res.violations
    assert ("multi-node-batch-gang-has-disruption-budget", "advisory") in {
        (v["policy"], v["enforcementLevel"]) for v in res.violations}, res.violations


def test_training_guide_indexed_job_clean_with_the_default_config_next_to_the_stack(tmp_path):
    res = mplan.plan("torchrun-guide-indexed-job", tmp_path / "build", GUIDE_JOB)     # tests/guides/policy-config.json
    assert res.exit_code == mplan.EXIT_OK, res.error or res.violations
    found = [(v["policy"], v["enforcementLevel"]) for v in res.violations]
    # the guide stack names its c10d store host (is_host, as the pack advises): no c10d-store-host-explicit
    assert sorted(found) == [("indexed-job-gang-scheduled", "advisory"),
                             ("multi-node-batch-gang-has-disruption-budget", "advisory")]
    assert "indexed-job-gang-scheduled mandatory -> advisory" in mplan.summary(res)


def test_plan_policy_config_option_names_the_file(tmp_path, capsys):
    f = tmp_path / GUIDE_JOB.name
    f.write_text(GUIDE_JOB.read_text())
    cfg = tmp_path / "team.json"
    cfg.write_text('{"indexed-job-gang-scheduled": {"enforcementLevel": "advisory"},'
                   ' "multi-node-gang-has-disruption-budget": "advisory"}')
    assert mplan.main(["--file", str(f), "--out", str(tmp_path / "b"), "--policy-config", str(cfg)]) == mplan.EXIT_OK
    assert f"policy config {cfg}" in capsys.readouterr().out
    # `disabled` is a team's choice for this rule: no finding at all
    cfg.write_text('{"indexed-job-gang-scheduled": "disabled", "multi-node-gang-has-disruption-budget": "disabled",'
                   ' "multi-node-batch-gang-has-disruption-budget": "disabled"}')
    res = mplan.plan("g", tmp_path / "b2", f, cfg)
    # nothing remains: the disabled rules are silent and the guide stack names its c10d store host (is_host)
    assert res.exit_code == mplan.EXIT_OK and [v["policy"] for v in res.violations] == []


def test_policy_config_never_disables_the_topology_contract(tmp_path):
    f = tmp_path / GUIDE_JOB.name
    f.write_text(GUIDE_JOB.read_text())
    cfg = tmp_path / "policy-config.json"            # the default location: next to the stack file
    cfg.write_text('{"stack-fits-node-pools": "disabled", "all": "disabled", "multinode-pod-shm": {"sizeHnt": "1Gi"},'
                   ' "no-such-rule": "advisory", "gang-whole": "loud"}')
    res = mplan.plan("g", tmp_path / "b", f)
    assert res.exit_code == mplan.EXIT_CONFIG and res.registrations == []
    for key in ("  - stack-fits-node-pools: stack-fits-node-pools is part of the topology contract",
                "  - all: `disabled` for every policy", "  - multinode-pod-shm.sizeHnt:", "  - no-such-rule:",
                "  - gang-whole: 'loud' is not an enforcement level"):
        assert key in res.error, res.error
    # a contract rule may be made advisory (its findings still print), and CrossGuard's "version: 2" form is read
    cfg.write_text('{"version": 2, "policies": {"parallelism-matches-gpus": "advisory"}}')
    assert mplan.plan("g", tmp_path / "b2", f).policy_config.levels == {"parallelism-matches-gpus": "advisory"}


def _servicer(team: Any) -> Any:
    """The pack as the Pulumi CLI talks to it: pulumi_policy's own analyzer servicer (what PolicyPack serves over
    gRPC, without starting a server), with the pack's policies and the team's file as its initial config, and
    configured as the CLI does when no --policy-pack-config is given: every policy's level from GetAnalyzerInfo,
    the initial config applied over it (pulumi pkg/v3 resource/analyzer/config.go ReconcilePolicyPackConfig)."""
    from pulumi.runtime import proto
    from pulumi_policy import EnforcementLevel
    from pulumi_policy.policy import _PolicyAnalyzerServicer

    from policy.config import initial_config
    from policy.pack import policies
    s = _PolicyAnalyzerServicer("multinode", "0.1.0", policies(), EnforcementLevel.MANDATORY,
                                initial_config(team) or None)
    info = s.GetAnalyzerInfo(None, None)
    req = proto.ConfigureAnalyzerRequest()
    for p in info.policies:
        req.policyConfig[p.name].enforcementLevel = p.enforcementLevel
    for name, c in info.initialConfig.items():
        req.policyConfig[name].enforcementLevel = c.enforcementLevel
        req.policyConfig[name].properties.update(dict(c.properties))
    s.Configure(req, None)
    return s


def _analyze_stack(s: Any, objs: list[dict[str, Any]]) -> list[tuple[str, int]]:
    from google.protobuf import struct_pb2
    from pulumi.runtime import proto
    req = proto.AnalyzeStackRequest()
    for i, o in enumerate(objs):
        props = struct_pb2.Struct()
        props.update(o)
        t = f"kubernetes:{o['apiVersion'] if '/' in o['apiVersion'] else 'core/' + o['apiVersion']}:{o['kind']}"
        req.resources.append(proto.AnalyzerResource(type=t, properties=props, urn=f"urn:pulumi:s::p::{t}::r{i}",
                                                    name=f"r{i}"))
    return [(d.policyName, d.enforcementLevel) for d in s.AnalyzeStack(req, None).diagnostics]


def test_the_same_file_changes_the_packs_level_under_crossguard():
    from pulumi.runtime import proto

    from policy import config as pconfig
    job = next(o for o in yaml.safe_load(GUIDE_JOB.read_text())["config"]["multinode:manifests"] if o["kind"] == "Job")
    without = _analyze_stack(_servicer(None), [job])
    assert ("indexed-job-gang-scheduled", proto.MANDATORY) in without
    team = pconfig.load(GUIDES / "policy-config.json")           # the very file plan reads next to the guide stacks
    found = _analyze_stack(_servicer(team), [job])
    assert ("indexed-job-gang-scheduled", proto.ADVISORY) in found
    assert ("indexed-job-gang-scheduled", proto.MANDATORY) not in found
    disabled = pconfig.parse({"indexed-job-gang-scheduled": "disabled"}, "team.json")
    assert "indexed-job-gang-scheduled" not in {p for p, _ in _analyze_stack(_servicer(disabled), [job])}


def test_settings_only_entry_keeps_the_rule_mandatory_under_crossguard():
    """An initial-config entry without a level reads as ADVISORY in the CLI (the proto's zero value): the pack
    always sends the level."""
    from pulumi.runtime import proto

    from policy import config as pconfig
    team = pconfig.parse({"multinode-pod-shm": {"sizeHint": "32Gi"}}, "team.json")
    s = _servicer(team)
    info = s.GetAnalyzerInfo(None, None)
    assert info.initialConfig["multinode-pod-shm"].enforcementLevel == proto.MANDATORY
    assert dict(info.initialConfig["multinode-pod-shm"].properties) == {"sizeHint": "32Gi"}


# ------------------------------------------------------------------ /dev/shm: as strict as the kubelet, and no stricter
def training_stack(**workload: Any) -> dict[str, Any]:
    """2 x p5.48xlarge (2 TiB of memory each) and the torchrun recipe's Indexed Job as a workload."""
    doc = stack_doc()
    w = {"name": "llm-finetune", "kind": "indexed-job", "engine": "torchrun", "nodePool": "gpu", "nodes": 2,
         "image": "public.ecr.aws/deep-learning-containers/pytorch-training:2.8.0-gpu-py312-cu129-ubuntu22.04-ec2",
         "script": "/workspace/train.py"}
    w.update(workload)
    doc["config"]["multinode:workloads"] = [w]
    return doc


def test_shm_larger_than_the_node_plans_with_an_advisory(tmp_path):
    doc = training_stack(shmSizeGi=512)                              # 512 GiB asked of a 100 GiB machine
    doc["config"]["multinode:nodePools"] = [{"name": "gpu", "nodeCount": 2, "nodeSelector": {"pool": "small"},
                                             "machineSpec": {"name": "small", "gpus": 8, "fabric": "efa",
                                                             "fabricNics": 8, "vcpus": 96, "memoryGib": 100}}]
    res = plan_doc(doc, tmp_path)
    assert res.exit_code == mplan.EXIT_OK, res.error or res.violations
    (adv,) = [a for a in res.advisories if a.startswith("workloads[0].shmSizeGi")]
    assert "the kubelet caps the volume" in adv and "use shmSizeGi" in adv
    assert res.placement.fits            # the scheduler does not count it; placement caps it as the kubelet does


def test_placement_caps_a_memory_backed_volume_as_the_kubelet_does():
    from multinode.placement import GPU, MEMORY, pod_requests
    gib = 2.0 ** 30
    spec = {"containers": [{"name": "c", "resources": {"requests": {"memory": "10Gi", GPU: 8}}}],
            "volumes": [{"name": "dshm", "emptyDir": {"medium": "Memory", "sizeLimit": "4Ti"}}]}
    assert pod_requests(spec)[MEMORY] == 10 * gib + 4096 * gib                   # node unknown: as asked
    assert pod_requests(spec, node_memory=2000 * gib)[MEMORY] == 2000 * gib        # at most the node's allocatable
    spec["containers"][0]["resources"]["limits"] = {"memory": "100Gi"}
    assert pod_requests(spec, node_memory=2000 * gib)[MEMORY] == 100 * gib         # at most the pod's memory limit
    spec["volumes"][0]["emptyDir"]["sizeLimit"] = "64Gi"
    assert pod_requests(spec, node_memory=2000 * gib)[MEMORY] == 74 * gib          # under the cap: sizeLimit counts


def test_one_gib_shm_on_a_multi_node_workload_is_an_advisory(tmp_path):
    res = plan_doc(training_stack(shmSizeGi=1), tmp_path)
    assert res.exit_code == mplan.EXIT_OK, res.error or res.violations
    (adv,) = [a for a in res.advisories if a.startswith("workloads[0].shmSizeGi")]
    assert "1 GiB of /dev/shm for a 2-node workload" in adv and "--shm-size 10.24g" in adv and "shmSizeGi 10" in adv
    res = plan_doc(training_stack(shmSizeGi=10), tmp_path, "ten")
    assert not [a for a in res.advisories if a.startswith("workloads[0].shmSizeGi")]


# ------------------------------------------------------------------ LWS subGroupSize: LWS's webhook rule
def _nim_lws(nodes: int, sub: int) -> dict[str, Any]:
    doc = yaml.safe_load((GUIDES / "Pulumi.nim-lws.yaml").read_text())
    w = doc["config"]["multinode:workloads"][0]
    w.update(nodes=nodes, pipelineParallel=nodes,
             groupPlacement={"topologyKey": "example.com/rack", "subGroupSize": sub})
    return doc


def test_lws_subgroup_size_follows_the_lws_webhook():
    """sigs.k8s.io/lws pkg/webhooks validateUpdateSubGroupPolicy: size or size - 1 divisible, and not above size."""
    from multinode import checks
    from multinode.errors import ConfigError
    from multinode.stackfile import read_stack_file

    def problems(nodes: int, sub: int) -> list[str]:
        import tempfile
        with tempfile.TemporaryDirectory() as d:
            f = Path(d) / "Pulumi.s.yaml"
            f.write_text(yaml.safe_dump(_nim_lws(nodes, sub)))
            raw, secrets, _ = read_stack_file(f)
        try:
            checks.load(raw, secrets)
        except ConfigError as e:
            return [str(p) for p in e.problems if p.path.endswith("subGroupSize")]
        return []
    assert problems(4, 3) == []          # size - 1 = 3 divisible by 3: the leader's subgroup holds one pod more
    assert problems(4, 4) == []          # a subgroup as large as the group
    assert problems(3, 2) == []          # 3 - 1 = 2
    (msg,) = problems(4, 5)
    assert "use one of 1, 2, 3, 4" in msg
    (msg,) = problems(6, 4)              # neither 6 nor 5 divisible by 4
    assert "use one of 1, 2, 3, 5, 6" in msg


# ------------------------------------------------------------------ env: agreeing with us is not a redefinition
def test_env_equal_to_the_fabrics_value_is_accepted_and_a_conflicting_one_refused(tmp_path):
    doc = yaml.safe_load((Path(__file__).resolve().parent.parent / "stacks" / "Pulumi.azure-dev.yaml").read_text())
    w = doc["config"]["multinode:workloads"][0]
    w["env"] = {"NCCL_IB_DISABLE": "0"}                 # what the InfiniBand fabric sets (clouds/azure.py)
    res = plan_doc(doc, tmp_path)
    assert res.exit_code == mplan.EXIT_OK, res.error or res.violations
    for path in (res.out_dir / "effective").glob("*.yaml"):   # the effective pods carry it once
        for c in yaml.safe_load(path.read_text())["spec"]["containers"]:
            names = [e["name"] for e in c.get("env", [])]
            assert names.count("NCCL_IB_DISABLE") <= 1, (path, names)
    w["env"] = {"NCCL_IB_DISABLE": "1"}
    res = plan_doc(doc, tmp_path, "bad")
    assert res.exit_code == mplan.EXIT_CONFIG and res.registrations == []
    assert "workloads[0].env.NCCL_IB_DISABLE: NCCL_IB_DISABLE is set by the fabric policy of pool 'gpu'" in res.error
    assert "to '0', and env gives '1'" in res.error


def test_env_equal_to_the_renderers_value_renders_once(tmp_path):
    from multinode.overrides import _OWNED
    doc = yaml.safe_load((GUIDES / "Pulumi.nim-lws.yaml").read_text())
    res = plan_doc(doc, tmp_path)
    lws = next(o for o in res.k8s_objects if o["kind"] == "LeaderWorkerSet")
    env = lws["spec"]["leaderWorkerTemplate"]["workerTemplate"]["spec"]["containers"][0]["env"]
    owned = next(e for e in env if _OWNED.search(e["name"]) and "value" in e)     # e.g. NIM_TENSOR_PARALLEL_SIZE
    doc["config"]["multinode:workloads"][0]["env"] = {owned["name"]: owned["value"]}
    res = plan_doc(doc, tmp_path, "same")
    assert res.exit_code == mplan.EXIT_OK, res.error or res.violations
    lws = next(o for o in res.k8s_objects if o["kind"] == "LeaderWorkerSet")
    for role in ("leaderTemplate", "workerTemplate"):
        names = [e["name"] for e in lws["spec"]["leaderWorkerTemplate"][role]["spec"]["containers"][0]["env"]]
        assert names.count(owned["name"]) == 1, (role, names)
    doc["config"]["multinode:workloads"][0]["env"] = {owned["name"]: owned["value"] + "0"}
    assert plan_doc(doc, tmp_path, "other").exit_code == mplan.EXIT_CONFIG


# ------------------------------------------------------------------ RoCE: one bootstrap interface for NCCL and GLOO
def _effective_env(res: mplan.PlanResult) -> list[dict[str, str]]:
    out = []
    for path in sorted((res.out_dir / "effective").glob("*.yaml")):
        for c in yaml.safe_load(path.read_text())["spec"]["containers"]:
            env = {e["name"]: e.get("value") for e in c.get("env", [])}
            if "NCCL_NET" in env:
                out.append(env)
    return out


def test_roce_bootstrap_interface_is_one_key_for_nccl_and_gloo(tmp_path):
    doc = yaml.safe_load((Path(__file__).resolve().parent.parent / "stacks" / "Pulumi.oci-dev.yaml").read_text())
    res = plan_doc(doc, tmp_path, "default")
    envs = _effective_env(res)
    assert envs and all(e["NCCL_SOCKET_IFNAME"] == "eth0" and e["GLOO_SOCKET_IFNAME"] == "eth0" for e in envs)

    doc["config"].setdefault("multinode:fabric", {})["socketInterface"] = "ens300"
    res = plan_doc(doc, tmp_path, "chosen")
    assert res.exit_code == mplan.EXIT_OK, res.error or res.violations
    envs = _effective_env(res)
    assert envs and all(e["NCCL_SOCKET_IFNAME"] == "=ens300" and e["GLOO_SOCKET_IFNAME"] == "ens300" for e in envs)

    doc["config"]["multinode:fabric"]["socketInterface"] = "eth0/1"
    res = plan_doc(doc, tmp_path, "bad")
    assert res.exit_code == mplan.EXIT_CONFIG and "fabric.socketInterface: 'eth0/1' is not a list" in res.error
    del doc["config"]["multinode:fabric"]["socketInterface"]
    doc["config"]["multinode:workloads"][0]["env"] = {"NCCL_SOCKET_IFNAME": "ens300"}
    res = plan_doc(doc, tmp_path, "env")
    assert res.exit_code == mplan.EXIT_CONFIG
    assert "workloads[0].env.NCCL_SOCKET_IFNAME" in res.error and "set fabric.socketInterface instead" in res.error


# ------------------------------------------------------------------ OCI: a reservation in another region
def test_oci_capacity_reservation_from_another_region_is_refused(tmp_path):
    from multinode.clouds.oci import ocid_region
    assert ocid_region("ocid1.capacityreservation.oc1.iad.aaaa") == "us-ashburn-1"          # a region key
    assert ocid_region("ocid1.capacityreservation.oc1.eu-frankfurt-1.aaaa") == "eu-frankfurt-1"
    assert ocid_region("ocid1.tenancy.oc1..aaaa") is None                                     # no region part
    assert ocid_region("ocid1.capacityreservation.oc1.xyz.aaaa") is None                      # unknown: not guessed
    doc = yaml.safe_load((Path(__file__).resolve().parent.parent / "stacks" / "Pulumi.oci-dev.yaml").read_text())
    pool = doc["config"]["multinode:nodePools"][0]               # the cluster is in us-ashburn-1
    pool["capacityReservation"] = {"id": "ocid1.capacityreservation.oc1.phx.aaaaaaaaexample"}
    res = plan_doc(doc, tmp_path, "phx")
    assert res.exit_code == mplan.EXIT_CONFIG and res.registrations == []
    assert ("nodePools[0].capacityReservation.id: ocid1.capacityreservation.oc1.phx.aaaaaaaaexample is a reservation "
            "in us-phoenix-1") in res.error and "use a reservation in us-ashburn-1" in res.error
    pool["capacityReservation"] = {"id": "ocid1.capacityreservation.oc1.iad.aaaaaaaaexample"}
    res = plan_doc(doc, tmp_path, "iad")
    assert "capacityReservation" not in (res.error or ""), res.error


# ------------------------------------------------------------------ the torchrun recipe's requests and dataset volume
def test_training_memory_requests_and_a_dataset_volume_beside_the_checkpoints(tmp_path):
    doc = training_stack(cpu=32, memoryGi=256, dataset={"claim": "imagenet", "mountPath": "/data"})
    res = plan_doc(doc, tmp_path)
    assert res.exit_code == mplan.EXIT_OK, res.error or res.violations
    pod = next(o for o in res.k8s_objects if o["kind"] == "Job")["spec"]["template"]["spec"]
    cont = pod["containers"][0]
    assert cont["resources"]["requests"]["cpu"] == "32" and cont["resources"]["requests"]["memory"] == "256Gi"
    assert {"name": "dataset", "mountPath": "/data", "readOnly": True} in cont["volumeMounts"]
    assert {"name": "dataset", "persistentVolumeClaim": {"claimName": "imagenet", "readOnly": True}} in pod["volumes"]
    assert any(m["mountPath"] == "/checkpoints" for m in cont["volumeMounts"])          # the checkpoints stay
    # the fabric policy adds its per-GPU share only where the container requests none: ours are kept
    (eff,) = [yaml.safe_load(p.read_text()) for p in (res.out_dir / "effective").glob("llm-finetune-*.yaml")]
    assert eff["spec"]["containers"][0]["resources"]["requests"]["memory"] == "256Gi"

    bad = training_stack(memoryGi=64, dataset={"claim": "Imagenet", "mountPath": "/checkpoints/data"})
    bad["config"]["multinode:workloads"].append({"name": "serve", "kind": "lws-inference", "engine": "vllm",
                                                 "model": "meta-llama/Llama-3.1-8B-Instruct", "nodePool": "gpu",
                                                 "nodes": 1, "memoryGi": 64})
    res = plan_doc(bad, tmp_path, "bad")
    assert res.exit_code == mplan.EXIT_CONFIG and res.registrations == []
    assert "workloads[0].dataset.claim: 'Imagenet' is not a PersistentVolumeClaim name" in res.error
    assert "workloads[0].dataset.mountPath: '/checkpoints/data' overlaps the checkpoint volume" in res.error
    assert "workloads[1].memoryGi: only for the training kinds" in res.error


# ------------------------------------------------------------------ NIM: the chart's autoscaling
def test_nim_lws_autoscaling_renders_the_charts_hpa_and_keeps_replicas_for_it(tmp_path):
    from multinode.schema_check import validate_object
    doc = yaml.safe_load((GUIDES / "Pulumi.nim-lws.yaml").read_text())
    metric = {"type": "Pods", "pods": {"metric": {"name": "num_requests_running"},
                                       "target": {"type": "AverageValue", "averageValue": "10"}}}
    doc["config"]["multinode:workloads"][0]["autoscaling"] = {"minReplicas": 1, "maxReplicas": 3, "metrics": [metric],
                                                              "scaleDownStabilizationSecs": 300}
    res = plan_doc(doc, tmp_path)
    assert res.exit_code == mplan.EXIT_OK, res.error or res.violations
    (hpa,) = [o for o in res.k8s_objects if o["kind"] == "HorizontalPodAutoscaler"]
    assert hpa["spec"]["scaleTargetRef"] == {"apiVersion": "leaderworkerset.x-k8s.io/v1", "kind": "LeaderWorkerSet",
                                             "name": "llama-405b-nim"}
    assert hpa["spec"]["metrics"] == [metric] and hpa["spec"]["maxReplicas"] == 3
    assert hpa["spec"]["behavior"] == {"scaleDown": {"stabilizationWindowSeconds": 300}}
    assert validate_object(hpa) == []
    (lws,) = [r for r in res.registrations if r.type.endswith("LeaderWorkerSet")]
    assert "spec.replicas" in (lws.ignore_changes or []), lws        # the HPA owns the group count
    (adv,) = [a for a in res.advisories if "autoscaling.maxReplicas" in a]     # 3 groups x 2 nodes, 4 in the pool
    assert "3 groups of 2 pods need 6 nodes" in adv

    doc["config"]["multinode:workloads"][0]["autoscaling"] = {"minReplicas": 3, "maxReplicas": 2}
    res = plan_doc(doc, tmp_path, "bad")
    assert res.exit_code == mplan.EXIT_CONFIG and "autoscaling.maxReplicas: 2 is below minReplicas 3" in res.error


# ------------------------------------------------------------------ a fleet with two candidates, and failover
def test_fleet_with_two_candidates_renders_karmada_failover():
    from multinode.fleet import manifests as fm
    from multinode.fleet.plan import failover_lines
    from multinode.schema_check import validate_object
    from tests.test_fleet import LAB, TRAIN, fleet_raw, load
    failover = {"tolerationSeconds": 120, "purgeMode": "Directly"}
    raw = fleet_raw(members=[{"name": "aws-dev", "stack": "aws-dev", "region": "us-east-1"}, LAB],
                    workloads=[dict(TRAIN, failover=failover, images={"lab": "nvcr.io/nvidia/pytorch:25.01-py3"})])
    raw["labKubeconfig"] = "[secret]"
    cfg = load(raw, {"hfToken", "labKubeconfig"})
    w = cfg.fleet.workloads[0]
    fit = cfg.fits[w.name]
    assert fit.members() == ["aws-dev", "lab"]                    # Karmada chooses between two members
    objs = fm.workload_objects(cfg, w, fit).objects
    pp = next(o for o in objs if o["kind"] == "PropagationPolicy" and o["metadata"]["name"] == w.name)
    assert pp["spec"]["placement"]["clusterAffinity"] == {"clusterNames": ["aws-dev", "lab"]}
    assert pp["spec"]["failover"] == {"application": {"decisionConditions": {"tolerationSeconds": 120},
                                                      "purgeMode": "Directly"}}
    assert validate_object(pp) == []                              # against Karmada v1.18.2's CRD
    (line,) = failover_lines(w, fit.members())
    assert "after 120s unhealthy Karmada moves it whole to one of the 1 other member" in line
    (line,) = failover_lines(w, ["aws-dev"])
    assert "nowhere to move it" in line
    bad = dict(pp, spec=dict(pp["spec"], failover={"application": {"purgeMode": "Sometimes",
                                                                   "decisionConditions": {}}}))
    assert validate_object(bad) != []                             # the CRD refuses what Karmada would


def test_the_pack_reads_the_default_file_or_the_one_the_environment_names(monkeypatch, tmp_path):
    from policy import config as pconfig
    monkeypatch.setenv(pconfig.PACK_CONFIG_ENV, str(GUIDES / "policy-config.json"))
    assert pconfig.for_pack().levels == {"indexed-job-gang-scheduled": "advisory",
                                         "multi-node-gang-has-disruption-budget": "advisory"}
    monkeypatch.setenv(pconfig.PACK_CONFIG_ENV, str(tmp_path / "missing.json"))
    try:
        pconfig.for_pack()
        raise AssertionError("a named file that is missing must be an error")
    except pconfig.PolicyConfigError as e:
        assert "cannot read the policy config" in str(e)
    monkeypatch.delenv(pconfig.PACK_CONFIG_ENV)
    repo = Path(pconfig.__file__).resolve().parent.parent
    assert pconfig.pack_default_path() == repo / "stacks" / "policy-config.json"
