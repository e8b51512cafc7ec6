"""Hostile stack files end in a clean config error (exit 2), never a traceback."""
from __future__ import annotations

import pytest

from .conftest import run_command

CASES = {
    "latin1": "config:\n  multinode:cloud: caf\xe9\n".encode("latin-1"),
    "null-pools": b"config:\n  multinode:cloud: aws\n  multinode:nodePools: null\n",
    "list-for-map": b"config:\n  multinode:cloud: aws\n  multinode:cluster: [a, b]\n  multinode:nodePools: []\n",
    "map-for-list": b"config:\n  multinode:cloud: existing\n  multinode:nodePools: {name: gpu}\n",
    "huge": b"config:\n  multinode:cloud: existing\n  multinode:nodePools:\n    - {name: gpu, machine: p5.48xlarge, "
            b"nodeCount: 99999999999999999999999}\n",
    "inf": b"config:\n  multinode:cloud: existing\n  multinode:workloads:\n    - {name: a, kind: lws-inference, "
           b"nodePool: gpu, modelParamsB: .inf}\n",
    "bad-apiversion": b"config:\n  multinode:cloud: existing\n  multinode:manifests:\n    - {apiVersion: apps/v9, "
                      b"kind: Deployment, metadata: {name: x}}\n",
    "top-level-list": b"- config\n",
    "unicode-name": "config:\n  multinode:cloud: existing\n  multinode:nodePools:\n    - {name: gp\u00fc, machine: "
                    "p5.48xlarge, nodeCount: 1}\n".encode(),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_hostile_stack_file_exits_2_without_traceback(name, tmp_path, capsys):
    path = tmp_path / f"Pulumi.{name}.yaml"
    path.write_bytes(CASES[name])
    code, out, err = run_command(capsys, "plan", name, "--file", str(path), "--out", str(tmp_path / "out"))
    assert code == 2, err[-2000:]
    assert "Traceback" not in err + out
    assert "problem" in err
