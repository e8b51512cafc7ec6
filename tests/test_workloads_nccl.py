"""NCCL bandwidth check: threshold from the catalog, config refusals, and the real master script run
with stub mpirun/ssh/curl so the verdict line, exit code and ConfigMap patch are exercised."""
from __future__ import annotations

import json
import os
import shutil
import stat
import subprocess
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))
import workload_fixtures as F  # noqa: E402

from multinode.errors import ConfigError  # noqa: E402
from multinode.manifests.workloads import nccl_test  # noqa: E402
from multinode.manifests.workloads.nccl_test import parse_verdict  # noqa: E402

NCCL = dict(F.WORKLOADS[-1])

# all_reduce_perf output shape (nccl-tests): size count type redop root time algbw busbw #wrong x2
SAMPLE = """# nThread 1 nGpus 1 minBytes 8 maxBytes 17179869184 step: 2(factor) warmup iters: 5 iters: 20
#                                                              out-of-place                       in-place
#       size         count      type   redop    root     time   algbw   busbw #wrong     time   algbw   busbw #wrong
#        (B)    (elements)                               (us)  (GB/s)  (GB/s)            (us)  (GB/s)  (GB/s)
           8             2     float     sum      -1    60.10    0.00    0.00      0    59.80    0.00    0.00      0
  8589934592    2147483648     float     sum      -1  41000.0  209.51  {a}      0  41100.0  209.00  {b}      0
 17179869184    4294967296     float     sum      -1  81000.0  212.10  {c}      0  81200.0  211.60  {d}      0
# Out of bounds values : 0 OK
# Avg bus bandwidth    : 150.123
"""


def cfg_with(**w):
    return F.load([dict(NCCL, **w)])


def test_threshold_from_the_catalog_and_the_override():
    cfg = cfg_with()
    gb, src = nccl_test.threshold_gbytes(cfg, cfg.workloads[0])
    assert gb == round(3200 / 8 * 0.6, 2) == 240.0 and "p5.48xlarge" in src
    cfg = cfg_with(busBandwidthEfficiency=0.8)
    assert nccl_test.threshold_gbytes(cfg, cfg.workloads[0])[0] == 320.0
    cfg = cfg_with(minBusBandwidthGbps=2000)
    assert nccl_test.threshold_gbytes(cfg, cfg.workloads[0]) == (250.0, "minBusBandwidthGbps")


def test_unconfirmed_catalog_bandwidth_is_refused_at_config_time():
    raw = F.raw_config([NCCL])
    raw["nodePools"][0]["machine"] = "BM.GPU.H100.8"   # OCI: bandwidth unconfirmed in the catalog
    raw["fabric"] = {"kind": "roce"}
    with pytest.raises(ConfigError) as e:
        F.checks.load(raw, F.SECRET_KEYS)
    assert "workloads[0].minBusBandwidthGbps" in str(e.value) and "BM.GPU.H100.8" in str(e.value)
    raw["workloads"][0]["minBusBandwidthGbps"] = 1200
    cfg = F.checks.load(raw, F.SECRET_KEYS)
    assert nccl_test.threshold_gbytes(cfg, cfg.workloads[0])[0] == 150.0


def test_the_check_needs_volcano_and_two_nodes():
    raw = F.raw_config([NCCL])
    raw["addons"]["volcano"] = {"enabled": False}
    raw["nodePools"][0]["nodeCount"] = 1
    with pytest.raises(ConfigError) as e:
        F.checks.load(raw, F.SECRET_KEYS)
    assert "addons.volcano.enabled" in str(e.value) and "workloads[0].nodes" in str(e.value)


def test_job_spans_every_node_of_the_pool_with_the_fabric():
    cfg = cfg_with()
    m = nccl_test.build(cfg, cfg.workloads[0])
    job = next(o for o in m.objects if o["kind"] == "Job")
    s = job["spec"]
    assert s["minAvailable"] == sum(t["replicas"] for t in s["tasks"]) == 2
    assert set(s["plugins"]) == {"ssh", "svc", "mpi"}
    for t in s["tasks"]:
        assert t["template"]["metadata"]["labels"]["multinode.dev/fabric"] == "enabled"
        assert t["template"]["spec"]["containers"][0]["resources"]["limits"]["nvidia.com/gpu"] == "8"
    role = next(o for o in m.objects if o["kind"] == "Role")
    assert role["rules"] == [{"apiGroups": [""], "resources": ["configmaps"],
                              "resourceNames": ["nccl-check-verdict"], "verbs": ["get", "patch"]}]
    assert m.runtime_written == ["nccl-check-verdict"]


def test_master_command_holds_no_kubelet_reference_to_an_undefined_variable():
    """The kubelet expands $(NAME) in a container's command and args from the container's env and leaves an
    undefined one literal (k8s.io/kubernetes@v1.33.13 third_party/forked/golang/expansion/expand.go): a shell command
    substitution written $(hostname) is such a reference (the real-node box reported it left unexpanded on
    existing-dev's master); the script names the pod's host through $HOSTNAME instead."""
    import re
    cfg = cfg_with()
    job = next(o for o in nccl_test.build(cfg, cfg.workloads[0]).objects if o["kind"] == "Job")
    for t in job["spec"]["tasks"]:
        for ctr in t["template"]["spec"]["containers"]:
            defined = {e["name"] for e in ctr.get("env") or []}
            refs = {m for a in (ctr.get("command") or []) + (ctr.get("args") or [])
                    for m in re.findall(r"(?<!\$)\$\(([A-Za-z_][A-Za-z0-9_]*)\)", a)}
            assert refs <= defined, (t["name"], sorted(refs - defined))


