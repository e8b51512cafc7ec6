"""The box with real nodes (issue 42) on a stack with planted defects (needs root, the clusterbox binary and the
Debian packages of conformance/realnode/install-deps.sh; skips otherwise).

One box: a one-pool stack of 2 nodes, run by real kubelets in the box's own network namespace with CoreDNS
(when conformance/bin/coredns is built), with three indexed-Job gangs applied one after the other (batch objects
run alone): `train` as plan renders it (its trainer a process that stays up with the rendered rendezvous flag,
no preflight: the PyTorch gangs are tests/test_box_gangs.py's) plus an env var that refers to an undefined
variable (planted),
`train-preflight`, the same Job with a preflight init container that exits 1 (planted), and `train-clash`, the
same Job under a subdomain whose only Service is a client Service for other pods (planted: a client Service that
takes the name the pods' hostnames live under, as the LWS stacks' client Service once took the name of LWS's
headless Service, which LWS then does not create). The
real kubelet must leave `$(UNDEFINED_HOST)` literal in the process's environment (so the check reports it), never
start the trainer behind the failing preflight; `train`'s rendezvous host must resolve from inside its pods to
pod 0 (no finding), `train-clash`'s must not (a finding naming the Service that took the name). A fourth gang,
`train-probe`, serves port 8000 and has a readiness probe on 8001 (planted: a probe on a port nobody listens on)."""
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
BIN = ROOT / "conformance" / "bin" / "clusterbox"
COREDNS = ROOT / "conformance" / "bin" / "coredns"
REALNODE = ROOT / "conformance" / "realnode"
# the Makefile's STANDIN_CACHE: outside the checkout, like Go's caches
CACHE = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "multinode" / "realnode"
pytestmark = [
    pytest.mark.skipif(not BIN.exists(), reason=f"{BIN} not built (make -C conformance/cluster build)"),
    pytest.mark.skipif(os.geteuid() != 0, reason="real nodes need root (network and mount namespaces, containerd)"),
    pytest.mark.skipif(shutil.which("containerd") is None or shutil.which("debootstrap") is None,
                       reason="containerd/debootstrap not installed (conformance/realnode/install-deps.sh)"),
]

IMAGE = "public.ecr.aws/deep-learning-containers/pytorch-training:2.8.0-gpu-py312-cu129-ubuntu22.04-ec2"
MISSING = "public.ecr.aws/deep-learning-containers/pytorch-training@sha256:" + "0" * 64

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
      image: {IMAGE}
      nodePool: gpu
      nodes: 2
      script: /workspace/train.py
