"""Gangs on real nodes (issue 43), each with a planted mistake, in the box with real kubelets (needs root, the
clusterbox binary, the operators' binaries and the Debian packages of conformance/realnode/install-deps.sh; skips
with the reason otherwise). The unplanted gangs are the stacks' own, run by `make real-node-check STACK=...`
(nim-mpijob, nim-lws, oci-dev: README.md here), so they are not run twice.

- MPIJob (nim-mpijob's, as rendered, run by the MPI operator; Volcano is not started here, so the box's
  kube-scheduler binds the pods): the real mpirun on the launcher reaches the workers' real sshd with the operator's
  hostfile and keys and runs the stand-in rank program (real MPI through mpi4py) on every slot. Planted: one slot
  too many per worker (slotsPerWorker 9 for 8 GPUs: mpirun -n 16 then puts 9 ranks on one worker and 7 on the
  other), and a worker short (1 worker: mpirun -n 16 finds 8 slots and refuses). The rendered one forms with 16
  ranks, 8 per worker, and its hostfile's names resolve from inside the launcher.
- Ray on a LeaderWorkerSet (oci-dev's vLLM group): the worker's `ray start --address` pointed at a name that does
  not resolve (planted): the group's Ray cluster never holds 2 nodes, the gang is a finding with the last lines of
  the worker's log.
- torchrun (an indexed Job of 2 pods as the torchrun engine renders it, with the NCCL preflight): the real
  launcher of Debian's PyTorch 1.13.1 with the rendered flags, c10d rendezvous, gloo; the preflight and the trainer
  form with world size 2 x 2 (the box's cap of 2 processes per pod). Planted, each a copy of the Job: --nnodes one
  larger than the pods, pod 1 naming the rendezvous endpoint on another port, a gang one pod short."""
from __future__ import annotations

import copy
import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[3]
HERE = ROOT / "conformance" / "cluster"
BIN = ROOT / "conformance" / "bin"
REALNODE = ROOT / "conformance" / "realnode"
CACHE = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "multinode" / "realnode"
pytestmark = [
    pytest.mark.skipif(not (BIN / "clusterbox").exists(), reason="conformance/bin/clusterbox not built"),
    pytest.mark.skipif(not (BIN / "coredns").exists(), reason="conformance/bin/coredns not built"),
    pytest.mark.skipif(os.geteuid() != 0, reason="real nodes need root (network and mount namespaces, containerd)"),
    pytest.mark.skipif(shutil.which("containerd") is None or shutil.which("debootstrap") is None,
                       reason="containerd/debootstrap not installed (conformance/realnode/install-deps.sh)"),
]


def _plan(tmp_path: Path, stack_file: Path, name: str, *prepare_args: str) -> Path:
    f = tmp_path / f"Pulumi.{name}.yaml"
    f.write_text(stack_file.read_text())
    py = sys.executable
    subprocess.run([str(Path(py).parent / "multinode"), "plan", "--file", str(f), "--out", str(tmp_path)],
                   capture_output=True, text=True, cwd=ROOT)
    out = tmp_path / name
    assert (out / "placement.json").exists()
    subprocess.run([py, str(HERE / "prepare.py"), str(out), str(f), *prepare_args], check=True, cwd=ROOT)
    return out


def _run(out: Path, *flags: str) -> tuple[int, dict]:
    py = sys.executable
    rootfs = subprocess.run([str(REALNODE / "rootfs.sh"), str(CACHE)], capture_output=True, text=True, check=True)
    r = subprocess.run([str(BIN / "clusterbox"), "--netns", "--real-nodes", "gpu-0,gpu-1", "--standin-rootfs",
                        rootfs.stdout.strip(), "--standin-dir", str(REALNODE / "standin"), "--stack-dir", str(out),
                        "--coredns", str(BIN / "coredns"), "--timeout", "9m", "--settle", "60s", *flags,
                        "--compare", f"{py} {HERE / 'compare.py'} {out}"],
                       capture_output=True, text=True, cwd=ROOT, env={**os.environ, "PYTHONPATH": str(ROOT)})
    print(r.stdout[-6000:], r.stderr[-3000:])
    return r.returncode, json.loads((out / "cluster.json").read_text())


