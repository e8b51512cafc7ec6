"""The `trainjob` kind (Kubeflow Trainer v2, issue 17): TrainJob + its ClusterTrainingRuntime validated
against the v2.3.0 CRDs, the trainer add-on, the config checks, placement and the policy pack."""
from __future__ import annotations

import copy

import pytest

from multinode import checks, config, placement, pools, stackfile
from multinode import plan as mplan
from multinode import schema_check as validation
from multinode.errors import ConfigError
from multinode.manifests import addons
from multinode.manifests.workloads import build, trainjob
from policy import objects
from policy.pack import evaluate
from tests import policy_fixtures as F


def raw(mutate=None):
    data, secrets, _ = stackfile.read_stack_file(stackfile.stack_path("existing-dev"))
    data = copy.deepcopy(dict(data))
    if mutate:
        mutate(data)
    return data, secrets


def load(mutate=None):
    return checks.load(*raw(mutate))


def workload(cfg, name="train-v2"):
    return next(w for w in cfg.workloads if w.name == name)


def by_kind(objs):
    return {o["kind"]: o for o in objs}


def test_trainjob_and_runtime_validate_against_the_v2_3_crds():
    cfg = load()
    w = workload(cfg)
    objs = by_kind(build(cfg, w).objects)
    rt, job = objs["ClusterTrainingRuntime"], objs["TrainJob"]
    assert validation.validate_object(rt) == [] and validation.validate_object(job) == []
    (node,) = rt["spec"]["template"]["spec"]["replicatedJobs"]
    pod = node["template"]["spec"]["template"]
    assert validation.validate_pod_template(pod) == []
    # the trainer finds its job by this label and injects PET_* into the container named node
    assert node["name"] == "node" and node["template"]["metadata"]["labels"] == {trainjob.ANCESTOR_LABEL: "trainer"}
    (cont,) = pod["spec"]["containers"]
    assert cont["name"] == "node" and cont["resources"]["limits"]["nvidia.com/gpu"] == "8"
    script = cont["command"][-1]
    assert "--node_rank=$PET_NODE_RANK" in script and "--master_addr=$PET_MASTER_ADDR" in script
    assert "--nnodes=2" in script and "--nproc_per_node=8" in script
    # the fabric policies match the pod by our label; Volcano gangs it
    assert pod["metadata"]["labels"][pools.FABRIC_POD_LABEL] == pools.FABRIC_POD_LABEL_VALUE
    assert pod["spec"]["schedulerName"] == "volcano" and rt["spec"]["podGroupPolicy"] == {"volcano": {}}
    assert rt["spec"]["mlPolicy"]["numNodes"] == 2
    # the TrainJob names it and carries the numbers the policy pack checks
    assert job["spec"]["runtimeRef"] == {"apiGroup": "trainer.kubeflow.org", "kind": "ClusterTrainingRuntime",
                                         "name": rt["metadata"]["name"]}
    assert job["spec"]["trainer"] == {"numNodes": 2, "numProcPerNode": 8,
                                      "resourcesPerNode": {"requests": {"nvidia.com/gpu": "8"},
                                                           "limits": {"nvidia.com/gpu": "8"}}}
    assert rt["metadata"]["name"] == f"{w.namespace}-{w.name}"      # cluster-scoped: namespace in the name


def test_a_typo_in_the_trainjob_would_be_caught():
    cfg = load()
    job = copy.deepcopy(by_kind(build(cfg, workload(cfg)).objects)["TrainJob"])
    job["spec"]["trainer"]["numNode"] = 2
    assert any("numNode" in e for e in validation.validate_object(job))


def test_trainer_addon_release():
    cfg = load()
    rel = {s.key: s for s in addons.addon_releases(cfg)}["trainer"]
    assert rel.chart == "oci://ghcr.io/kubeflow/charts/kubeflow-trainer" and rel.repository is None
    assert rel.version == config.ADDON_VERSIONS["trainer"] == "2.3.0" and rel.namespace == "kubeflow-system"
    assert rel.values == {} and not rel.skip_crds                 # the chart's templates own its CRDs
    assert "trainer.kubeflow.org" in rel.installs_crds