"""


def _plant(k8s: Path) -> None:
    job_file = next(k8s.glob("Job-*-train.yaml"))
    doc = yaml.safe_load(job_file.read_text())
    pod = doc["spec"]["template"]["spec"]
    pod.pop("schedulerName", None)            # Volcano does not run in this box: kube-scheduler binds them
    # The PyTorch gangs are test_box_gangs.py's. Here the trainer is a process that stays up with the rendered
    # rendezvous flag on its command line (the names check reads it there), and the preflight is left out.
    pod.pop("initContainers", None)
    trainer = pod["containers"][0]
    endpoint = re.search(r"--rdzv_endpoint=\S+", " ".join(trainer["command"] + trainer.get("args", [])))
    assert endpoint, trainer
    trainer["command"], trainer["args"] = ["python3", "-c", "import time; time.sleep(3600)", endpoint.group(0)], []
    second = copy.deepcopy(doc)
    trainer = pod["containers"][0]
    trainer.setdefault("env", []).append({"name": "RDZV_ADDR", "value": "$(UNDEFINED_HOST):29500"})
    job_file.write_text(yaml.safe_dump(doc))
    second["metadata"]["name"] = "train-preflight"
    sp = second["spec"]["template"]["spec"]
    sp["initContainers"] = [{"name": "preflight", "image": sp["containers"][0]["image"],
                             "command": ["/bin/sh", "-c", "echo planted preflight failure; exit 1"]}]
    second["spec"]["backoffLimit"] = 0
    planted = [job_file.name.replace("-train.yaml", "-train-preflight.yaml")]
    (k8s / planted[0]).write_text(yaml.safe_dump(second))
    # the name clash: the same Job under subdomain train-clash, whose Service is not headless
    third = copy.deepcopy(doc)
    third["metadata"]["name"] = "train-clash"
    tp = third["spec"]["template"]["spec"]
    tp["subdomain"] = "train-clash"
    tp["containers"][0]["env"] = [e for e in tp["containers"][0]["env"] if e["name"] != "RDZV_ADDR"]
    text = yaml.safe_dump(third).replace(f"{pod['subdomain']}-0.{pod['subdomain']}", "train-clash-0.train-clash")
    assert "train-clash-0.train-clash" in text, "the rendered trainer names no rendezvous host of its subdomain"
    planted.append(job_file.name.replace("-train.yaml", "-train-clash.yaml"))
    (k8s / planted[-1]).write_text(text)
    clash = {"apiVersion": "v1", "kind": "Service",
             "metadata": {"name": "train-clash", "namespace": doc["metadata"]["namespace"]},
             "spec": {"selector": {"app.kubernetes.io/name": "train-client"},
                      "ports": [{"name": "rdzv", "port": 29500, "targetPort": 29500}]}}
    planted.append(f"Service-{doc['metadata']['namespace']}-train-clash.yaml")
    (k8s / planted[-1]).write_text(yaml.safe_dump(clash))
    # a probe on a port nobody listens on: the trainer serves 8000 (python3's http.server, in the stand-in), its
    # liveness probe asks 8000 (fine), its readiness probe 8001 (planted)
    fourth = copy.deepcopy(doc)
    fourth["metadata"]["name"] = "train-probe"
    c = fourth["spec"]["template"]["spec"]["containers"][0]
    c["env"] = [e for e in c["env"] if e["name"] != "RDZV_ADDR"]
    c["command"], c["args"] = ["python3", "-m", "http.server", "8000"], []
    c["ports"] = [{"name": "http", "containerPort": 8000}]
    c["livenessProbe"] = {"tcpSocket": {"port": "http"}, "periodSeconds": 5}
    c["readinessProbe"] = {"tcpSocket": {"port": 8001}, "periodSeconds": 5}
    # the box's registry: the probe gang's trainer is pulled on every start (policy Always, as the API server
    # defaults it for a :latest tag), which only the box's registry can serve; a pod that pulls an image by digest
    # reference (planted: policy Always) finds nothing there, as the stand-in cannot have that digest (the nodes'
    # image stores name the stand-in so, for a kubelet that does not pull: IfNotPresent, a digest's default)
    c["imagePullPolicy"] = "Always"
    planted.append(job_file.name.replace("-train.yaml", "-train-probe.yaml"))
    (k8s / planted[-1]).write_text(yaml.safe_dump(fourth))
    ns = doc["metadata"]["namespace"]
    missing = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "missing-image", "namespace": ns},
               "spec": {"containers": [{"name": "main", "image": MISSING, "imagePullPolicy": "Always",
                                        "command": ["sleep", "infinity"]}],
                        "tolerations": pod.get("tolerations") or [], "nodeSelector": pod.get("nodeSelector") or {}}}
    planted.append(f"Pod-{ns}-missing-image.yaml")
    (k8s / planted[-1]).write_text(yaml.safe_dump(missing))
    # connections to a Service's ports: port 80 to the trainer's 8000 (http.server answers), port 81 to 9000
    # (planted: nothing listens there); publishNotReadyAddresses: the pods are never Ready (the probe on 8001)
    api = {"apiVersion": "v1", "kind": "Service", "metadata": {"name": "train-probe-api", "namespace": ns},
           "spec": {"selector": {"batch.kubernetes.io/job-name": "train-probe"}, "publishNotReadyAddresses": True,
                    "ports": [{"name": "http", "port": 80, "targetPort": 8000},
                              {"name": "nothing", "port": 81, "targetPort": 9000}]}}
    planted.append(f"Service-{ns}-train-probe-api.yaml")
    (k8s / planted[-1]).write_text(yaml.safe_dump(api))
    index = k8s / "apply-order.txt"          # the apply order lists every file of k8s/ (multinode/k8sfiles.py)
    listed = "".join(f"{name}\n" for name in planted)
    index.write_text(index.read_text().replace(f"{job_file.name}\n", f"{job_file.name}\n{listed}"))


def test_real_nodes_report_a_failing_preflight_and_an_unexpanded_env_var(tmp_path: Path) -> None:
    f = tmp_path / "Pulumi.realnode.yaml"
    f.write_text(STACK.replace("{IMAGE}", IMAGE))
    py = sys.executable
    subprocess.run([str(Path(py).parent / "multinode"), "plan", "--file", str(f), "--out", str(tmp_path)],
                   capture_output=True, text=True, cwd=ROOT)
    out = tmp_path / "realnode"
    assert (out / "placement.json").exists()
    subprocess.run([py, str(HERE / "prepare.py"), str(out), str(f)], check=True, cwd=ROOT)
    _plant(out / "k8s")
    rootfs = subprocess.run([str(REALNODE / "rootfs.sh"), str(CACHE)], capture_output=True, text=True, check=True)
    r = subprocess.run([str(BIN), "--netns", "--real-nodes", "gpu-0,gpu-1", "--standin-rootfs", rootfs.stdout.strip(),
                        "--standin-dir", str(REALNODE / "standin"), "--stack-dir", str(out), "--timeout", "7m",
                        *(["--coredns", str(COREDNS)] if COREDNS.exists() else []),
                        "--settle", "60s", "--compare", f"{py} {HERE / 'compare.py'} {out}"],
                       capture_output=True, text=True, cwd=ROOT, env={**os.environ, "PYTHONPATH": str(ROOT)})
    print(r.stdout[-5000:], r.stderr[-3000:])
    result = json.loads((out / "cluster.json").read_text())
    assert r.returncode == 1
    real = result["realNodes"]
    # the network namespace: only loopback at the start, only the box's interfaces at the end, never a default route
    assert [link["ifname"] for link in real["netns"]["start"]["links"]] == ["lo"]
    assert not real["netns"]["start"]["defaultRoute"] and not real["netns"]["end"]["defaultRoute"]
    assert not real["netns"]["end"]["outside"], real["netns"]["end"]
    assert real["netns"]["start"]["inode"] != real["netns"]["start"]["hostInode"]
    assert [n["name"] for n in real["nodes"]] == ["gpu-0", "gpu-1"] and all(n["ready"] for n in real["nodes"])
    assert all(n["allocatable"]["nvidia.com/gpu"] == "8" for n in real["nodes"])     # our device plugin's
    by_phase: dict[str, list[dict]] = {}
    for p in real["pods"]:   # the planted missing-image pod (applied with the Services) is in every phase: apart
        by_phase.setdefault(p["phase"] if p["pod"] != "multinode/missing-image" else "missing-image", []).append(p)
    env_pods = by_phase["batch Job multinode/train"]
    assert len(env_pods) == 2 and all(p["podPhase"] == "Running" for p in env_pods), env_pods
    for p in env_pods:   # the trainer runs; its env holds the reference the kubelet could not expand
        assert len(p["problems"]) == 1, p
        assert "env RDZV_ADDR='$(UNDEFINED_HOST):29500': $(UNDEFINED_HOST) left " \
            "unexpanded" in p["problems"][0], p
    pre_pods = by_phase["batch Job multinode/train-preflight"]
    # backoffLimit 0: the first pod whose preflight fails fails the Job, and the Job controller deletes its other
    # pod, which may not have run its preflight yet: that pod is kept as last seen ("gone", podlogs.go), counted but
    # not judged; every pod that is not gone shows the failed preflight, and at least one does
    failed = [p for p in pre_pods if not p.get("gone")]
    assert failed, real["pods"]
    for p in failed:   # the preflight exited 1, the trainer never started
        assert any(m.startswith("init container preflight: terminated:1") for m in p["problems"]), p
    assert all(p["verdict"] == "gone" and not p["problems"] for p in pre_pods if p.get("gone")), pre_pods
    # $(JOB_COMPLETION_INDEX) in the command line was expanded by the kubelet (no finding about it)
    assert not any("JOB_COMPLETION_INDEX" in m for p in real["pods"] for m in p["problems"])
    if not COREDNS.exists():
        return
    # CoreDNS: train's rendezvous host (pod 0 of its headless subdomain) and its Services resolved, no finding
    for p in env_pods:
        assert p["namesResolved"] >= 2, p
    clash_pods = by_phase["batch Job multinode/train-clash"]
    assert len(clash_pods) == 2 and all(p["podPhase"] == "Running" for p in clash_pods), clash_pods
    for p in clash_pods:
        rdzv = [m for m in p["problems"] if "'train-clash-0.train-clash'" in m]
        assert len(rdzv) == 1, (p, real["pods"])
        assert "does not resolve from inside the pod" in rdzv[0], rdzv
        assert "Service multinode/train-clash (not headless" in rdzv[0], rdzv
        assert "has the subdomain's name but no endpoint with hostname train-clash-0" in rdzv[0], rdzv
    # the probe on 8001 is found, the one on 8000 (where http.server listens) is not
    probe_pods = by_phase["batch Job multinode/train-probe"]
    assert len(probe_pods) == 2, probe_pods
    for p in probe_pods:
        probes = [m for m in p["problems"] if "Probe" in m]
        assert probes == ["container trainer: readinessProbe tcpSocket on port 8001: nothing listens on it in the pod "
                          "(listening: [8000])"], p
    # the trainer with policy Always ran (above): its image came from the box's registry
    registry = json.loads((out / "engines" / "cluster" / "observed.json").read_text())["registry"]
    pulls = [m for m in registry["manifests"] if m["ref"] == IMAGE and m["status"] == 200]
    assert pulls, registry
    # the digest reference the registry does not hold: a clear finding, and the registry's miss
    miss = [p for p in by_phase["missing-image"] if p["phase"] == "services"]
    assert len(miss) == 1 and len(miss[0]["problems"]) >= 1, miss
    assert "the box's registry 10.2.0.253:5000 holds no image " + MISSING in miss[0]["problems"][0], miss
    assert MISSING in registry["misses"] and MISSING in real["registry"]["misses"], registry
    # the Service's ports: 80 answers (no finding), 81 is a finding naming the Service, port, targetPort and pods
    conns = [m for m in result["findings"] if "Service multinode/train-probe-api" in m]
    assert len(conns) == 1, conns
    assert "port 81 (targetPort 9000)" in conns[0] and "nothing listens on 9000 in pod multinode/train-probe-" \
        in conns[0] and "connecting to train-probe-api:81 (clusterIP)" in conns[0], conns
    dialled = {(c["service"], c["port"]): c["connected"] for c in real["serviceConnections"]}
    assert dialled[("multinode/train-probe-api", 80)] is True and dialled[("multinode/train-probe-api", 81)] is False