def _gangs(result: dict) -> dict[str, dict]:
    return {g["gang"]: g for g in result.get("realNodes", {}).get("gangs") or []}


@pytest.mark.skipif(not (BIN / "mpi-operator").exists(), reason="conformance/bin/mpi-operator not built")
def test_mpijob_gangs_one_slot_too_many_and_a_worker_short(tmp_path: Path) -> None:
    out = _plan(tmp_path, ROOT / "tests" / "guides" / "Pulumi.nim-mpijob.yaml", "gangs-mpi")
    k8s = out / "k8s"
    job_file = next(k8s.glob("MPIJob-*.yaml"))
    doc = yaml.safe_load(job_file.read_text())
    for spec in doc["spec"]["mpiReplicaSpecs"].values():
        spec["template"]["spec"].pop("schedulerName", None)    # no Volcano in this box: kube-scheduler binds
    assert doc["spec"]["slotsPerWorker"] == 8 and doc["spec"]["mpiReplicaSpecs"]["Worker"]["replicas"] == 2
    job_file.write_text(yaml.safe_dump(doc))
    planted = []
    slots = json.loads(json.dumps(doc))
    slots["metadata"]["name"] = "nim-slots"
    slots["spec"]["slotsPerWorker"] = 9                       # planted: one slot too many on each worker
    short = json.loads(json.dumps(doc))
    short["metadata"]["name"] = "nim-short"
    short["spec"]["mpiReplicaSpecs"]["Worker"]["replicas"] = 1  # planted: a worker short
    for d in (slots, short):
        planted.append(job_file.name.replace("llama-405b-nim", d["metadata"]["name"]))
        (k8s / planted[-1]).write_text(yaml.safe_dump(d))
    index = k8s / "apply-order.txt"
    index.write_text(index.read_text().replace(f"{job_file.name}\n", f"{job_file.name}\n" + "".join(
        f"{p}\n" for p in planted)))
    # the plan of the planted jobs is the rendered one's (16 GPUs on 2 nodes): gang_check.py judges each against it
    placement = json.loads((out / "placement.json").read_text())
    gang = next(g for g in placement["batchEachBesideServices"] if g["owner"] == "MPIJob multinode/llama-405b-nim")
    pool = next(pl for pl in placement["pools"] if any(w["gang"] == "llama-405b-nim"
                                                       for w in (pl.get("use") or {}).get("workloads") or []))
    use = next(w for w in pool["use"]["workloads"] if w["gang"] == "llama-405b-nim")
    for d in (slots, short):
        name = d["metadata"]["name"]
        placement["batchEachBesideServices"].append(json.loads(json.dumps(gang).replace("llama-405b-nim", name)))
        pool["use"]["workloads"].append({**use, "gang": name})
    (out / "placement.json").write_text(json.dumps(placement, indent=1))
    code, result = _run(out, "--mpi-operator", str(BIN / "mpi-operator"), "--gang-timeout", "120s")
    assert code == 1
    gangs = _gangs(result)
    ok = gangs["MPIJob multinode/llama-405b-nim"]
    assert ok["formed"] and ok["worldSize"] == 16 and ok["expected"] == 16, ok
    assert ok["verdict"]["ranksPerHost"] == {"llama-405b-nim-worker-0": 8, "llama-405b-nim-worker-1": 8}, ok
    assert not [f for f in result["findings"] if f.startswith("gang MPIJob multinode/llama-405b-nim ")]
    # the launcher resolved every host of the operator's hostfile to its worker pod
    pods = {p["pod"]: p for p in result["realNodes"]["pods"]}
    launcher = next(p for name, p in pods.items() if name.startswith("multinode/llama-405b-nim-launcher"))
    assert not [m for m in launcher["problems"] if "hostfile" in m], launcher
    assert launcher["namesResolved"] >= 2, launcher
    # one slot too many: 16 ranks, but 9 and 7 on the two workers where plan gives each 8 (its GPUs)
    mine = [f for f in result["findings"] if f.startswith("gang MPIJob multinode/nim-slots ")]
    assert len(mine) == 1 and "ranks per host" in mine[0] and "plan says 8 per node" in mine[0], mine
    assert "'nim-slots-worker-0': 9" in mine[0] and "'nim-slots-worker-1': 7" in mine[0], mine
    # a worker short: mpirun finds 8 slots for 16 ranks and refuses; no rank ran, the gang did not form
    mine = [f for f in result["findings"] if f.startswith("gang MPIJob multinode/nim-short ")]
    assert len(mine) == 1 and "not formed" in mine[0], mine
    # the finding carries the launcher's last lines: the end of Open MPI 4's "There are not enough slots available
    # in the system" help text (open-mpi/ompi v4.1.x orte/mca/rmaps/base/help-orte-rmaps-base.txt,
    # [orte-rmaps-base:alloc-error]), whose first lines scroll out of the box's 15-line tail
    assert "--oversubscribe option to ignore the | number of available slots" in mine[0], mine
    assert gangs["MPIJob multinode/nim-short"]["formed"] is False


