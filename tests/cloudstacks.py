"""Shared helpers for the cloud tests: run an example stack (or a variant of it) under mocks."""
from __future__ import annotations

import copy
from collections.abc import Callable
from pathlib import Path
from typing import Any

import yaml

from multinode import checks, stackfile
from multinode import config as mconfig
from multinode.errors import ConfigError
from multinode.recording import ProgramRun, Registration, run_program

ROOT = Path(__file__).resolve().parent.parent


def stack_doc(stack: str) -> dict[str, Any]:
    return yaml.safe_load(stackfile.stack_path(stack).read_text())


def write_variant(tmp_path: Path, stack: str, edit: Callable[[dict[str, Any]], None] | None) -> Path:
    doc = copy.deepcopy(stack_doc(stack))
    if edit:
        edit(doc["config"])
    path = tmp_path / f"Pulumi.{stack}.yaml"
    path.write_text(yaml.safe_dump(doc, sort_keys=False))
    return path


def run_variant(tmp_path: Path, stack: str, edit=None) -> ProgramRun:
    raw, secrets, wire = stackfile.read_stack_file(write_variant(tmp_path, stack, edit))
    checks.load(raw, secrets)          # a variant must be a valid stack
    return run_program(wire, [f"{mconfig.NAMESPACE}:{k}" for k in secrets], stack)


def config_problems(tmp_path: Path, stack: str, edit) -> list[Any]:
    raw, secrets, _ = stackfile.read_stack_file(write_variant(tmp_path, stack, edit))
    try:
        checks.load(raw, secrets)
    except ConfigError as e:
        return e.problems
    return []


def of_type(run: ProgramRun, typ: str) -> list[Registration]:
    return [r for r in run.registrations if r.type == typ]


def one(run: ProgramRun, typ: str) -> Registration:
    regs = of_type(run, typ)
    assert len(regs) == 1, f"expected one {typ}, got {[r.name for r in regs]}"
    return regs[0]


def parent_of(run: ProgramRun, reg: Registration) -> Registration:
    return next(r for r in run.registrations if r.urn == reg.parent)


def k8s_objects(run: ProgramRun) -> list[dict[str, Any]]:
    return [r.inputs for r in run.registrations
            if r.custom and r.type.startswith("kubernetes:") and "kind" in r.inputs]
