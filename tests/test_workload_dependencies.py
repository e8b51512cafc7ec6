"""Each workload waits for what it needs and nothing else (components/kubernetes/workloads.workload_needs):
its own node pool, the storage it mounts, the add-ons of its kinds and its pool's fabric policy. Read from the
raw RegisterResource requests the mock monitor recorded (multinode/recording.py)."""
from __future__ import annotations

from typing import Any

import pytest

from multinode.manifests.addons import Needs, addons_needed
from multinode.recording import Registration
from tests.cloudstacks import run_variant

LWS = "kubernetes:leaderworkerset.x-k8s.io/v1:LeaderWorkerSet"
VCJOB = "kubernetes:batch.volcano.sh/v1alpha1:Job"


def _more_pools(n: int):
    def edit(c: dict[str, Any]) -> None:
        for i in range(2, 2 + n):
            c["multinode:nodePools"].append({"name": f"gpu{i}", "machine": "p5.48xlarge", "nodeCount": 2,
                                             "zone": "us-east-1a", "subnetId": "subnet-0a1b2c3d4e5f60718"})
        c["multinode:queues"] = [{"name": "training", "weight": 1}]
        c["multinode:workloads"][1]["queue"] = "training"           # llama-finetune
        c["multinode:workloads"].append({"name": "nccl-two", "kind": "nccl-test", "nodePool": "gpu2",
                                         "nodes": 2, "image": "public.ecr.aws/hpc-cloud/nccl-tests:latest"})
    return edit


def _custom_descendants(regs: list[Registration], name: str, typ: str) -> set[str]:
    """URNs of the custom resources under the component `name` (how the SDK expands a component dependency)."""
    (root,) = [r.urn for r in regs if r.name == name and r.type == typ]
    parent = {r.urn: r.parent for r in regs}
    out = set()
    for r in regs:
        u = r.urn
        while u in parent and parent[u] != root:
            u = parent[u]
        if u in parent and r.custom:
            out.add(r.urn)
    return out


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    return {n: run_variant(tmp_path_factory.mktemp(f"pools{n}"), "aws-dev", _more_pools(n)) for n in (1, 3)}


def _one(regs: list[Registration], typ: str, name: str) -> Registration:
    (r,) = [r for r in regs if r.type == typ and r.inputs["metadata"]["name"] == name]
    return r


def test_a_workload_depends_on_its_pool_storage_addons_and_fabric_policy_only(runs):
    regs = runs[1].registrations
    urn = {r.name: r.urn for r in regs if r.custom}
    lws = _one(regs, LWS, "llama-405b")
    want = (_custom_descendants(regs, "gpu", "multinode:index:GpuNodePool")
            | _custom_descendants(regs, "checkpoints", "multinode:index:CheckpointStorage")
            | {urn["addons-lws"], urn["addons-volcano"], urn["addons-nvidia-device-plugin"],
               urn["fabric-multinode-fabric-gpu"], urn["fabric-queue-training"],
               # the stack-wide ValidatingPolicy (fail-closed checks, issue 17): before any fabric pod
               urn["fabric-multinode-fabric-checks"],
               # the ConfigGroup of the LeaderWorkerSet CRD, applied by the program from the pinned release
               # (issue 17): one URN, whose CRD resources the engine waits for
               next(r.urn for r in regs if r.name == "addons-crds-lws" and r.type == "kubernetes:yaml/v2:ConfigGroup"),
               # its passive objects (issue 35: they wait for their namespace only; the pods name them)
               urn["llama-405b-secret-llama-405b-hf-token"], urn["llama-405b-service-llama-405b-leader"],
               # its group's PodDisruptionBudget (issue 36), passive too: in place before the first pod
               urn["llama-405b-poddisruptionbudget-llama-405b-group-0"]})
    assert _custom_descendants(regs, "gpu", "multinode:index:GpuNodePool")      # the pool has resources
    assert set(lws.dependencies) == want
    # the other pool, its fabric policy, Kyverno and the queue are not among them
    gpu2 = _custom_descendants(regs, "gpu2", "multinode:index:GpuNodePool")
    assert gpu2 and not gpu2 & set(lws.dependencies)
    assert urn["fabric-multinode-fabric-gpu2"] not in lws.dependencies


