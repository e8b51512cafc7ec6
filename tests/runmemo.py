"""One program run per distinct input in a test process (issue 19: a faster suite).

Many tests run the program on the same input (an example stack, unchanged) to check different things: one
`make test` ran 214 programs for 145 distinct inputs, about a quarter of the suite's CPU (112 of ~440 s)
spent repeating a run. `install()` (tests/conftest.py) replaces `recording._run_program` with
`memo_run_program`; while a test runs, that runs a given input once per process and hands every later caller
a copy of that first run (registrations, reads and calls unpickled afresh, so a test that changes what it got
changes only its own copy). Every input is still run for real once, and every test still asserts on a real
run of its input. The copies cost memory (a pickled run is ~0.7-1.5 MB, ~100 distinct runs per worker).

A run is taken from the memo only when nothing outside its key can change it:
- the key is the config as Pulumi passes it, the secret keys, the stack name, the program file (path and
  text) and the stack file the program reads its key names from (path and text);
- the mock answers (recording.CALLS / OUTPUTS) must be the standard ones (each cloud module's MOCK_CALLS /
  MOCK_OUTPUTS, the fleet's StackReference answer): a test that replaced one runs fresh;
- tests that patch or capture (fixtures monkeypatch, capsys, capfd, caplog) run fresh: a run's side effects
  (pulumi.log warnings, a patched helper's calls) happen only when it really runs;
- tests marked `fresh_runs` run fresh (e.g. a test that plans twice to compare the two runs);
- MULTINODE_FRESH_RUNS=1 turns the memo off for the whole suite.
"""
from __future__ import annotations

import hashlib
import json
import os
import pickle
from pathlib import Path
from typing import Any

import pytest

from multinode import recording, stackfile

# fixtures whose tests must see a run's side effects, or may have patched what a run reads
FRESH_FIXTURES = frozenset({"monkeypatch", "capsys", "capfd", "capsysbinary", "capfdbinary", "caplog"})
DISABLED = os.environ.get("MULTINODE_FRESH_RUNS", "") not in ("", "0")

_real_run_program = recording._run_program
_memo: dict[str, bytes] = {}
_state = {"active": False}
stats = {"runs": 0, "hits": 0, "fresh": 0}


def _standard_mocks() -> tuple[dict[str, Any], dict[str, Any]]:
    """Every mock answer a run may find registered without a test having replaced it."""
    from multinode import clouds
    from multinode.fleet import plan as fleet_plan
    calls: dict[str, Any] = {}
    outputs: dict[str, Any] = dict(_BASE_OUTPUTS)
    for cloud in clouds.MODULES:
        module = clouds.module(cloud)
        calls.update(module.MOCK_CALLS)
        outputs.update(module.MOCK_OUTPUTS)
    outputs[fleet_plan.STACK_REFERENCE] = fleet_plan._stack_reference_outputs
    return calls, outputs


_BASE_OUTPUTS = dict(recording.OUTPUTS)      # before any run or test added to it
_STANDARD: list[tuple[dict[str, Any], dict[str, Any]]] = []


def _mocks_are_standard() -> bool:
    if not _STANDARD:
        _STANDARD.append(_standard_mocks())
    calls, outputs = _STANDARD[0]
    return (all(calls.get(k) is v for k, v in recording.CALLS.items())
            and all(outputs.get(k) is v for k, v in recording.OUTPUTS.items()))


def _file_part(path: Path | None) -> list[str] | None:
    if path is None:
        return None
    p = Path(path)
    return [str(p.resolve()), hashlib.sha256(p.read_bytes()).hexdigest() if p.is_file() else "<missing>"]


def run_key(wire_config: dict[str, str], secret_keys: list[str], stack: str, program: Path) -> str:
    stack_file = stackfile._PROGRAM_STACK_FILE[-1] if stackfile._PROGRAM_STACK_FILE else None
    doc = [sorted(wire_config.items()), sorted(secret_keys), stack, _file_part(program), _file_part(stack_file)]
    return hashlib.sha256(json.dumps(doc).encode()).hexdigest()


class OutputOfAMemoizedRun:
    """Stands in a copy for a stack output that was a pulumi.Output: keeping the Output would keep the finished
    run's monitor and every registration alive (tests/test_plan.py, test_finished_runs_do_not_pile_up_in_memory).
    No test reads such an output; one that did would get this object, not a value, and fail."""

    def __repr__(self) -> str:
        return "<pulumi.Output of a memoized run: mark the test fresh_runs to read it>"


def _freeze(run: recording.ProgramRun) -> bytes:
    outputs = {k: v if _picklable(v) else OutputOfAMemoizedRun() for k, v in run.stack_outputs.items()}
    return pickle.dumps((run.registrations, run.reads, run.calls, outputs), protocol=pickle.HIGHEST_PROTOCOL)


def _picklable(value: Any) -> bool:
    try:
        pickle.dumps(value)
    except Exception:       # noqa: BLE001 - an Output refuses with a plain Exception
        return False
    return True


def _thaw(frozen: bytes) -> recording.ProgramRun:
    return recording.ProgramRun(*pickle.loads(frozen))


def memo_run_program(wire_config: dict[str, str], secret_keys: list[str], stack: str,
                     program: Path) -> recording.ProgramRun:
    if not _state["active"]:
        stats["fresh"] += 1
        return _real_run_program(wire_config, secret_keys, stack, program)
    # the run's own side effect on the mock answers, so CALLS / OUTPUTS look as after a real run
    recording._register_mock_data(str(wire_config.get("multinode:cloud", "")))
    if not _mocks_are_standard():
        stats["fresh"] += 1
        return _real_run_program(wire_config, secret_keys, stack, program)
    key = run_key(wire_config, secret_keys, stack, program)
    frozen = _memo.get(key)
    if frozen is not None:
        stats["hits"] += 1
        return _thaw(frozen)
    stats["runs"] += 1
    run = _real_run_program(wire_config, secret_keys, stack, program)
    _memo[key] = _freeze(run)
    return run


def wants_fresh_runs(item: pytest.Item) -> bool:
    return DISABLED or bool(FRESH_FIXTURES & set(getattr(item, "fixturenames", ()))) \
        or item.get_closest_marker("fresh_runs") is not None


def install() -> None:
    recording._run_program = memo_run_program


def activate(item: pytest.Item) -> None:
    _state["active"] = not wants_fresh_runs(item)


def deactivate() -> None:
    _state["active"] = False
