"""LWS exclusive placement gang-scheduled by Volcano, in the box with the real LWS controller and Volcano (needs
conformance/bin/clusterbox, lws, vc-scheduler and vc-controller-manager; skips with the reason otherwise).

The guide stack nim-lws (one LWS group of 2 pods, groupPlacement on topology.k8s.aws/network-node-layer-3, Volcano
on) as `plan` renders it (group placement as pod affinity in both templates: multinode/manifests/workloads/lws.py
group_exclusive_affinity) is one of the stacks `make cluster-check` runs, and passes there (bound whole by
Volcano, PodGroup minMember 2 Running); not run twice here (CI time). The planted defect is the rendering
plan made before: LWS's exclusive-topology annotation and no affinity. LWS then creates only the leader (its
workers wait for a bound leader) and Volcano's gang (minMember 2) never binds it: the check must fail with the
PodGroup's reason. Kyverno is left out (faster; the fabric is not what is tested here)."""
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
BIN_DIR = ROOT / "conformance" / "bin"
NEEDED = [BIN_DIR / n for n in ("clusterbox", "lws", "vc-scheduler", "vc-controller-manager")]
pytestmark = pytest.mark.skipif(not all(p.exists() for p in NEEDED),
                                reason=f"not built: {[str(p) for p in NEEDED if not p.exists()]} "
                                       "(make -C conformance/cluster build; make -C conformance/lws build; "
                                       "make -C conformance/volcano build)")
GUIDE = ROOT / "tests" / "guides" / "Pulumi.nim-lws.yaml"
EXCLUSIVE = "leaderworkerset.sigs.k8s.io/exclusive-topology"


def _module_dir(folder: str, module: str) -> str:
    return subprocess.run(["go", "list", "-m", "-f", "{{.Dir}}", module], capture_output=True, text=True,
                          check=True, cwd=ROOT / "conformance" / folder).stdout.strip()


def _old_rendering(k8s: Path) -> None:
    """The planted defect: the LeaderWorkerSet as plan rendered it before (annotation, no affinity)."""
    f = next(k8s.glob("LeaderWorkerSet-*.yaml"))
    lws = yaml.safe_load(f.read_text())
    lws["metadata"]["annotations"][EXCLUSIVE] = "topology.k8s.aws/network-node-layer-3"
    for t in ("leaderTemplate", "workerTemplate"):
        lws["spec"]["leaderWorkerTemplate"][t]["spec"].pop("affinity")
    f.write_text(yaml.safe_dump(lws))


def _box(tmp_path: Path, plant=None) -> tuple[int, dict]:
    py = sys.executable
    subprocess.run([str(Path(py).parent / "multinode"), "plan", "--file", str(GUIDE), "--out", str(tmp_path)],
                   capture_output=True, text=True, cwd=ROOT)
    out = tmp_path / "nim-lws"
    assert (out / "placement.json").exists(), f"plan wrote no {out}/placement.json"
    subprocess.run([py, str(HERE / "prepare.py"), str(out), str(GUIDE),
                    "--lws-crds", _module_dir("lws", "sigs.k8s.io/lws") + "/config/crd/bases",
                    "--volcano", _module_dir("volcano", "volcano.sh/volcano")], check=True, cwd=ROOT)
    if plant is not None:
        plant(out / "k8s")
    r = subprocess.run([str(BIN_DIR / "clusterbox"), *netns_flags(), "--stack-dir", str(out), "--timeout", "5m",
                        "--settle", "60s",
                        "--lws", str(BIN_DIR / "lws"), "--volcano", str(BIN_DIR),
                        "--compare", f"{py} {HERE / 'compare.py'} {out}"],
                       capture_output=True, text=True, cwd=ROOT, env={**os.environ, "PYTHONPATH": str(ROOT)})
    print(r.stdout[-4000:], r.stderr[-4000:])
    return r.returncode, json.loads((out / "cluster.json").read_text())


def test_the_old_rendering_deadlocks_under_volcano(tmp_path: Path) -> None:
    code, result = _box(tmp_path, plant=_old_rendering)
    assert code == 1
    (w,) = [w for w in result["workloads"] if w["owner"] == "LeaderWorkerSet multinode/llama-405b-nim"]
    assert [p["node"] for p in w["pods"]] == [None] or [p["node"] for p in w["pods"]] == [""], w["pods"]
    assert any("minAvailable" in f and "llama-405b-nim" in f for f in result["findings"]), result["findings"]
