"""Budgets in the box (issue 40; needs conformance/bin/clusterbox, vc-scheduler and vc-controller-manager; skips
with the reason otherwise): a 2-node Volcano training job whose budget is planted back to the form rendered before
issue 40, `maxUnavailable: 1`. The real disruption controller cannot count a Volcano Job's scale (no scale
subresource), fails the sync and writes disruptionsAllowed 0, reason SyncFailed: the check must fail, naming the
budget and the reason. The rendered form (`minAvailable: 1`) passes the same check in `make cluster-check` on the
Volcano stacks (aws-dev's llama-finetune, the volcano-llm-training guide), so it is not run twice here (CI time)."""
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
BIN_DIR = ROOT / "conformance" / "bin"
NEEDED = [BIN_DIR / n for n in ("clusterbox", "vc-scheduler", "vc-controller-manager")]
pytestmark = pytest.mark.skipif(not all(p.exists() for p in NEEDED),
                                reason=f"not built: {[str(p) for p in NEEDED if not p.exists()]} "
                                       "(make -C conformance/cluster build; make -C conformance/volcano build)")
BUDGET = "multinode/train-gang"
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
  multinode:addons: {lws: {enabled: false}}
  multinode:workloads:
    - name: train
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


def test_a_maxunavailable_budget_on_a_volcano_job_gang_fails_the_box(tmp_path: Path) -> None:
    name = "budget-planted"
    f = tmp_path / f"Pulumi.{name}.yaml"
    f.write_text(STACK)
    py = sys.executable
    subprocess.run([str(Path(py).parent / "multinode"), "plan", "--file", str(f), "--out", str(tmp_path)],
                   capture_output=True, text=True, cwd=ROOT)
    out = tmp_path / name
    assert (out / "placement.json").exists(), f"plan wrote no {out}/placement.json"
    budget_file = next((out / "k8s").glob("*-PodDisruptionBudget-train-gang.yaml"))
    budget = yaml.safe_load(budget_file.read_text())
    assert budget["spec"].pop("minAvailable") == 1                # what plan renders for a 2-pod Volcano Job
    budget["spec"]["maxUnavailable"] = 1                          # planted: the rendering before issue 40
    budget_file.write_text(yaml.safe_dump(budget))
    subprocess.run([py, str(HERE / "prepare.py"), str(out), str(f), "--volcano", _volcano_module()], check=True,
                   cwd=ROOT)
    r = subprocess.run([str(BIN_DIR / "clusterbox"), "--stack-dir", str(out), "--timeout", "5m", "--settle", "60s",
                        "--volcano", str(BIN_DIR), "--compare", f"{py} {HERE / 'compare.py'} {out}"],
                       capture_output=True, text=True, cwd=ROOT, env={**os.environ, "PYTHONPATH": str(ROOT)})
    print(r.stdout[-4000:], r.stderr[-4000:])
    result = json.loads((out / "cluster.json").read_text())
    assert r.returncode == 1, result["findings"]
    mine = [x for x in result["findings"] if x.startswith(f"PodDisruptionBudget {BUDGET}")]
    assert len(mine) == 1, result["findings"]
    assert "disruptionsAllowed 0" in mine[0] and "SyncFailed" in mine[0], mine
    # the gang itself was bound as placement.json says: the budget is the only finding
    assert result["findings"] == mine, result["findings"]
