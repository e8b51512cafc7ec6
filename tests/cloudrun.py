"""Helpers for the per-cloud component tests: run the real program on a (changed) example stack."""
from __future__ import annotations

import json
from collections.abc import Iterable
from typing import Any

from multinode import checks
from multinode import config as mconfig
from multinode.recording import ProgramRun, Registration, run_program


def wire(raw: dict[str, Any]) -> dict[str, str]:
    return {f"{mconfig.NAMESPACE}:{k}": v if isinstance(v, str) else json.dumps(v) for k, v in raw.items()}


def run(raw: dict[str, Any], secrets: set[str], stack: str) -> ProgramRun:
    checks.load(raw, secrets)   # the same config the program will load (fails loudly if a variant is bad)
    return run_program(wire(raw), [f"{mconfig.NAMESPACE}:{k}" for k in secrets], stack)


def of_type(run_: ProgramRun, typ: str) -> list[Registration]:
    return [r for r in run_.registrations if r.type == typ]


def one(run_: ProgramRun, typ: str) -> Registration:
    regs = of_type(run_, typ)
    assert len(regs) == 1, [r.name for r in regs]
    return regs[0]


def by_urn(run_: ProgramRun) -> dict[str, Registration]:
    return {r.urn: r for r in run_.registrations}


def problems(raw: dict[str, Any], secrets: Iterable[str]) -> list[tuple[str, str]]:
    """(key path, message) of every problem config.load reports ([] when the stack loads)."""
    try:
        checks.load(raw, secrets)
    except mconfig.ConfigError as e:
        return [(p.path, p.message) for p in e.problems]
    return []


def refused(raw: dict[str, Any], secrets: Iterable[str], path: str, text: str) -> None:
    found = problems(raw, secrets)
    assert any(p == path and text in m for p, m in found), found
