"""Advisories as one list a team can act on (issue 46): every non-fatal finding of a plan, from the config checks
(checks.advisories) and from the policy pack's rules at the advisory level, each with a stable id; written to
build/<stack>/advisories.json, printed once, counted in the summary, and acknowledged by id with a reason in the
team's policy config file (`"acknowledged": {"<id>": "<reason>"}`, policy/config.py).

The id is `<source>-<8 hex>`: a digest of the key path (a config advisory) or the policy name (a pack advisory) and
the message with its numbers blanked. It stays the same from run to run and when an unrelated part of the stack
changes (a node count inside the message does not move it); it changes when the advisory is about another key or
says another thing, and the advisory disappears when its fix is applied. An acknowledgement whose id matches no
advisory is reported (the finding was fixed or changed: remove the entry), never silently kept.
"""
from __future__ import annotations

import hashlib
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

CONFIG, POLICY = "config", "policy"
_NUMBER = re.compile(r"\d+(\.\d+)?")


@dataclass(frozen=True)
class Advisory:
    id: str
    source: str               # config | policy
    where: str                # the key path (config) or the policy name (policy)
    message: str
    reason: str | None = None  # the team's reason when acknowledged

    @property
    def acknowledged(self) -> bool:
        return self.reason is not None

    def as_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"id": self.id, "source": self.source, "where": self.where, "message": self.message,
                               "acknowledged": self.acknowledged}
        if self.reason is not None:
            out["reason"] = self.reason
        return out

    def line(self) -> str:
        if self.acknowledged:
            return f"acknowledged: {self.where}: {self.message} [id {self.id}, acknowledged: {self.reason}]"
        return f"advisory: {self.where}: {self.message} [id {self.id}]"


def advisory_id(source: str, where: str, message: str) -> str:
    text = f"{source}\0{where}\0{_NUMBER.sub('#', message)}"
    return f"{source}-{hashlib.sha256(text.encode()).hexdigest()[:8]}"


@dataclass(frozen=True)
class Report:
    advisories: tuple[Advisory, ...]
    stale: tuple[str, ...]            # acknowledged ids that match no advisory of this plan

    @property
    def open(self) -> list[Advisory]:
        return [a for a in self.advisories if not a.acknowledged]

    @property
    def acknowledged(self) -> list[Advisory]:
        return [a for a in self.advisories if a.acknowledged]

    def count_line(self) -> str:
        return f"advisories: {len(self.open)} open, {len(self.acknowledged)} acknowledged"

    def lines(self) -> list[str]:
        out = [a.line() for a in self.advisories]
        out += [f"acknowledgement {i} matches no advisory of this plan (fixed, or it says something else now): "
                f"remove it from the policy config's `acknowledged`" for i in self.stale]
        return out

    def as_json(self) -> dict[str, Any]:
        return {"open": len(self.open), "acknowledged": len(self.acknowledged),
                "advisories": [a.as_dict() for a in self.advisories],
                "staleAcknowledgements": list(self.stale)}


def collect(config_findings: Iterable[Any], violations: Iterable[Mapping[str, Any]],
            acknowledged: Mapping[str, str] | None = None) -> Report:
    """`config_findings`: Problems (path, message) from checks.advisories and plan's own; `violations`: the pack's
    findings (only the advisory-level ones are advisories; a mandatory one fails the plan). Duplicates (the same id)
    are listed once."""
    acks = dict(acknowledged or {})
    out: dict[str, Advisory] = {}
    for p in config_findings:
        where, message = (str(p.path), str(p.message)) if hasattr(p, "path") else ("", str(p))
        i = advisory_id(CONFIG, where, message)
        out.setdefault(i, Advisory(i, CONFIG, where or "(stack)", message, acks.get(i)))
    for v in violations:
        if v.get("enforcementLevel") != "advisory":
            continue
        where, message = str(v.get("policy", "")), str(v.get("message", ""))
        i = advisory_id(POLICY, where, message)
        out.setdefault(i, Advisory(i, POLICY, where, message, acks.get(i)))
    stale = tuple(sorted(i for i in acks if i not in out))
    return Report(tuple(out.values()), stale)
