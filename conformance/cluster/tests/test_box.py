"""The box itself on stacks made to fail (needs the clusterbox binary: `make -C conformance/cluster build`).

The config refuses a gang larger than its pool before anything is rendered, so the defects are planted in the
box's nodes (nodes.yaml, written by prepare.py): a pool with one node fewer than the gang, a node with less cpu
than the pod requests. The real scheduler must leave the pods Pending with its reason and the check must fail;
the same stack unchanged must pass (so the failure is the defect's, not the box's)."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

HERE = Path(__file__).resolve().parent.parent
ROOT = HERE.parent.parent
BIN = ROOT / "conformance" / "bin" / "clusterbox"
pytestmark = pytest.mark.skipif(not BIN.exists(), reason=f"{BIN} not built (make -C conformance/cluster build)")

# A one-pool stack on an existing cluster with one 2-pod indexed-Job gang (torchrun: every rank at once).
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
      kind: volcano-training
      engine: torchrun
      image: public.ecr.aws/deep-learning-containers/pytorch-training:2.8.0-gpu-py312-cu129-ubuntu22.04-ec2
      nodePool: gpu
      nodes: 2
      script: /workspace/train.py
"""


def _box(tmp_path: Path, name: str, plant=None) -> tuple[int, dict]:
    f = tmp_path / f"Pulumi.{name}.yaml"
    f.write_text(STACK.format(nodes=2))
    py = sys.executable
    subprocess.run([str(Path(py).parent / "multinode"), "plan", "--file", str(f), "--out", str(tmp_path)],
                   capture_output=True, text=True, cwd=ROOT)
    out = tmp_path / name
    assert (out / "placement.json").exists(), f"plan wrote no {out}/placement.json"
    subprocess.run([py, str(HERE / "prepare.py"), str(out), str(f)], check=True, cwd=ROOT)
    if plant is not None:
        nodes_file = out / "engines" / "cluster" / "nodes.yaml"
        nodes = yaml.safe_load(nodes_file.read_text())
        plant(nodes["items"])
        nodes_file.write_text(yaml.safe_dump(nodes))
    r = subprocess.run([str(BIN), "--stack-dir", str(out), "--timeout", "4m", "--settle", "45s",
                        "--compare", f"{py} {HERE / 'compare.py'} {out}"], capture_output=True, text=True, cwd=ROOT,
                       env={**os.environ, "PYTHONPATH": str(ROOT)})
    print(r.stdout[-4000:], r.stderr[-4000:])
    return r.returncode, json.loads((out / "cluster.json").read_text())


def test_gang_larger_than_its_pool_stays_pending_with_the_schedulers_reason(tmp_path: Path) -> None:
    code, result = _box(tmp_path, "one-node-short", plant=lambda items: items.pop())
    assert code == 1
    pending = [f for f in result["findings"] if "Pending" in f]
    assert len(pending) == 1 and "Insufficient nvidia.com/gpu" in pending[0], result["findings"]
    assert any("half-bound (1 of 2 pods bound)" in f for f in result["findings"])


def _less_cpu(items: list) -> None:
    for n in items:
        n["status"]["allocatable"]["cpu"] = "16"


def test_cpu_beyond_the_machine_stays_pending_with_the_schedulers_reason(tmp_path: Path) -> None:
    code, result = _box(tmp_path, "cpu-short", plant=_less_cpu)
    assert code == 1
    pending = [f for f in result["findings"] if "Pending" in f]
    assert len(pending) == 2 and all("Insufficient cpu" in f for f in pending), result["findings"]


def test_the_same_stack_unchanged_passes(tmp_path: Path) -> None:
    code, result = _box(tmp_path, "as-planned")
    assert code == 0, result["findings"]
    assert result["workloads"] and all(w["verdict"] == "ok" for w in result["workloads"])
