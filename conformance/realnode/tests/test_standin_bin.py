"""The stand-in commands of conformance/realnode/standin/bin that keep a pod inside the box (no box needed: each
runs here as the image would run it, first in PATH)."""
from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

BIN = Path(__file__).resolve().parents[1] / "standin" / "bin"


def _run(*argv: str) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ, PATH=f"{BIN}:{os.environ.get('PATH', '/usr/bin:/bin')}")
    return subprocess.run(list(argv), env=env, capture_output=True, text=True, timeout=30, check=False)


@pytest.mark.parametrize("argv", [
    ["nsenter", "-at", "1", "--"],                       # gcp-dev's nccl-tcpxo-installer pre-installation
    ["nsenter", "--target", "1", "--mount", "--net"],
    ["nsenter", "-t1", "-m", "-n"],
    ["nsenter", "--target=1", "--all", "--"],
])
def test_nsenter_runs_the_command_where_the_container_is(argv: list[str]) -> None:
    """A privileged hostPID pod's `nsenter -t 1` would enter this machine's init namespaces (in the box PID 1 is
    not a node's): the stand-in runs the command in the caller's own network and mount namespaces, says so, and
    passes the command's exit code on."""
    r = _run(*argv, "sh", "-c", "readlink /proc/self/ns/net /proc/self/ns/mnt; exit 7")
    assert r.returncode == 7, r
    own = [os.readlink("/proc/self/ns/net"), os.readlink("/proc/self/ns/mnt")]
    assert r.stdout.splitlines()[-2:] == own
    assert "multinode box stand-in nsenter" in r.stdout and "not entering" in r.stdout
    assert (BIN / "nsenter").stat().st_mode & 0o111


def test_modprobe_loads_nothing_and_says_so() -> None:
    """azure-dev's nvidia-peermem reloader runs `modprobe nvidia-peermem` as its command and its startup and liveness
    probes: the stand-in (first in PATH, before kmod's) loads nothing into this machine's kernel, says so, exits 0."""
    before = Path("/proc/modules").read_text() if Path("/proc/modules").exists() else ""
    r = _run("modprobe", "nvidia-peermem")
    assert r.returncode == 0, r
    assert "multinode box stand-in modprobe nvidia-peermem" in r.stdout and "no kernel module loaded" in r.stdout
    after = Path("/proc/modules").read_text() if Path("/proc/modules").exists() else ""
    assert after == before


def test_python_runs_python3_and_stands_in_for_a_missing_rank_script(tmp_path: Path) -> None:
    """`python` is python3 as it is; as an MPI rank (OMPI_COMM_WORLD_RANK) on a script the stand-in lacks, the rank
    program runs in its place and rank 0 says so (checked here up to the exec: mpi4py's MPI_Init needs mpirun)."""
    r = _run("python", "-c", "import sys; print(sys.version_info[0])")
    assert r.returncode == 0 and r.stdout.strip() == "3", r
    script = tmp_path / "there.py"
    script.write_text("print('the real script ran')\n")
    env = dict(os.environ, PATH=f"{BIN}:{os.environ.get('PATH', '/usr/bin:/bin')}", OMPI_COMM_WORLD_RANK="0",
               PYTHONPATH="/nonexistent")   # the stand-in module is not importable here: its exec fails after the note
    r = subprocess.run(["python", str(script)], env=env, capture_output=True, text=True, timeout=30, check=False)
    assert r.returncode == 0 and r.stdout.strip() == "the real script ran", r     # a script that is there runs
    r = subprocess.run(["python", "scripts/tf_cnn_benchmarks/tf_cnn_benchmarks.py", "--model=resnet101"], env=env,
                       capture_output=True, text=True, timeout=30, check=False, cwd=tmp_path)
    assert "python scripts/tf_cnn_benchmarks/tf_cnn_benchmarks.py: the script is not in the stand-in; the MPI rank " \
           "program runs in its place" in r.stdout, r
    assert "No module named multinode_standin" in r.stderr or "No module named 'multinode_standin'" in r.stderr, r


def test_nim_start_script_runs_the_nim_stand_in(tmp_path: Path) -> None:
    """nim-lws-options' worker command ends in `exec /opt/nim/start_server.sh`, a NIM image's entrypoint: the
    stand-in's script at that path runs what a container without a command gets (standin-entrypoint): for a NIM
    multi-node pod the NIM stand-in (multinode_standin.nim, checked up to its exec: the module is not importable
    here), else the hold."""
    script = BIN.parent / "root" / "opt" / "nim" / "start_server.sh"
    assert script.stat().st_mode & 0o111
    env = dict(os.environ, PATH=f"{BIN}:{os.environ.get('PATH', '/usr/bin:/bin')}", NIM_MULTI_NODE="1",
               NIM_LEADER_ROLE="0", PYTHONPATH=str(tmp_path))
    r = subprocess.run([str(script)], env=env, capture_output=True, text=True, timeout=30, check=False)
    assert "NIM's start script is not in the stand-in" in r.stdout, r
    assert "'multinode_standin.nim'" in r.stderr, r        # it went on to python3 -m multinode_standin.nim
