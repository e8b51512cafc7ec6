"""The box itself on stacks made to fail (needs the clusterbox binary: `make -C conformance/cluster build`).

The config refuses a gang larger than its pool before anything is rendered, so the defects are planted in the
box's nodes (nodes.yaml, written by prepare.py): a pool with one node fewer than the gang, nodes with fewer GPUs
than a pod requests. The real scheduler must leave the pods Pending with its reason and the check must fail;
the same stack unchanged must pass (so the failure is the defect's, not the box's)."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from boxnet import netns_flags

HERE = Path(__file__).resolve().parent.parent
ROOT = HERE.parent.parent
BIN = ROOT / "conformance" / "bin" / "clusterbox"
KYVERNO = ROOT / "conformance" / "kyverno" / "bin" / "kyverno"
pytestmark = pytest.mark.skipif(not BIN.exists(), reason=f"{BIN} not built (make -C conformance/cluster build)")

# A one-pool stack with one 2-pod indexed-Job gang (torchrun: every rank at once). The stack gives it to Volcano
# (schedulerName volcano, a PodGroup); Volcano does not run in the box yet, so the tests hand the Job's pods to
# kube-scheduler (_default_scheduler): the default scheduler is not gang-aware, which is why a short pool shows
# up as a half-bound gang, a finding the check makes.
STACK = """\
config:
  multinode:cloud: aws
  multinode:cluster: {{name: box, region: us-east-1}}
  multinode:nodePools:
    - name: gpu
      machine: p5.48xlarge
      nodeCount: {nodes}
      zone: us-east-1a
      subnetId: subnet-0a1b2c3d4e5f60718
  multinode:storage: {{kind: fsx-lustre, sizeGib: 2400, throughput: 250}}
  multinode:workloads:
    - name: train
      kind: indexed-job
      engine: torchrun
      image: public.ecr.aws/deep-learning-containers/pytorch-training:2.8.0-gpu-py312-cu129-ubuntu22.04-ec2
      nodePool: gpu
      nodes: 2
      script: /workspace/train.py
"""


def _default_scheduler(k8s: Path) -> None:
    job = next(k8s.glob("Job-*-train.yaml"))
    doc = yaml.safe_load(job.read_text())
    assert doc["apiVersion"] == "batch/v1", doc["apiVersion"]
    doc["spec"]["template"]["spec"].pop("schedulerName", None)
    job.write_text(yaml.safe_dump(doc))
    for f in (k8s.parent / "effective").glob("*.yaml"):          # the same change in what plan expects
        eff = yaml.safe_load(f.read_text())
        eff["spec"].pop("schedulerName", None)
        f.write_text(yaml.safe_dump(eff))


def _kyverno_crds() -> str:
    d = subprocess.run(["go", "list", "-m", "-f", "{{.Dir}}", "github.com/kyverno/kyverno"], capture_output=True,
                       text=True, check=True, cwd=ROOT / "conformance" / "kyverno").stdout.strip()
    return f"{d}/config/crds"


def _box(tmp_path: Path, name: str, plant=None, kyverno: bool = False, plant_k8s=None) -> tuple[int, dict]:
    f = tmp_path / f"Pulumi.{name}.yaml"
    f.write_text(STACK.format(nodes=2))
    py = sys.executable
    subprocess.run([str(Path(py).parent / "multinode"), "plan", "--file", str(f), "--out", str(tmp_path)],
                   capture_output=True, text=True, cwd=ROOT)
    out = tmp_path / name
    assert (out / "placement.json").exists(), f"plan wrote no {out}/placement.json"
    subprocess.run([py, str(HERE / "prepare.py"), str(out), str(f)]
                   + (["--kyverno-crds", _kyverno_crds()] if kyverno else []), check=True, cwd=ROOT)
    _default_scheduler(out / "k8s")
    if plant_k8s is not None:
        plant_k8s(out / "k8s")
    if plant is not None:
        nodes_file = out / "engines" / "cluster" / "nodes.yaml"
        nodes = yaml.safe_load(nodes_file.read_text())
        plant(nodes["items"])
        nodes_file.write_text(yaml.safe_dump(nodes))
    r = subprocess.run([str(BIN), *netns_flags(), "--stack-dir", str(out), "--timeout", "4m", "--settle", "45s"]
                       + (["--kyverno", str(KYVERNO)] if kyverno else [])
                       + ["--compare", f"{py} {HERE / 'compare.py'} {out}" + (" --kyverno" if kyverno else "")],
                       capture_output=True, text=True, cwd=ROOT,
                       env={**os.environ, "PYTHONPATH": str(ROOT)})
    print(r.stdout[-4000:], r.stderr[-4000:])
    return r.returncode, json.loads((out / "cluster.json").read_text())


def test_gang_larger_than_its_pool_stays_pending_with_the_schedulers_reason(tmp_path: Path) -> None:
    code, result = _box(tmp_path, "one-node-short", plant=lambda items: items.pop())
    assert code == 1
    pending = [f for f in result["findings"] if "Pending" in f]
    assert len(pending) == 1 and "Insufficient nvidia.com/gpu" in pending[0], result["findings"]
    assert any("half-bound (1 of 2 pods bound)" in f for f in result["findings"])


def _half_the_gpus(items: list) -> None:
    for n in items:
        n["status"]["allocatable"]["nvidia.com/gpu"] = "4"


def test_pod_larger_than_the_machine_stays_pending_with_the_schedulers_reason(tmp_path: Path) -> None:
    # the pods ask only for GPUs (no cpu request: a planted cpu shortage would not reach them)
    code, result = _box(tmp_path, "gpu-short", plant=_half_the_gpus)
    assert code == 1
    pending = [f for f in result["findings"] if "Pending" in f]
    assert len(pending) == 2 and all("2 Insufficient nvidia.com/gpu" in f for f in pending), result["findings"]


def test_the_same_stack_unchanged_passes(tmp_path: Path) -> None:
    code, result = _box(tmp_path, "as-planned")
    assert code == 0, result["findings"]
    assert result["workloads"] and all(w["verdict"] == "ok" for w in result["workloads"])


def _drop_fabric_label(k8s: Path) -> None:
    job = next(k8s.glob("Job-*-train.yaml"))
    doc = yaml.safe_load(job.read_text())
    del doc["spec"]["template"]["metadata"]["labels"]["multinode.dev/fabric"]
    job.write_text(yaml.safe_dump(doc))


@pytest.mark.skipif(not KYVERNO.exists(), reason=f"{KYVERNO} not built (make -C conformance/kyverno build)")
def test_kyverno_in_the_box_admits_the_fabric_pods_as_effective_says(tmp_path: Path) -> None:
    code, result = _box(tmp_path, "with-kyverno", kyverno=True)
    assert code == 0, result["findings"]
    assert result["effective"] and all(e["verdict"] == "equal" for e in result["effective"]), result["effective"]


@pytest.mark.skipif(not KYVERNO.exists(), reason=f"{KYVERNO} not built (make -C conformance/kyverno build)")
def test_kyverno_in_the_box_denies_a_gpu_pod_without_the_fabric_label(tmp_path: Path) -> None:
    code, result = _box(tmp_path, "no-fabric-label", kyverno=True, plant_k8s=_drop_fabric_label)
    assert code == 1
    denied = [f for f in result["findings"] if "no pods created" in f]
    assert denied and "denied" in denied[0], result["findings"]


# Volcano in the box (conformance/volcano builds vc-scheduler and vc-controller-manager; today it cannot: its
# README). The same stacks, the pods left to Volcano as the stack renders them (schedulerName volcano, the Job's
# PodGroup), plus a volcano-training gang (a Volcano Job: Volcano's controller creates its pods).
VC_BIN = ROOT / "conformance" / "bin"
VOLCANO_BUILT = (VC_BIN / "vc-scheduler").exists() and (VC_BIN / "vc-controller-manager").exists()
needs_volcano = pytest.mark.skipif(not VOLCANO_BUILT, reason=f"{VC_BIN}/vc-scheduler and vc-controller-manager not "
                                   "built (make -C conformance/volcano build; conformance/volcano/README.md: the Go "
                                   "module proxy does not serve volcano.sh/apis v1.15.1)")
VOLCANO_JOB = """\
    - name: finetune
      kind: volcano-training
      engine: torchrun
      image: public.ecr.aws/deep-learning-containers/pytorch-training:2.8.0-gpu-py312-cu129-ubuntu22.04-ec2
      nodePool: gpu
      nodes: 2
      script: /workspace/train.py
