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