def test_each_workload_waits_for_its_own_pool_and_queue(runs):
    regs = runs[1].registrations
    urn = {r.name: r.urn for r in regs if r.custom}
    gpu = _custom_descendants(regs, "gpu", "multinode:index:GpuNodePool")
    gpu2 = _custom_descendants(regs, "gpu2", "multinode:index:GpuNodePool")
    two = _one(regs, VCJOB, "nccl-two")
    assert gpu2 <= set(two.dependencies) and not gpu & set(two.dependencies)
    assert urn["fabric-multinode-fabric-gpu2"] in two.dependencies
    assert urn["fabric-multinode-fabric-gpu"] not in two.dependencies
    finetune = _one(regs, VCJOB, "llama-finetune")
    assert urn["fabric-queue-training"] in finetune.dependencies            # Volcano refuses an unknown queue
    assert two.inputs["spec"]["queue"] == "training"                        # no queue set: the first one
    assert urn["fabric-queue-training"] in two.dependencies
    lws = _one(regs, LWS, "llama-405b")                                     # LWS names it by annotation
    assert lws.inputs["metadata"]["annotations"]["scheduling.volcano.sh/queue-name"] == "training"
    assert urn["fabric-queue-training"] in lws.dependencies


def test_no_workload_x_pool_term(runs):
    """Adding pools leaves a workload's edges unchanged (the SDK expands each dependency to its children)."""
    few, many = ({r.name: r for r in runs[n].registrations} for n in (1, 3))
    for name in ("llama-405b-leaderworkerset-llama-405b", "llama-finetune-job-llama-finetune"):
        assert few[name].dependencies == many[name].dependencies, name
    total = {n: sum(len(r.dependencies) for r in runs[n].registrations) for n in (1, 3)}
    per_pool = ("fabric-multinode-fabric", "fabric-hypernode")       # a pool's policy and Volcano HyperNode
    pools_only = {n: sum(len(r.dependencies) for r in runs[n].registrations
                         if "GpuNodePool" in r.urn or r.name.startswith(per_pool)) for n in (1, 3)}
    # only the two added pools' own resources (and their policies) add edges
    assert total[3] - total[1] == pools_only[3] - pools_only[1]


def test_addons_needed_reads_groups_schedulers_and_gpus():
    objs = [{"apiVersion": "leaderworkerset.x-k8s.io/v1", "kind": "LeaderWorkerSet",
             "spec": {"template": {"spec": {"schedulerName": "volcano", "containers": [
                 {"resources": {"limits": {"nvidia.com/gpu": 8}}}]}}}},
            {"apiVersion": "v1", "kind": "Service", "spec": {}}]
    objs[0]["metadata"] = {"annotations": {"scheduling.volcano.sh/queue-name": "inference"}}
    assert addons_needed(objs) == Needs(["leaderworkerset.x-k8s.io"], ["nvidiaDevicePlugin", "volcano"],
                                        ["inference"])
    cpu = [{"apiVersion": "batch/v1", "kind": "Job", "spec": {"template": {"spec": {
        "schedulerName": "kai-scheduler", "containers": [{"resources": {"limits": {"cpu": "1"}}}]}}}}]
    assert addons_needed(cpu) == Needs(["batch"], ["kai"], [])
    vcjob = [{"apiVersion": "batch.volcano.sh/v1alpha1", "kind": "Job", "spec": {"queue": "training", "tasks": [
        {"template": {"spec": {"schedulerName": "volcano", "containers": [{"name": "queue"}]}}}]}}]
    assert addons_needed(vcjob) == Needs(["batch.volcano.sh"], ["volcano"], ["training"])