"""


def _volcano_module() -> str:
    return subprocess.run(["go", "list", "-m", "-f", "{{.Dir}}", "volcano.sh/volcano"], capture_output=True,
                          text=True, check=True, cwd=ROOT / "conformance" / "volcano").stdout.strip()


def _volcano_box(tmp_path: Path, name: str, plant=None) -> tuple[int, dict]:
    f = tmp_path / f"Pulumi.{name}.yaml"
    f.write_text(STACK.format(nodes=2) + VOLCANO_JOB)
    py = sys.executable
    subprocess.run([str(Path(py).parent / "multinode"), "plan", "--file", str(f), "--out", str(tmp_path)],
                   capture_output=True, text=True, cwd=ROOT)
    out = tmp_path / name
    assert (out / "placement.json").exists(), f"plan wrote no {out}/placement.json"
    subprocess.run([py, str(HERE / "prepare.py"), str(out), str(f), "--volcano", _volcano_module()], check=True,
                   cwd=ROOT)
    assert (out / "engines" / "cluster" / "volcano.json").exists()
    if plant is not None:
        nodes_file = out / "engines" / "cluster" / "nodes.yaml"
        nodes = yaml.safe_load(nodes_file.read_text())
        plant(nodes["items"])
        nodes_file.write_text(yaml.safe_dump(nodes))
    r = subprocess.run([str(BIN), *netns_flags(), "--stack-dir", str(out), "--timeout", "5m", "--settle", "60s",
                        "--volcano", str(VC_BIN), "--compare", f"{py} {HERE / 'compare.py'} {out}"],
                       capture_output=True, text=True, cwd=ROOT, env={**os.environ, "PYTHONPATH": str(ROOT)})
    print(r.stdout[-4000:], r.stderr[-4000:])
    return r.returncode, json.loads((out / "cluster.json").read_text())


@needs_volcano
def test_volcano_binds_both_gangs_as_planned(tmp_path: Path) -> None:
    code, result = _volcano_box(tmp_path, "vc-as-planned")
    assert code == 0, result["findings"]
    assert len(result["workloads"]) == 2 and all(w["verdict"] == "ok" for w in result["workloads"]), result
    assert not any("volcano" in n.lower() for n in result["notChecked"]), result["notChecked"]


@needs_volcano
def test_volcano_holds_a_gang_larger_than_its_pool_back_whole(tmp_path: Path) -> None:
    code, result = _volcano_box(tmp_path, "vc-one-node-short", plant=lambda items: items.pop())
    assert code == 1
    assert not any("half-bound" in f for f in result["findings"]), result["findings"]
    # the indexed Job's pods exist (the Job controller made them) and wait whole; the Volcano Job's pods are not
    # even created: its PodGroup is not admitted. Both findings carry the PodGroup's reason.
    assert any("Pending under Volcano" in f and "PodGroup" in f for f in result["findings"]), result["findings"]
    assert any("held back whole by Volcano" in f for f in result["findings"]), result["findings"]
