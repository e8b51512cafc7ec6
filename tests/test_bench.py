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
    replay = _load("sdk_replay")
    regs = [r.as_dict() for r in mplan.plan("existing-dev", None).registrations]
    assert any(r["type"].endswith(":CustomResourceDefinition") for r in regs)       # full CRDs, not digests
    assert replay.replay(json.loads(json.dumps(regs)), "existing-dev") == len(regs)
    # its command line (files written by plan_bench.replay_argv) too; main sets the batch GC thresholds
    file = tmp_path / "regs.json"
    file.write_text(json.dumps(regs))
    mods = tmp_path / "mods.json"
    mods.write_text(json.dumps(["pulumi"]))
    before = gc.get_threshold()
    try:
        assert replay.main([str(mods), str(file)]) == 0
    finally:
        gc.set_threshold(*before)
