"""PyTorch gangs on real nodes (issue 43), each planted mistake failing for its reason (needs root, the
clusterbox binary, CoreDNS and the Debian packages of conformance/realnode/install-deps.sh; skips otherwise).

One box: a one-pool stack of 2 nodes run by real kubelets, the stand-in image with Debian's PyTorch 1.13.1, the
box's cap of 2 processes per node (--torch-nproc-max 2: 8 gloo processes per pod are not needed to show a
rendezvous) and a bound of 100 s per phase for the gangs (--gang-timeout). Four indexed Jobs, one after the other:
- `train` as plan renders it: the NCCL preflight init container (the rendered script, gloo in place of NCCL, its
  floor not checked) and the trainer (the real torchrun, the box's trainer stand-in in place of
  /workspace/train.py) both form with world size 2 x 2 = 4, and the pods succeed;
- `train-nnodes`: --nnodes=3 for a Job of 2 pods (planted): the rendezvous waits for a third node that never comes;
- `train-port`: the pods other than pod 0 name the rendezvous endpoint on another port (planted: as a master and
  a worker template of a Volcano Job or a PyTorchJob rendered with different ports), where nothing listens;
- `train-short`: parallelism 1 for completions 2 (planted): one pod of the gang runs, the other never starts.
The three planted gangs do not form: each is a finding naming its pods, the node ranks that did not join and the
containers' last lines.
"""
from __future__ import annotations

import copy
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[3]
HERE = ROOT / "conformance" / "cluster"
BIN = ROOT / "conformance" / "bin" / "clusterbox"
COREDNS = ROOT / "conformance" / "bin" / "coredns"
REALNODE = ROOT / "conformance" / "realnode"
CACHE = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "multinode" / "realnode"
pytestmark = [
    pytest.mark.skipif(not BIN.exists(), reason=f"{BIN} not built (make -C conformance/cluster build)"),
    pytest.mark.skipif(not COREDNS.exists(), reason=f"{COREDNS} not built (make -C conformance/coredns build)"),
    pytest.mark.skipif(os.geteuid() != 0, reason="real nodes need root (network and mount namespaces, containerd)"),
    pytest.mark.skipif(shutil.which("containerd") is None or shutil.which("debootstrap") is None,
                       reason="containerd/debootstrap not installed (conformance/realnode/install-deps.sh)"),
]