# ------------------------------------------------------------------ the script, for real
def _stub(dirpath: Path, name: str, body: str) -> None:
    p = dirpath / name
    p.write_text("#!/bin/bash\n" + body)
    p.chmod(p.stat().st_mode | stat.S_IEXEC)


def run_script(tmp_path: Path, output: str, mpirun_rc: int = 0, curl: bool = True):
    cfg = cfg_with()
    script = nccl_test.master_script(cfg, cfg.workloads[0])
    bin_ = tmp_path / "bin"
    bin_.mkdir()
    (tmp_path / "out.txt").write_text(output)
    _stub(bin_, "mpirun", f'echo "$@" > {tmp_path}/mpirun-args\ncat {tmp_path}/out.txt\nexit {mpirun_rc}\n')
    _stub(bin_, "ssh", "exit 0\n")
    if curl:
        _stub(bin_, "curl", f'printf "%s\\n" "$@" > {tmp_path}/curl-args\n')
    # HOSTNAME: the pod's hostname, as containerd's CRI sets it in every container
    # (containerd/containerd@v1.6.20 pkg/cri/server/container_create_linux.go:164)
    env = {"PATH": f"{bin_}:/usr/bin:/bin", "HOSTNAME": "nccl-check-master-0",
           "MPI_HOST": "nccl-check-worker-0.nccl-check", "NCCL_NET": "AWS Libfabric", "FI_PROVIDER": "efa"}
    if not curl:   # hide curl and python3 from the script
        for tool in ("awk", "sed", "tee", "cat", "seq", "tr", "cut", "grep", "sort", "env", "readlink"):
            src = shutil.which(tool)
            if src:
                os.symlink(src, bin_ / tool)
        env["PATH"] = str(bin_)
    r = subprocess.run(["/bin/bash", "-c", script], env=env, capture_output=True, text=True, timeout=60)
    return r, tmp_path


def test_script_passes_above_threshold(tmp_path):
    r, d = run_script(tmp_path, SAMPLE.format(a="300.11", b="299.00", c="305.20", d="306.40"))
    assert r.returncode == nccl_test.EXIT_PASS, r.stderr
    v = parse_verdict(r.stdout)
    assert v["pass"] is True and v["status"] == "pass" and v["exit_code"] == 0
    assert v["busbw_GBps"] == 306.4 and v["message_bytes"] == 17179869184 and v["threshold_GBps"] == 240.0
    assert v["detail"]["ranks"] == 16 and v["detail"]["nccl_net"] == "AWS Libfabric"
    mp = (d / "mpirun-args").read_text()
    assert "-np 16" in mp and "nccl-check-master-0:8,nccl-check-worker-0.nccl-check:8" in mp
    assert "-x NCCL_NET" in mp and "-x FI_PROVIDER" in mp      # the injected fabric env reaches every rank
    curl = (d / "curl-args").read_text()
    assert "configmaps/nccl-check-verdict" in curl and "merge-patch+json" in curl
    body = json.loads(curl.split("--data\n", 1)[1].splitlines()[0])
    assert body["data"]["status"] == "pass"
    assert parse_verdict(body["data"]["verdict.json"]) == v


def test_script_fails_below_threshold(tmp_path):
    r, _ = run_script(tmp_path, SAMPLE.format(a="11.0", b="12.0", c="12.5", d="12.1"))
    assert r.returncode == nccl_test.EXIT_BELOW
    v = parse_verdict(r.stdout)
    assert v["pass"] is False and v["status"] == "fail" and v["busbw_GBps"] == 12.5


def test_script_reports_an_error_when_the_test_does_not_run(tmp_path):
    r, _ = run_script(tmp_path, "NCCL WARN NET/OFI Failed to initialize\n", mpirun_rc=1)
    assert r.returncode == nccl_test.EXIT_ERROR
    v = parse_verdict(r.stdout)
    assert v["status"] == "error" and v["busbw_GBps"] is None and v["pass"] is False


def test_script_without_curl_or_python_still_gives_the_line_and_exit_code(tmp_path):
    r, _ = run_script(tmp_path, SAMPLE.format(a="300", b="300", c="300", d="300"), curl=False)
    assert r.returncode == 0
    assert parse_verdict(r.stdout)["pass"] is True
    assert "ConfigMap nccl-check-verdict not written" in r.stdout


def test_python_reading_of_the_output_matches_the_script():
    out = SAMPLE.format(a="300.11", b="299.00", c="305.20", d="306.40")
    assert nccl_test.busbw_from_output(out) == (17179869184, 306.4)


def test_parse_verdict_rules():
    line = 'x MULTINODE_NCCL_VERDICT {"version": 1, "pass": false, "status": "fail", "busbw_GBps": 1, ' \
           '"threshold_GBps": 2, "exit_code": 1}'
    later = line.replace('"pass": false', '"pass": true').replace('"fail"', '"pass"')
    assert parse_verdict(line + "\n" + later + "\n")["pass"] is True       # last line wins
    with pytest.raises(ValueError):
        parse_verdict("no verdict here")
    with pytest.raises(ValueError):
        parse_verdict('MULTINODE_NCCL_VERDICT {"pass": true}')             # required keys missing
    with pytest.raises(ValueError):
        parse_verdict("MULTINODE_NCCL_VERDICT {not json}")
