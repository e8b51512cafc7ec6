"""gang_check.py on hand-made observations (no Go, no box): a formed MPI gang and a formed Ray group agree with
placement.json; each way a gang goes wrong is planted: no verdict within the bound, a world size other than plan's,
one slot too many per worker, a worker with no rank, a Ray node that did not join."""
from __future__ import annotations

import copy
import json
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from gang_check import gang_findings, parse_verdict  # noqa: E402

T0 = "2026-11-28T13:00:00.123456789Z"
PLACEMENT = {
    "pools": [{"name": "gpu", "use": {"workloads": [{"gang": "nim", "kind": "batch", "nodes": 2, "gpus": 16.0},
                                                    {"gang": "llm", "kind": "service", "nodes": 2, "gpus": 16.0}]}}],
    "services": [{"gang": "llm", "owner": "LeaderWorkerSet ns/llm", "pods": 2}],
    "batchEachBesideServices": [{"gang": "nim", "owner": "MPIJob ns/nim", "pods": 3}],
}


def _pod(name: str, labels: dict[str, str], node: str = "gpu-0", ip: str = "10.245.1.2", phase: str = "Running",
         gang: list[str] | None = None, logs: list[str] | None = None) -> dict[str, Any]:
    return {"namespace": "ns", "name": name, "node": node, "gang": gang or [],
            "logs": {"main": logs or [f"{T0} stdout F hello from {name}"]},
            "pod": {"metadata": {"labels": labels},
                    "spec": {"hostname": name},
                    "status": {"phase": phase, "podIP": ip,
                               "containerStatuses": [{"name": "main", "state": {"running": {"startedAt": T0}}}]}}}


def _verdict(rec: dict[str, Any], at: str = "2026-11-28T13:00:12.5Z") -> str:
    return f"main {at} stdout F MULTINODE_GANG {json.dumps(rec)}"


def _mpi(per_host: dict[str, int], world: int = 16, formed: bool = True, verdict: bool = True,
         launcher_phase: str = "Running") -> dict[str, Any]:
    role = "training.kubeflow.org/job-role"
    job = {"training.kubeflow.org/job-name": "nim"}
    rec = {"engine": "mpi", "formed": formed, "worldSize": world, "expected": world, "ranksPerHost": per_host}
    pods = [_pod("nim-launcher-abcde", {**job, role: "launcher"}, phase=launcher_phase,
                 gang=[_verdict(rec)] if verdict else [],
                 logs=[f"{T0} stderr F There are not enough slots available in the system"]),
            _pod("nim-worker-0", {**job, role: "worker"}, ip="10.245.1.3"),
            _pod("nim-worker-1", {**job, role: "worker"}, node="gpu-1", ip="10.245.2.2")]
    return {"realNodes": [{"name": "gpu-0"}, {"name": "gpu-1"}], "gangTimeout": 240.0,
            "phases": [{"name": "batch MPIJob ns/nim", "pods": pods}]}


def _ray(members: list[str], verdict: bool = True) -> dict[str, Any]:
    lws = {"leaderworkerset.sigs.k8s.io/name": "llm", "leaderworkerset.sigs.k8s.io/group-index": "0"}
    rec = {"engine": "ray", "formed": len(members) == 2, "worldSize": len(members), "expected": 2, "members": members}
    pods = [_pod("llm-0", {**lws, "leaderworkerset.sigs.k8s.io/worker-index": "0"}, ip="10.245.1.2",
                 gang=[_verdict(rec)] if verdict else []),
            _pod("llm-0-1", {**lws, "leaderworkerset.sigs.k8s.io/worker-index": "1"}, node="gpu-1", ip="10.245.2.2",
                 logs=[f"{T0} stdout F waiting for the Ray head at no-such-name"])]
    return {"realNodes": [{"name": "gpu-0"}, {"name": "gpu-1"}], "gangTimeout": 90.0,
            "phases": [{"name": "services", "pods": pods}]}


def test_verdict_line_parsed_with_its_time() -> None:
    c, when, rec = parse_verdict(_verdict({"engine": "mpi", "worldSize": 3}, at=T0))  # type: ignore[misc]
    assert c == "main" and rec["worldSize"] == 3 and when is not None and when.microsecond == 123456
    assert when.utcoffset() is not None     # the kubelet's "Z" kept: comparable with the pods' startedAt