def _ray_layer() -> str:
    return subprocess.run([str(REALNODE / "ray-layer.sh"), str(CACHE)], capture_output=True, text=True,
                          check=True).stdout.strip()


@pytest.mark.skipif(not (BIN / "lws").exists(), reason="conformance/bin/lws not built")
def test_ray_worker_pointed_at_a_name_that_does_not_resolve(tmp_path: Path) -> None:
    lws_crds = subprocess.run(["make", "--no-print-directory", "-s", "-C", str(ROOT / "conformance" / "lws"), "crds"],
                              capture_output=True, text=True, check=True).stdout.strip()
    out = _plan(tmp_path, ROOT / "stacks" / "Pulumi.oci-dev.yaml", "gangs-ray", "--lws-crds", lws_crds)
    lws_file = next((out / "k8s").glob("LeaderWorkerSet-*.yaml"))
    text = lws_file.read_text()
    doc = yaml.safe_load(text)
    for t in ("leaderTemplate", "workerTemplate"):     # no Volcano in this box: kube-scheduler binds
        doc["spec"]["leaderWorkerTemplate"].get(t, {}).get("spec", {}).pop("schedulerName", None)
    worker = doc["spec"]["leaderWorkerTemplate"]["workerTemplate"]["spec"]["containers"][0]
    assert "$LWS_LEADER_ADDRESS:6379" in " ".join(worker["command"]), worker["command"]
    worker["command"] = [c.replace("$LWS_LEADER_ADDRESS", "llama-405b-0.no-such-service.multinode")
                         for c in worker["command"]]                 # planted
    lws_file.write_text(yaml.safe_dump(doc))
    code, result = _run(out, "--lws", str(BIN / "lws"), "--ray-layer", _ray_layer(), "--gang-timeout", "90s")
    assert code == 1
    g = _gangs(result)["LeaderWorkerSet multinode/llama-405b group 0"]
    assert g["formed"] is False and g["expected"] == 2, g
    mine = [f for f in result["findings"] if f.startswith("gang LeaderWorkerSet multinode/llama-405b group 0 ")]
    assert len(mine) == 1 and "not formed" in mine[0], mine
    assert "llama-405b-0.no-such-service.multinode" in mine[0], mine   # the worker's last lines name it