STACK = """\
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


def _copy(doc: dict, name: str, edit) -> tuple[str, str]:
    """The Job under another name, its own subdomain and headless Service, no preflight; edit(job) plants."""
    job = copy.deepcopy(doc)
    job["metadata"]["name"] = name
    spec = job["spec"]["template"]["spec"]
    spec.pop("initContainers", None)
    spec["subdomain"] = name
    job["spec"]["backoffLimit"] = 0
    edit(job)
    text = yaml.safe_dump(job).replace("train-0.train:", f"{name}-0.{name}:")
    assert f"{name}-0.{name}:" in text
    svc = {"apiVersion": "v1", "kind": "Service", "metadata": {"name": name, "namespace": doc["metadata"]["namespace"]},
           "spec": {"clusterIP": "None", "publishNotReadyAddresses": True,
                    "selector": {"batch.kubernetes.io/job-name": name},
                    "ports": [{"name": "rdzv", "port": 29400, "targetPort": 29400}]}}
    return text, yaml.safe_dump(svc)


def _args(job: dict) -> list[str]:
    return job["spec"]["template"]["spec"]["containers"][0]["command"]


def _nnodes(job: dict) -> None:
    cmd = _args(job)
    assert "--nnodes=2" in cmd[-1]
    cmd[-1] = cmd[-1].replace("--nnodes=2", "--nnodes=3")


def _port(job: dict) -> None:
    cmd = _args(job)
    assert "train-0.train:29400" in cmd[-1]
    cmd[-1] = cmd[-1].replace("train-0.train:29400", "train-0.train:$((29400 + (JOB_COMPLETION_INDEX > 0)))")


def _short(job: dict) -> None:
    job["spec"]["parallelism"] = 1


def _plant(k8s: Path) -> None:
    job_file = next(k8s.glob("Job-*-train.yaml"))
    doc = yaml.safe_load(job_file.read_text())
    doc["spec"]["template"]["spec"].pop("schedulerName", None)   # no Volcano in this box: kube-scheduler binds
    job_file.write_text(yaml.safe_dump(doc))
    ns = doc["metadata"]["namespace"]
    listed = []
    for name, edit in (("train-nnodes", _nnodes), ("train-port", _port), ("train-short", _short)):
        job, svc = _copy(doc, name, edit)
        (k8s / f"Service-{ns}-{name}.yaml").write_text(svc)
        (k8s / f"Job-{ns}-{name}.yaml").write_text(job)
        listed += [f"Service-{ns}-{name}.yaml", f"Job-{ns}-{name}.yaml"]
    index = k8s / "apply-order.txt"
    index.write_text(index.read_text().replace(f"{job_file.name}\n", f"{job_file.name}\n" + "".join(
        f"{n}\n" for n in listed)))


def test_gangs_form_and_each_planted_mistake_is_found(tmp_path: Path) -> None:
    f = tmp_path / "Pulumi.gangs.yaml"
    f.write_text(STACK.replace("box, region", "box, region"))
    py = sys.executable
    subprocess.run([str(Path(py).parent / "multinode"), "plan", "--file", str(f), "--out", str(tmp_path)],
                   capture_output=True, text=True, cwd=ROOT)
    out = tmp_path / "gangs"
    assert (out / "placement.json").exists()
    subprocess.run([py, str(HERE / "prepare.py"), str(out), str(f)], check=True, cwd=ROOT)
    _plant(out / "k8s")
    rootfs = subprocess.run([str(REALNODE / "rootfs.sh"), str(CACHE)], capture_output=True, text=True, check=True)
    r = subprocess.run([str(BIN), "--netns", "--real-nodes", "gpu-0,gpu-1", "--standin-rootfs", rootfs.stdout.strip(),
                        "--standin-dir", str(REALNODE / "standin"), "--stack-dir", str(out), "--timeout", "14m",
                        "--coredns", str(COREDNS), "--torch-nproc-max", "2", "--gang-timeout", "100s",
                        "--settle", "60s", "--compare", f"{py} {HERE / 'compare.py'} {out}"],
                       capture_output=True, text=True, cwd=ROOT, env={**os.environ, "PYTHONPATH": str(ROOT)})
    print(r.stdout[-6000:], r.stderr[-3000:])
    result = json.loads((out / "cluster.json").read_text())
    assert r.returncode == 1
    real = result["realNodes"]
    assert real["gangSettings"] == {"bound": 100, "nprocMax": 2, "torchLayer": True}
    gangs = {(g["gang"], g["container"]): g for g in real["gangs"]}
    print(json.dumps(real["gangs"], indent=1)[:6000])
    ns = "multinode"
    # as rendered: the preflight and the trainer form, world size 2 nodes x 2 processes (the box's cap of 8)
    for c in ("preflight-nccl", "trainer"):
        g = gangs[(f"Job {ns}/train", c)]
        assert g["formed"] and g["verdict"] == "formed", g
        assert g["worldSizeSeen"] == 4 and g["nprocPerNode"] == 8 and g["nprocUsed"] == 2, g
        assert g["secondsToForm"] is not None and g["secondsToForm"] < 100, g
    train_pods = [p for p in real["pods"] if p["phase"] == f"batch Job {ns}/train"]
    assert len(train_pods) == 2 and all(p["podPhase"] == "Succeeded" and not p["problems"] for p in train_pods)
    findings = result["findings"]
    assert not [m for m in findings if f"Job {ns}/train " in m], findings
    # --nnodes one larger than the replicas
    nn = [m for m in findings if m.startswith(f"gang Job {ns}/train-nnodes container trainer:")]
    assert any("--nnodes=3 but plan gives the workload 2 pods" in m for m in nn), nn
    assert any("not formed within 100s" in m and "only 2 pods of the gang ran for --nnodes=3" in m for m in nn), nn
    # the endpoint on the wrong port: pod 1 cannot reach the store pod 0 serves
    port = [m for m in findings if m.startswith(f"gang Job {ns}/train-port container trainer: not formed")]
    assert len(port) == 1 and "train-port-1" in port[0] and "29401" in port[0], port
    # one pod short
    short = [m for m in findings if m.startswith(f"gang Job {ns}/train-short container trainer: not formed")]
    assert len(short) == 1 and "only 1 pods of the gang ran for --nnodes=2 (plan gives 2: 1 pod(s) short)" in short[0]
    for key in ((f"Job {ns}/train-nnodes", "trainer"), (f"Job {ns}/train-port", "trainer"),
                (f"Job {ns}/train-short", "trainer")):
        assert not gangs[key]["formed"] and gangs[key]["worldSizeSeen"] == 0, gangs[key]