def test_formed_mpi_gang_agrees_with_plan() -> None:
    findings, report = gang_findings(_mpi({"nim-worker-0": 8, "nim-worker-1": 8}), PLACEMENT)
    assert findings == []
    assert report == [{"gang": "MPIJob ns/nim", "phase": "batch MPIJob ns/nim", "expected": 16, "formed": True,
                       "worldSize": 16, "engine": "mpi", "secondsToForm": 12.4,
                       "pods": ["nim-launcher-abcde", "nim-worker-0", "nim-worker-1"],
                       "onRealNodes": ["nim-launcher-abcde", "nim-worker-0", "nim-worker-1"],
                       "verdict": report[0]["verdict"]}]


def test_one_slot_too_many_per_worker() -> None:
    findings, _ = gang_findings(_mpi({"nim-worker-0": 9, "nim-worker-1": 7}), PLACEMENT)
    assert len(findings) == 1
    assert "ranks per host {'nim-worker-0': 9, 'nim-worker-1': 7}, plan says 8 per node" in findings[0]


def test_world_size_other_than_plan_and_a_worker_with_no_rank() -> None:
    findings, _ = gang_findings(_mpi({"nim-worker-0": 8}, world=8), PLACEMENT)
    assert len(findings) == 1
    assert "world size 8, plan says 16 (one rank per GPU)" in findings[0]
    assert "workers with no rank (did not join): ['nim-worker-1']" in findings[0]


def test_no_verdict_names_the_pods_and_their_last_lines() -> None:
    findings, report = gang_findings(_mpi({}, verdict=False, launcher_phase="Failed"), PLACEMENT)
    assert len(findings) == 1 and report[0]["formed"] is False
    f = findings[0]
    assert f.startswith("gang MPIJob ns/nim (pods nim-launcher-abcde, nim-worker-0, nim-worker-1): not formed: "
                        "no verdict within 240.0s"), f
    assert "nim-launcher-abcde: phase Failed" in f
    assert "nim-launcher-abcde/main: There are not enough slots available in the system" in f
    assert "nim-worker-1/main: hello from nim-worker-1" in f
    assert "whole logs" not in f   # an observation without copies names none


def test_gang_not_formed_names_its_containers_whole_logs() -> None:
    obs = _mpi({}, verdict=False, launcher_phase="Failed")
    for p in obs["phases"][0]["pods"]:
        p["logFiles"] = {"main": f"build/s/pod-logs/ns_{p['name']}_uid/main/0.log"}
    findings, report = gang_findings(obs, PLACEMENT)
    assert findings[0].endswith("; whole logs: build/s/pod-logs/ns_nim-launcher-abcde_uid/main/0.log, "
                                "build/s/pod-logs/ns_nim-worker-0_uid/main/0.log, "
                                "build/s/pod-logs/ns_nim-worker-1_uid/main/0.log"), findings[0]
    assert report[0]["logFiles"][0] == "build/s/pod-logs/ns_nim-launcher-abcde_uid/main/0.log"
    # a PyTorch gang names its one container's logs, not the pods' others
    obs = _torch(None, n=3)
    for p in obs["phases"][0]["pods"]:
        p["logFiles"] = {"trainer": f"build/s/pod-logs/{p['name']}/trainer/0.log",
                         "preflight": f"build/s/pod-logs/{p['name']}/preflight/0.log"}
    findings, report = gang_findings(obs, TORCH_PLACEMENT)
    assert findings[0].endswith("; whole logs: build/s/pod-logs/train-0/trainer/0.log, "
                                "build/s/pod-logs/train-1/trainer/0.log"), findings[0]
    assert report[0]["logFiles"] == ["build/s/pod-logs/train-0/trainer/0.log", "build/s/pod-logs/train-1/trainer/0.log"]


def test_ray_group_formed_and_a_node_that_did_not_join() -> None:
    findings, report = gang_findings(_ray(["10.245.1.2", "10.245.2.2"]), PLACEMENT)
    assert findings == [] and report[0]["formed"] and report[0]["expected"] == 2
    findings, _ = gang_findings(_ray(["10.245.1.2"]), PLACEMENT)
    assert len(findings) == 1
    assert "not formed: the ray stand-in saw 1 of 2" in findings[0]
    assert "world size 1, plan says 2 (the group's pods)" in findings[0]
    assert "pods whose Ray node did not join: ['llm-0-1']" in findings[0]
    findings, _ = gang_findings(_ray([], verdict=False), PLACEMENT)
    assert len(findings) == 1 and "llm-0-1/main: waiting for the Ray head at no-such-name" in findings[0]


