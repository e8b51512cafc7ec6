"""`multinode check-cluster existing-dev` against the box (issue 46): passes on the box with the stack applied and
the cluster's own prerequisites present, fails with one line per prerequisite removed (needs the clusterbox
binary: `make -C conformance/cluster build`)."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from boxnet import netns_flags

HERE = Path(__file__).resolve().parent.parent
ROOT = HERE.parent.parent
BIN = ROOT / "conformance" / "bin" / "clusterbox"
pytestmark = pytest.mark.skipif(not BIN.exists(), reason=f"{BIN} not built (make -C conformance/cluster build)")
STACK = "existing-dev"


def test_check_cluster_passes_on_the_box_and_names_each_missing_prerequisite(tmp_path: Path) -> None:
    py = sys.executable
    stack_file = ROOT / "stacks" / f"Pulumi.{STACK}.yaml"
    subprocess.run([str(Path(py).parent / "multinode"), "plan", STACK, "--out", str(tmp_path)],
                   capture_output=True, text=True, cwd=ROOT)
    out = tmp_path / STACK
    assert (out / "placement.json").exists()
    subprocess.run([py, str(HERE / "prepare.py"), str(out), str(stack_file)], check=True, cwd=ROOT)
    result = tmp_path / "check-cluster.json"
    r = subprocess.run([str(BIN), *netns_flags(), "--stack-dir", str(out), "--timeout", "5m", "--settle", "30s",
                        "--compare", f"{py} {HERE / 'check_cluster_box.py'} {out} {stack_file} {result}"],
                       capture_output=True, text=True, cwd=ROOT, env={**os.environ, "PYTHONPATH": str(ROOT)})
    print(r.stdout[-3000:], r.stderr[-3000:])
    runs = json.loads(result.read_text())
    complete = runs["complete"]
    assert complete["exit"] == 0, complete
    assert not [ln for ln in complete["lines"] if ln.startswith("FAIL")]
    ok = [ln for ln in complete["lines"] if ln.startswith("ok")]
    # the box's API server is built from modules: no release version in /version (a warning, not a failure)
    assert [ln for ln in complete["lines"] if "api-server: v0.0.0" in ln and ln.startswith("warn")], complete
    assert any("runtimeclass: nvidia" in ln for ln in ok) and any("StorageClass efs-sc" in ln for ln in ok)
    assert any("nodePools[0] (gpu): 8 node(s)" in ln for ln in ok)
    assert any("vpc.amazonaws.com/efa 32 on every node" in ln for ln in ok), ok
    assert any("kubeflow.org/v2beta1 MPIJob served" in ln for ln in ok), ok
    for name, needle in (("no-runtimeclass", "runtimeclass: nvidia"),
                         ("one-node-unlabelled", "nodePools[0] (gpu): 7 node(s)"),
                         ("no-mpijob-crd", "kubeflow.org/v2beta1 MPIJob")):
        run = runs[name]
        fails = [ln for ln in run["lines"] if ln.startswith("FAIL")]
        assert run["exit"] == 1 and len(fails) == 1 and needle in fails[0], (name, run)