@pytest.mark.parametrize("mutate,path,words", [
    (lambda d: d["addons"].pop("trainer"), "workloads[3].kind", "addons.trainer.enabled"),
    (lambda d: d["addons"].update(volcano={"enabled": False}), "workloads[3].kind", "needs Volcano"),
])
def test_config_refuses_a_trainjob_without_its_controller_or_gang(mutate, path, words):
    def m(d):
        mutate(d)
        # drop the kinds that need Volcano or Grove themselves, so only the trainjob's problem remains
        d["workloads"] = [w for w in d["workloads"] if w["kind"] in ("trainjob", "lws-inference", "nccl-test",
                                                                    "indexed-job")]
    data, secrets = raw(m)
    assert data["workloads"][3]["kind"] == "trainjob"
    with pytest.raises(ConfigError) as e:
        checks.load(data, secrets)
    assert any(p.path == path and words in p.message for p in e.value.problems), e.value


def test_plan_places_it_and_orders_it_after_the_trainer(tmp_path):
    res = mplan.plan("existing-dev", tmp_path)
    assert res.exit_code == 0, res.error
    regs = {r.name: r for r in res.registrations}
    job = next(r for r in res.registrations if mplan.is_k8s_object(r) and r.inputs["kind"] == "TrainJob")
    assert regs["addons-kubeflow-trainer"].urn in job.dependencies
    owners = {g.owner for g in placement.gangs_of(next(o for o in res.k8s_objects
                                                      if o["kind"] == "ClusterTrainingRuntime"))}
    assert owners == {"ClusterTrainingRuntime multinode-train-v2"}
    assert any(p.name.startswith("multinode-train-v2") for p in
               (f for f in (tmp_path / "existing-dev" / "effective").iterdir()))
    assert not [v for v in res.violations if v["enforcementLevel"] == "mandatory"]


# ------------------------------------------------------------------ the policy pack
def _rec(obj):
    return {"type": f"kubernetes:{obj['apiVersion']}:{obj['kind']}", "name": obj["metadata"]["name"],
            "urn": f"urn:pulumi:t::multinode::x::{obj['metadata']['name']}", "inputs": obj,
            "protect": False, "retainOnDelete": True}


def _pack_cfg():
    data = {k.split(":", 1)[1]: v for k, v in F.existing_stack([], 2)["config"].items()}
    data["kubeconfig"] = "kubeconfig"
    return checks.load(data, {"kubeconfig"})


def _rendered():
    cfg = load()
    return by_kind(build(cfg, workload(cfg)).objects)


def test_pack_reads_trainjob_and_its_runtime():
    objs = _rendered()
    (tj,) = objects.gangs(objs["TrainJob"])
    assert tj.kind == "TrainJob" and tj.roles == [] and tj.extra["gpusPerNode"] == 8
    (rt,) = objects.gangs(objs["ClusterTrainingRuntime"])
    assert rt.pods == 2 and rt.gpus_per_pod == 8 and rt.multi_node
    # the PyTorchJob reader is still there
    (ptj,) = objects.gangs(F.pytorchjob())
    assert ptj.kind == "PyTorchJob"


def test_pack_flags_numprocpernode_that_differs_from_the_gpus():
    objs = _rendered()
    good = evaluate([_rec(objs["TrainJob"])], _pack_cfg())
    assert not [v for v in good if v["policy"] == "parallelism-matches-gpus"]
    bad = copy.deepcopy(objs["TrainJob"])
    bad["spec"]["trainer"]["numProcPerNode"] = 4
    out = [v for v in evaluate([_rec(bad)], _pack_cfg()) if v["policy"] == "parallelism-matches-gpus"]
    assert len(out) == 1 and "numProcPerNode 4" in out[0]["message"] and "set numProcPerNode 8" in out[0]["message"]


def test_pack_flags_a_runtime_gang_without_the_fabric_label_or_with_the_wrong_nnodes():
    rt = copy.deepcopy(_rendered()["ClusterTrainingRuntime"])
    pod = rt["spec"]["template"]["spec"]["replicatedJobs"][0]["template"]["spec"]["template"]
    del pod["metadata"]["labels"][pools.FABRIC_POD_LABEL]
    out = evaluate([_rec(rt)], _pack_cfg())
    assert [v for v in out if v["policy"] == "multinode-pod-fabric-label"]
    rt3 = copy.deepcopy(_rendered()["ClusterTrainingRuntime"])
    rt3["spec"]["mlPolicy"]["numNodes"] = 3            # torchrun still says --nnodes=2
    out = [v for v in evaluate([_rec(rt3)], _pack_cfg()) if v["policy"] == "parallelism-matches-gpus"]
    assert out and "nnodes" in out[0]["message"]