def test_gangs_only_on_real_nodes() -> None:
    obs = copy.deepcopy(_mpi({}, verdict=False))
    obs["realNodes"] = [{"name": "gpu-9"}]
    assert gang_findings(obs, PLACEMENT) == ([], [])


def test_launcher_on_a_node_of_its_own_is_not_counted_as_a_worker() -> None:
    """existing-dev's mpi-alltoall: plan places the launcher on a node of its own (3 nodes, 16 GPUs on 2 workers):
    8 ranks per worker agree with plan (it was judged against 16 // 3 = 5)."""
    placement = copy.deepcopy(PLACEMENT)
    placement["pools"][0]["use"]["workloads"][0]["nodes"] = 3
    placement["batchEachBesideServices"][0]["nodes"] = {"nim-worker-0": "gpu-6", "nim-worker-1": "gpu-7",
                                                         "nim-launcher-0": "gpu-0"}
    findings, _ = gang_findings(_mpi({"nim-worker-0": 8, "nim-worker-1": 8}), placement)
    assert findings == []
    findings, _ = gang_findings(_mpi({"nim-worker-0": 9, "nim-worker-1": 7}), placement)
    assert len(findings) == 1 and "plan says 8 per node" in findings[0]


# PyTorch gangs: an indexed Job of 2 pods, torchrun with the rendered flags (2 nodes x 8 processes, the box's cap)
TORCH_PLACEMENT = {
    "pools": [{"name": "gpu", "use": {"workloads": [{"gang": "train", "kind": "batch", "nodes": 2, "gpus": 16.0}]}}],
    "services": [], "batchEachBesideServices": [{"gang": "train", "owner": "Job ns/train", "pods": 2}]}
TORCHRUN = ("torchrun --nnodes={n} --nproc_per_node=8 --node_rank=$(JOB_COMPLETION_INDEX) --rdzv_backend=c10d "
            "--rdzv_endpoint=train-0.train:{port} /workspace/train.py")


VC_PLACEMENT = {
    "pools": [{"name": "gpu", "use": {"workloads": [{"gang": "nccl-check", "kind": "batch", "nodes": 2,
                                                    "gpus": 16.0}]}}],
    "batchEachBesideServices": [{"gang": "nccl-check", "owner": "Job ns/nccl-check", "pods": 2}],
}


def _volcano_mpi(per_host: dict[str, int] | None, master_phase: str = "Running") -> dict[str, Any]:
    """aws-dev's and existing-dev's NCCL check: a Volcano Job whose master (the mpi plugin's MPI_HOST in its env)
    runs mpirun over its worker's sshd, ranks on both pods."""
    job = {"volcano.sh/job-name": "nccl-check"}
    gang = []
    if per_host is not None:
        world = sum(per_host.values())
        gang = [_verdict({"engine": "mpi", "formed": True, "worldSize": world, "expected": world,
                          "ranksPerHost": per_host})]
    master = _pod("nccl-check-master-0", {**job, "volcano.sh/task-spec": "master"}, phase=master_phase, gang=gang,
                  logs=[f"{T0} stdout F ORTE has lost communication with a remote daemon."])
    master["pod"]["spec"]["containers"] = [{"name": "main", "env": [{"name": "MPI_HOST",
                                                                     "value": "nccl-check-worker-0.nccl-check"}]}]
    worker = _pod("nccl-check-worker-0", {**job, "volcano.sh/task-spec": "worker"}, node="gpu-1", ip="10.245.2.2")
    worker["pod"]["spec"]["containers"] = [{"name": "main", "env": []}]
    # a Volcano Job without the mpi plugin (llama-finetune, PyTorch) in the same phase is no MPI gang
    other = _pod("llama-finetune-master-0", {"volcano.sh/job-name": "llama-finetune"})
    return {"realNodes": [{"name": "gpu-0"}, {"name": "gpu-1"}], "gangTimeout": 240.0,
            "phases": [{"name": "batch Job ns/nccl-check", "pods": [master, worker, other]}]}


