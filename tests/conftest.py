"""Shared helpers: example stacks as raw config, and running the real program under mocks."""
from __future__ import annotations

import copy
import functools
import os
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from multinode import stackfile  # noqa: E402

from . import runmemo  # noqa: E402

runmemo.install()


# The test files that cost the most CPU, costliest first (CPU seconds in one `make test`, 2026-11-23: 52, 29,
# 28, 24, 23, 20, 20, 19, 12, 12). The Makefile runs xdist with --dist loadfile --no-loadscope-reorder, which
# hands out whole files in collection order: the long files start first and the many short ones fill in at
# the end, so both workers finish together. xdist's own order (files with the most tests first) left the
# 24 s property test, a single test, to start last on one worker while the other sat idle.
# test_pack_wire.py (~30 s, issue 35: six plans, each compared with and without policy/wire.py) added 2026-11-26.
COSTLIEST_FIRST = ["test_policy_stacks.py", "test_plan.py", "test_pack_wire.py", "test_addons.py",
                   "test_properties.py", "test_clouds_gcp.py", "test_fleet.py", "test_clouds_retention.py",
                   "test_hostile_input.py", "test_package.py", "test_clouds_aws.py"]


def pytest_collection_modifyitems(session: pytest.Session, config: pytest.Config, items: list[pytest.Item]) -> None:
    rank = {name: i for i, name in enumerate(COSTLIEST_FIRST)}
    items.sort(key=lambda item: rank.get(item.path.name, len(rank)))     # stable: each file keeps its order


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "fresh_runs: every program run of this test really runs (tests/runmemo.py)")


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item: pytest.Item, nextitem: pytest.Item | None) -> Iterator[None]:
    """A test takes program runs from the memo (tests/runmemo.py) unless it must see fresh ones."""
    runmemo.activate(item)
    try:
        yield
    finally:
        runmemo.deactivate()

# The expensive randomized tests (hypothesis properties, tests/fuzz_hostile.py) run at a CI size by default;
# MULTINODE_LONG_TESTS=1 runs them at their full size (README, "Tests").
LONG_TESTS = os.environ.get("MULTINODE_LONG_TESTS", "") not in ("", "0")


def sized(ci: int, long: int) -> int:
    """How many examples / cases a randomized test runs: `ci` by default, `long` with MULTINODE_LONG_TESTS=1."""
    return long if LONG_TESTS else ci


EXAMPLE_STACKS = ["aws-dev", "azure-dev", "gcp-dev", "oci-dev", "existing-dev", "dynamo-dev"]


@functools.cache
def _read_example(stack: str) -> tuple[dict[str, Any], frozenset[str]]:
    raw, secrets, _ = stackfile.read_stack_file(stackfile.stack_path(stack))
    return raw, frozenset(secrets)


def example_raw(stack: str) -> tuple[dict[str, Any], set[str]]:
    """The `multinode` keys of an example stack (a deep copy the test may change) and its secret keys. The file
    is read once per process (stacks/ does not change during a run; ~20 ms of YAML checking per read)."""
    raw, secrets = _read_example(stack)
    return copy.deepcopy(raw), set(secrets)


def run_command(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    """`python -m multinode <argv>` in this process: the main() the command runs (exit status, stdout, stderr).
    A fresh interpreter per case cost ~1-2 s of imports each; what only the real command adds (its entry
    point, SIGPIPE handling) is checked once by subprocess (test_cli_typo_key_exits_2_naming_the_key,
    test_a_closed_stdout_ends_the_command_quietly). An exception that escapes main() fails the test."""
    from multinode.__main__ import main
    capsys.readouterr()                     # only this command's output
    code = main(list(argv))
    out = capsys.readouterr()
    return code, out.out, out.err


@pytest.fixture
def raw_aws():
    return example_raw("aws-dev")


def stack_cloud(stack: str) -> str:
    """The cloud an example stack runs on, read from its file (dynamo-dev is cloud 'existing': the stack
    name is not a cloud name)."""
    return example_raw(stack)[0]["cloud"]
