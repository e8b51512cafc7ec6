"""The negative stacks of tests/negative (issue 28 item 6) in the box: `plan` refuses each for a placement reason
(and still writes build/), the real scheduler leaves its pods Pending with its own reason, and the check fails
for that reason, not merely with a non-zero exit. Needs conformance/bin/clusterbox (skips otherwise).

Volcano does not run in the box yet, so the gang's pods (schedulerName volcano) are handed to kube-scheduler, as
tests/test_box.py does: it is not gang-aware, so the gang too big for its pool shows up as a half-bound gang with
one pod Pending ("Insufficient nvidia.com/gpu"). A pod without the fabric label on a fabric pool, denied by
Kyverno: tests/test_box.py::test_kyverno_in_the_box_denies_a_gpu_pod_without_the_fabric_label."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml
from boxnet import netns_flags

HERE = Path(__file__).resolve().parent.parent
ROOT = HERE.parent.parent
BIN = ROOT / "conformance" / "bin" / "clusterbox"
NEGATIVE = ROOT / "tests" / "negative"
pytestmark = pytest.mark.skipif(not BIN.exists(), reason=f"{BIN} not built (make -C conformance/cluster build)")


def _plan(tmp_path: Path, name: str) -> tuple[subprocess.CompletedProcess[str], Path]:
    f = NEGATIVE / f"Pulumi.{name}.yaml"
    r = subprocess.run([str(Path(sys.executable).parent / "multinode"), "plan", "--file", str(f), "--out",
                        str(tmp_path)], capture_output=True, text=True, cwd=ROOT)
    return r, tmp_path / name


def _to_kube_scheduler(k8s: Path) -> None:
    for f in k8s.glob("Job-*.yaml"):
        doc = yaml.safe_load(f.read_text())
        doc["spec"]["template"]["spec"].pop("schedulerName", None)
        f.write_text(yaml.safe_dump(doc))


def _box(out: Path, name: str) -> tuple[int, dict[str, Any], str]:
    py = sys.executable
    subprocess.run([py, str(HERE / "prepare.py"), str(out), str(NEGATIVE / f"Pulumi.{name}.yaml")], check=True,
                   cwd=ROOT)
    _to_kube_scheduler(out / "k8s")
    r = subprocess.run([str(BIN), *netns_flags(), "--stack-dir", str(out), "--timeout", "4m", "--settle", "45s",
                        "--compare", f"{py} {HERE / 'compare.py'} {out}"],
                       capture_output=True, text=True, cwd=ROOT, env={**os.environ, "PYTHONPATH": str(ROOT)})
    print(r.stdout[-4000:], r.stderr[-4000:])
    return r.returncode, json.loads((out / "cluster.json").read_text()), r.stdout


def test_gang_larger_than_its_pool_is_refused_by_plan_and_left_pending_by_the_scheduler(tmp_path: Path) -> None:
    r, out = _plan(tmp_path, "neg-gang-too-big")
    assert r.returncode == 1, r.stdout[-2000:]
    assert "batch too-big: does not fit beside the services" in r.stdout
    placement = json.loads((out / "placement.json").read_text())
    assert placement["fits"] is False
    code, result, stdout = _box(out, "neg-gang-too-big")
    assert code == 1
    pending = [f for f in result["findings"] if "Pending" in f]
    assert len(pending) == 1 and "Insufficient nvidia.com/gpu" in pending[0], result["findings"]
    assert any("Job default/too-big: gang half-bound (2 of 3 pods bound)" in f for f in result["findings"])
    pods = result["workloads"][0]["pods"]
    assert sorted(bool(p["node"]) for p in pods) == [False, True, True]
    assert "Insufficient nvidia.com/gpu" in next(p["pending"] for p in pods if not p["node"])
    assert "Insufficient nvidia.com/gpu" in stdout            # printed as a finding line too


def test_cpu_beyond_the_machine_is_refused_by_plan_and_left_pending_by_the_scheduler(tmp_path: Path) -> None:
    r, out = _plan(tmp_path, "neg-cpu-beyond-machine")
    assert r.returncode == 1, r.stdout[-2000:]
    assert "one pod asks cpu 256 > 192 (allocatable per node)" in r.stdout
    code, result, _ = _box(out, "neg-cpu-beyond-machine")
    assert code == 1
    pending = [f for f in result["findings"] if "Pending" in f]
    assert len(pending) == 1 and "2 Insufficient cpu" in pending[0], result["findings"]
    pods = result["workloads"][0]["pods"]
    assert len(pods) == 1 and pods[0]["node"] is None and "Insufficient cpu" in pods[0]["pending"]