def test_volcano_mpi_gang_formed_agrees_with_plan() -> None:
    findings, report = gang_findings(_volcano_mpi({"nccl-check-master-0": 8, "nccl-check-worker-0": 8}),
                                     VC_PLACEMENT)
    assert findings == []
    assert [(g["gang"], g["formed"], g["worldSize"], g["expected"]) for g in report] == [
        ("Job ns/nccl-check", True, 16, 16)]


def test_volcano_mpi_gang_with_a_pod_short_of_ranks_or_no_verdict() -> None:
    findings, _ = gang_findings(_volcano_mpi({"nccl-check-master-0": 8}), VC_PLACEMENT)
    assert len(findings) == 1
    assert "world size 8, plan says 16 (one rank per GPU)" in findings[0]
    assert "pods with no rank (did not join): ['nccl-check-worker-0']" in findings[0]
    findings, report = gang_findings(_volcano_mpi(None, master_phase="Failed"), VC_PLACEMENT)
    assert len(findings) == 1 and report[0]["formed"] is False
    assert findings[0].startswith("gang Job ns/nccl-check (pods nccl-check-master-0, nccl-check-worker-0): not "
                                  "formed: no verdict within 240.0s")
    assert "nccl-check-master-0/main: ORTE has lost communication with a remote daemon." in findings[0]


def _launch(i: int, n: int, port: int) -> str:
    rec = {"engine": "torchrun", "host": f"train-{i}.train.ns.svc.cluster.local", "nodeRank": i, "maxNodes": n,
           "rdzvEndpoint": f"train-0.train:{port}", "nprocPerNode": 2, "nprocRendered": 8}
    return f"trainer {T0} stdout F MULTINODE_GANG_LAUNCH {json.dumps(rec)}"


def _torch(per_host: dict[str, int] | None, n: int = 2, pods: int = 2, ports: tuple[int, ...] = (29400, 29400),
           problems: list[str] | None = None, cap: int = 2) -> dict[str, Any]:
    out = []
    for i in range(pods):
        gang = [_launch(i, n, ports[i])]
        if per_host is not None and i == 0:
            world = sum(per_host.values())
            rec = {"engine": "torchrun", "formed": world == n * 2, "worldSize": world, "expected": n * 2,
                   "ranksPerHost": per_host, "torch": "1.13.1", "backend": "gloo", "secondsToForm": 9.5,
                   "problems": problems or []}
            gang.append(f"trainer 2026-11-28T13:00:12Z stdout F MULTINODE_GANG {json.dumps(rec)}")
        p = _pod(f"train-{i}", {"batch.kubernetes.io/job-name": "train"}, node=f"gpu-{i}", gang=gang,
                 logs=[f"{T0} stdout F multinode box: torch.distributed.run of PyTorch 1.13.1",
                       f"{T0} stderr F waiting at the rendezvous in pod {i}"])
        p["owner"] = "Job ns/train"
        p["logs"] = {"trainer": p["logs"]["main"]}
        p["pod"]["spec"] = {"hostname": f"train-{i}", "subdomain": "train", "containers": [
            {"name": "trainer", "command": ["/bin/bash", "-c"], "args": [TORCHRUN.format(n=n, port=ports[i])]}]}
        p["pod"]["status"]["containerStatuses"][0]["name"] = "trainer"
        out.append(p)
    return {"realNodes": [{"name": "gpu-0"}, {"name": "gpu-1"}], "gangTimeout": 75.0, "torchNprocMax": cap,
            "phases": [{"name": "batch Job ns/train", "pods": out}]}


FQDN = {"train-0.train.ns.svc.cluster.local": 2, "train-1.train.ns.svc.cluster.local": 2}


def test_torchrun_gang_formed_agrees_with_plan() -> None:
    findings, report = gang_findings(_torch(FQDN), TORCH_PLACEMENT)
    assert findings == []
    g = report[0]
    assert g["gang"] == "Job ns/train container trainer" and g["formed"] is True and g["worldSize"] == 4
    assert g["expected"] == 4 and g["nprocPerNode"] == 8 and g["nprocUsed"] == 2 and g["plannedPods"] == 2
    assert g["secondsToForm"] == 9.5 and "run as 2 processes per pod" in g["boxOnly"] and g["problems"] == []
    # without the cap the same ranks are a gang short of its 16 (2 pods x 8 GPUs)
    obs = _torch(FQDN, cap=0)
    findings, _ = gang_findings(obs, TORCH_PLACEMENT)
    assert len(findings) == 1 and "world size 4, plan says 16 (2 pods x 8 processes)" in findings[0], findings


