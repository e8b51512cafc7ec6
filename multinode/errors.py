"""Config errors: one message listing every problem, each with its key path and the fix."""
from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass


@dataclass(frozen=True)
class Problem:
    path: str      # key path as the user wrote it, e.g. "workloads[0].tensorParallel"
    message: str   # states the bad value and the fix

    def __str__(self) -> str:
        return f"{self.path}: {self.message}" if self.path else self.message


class ConfigError(Exception):
    """Raised before any resource is registered; str() is the whole user-facing message."""

    def __init__(self, problems: Iterable[Problem], source: str = "stack config"):
        self.problems: list[Problem] = list(problems)
        self.source = source
        super().__init__(self.render())

    def render(self) -> str:
        n = len(self.problems)
        head = f"{self.source}: {n} problem{'s' if n != 1 else ''} (keys under the `multinode:` namespace)"
        return "\n".join([head] + [f"  - {p}" for p in self.problems])

    def __str__(self) -> str:
        return self.render()
