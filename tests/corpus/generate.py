"""Writes the broken-stack corpus: one stack file per breakage, each a valid stack config (so it reaches the
policy stage) carrying hand-written objects in multinode:manifests that break exactly one rule.

    .venv/bin/python tests/corpus/generate.py      # rewrites tests/corpus/*.yaml

The first line of each file names the rule `plan` must report (`# expect: <rule>`).
"""
from __future__ import annotations

import copy
import sys
from pathlib import Path

import yaml

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))
import policy_fixtures as F  # noqa: E402


def edit(obj, fn):
    obj = copy.deepcopy(obj)
    fn(obj)
    return obj


def lws_tpl(o, key):
    return o["spec"]["leaderWorkerTemplate"][key]


def both(o, fn):
    for key in ("leaderTemplate", "workerTemplate"):
        fn(lws_tpl(o, key))


CASES = {
    # name: (expected rule, why, manifests)
    "lws-tp-too-small": ("parallelism-matches-gpus", "vLLM tp 8 x pp 1 on 2 pods x 8 GPUs",
                         [F.lws(leader_cmd=F.VLLM.replace("--pipeline-parallel-size 2", "--pipeline-parallel-size 1"))]),
    "lws-tp-equals-form": ("parallelism-matches-gpus", "--tensor-parallel-size=16 --pipeline-parallel-size=2 = 32",
                           [F.lws(leader_cmd="vllm serve m --tensor-parallel-size=16 --pipeline-parallel-size=2")]),
    "lws-sglang-nnodes": ("parallelism-matches-gpus", "SGLang --tp 16 --nnodes 4 on a group of 2",
                          [F.lws(leader_cmd=F.SGLANG.replace("--nnodes 2", "--nnodes 4"))]),
    "lws-nim-env": ("parallelism-matches-gpus", "NIM_TENSOR_PARALLEL_SIZE 8, pipeline 1, on 2 pods",
                    [edit(F.lws(leader_cmd="/opt/nim/start_server.sh"),
                          lambda o: lws_tpl(o, "leaderTemplate")["spec"]["containers"][0]["env"].extend(
                              [{"name": "NIM_TENSOR_PARALLEL_SIZE", "value": "8"},
                               {"name": "NIM_PIPELINE_PARALLEL_SIZE", "value": "1"}]))]),
    "lws-leader-no-gpu": ("gang-pods-uniform", "the leader requests no GPU",
                          [edit(F.lws(), lambda o: lws_tpl(o, "leaderTemplate")["spec"]["containers"][0]
                                .__setitem__("resources", {}))]),
    "lws-leader-extra-efa": ("gang-pods-uniform", "only the leader requests EFA devices",
                             [edit(F.lws(), lambda o: lws_tpl(o, "leaderTemplate")["spec"]["containers"][0]
                                   ["resources"]["limits"].__setitem__("vpc.amazonaws.com/efa", 32))]),
    "lws-16-gpus-per-pod": ("gpus-per-pod-within-machine", "16 GPUs per pod on an 8-GPU p5.48xlarge",
                            [F.lws(gpus=16, leader_cmd="vllm serve m --tensor-parallel-size 16 "
                                                       "--pipeline-parallel-size 2")]),
    "lws-no-fabric-label": ("multinode-pod-fabric-label", "worker template without multinode.dev/fabric",
                            [edit(F.lws(), lambda o: lws_tpl(o, "workerTemplate")["metadata"].__setitem__("labels", {}))]),
    "lws-no-shm": ("multinode-pod-shm", "no /dev/shm mount",
                   [edit(F.lws(), lambda o: both(o, lambda t: t["spec"]["containers"][0].__setitem__("volumeMounts", [])))]),
    "lws-shm-on-disk": ("multinode-pod-shm", "/dev/shm is a disk-backed emptyDir",
                        [edit(F.lws(), lambda o: both(o, lambda t: t["spec"]["volumes"][0].__setitem__("emptyDir", {})))]),
    "lws-not-gang-scheduled": ("lws-gang-scheduled", "Volcano runs but the LWS uses the default scheduler",
                               [edit(F.lws(), lambda o: both(o, lambda t: t["spec"].pop("schedulerName")))]),
    # (an HF_TOKEN literal in a hand-written object is refused by the config layer since issue 46, before the pack
    # runs: tests/test_issue32.py and tests/test_second_week.py; the pack's rule on its own: tests/test_policy_rules.py)
    "lws-group-larger-than-pool": ("node-count-within-pool", "groups of 4 nodes on a 2-node pool",
                                   [F.lws(size=4, leader_cmd="vllm serve m --tensor-parallel-size 8 "
                                                             "--pipeline-parallel-size 4")]),
    "lws-selects-no-pool": ("workload-matches-node-pool", "nodeSelector names p5e.48xlarge; the pool is p5.48xlarge",
                            [edit(F.lws(), lambda o: both(o, lambda t: t["spec"].__setitem__(
                                "nodeSelector", {"node.kubernetes.io/instance-type": "p5e.48xlarge"})))]),
    "volcano-min-available": ("gang-whole", "minAvailable 1 for 2 task pods", [F.volcano_job(min_available=1)]),
    "volcano-torchrun-nnodes": ("parallelism-matches-gpus", "torchrun --nnodes=4 on 2 pods",
                                [F.volcano_job(cmd=F.TORCHRUN.replace("--nnodes=2", "--nnodes=4"))]),
    "indexed-job-nproc": ("parallelism-matches-gpus", "--nproc_per_node 4 with 8 GPUs per pod",
                          [F.indexed_job(cmd=F.TORCHRUN.replace("--nproc_per_node=8", "--nproc_per_node 4"))]),
    "mpijob-slots": ("parallelism-matches-gpus", "slotsPerWorker 4 with 8 GPUs per worker", [F.mpijob(slots=4)]),
    "mpijob-np": ("parallelism-matches-gpus", "mpirun -np 8 for 2 workers x 8 GPUs", [F.mpijob(np=8)]),
    "pytorchjob-nproc": ("parallelism-matches-gpus", "nprocPerNode 4 with 8 GPUs per pod", [F.pytorchjob(nproc="4")]),
    "grove-min-available-1": ("gang-whole", "worker clique of 3 with minAvailable 1 (4-node pool)",
                              [F.grove(workers=3, min_available=1,
                                       cmd=F.SGLANG.replace("--tp 16 --nnodes 2", "--tp 32 --nnodes 4"))]),
    "grove-tp": ("parallelism-matches-gpus", "SGLang --tp 8 on a 2-pod scaling group",
                 [F.grove(cmd=F.SGLANG.replace("--tp 16", "--tp 8"))]),
    "kyverno-efa-count": ("fabric-devices-match-catalog", "the policy injects 16 EFA; p5.48xlarge has 32",
                          [F.efa_policy(count=16)]),
    "kyverno-second-fabric": ("exactly-one-fabric", "an InfiniBand policy in an EFA stack",
                              [F.efa_policy(name="byo-ib", count=1, resource="rdma/shared_ib")]),
    "pvc-rwo-mounted-by-gang": ("checkpoint-storage-rwx", "a ReadWriteOnce claim mounted by a 2-node LWS",
                                [F.pvc(modes=["ReadWriteOnce"]), F.mount_claim(F.lws(), "byo-ckpt")]),
    "pv-reclaim-delete": ("checkpoint-storage-retained", "the checkpoint PV is reclaimed with Delete",
                          [F.pvc(storage_class=""), F.pv(reclaim="Delete"), F.mount_claim(F.lws(), "byo-ckpt")]),
    "storageclass-delete": ("checkpoint-storage-retained", "the checkpoint StorageClass has no reclaimPolicy",
                            [F.storage_class(reclaim=None), F.pvc(storage_class="byo-sc"),
                             F.mount_claim(F.lws(), "byo-ckpt")]),
    "dynamo-dgd-tp": ("dynamo-parallelism-matches-gpus",
                      "DGD decode: --tensor-parallel-size 4 x pp 2 on multinode.nodeCount 2 x 8 GPUs",
                      [F.dgd(decode_tp=4)]),
    "dynamo-dgd-no-fabric-label": ("dynamo-multinode-fabric-label",
                                   "DGD decode spans 2 nodes but its pods lack multinode.dev/fabric",
                                   [F.dgd(decode_labels={})]),
    "pool-shared-by-two-services": ("stack-fits-node-pools", "two 2-node LWS services on one 2-node pool",
                                    [F.lws(name="llama-a"), F.lws(name="llama-b")]),
    "batch-job-beside-service": ("stack-fits-node-pools", "a 2-node Volcano job beside a 2-node LWS on 2 nodes",
                                 [F.lws(), F.volcano_job()]),
    "grove-base-gang-larger-than-pool": ("stack-fits-node-pools",
                                         "scaling group minAvailable 2 x 2 pods = a base gang of 4 on 3 nodes",
                                         [edit(F.grove(), lambda o: o["spec"]["template"]["podCliqueScalingGroups"][0]
                                               .update(replicas=2, minAvailable=2))]),
    "podgroup-min-member-below-group": ("pod-group-min-member",
                                        "Volcano PodGroup minMember 1 joined by 2 indexed pods (group-name annotation)",
                                        [F.indexed_job(gang="volcano"), F.pod_group(min_member=1)]),
    "kai-batch-min-member-below": ("pod-group-min-member", "kai.scheduler/batch-min-member 1 on a 2-pod Indexed Job",
                                   [edit(F.indexed_job(), lambda o: o["metadata"]["annotations"].__setitem__(
                                       "kai.scheduler/batch-min-member", "1"))]),
    "indexed-job-no-gang-scheduler": ("indexed-job-gang-scheduled", "a 2-node Indexed Job on the default scheduler",
                                      [F.indexed_job(gang=None)]),
    "env-set-twice": ("env-defined-once", "NCCL_SOCKET_IFNAME twice in one container (the last wins)",
                      [edit(F.indexed_job(), lambda o: o["spec"]["template"]["spec"]["containers"][0].__setitem__(
                          "env", [{"name": "NCCL_SOCKET_IFNAME", "value": "eth0"},
                                  {"name": "NCCL_SOCKET_IFNAME", "value": "ens5"}]))]),
}
# pools larger than 2 nodes, where the breakage needs them (everything else: 2 x p5.48xlarge)
NODES = {"grove-min-available-1": 4, "grove-base-gang-larger-than-pool": 3}


def main() -> None:
    for old in HERE.glob("*.yaml"):
        old.unlink()
    for name, (rule, why, manifests) in CASES.items():
        dynamo = name.startswith("dynamo-")      # prefill (1 node) + decode (2 nodes) need 3 nodes
        doc = F.existing_stack(manifests, node_count=NODES.get(name, 3 if dynamo else 2),
                               addons=F.DYNAMO_ADDONS if dynamo else None)
        text = f"# expect: {rule}\n# {why}\n" + yaml.safe_dump(doc, sort_keys=False, width=120)
        (HERE / f"{name}.yaml").write_text(text)
    print(f"wrote {len(CASES)} stacks to {HERE}")


if __name__ == "__main__":
    main()