def test_torchrun_nnodes_one_larger_than_the_pods() -> None:
    findings, report = gang_findings(_torch(None, n=3), TORCH_PLACEMENT)
    assert len(findings) == 1 and report[0]["formed"] is False
    f = findings[0]
    assert f.startswith("gang Job ns/train container trainer (pods train-0, train-1): not formed: no rank of its "
                        "process group reported within 75.0s"), f
    assert "2 of --nnodes=3 launchers started, node ranks that never joined: [2]" in f
    assert "--nnodes=3, plan gives the gang 2 pods" in f
    assert "train-1/trainer: multinode box: torch.distributed.run of PyTorch 1.13.1 | waiting at the rendezvous " \
        "in pod 1" in f


def test_torchrun_endpoint_on_another_port() -> None:
    findings, _ = gang_findings(_torch(None, ports=(29400, 29401)), TORCH_PLACEMENT)
    assert len(findings) == 1
    assert "the launchers name different rendezvous endpoints: train-0 train-0.train:29400, train-1 " \
        "train-0.train:29401" in findings[0], findings


def test_torchrun_gang_one_pod_short() -> None:
    findings, _ = gang_findings(_torch(None, pods=1), TORCH_PLACEMENT)
    assert len(findings) == 1
    assert "1 of --nnodes=2 launchers started, node ranks that never joined: [1]" in findings[0]
    assert "1 pods of the gang in the box, plan gives 2" in findings[0]


def test_torchrun_ranks_per_pod_and_the_ranks_own_problems() -> None:
    findings, _ = gang_findings(_torch({"train-0.train.ns.svc.cluster.local": 4},
                                       problems=["rank 3: LOCAL_RANK 3 / LOCAL_WORLD_SIZE 4 for --nproc_per_node 2"]),
                                TORCH_PLACEMENT)
    assert len(findings) == 1
    f = findings[0]
    assert "pods with no rank (did not join): ['train-1']" in f
    assert "ranks per pod {'train-0.train.ns.svc.cluster.local': 4}, 2 expected" in f
    assert "rank 3: LOCAL_RANK 3 / LOCAL_WORLD_SIZE 4 for --nproc_per_node 2" in f


def test_torchrun_processes_per_node_against_the_plans_gpus() -> None:
    placement = copy.deepcopy(TORCH_PLACEMENT)
    placement["pools"][0]["use"]["workloads"][0]["gpus"] = 8.0       # 4 GPUs per node
    findings, _ = gang_findings(_torch(FQDN), placement)
    assert len(findings) == 1 and "--nproc_per_node=8, plan gives 4 GPUs per node" in findings[0], findings


def test_torchrun_gang_with_a_pod_on_a_fake_node_is_not_checked() -> None:
    obs = _torch(None)
    obs["phases"][0]["pods"][1]["node"] = "gpu-9"
    findings, report = gang_findings(obs, TORCH_PLACEMENT)
    assert findings == [] and report[0]["formed"] is None
    assert "pods ['train-1'] not on real nodes: its rendezvous was not run" in report[0]["notChecked"]


def test_lws_preflight_verdict_is_not_the_groups_ray_verdict() -> None:
    obs = _ray([], verdict=False)
    leader = obs["phases"][0]["pods"][0]
    rec = {"engine": "torchrun", "formed": True, "worldSize": 2, "expected": 2}
    leader["gang"] = [f"preflight {T0} stdout F MULTINODE_GANG {json.dumps(rec)}"]
    findings, report = gang_findings(obs, PLACEMENT)
    ray = [g for g in report if g["gang"] == "LeaderWorkerSet ns/llm group 0"]
    assert ray and ray[0]["formed"] is False and any("no verdict" in f for f in findings), (report, findings)


def test_no_verdict_with_a_container_whose_log_is_empty() -> None:
    """A container whose log file is empty is null in observed.json (azure-dev: compare.py failed on it with a
    TypeError instead of the finding)."""
    obs = _mpi({}, verdict=False, launcher_phase="Failed")
    obs["phases"][0]["pods"][1]["logs"] = {"main": None}
    findings, report = gang_findings(obs, PLACEMENT)
    assert len(findings) == 1 and report[0]["formed"] is False
    assert "nim-worker-0/main: (no output)" in findings[0], findings[0]
