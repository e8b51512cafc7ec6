"""Each member cluster as a cluster stack's config, read offline.

A member that is one of this project's stacks is read from its own stack file and checked exactly as
`multinode plan <stack>` checks it (checks.load): its pools, fabric, storage and workloads are what the
fit check places the fleet's workloads beside. Under `pulumi up` the same file is read (the fleet program
runs in this repository), while the kubeconfig comes from the member stack's outputs (StackReference).
A member given by kubeconfig secret is described in the fleet stack (nodePools, fabric, storage) and
read as a `cloud: existing` stack. Pure: no Pulumi.
"""
from __future__ import annotations

from typing import Any

from .. import checks, stackfile
from ..config import SECRET_PLACEHOLDER, StackConfig
from ..errors import ConfigError, Problem
from .config import FleetConfig, FleetMember, is_fleet


def existing_member_raw(m: FleetMember) -> dict[str, Any]:
    """A kubeconfigSecret member as the raw keys of a `cloud: existing` stack."""
    raw: dict[str, Any] = {"cloud": "existing", "kubeconfig": SECRET_PLACEHOLDER,
                           "nodePools": [p.model_dump(by_alias=True, exclude_unset=True) for p in m.node_pools],
                           "fabric": m.fabric.model_dump(by_alias=True, exclude_unset=True)}
    if m.storage is not None:
        raw["storage"] = m.storage.model_dump(by_alias=True, exclude_unset=True)
    return raw


def load_member(m: FleetMember, at: str) -> tuple[StackConfig | None, list[Problem]]:
    if m.stack is not None:
        path = stackfile.stack_path(m.stack)
        try:
            raw, secrets, _ = stackfile.read_stack_file(path)
            if is_fleet(raw):
                return None, [Problem(f"{at}.stack", f"{m.stack!r} is a fleet stack; a member is a cluster stack")]
            return checks.load(raw, secrets, source=str(path)), []
        except ConfigError as e:
            first = "; ".join(str(x) for x in e.problems[:2])
            return None, [Problem(f"{at}.stack", f"stack {m.stack!r} does not load ({len(e.problems)} problem(s): "
                                                 f"{first}); run `multinode plan {m.stack}` and fix it first")]
    if not m.node_pools:
        return None, [Problem(f"{at}.nodePools", "a kubeconfigSecret member needs its GPU node pools (name, "
                                                 "nodeSelector, nodeCount, machine or machineSpec) so the fit "
                                                 "check can place workloads on it; add nodePools")]
    try:
        return checks.load(existing_member_raw(m), {"kubeconfig"}, source=f"{at} (cloud existing)"), []
    except ConfigError as e:
        return None, [Problem(f"{at}.{p.path}" if p.path else at, p.message) for p in e.problems]


def load_members(cfg: FleetConfig) -> tuple[dict[str, StackConfig], list[Problem]]:
    out: dict[str, StackConfig] = {}
    problems: list[Problem] = []
    for i, m in enumerate(cfg.fleet.members):
        loaded, p = load_member(m, f"fleet.members[{i}]")
        problems += p
        if loaded is not None:
            out[m.name] = loaded
    return out, problems
