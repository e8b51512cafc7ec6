"""The benchmark's pieces that can be wrong without any timing: the SDK replay registers what the plan did."""
from __future__ import annotations

import gc
import importlib.util
import json
from pathlib import Path

from multinode import gcpolicy
from multinode import plan as mplan

BENCH = Path(__file__).resolve().parent.parent / "bench"


def _load(name: str):
    spec = importlib.util.spec_from_file_location(f"bench_{name}", BENCH / f"{name}.py")
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_replay_runs_with_the_plan_commands_gc_thresholds():
    assert _load("sdk_replay").BATCH_THRESHOLDS == gcpolicy.BATCH_THRESHOLDS


def test_the_replay_registers_every_resource_the_plan_did(tmp_path):
    replay, bench = _load("sdk_replay"), _load("plan_bench")
    regs = [r.as_dict() for r in mplan.plan("existing-dev", None).registrations]
    assert any(r["type"].endswith(":CustomResourceDefinition") for r in regs)       # full CRDs, not digests
    assert replay.replay(json.loads(json.dumps(regs)), "existing-dev") == len(regs)
    # the files and command line plan_bench.py uses (main sets the batch GC thresholds: restored after)
    argv = bench.replay_argv("existing-dev", ["pulumi"], tmp_path)
    written = json.loads((tmp_path / "existing-dev.registrations.json").read_text())
    assert [r["urn"] for r in written] == [r["urn"] for r in regs]
    assert {r["type"] for r in written if r["identityOutputs"]} >= {
        "kubernetes:apiextensions.k8s.io/v1:CustomResourceDefinition"}
    before = gc.get_threshold()
    try:
        assert replay.main(argv[1:]) == 0
    finally:
        gc.set_threshold(*before)