# PyTorch gangs: a one-pool stack of 2 nodes whose indexed Job runs torchrun with a script the image lacks, and
# the NCCL preflight init container as plan renders them
TORCH_STACK = """\
config:
  multinode:cloud: aws
  multinode:cluster: {name: box, region: us-east-1}
  multinode:nodePools:
    - name: gpu
      machine: p5.48xlarge
      nodeCount: 2
      zone: us-east-1a
      subnetId: subnet-0a1b2c3d4e5f60718
  multinode:storage: {kind: fsx-lustre, sizeGib: 2400, throughput: 250}
  multinode:workloads:
    - name: train
      kind: indexed-job
      engine: torchrun
      image: public.ecr.aws/deep-learning-containers/pytorch-training:2.8.0-gpu-py312-cu129-ubuntu22.04-ec2
      nodePool: gpu
      nodes: 2
      script: /workspace/train.py
"""


def _torch_layer() -> str:
    rootfs = subprocess.run([str(REALNODE / "rootfs.sh"), str(CACHE)], capture_output=True, text=True,
                            check=True).stdout.strip()
    return subprocess.run([str(REALNODE / "torch-layer.sh"), str(CACHE), rootfs], capture_output=True, text=True,
                          check=True).stdout.strip()


def _trainer_line(job: dict) -> list[str]:
    c = job["spec"]["template"]["spec"]["containers"][0]
    return c["args"] if any("torchrun" in a for a in c.get("args") or []) else c["command"]


def _plant_torch(out: Path) -> None:
    """Three copies of the rendered Job, each with its own subdomain and headless Service and no preflight, each
    with one classic mistake; placement.json gives each the rendered Job's plan (2 pods, 8 GPUs each)."""
    k8s = out / "k8s"
    job_file = next(k8s.glob("Job-*-train.yaml"))
    doc = yaml.safe_load(job_file.read_text())
    doc["spec"]["template"]["spec"].pop("schedulerName", None)   # no Volcano in this box: kube-scheduler binds
    job_file.write_text(yaml.safe_dump(doc))
    ns = doc["metadata"]["namespace"]
    line = _trainer_line(doc)
    assert "--nnodes=2" in line[-1] and "train-0.train:29400" in line[-1], line

    def nnodes(job: dict) -> None:         # --nnodes one larger than the replicas
        args = _trainer_line(job)
        args[-1] = args[-1].replace("--nnodes=2", "--nnodes=3")

    def port(job: dict) -> None:           # pod 1 names the endpoint on another port (nothing listens there)
        args = _trainer_line(job)
        args[-1] = args[-1].replace(
            "train-0.train:29400", "train-0.train:$((29400 + (JOB_COMPLETION_INDEX > 0)))").replace(
            "--rdzv_conf=", "--rdzv_conf=read_timeout=600,")   # pod 1 keeps trying (not failing the Job)

    def short(job: dict) -> None:          # one pod of the gang of two runs
        job["spec"]["parallelism"] = 1
    listed = []
    placement = json.loads((out / "placement.json").read_text())
    gang = next(g for g in placement["batchEachBesideServices"] if g["owner"] == f"Job {ns}/train")
    pool = next(pl for pl in placement["pools"] if any(w["gang"] == "train"
                                                       for w in (pl.get("use") or {}).get("workloads") or []))
    use = next(w for w in pool["use"]["workloads"] if w["gang"] == "train")
    for name, edit in (("train-nnodes", nnodes), ("train-port", port), ("train-short", short)):
        job = copy.deepcopy(doc)
        job["metadata"]["name"] = name
        spec = job["spec"]["template"]["spec"]
        spec.pop("initContainers", None)
        spec["subdomain"] = name
        job["spec"]["backoffLimit"] = 0
        edit(job)
        # the store host's name, which the rendered script compares the pod's own host name with
        args = _trainer_line(job)
        assert 'RDZV_HOST="train-0.train"' in args[-1], args
        args[-1] = args[-1].replace('RDZV_HOST="train-0.train"', f'RDZV_HOST="{name}-0.{name}"')
        text = yaml.safe_dump(job).replace("train-0.train:", f"{name}-0.{name}:")
        assert f"{name}-0.{name}:" in text
        svc = {"apiVersion": "v1", "kind": "Service", "metadata": {"name": name, "namespace": ns},
               "spec": {"clusterIP": "None", "publishNotReadyAddresses": True,
                        "selector": {"batch.kubernetes.io/job-name": name},
                        "ports": [{"name": "rdzv", "port": 29400, "targetPort": 29400}]}}
        (k8s / f"Service-{ns}-{name}.yaml").write_text(yaml.safe_dump(svc))
        (k8s / f"Job-{ns}-{name}.yaml").write_text(text)
        listed += [f"Service-{ns}-{name}.yaml", f"Job-{ns}-{name}.yaml"]
        planned = json.loads(json.dumps(gang).replace('"train', f'"{name}'))
        placement["batchEachBesideServices"].append({**planned, "owner": f"Job {ns}/{name}"})
        pool["use"]["workloads"].append({**use, "gang": name})
    (out / "placement.json").write_text(json.dumps(placement, indent=1))
    index = k8s / "apply-order.txt"
    index.write_text(index.read_text().replace(f"{job_file.name}\n", f"{job_file.name}\n" + "".join(
        f"{n}\n" for n in listed)))


