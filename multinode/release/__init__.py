"""`python -m multinode release <stack>`: a release pipeline on the Pulumi Automation API.

select -> refresh -> preview with the policy pack (stop on a mandatory violation) -> up -> NCCL bandwidth
check on the cluster (wait for its verdict) -> record the verdict on the stack -> JSON report.

Layout (only `adapters` touches pulumi.automation and kubernetes, and only when called):
  pipeline.py   the orchestration; takes the stack, cluster and check objects as parameters
  bandwidth.py  which checks a stack runs, waiting for and judging their verdicts
  adapters.py   Automation API stack + official kubernetes client behind the small protocols above
  cli.py        argument parsing, the missing-CLI path, wiring the real adapters
"""
from __future__ import annotations

from .cli import main  # noqa: F401  (the lead wires `python -m multinode release` to this)

__all__ = ["main"]
