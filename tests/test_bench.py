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
    recorded = mplan.plan("existing-dev", None).registrations
    regs = bench.program_registrations(recorded)
    # the CRDs' ConfigGroups with their full manifest text; not the CRD resources the provider constructs
    groups = [r for r in regs if r["type"] == "kubernetes:yaml/v2:ConfigGroup"]
    assert len(groups) == 2 and all(len(r["inputs"]["yaml"]) > 100_000 for r in groups)
    assert not any(r["type"].endswith(":CustomResourceDefinition") for r in regs)
    assert len(regs) == len(recorded) - 6                                    # LWS's CRD and Grove's five
    assert replay.replay(json.loads(json.dumps(regs)), "existing-dev") == len(regs)
    # the files and command line plan_bench.py uses (main sets the batch GC thresholds: restored after)
    argv = bench.replay_argv("existing-dev", ["pulumi"], tmp_path)
    written = json.loads((tmp_path / "existing-dev.registrations.json").read_text())
    assert [r["urn"] for r in written] == [r["urn"] for r in regs]
    assert {r["type"] for r in written if r["identityOutputs"]} >= {
        "kubernetes:leaderworkerset.x-k8s.io/v1:LeaderWorkerSet", "kubernetes:grove.io/v1alpha1:PodCliqueSet"}
    before = gc.get_threshold()
    try:
        assert replay.main(argv[1:]) == 0
    finally:
        gc.set_threshold(*before)