def test_torchrun_gangs_form_and_each_planted_mistake_is_found(tmp_path: Path) -> None:
    """The real torchrun (Debian's PyTorch 1.13.1) with the rendered flags, 2 processes per pod (the box's cap
    --torch-nproc-max 2 for the rendered 8), the gangs waited for at most 75 s each. As rendered, the preflight
    and the trainer form with world size 2 pods x 2; --nnodes one larger than the pods, the endpoint on another
    port in pod 1 and a gang one pod short do not form, each a finding for its reason."""
    f = tmp_path / "Pulumi.gangs-torch.yaml"
    f.write_text(TORCH_STACK)
    out = _plan(tmp_path, f, "gangs-torch")
    _plant_torch(out)
    code, result = _run(out, "--torch-layer", _torch_layer(), "--torch-nproc-max", "2", "--gang-timeout", "75s",
                        "--timeout", "14m")
    gangs = _gangs(result)
    print(json.dumps(gangs, indent=1)[:8000])
    assert code == 1
    ns = "multinode"
    for c in ("preflight-nccl", "trainer"):
        g = gangs[f"Job {ns}/train container {c}"]
        assert g["formed"] is True and g["worldSize"] == 4 and g["expected"] == 4, g
        assert g["nprocPerNode"] == 8 and g["nprocUsed"] == 2 and "boxOnly" in g, g
        assert g["verdict"]["torch"].startswith("1.13") and g["verdict"]["backend"] == "gloo", g
        assert sorted(g["verdict"]["ranksPerHost"].values()) == [2, 2] and not g["problems"], g
        assert g["secondsToForm"] is not None and g["secondsToForm"] < 75, g
    findings = result["findings"]
    assert not [m for m in findings if m.startswith(f"gang Job {ns}/train container")], findings
    mine = [m for m in findings if m.startswith(f"gang Job {ns}/train-nnodes container trainer ")]
    assert len(mine) == 1 and "--nnodes=3, plan gives the gang 2 pods" in mine[0], mine
    assert "not formed" in mine[0] and "2 of --nnodes=3 launchers started, node ranks that never joined: [2]" \
        in mine[0], mine
    mine = [m for m in findings if m.startswith(f"gang Job {ns}/train-port container trainer ")]
    assert len(mine) == 1 and "not formed" in mine[0], mine
    assert re.search(r"the launchers name different rendezvous endpoints: train-port-0-\w+ "
                     r"train-port-0\.train-port:29400, train-port-1-\w+ train-port-0\.train-port:29401", mine[0]), mine
    mine = [m for m in findings if m.startswith(f"gang Job {ns}/train-short container trainer ")]
    assert len(mine) == 1 and "1 pods of the gang in the box, plan gives 2" in mine[0], mine
    assert "1 of --nnodes=2 launchers started, node ranks that never joined: [1]" in mine[0], mine
    for name in ("train-nnodes", "train-port", "train-short"):
        assert gangs[f"Job {ns}/{name} container trainer"]["formed"] is False
