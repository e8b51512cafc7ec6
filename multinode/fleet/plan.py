"""`plan` of a fleet stack: validate (fleet/checks.load: members' stack files, the fit check), run the real
__main__.py under Pulumi mocks (it builds components/fleet.py), and write build/<fleet>/ like a cluster
stack's plan: k8s/, helm/, resources.json, graph.mmd, policy.json, plus fit.json (every workload's
candidates: member, pool, fits, why not). multinode/plan.py (plan_fleet) calls these pieces when the
stack file has `multinode:fleet`. Imports no cloud module or SDK: the members are read from their stack
files.

Under mocks a member's StackReference answers with a placeholder kubeconfig naming the member's API at
https://<member>.invalid (its outputs exist only after `pulumi up` of that stack).
"""
from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from .. import recording
from .checks import load
from .config import FleetConfig

__all__ = ["load", "prepare_mocks", "write_extra", "fits_json", "summary"]

STACK_REFERENCE = "pulumi:pulumi:StackReference"


def _placeholder_kubeconfig(stack: str) -> str:
    return (f"apiVersion: v1\nkind: Config\nclusters:\n- name: {stack}\n  cluster:\n"
            f"    server: https://{stack}.invalid\ncontexts: []\nusers: []\n")


def _stack_reference_outputs(name: str, inputs: dict[str, Any]) -> dict[str, Any]:
    stack = str(inputs.get("name") or name).rsplit("/", 1)[-1]
    return {"outputs": {"kubeconfig": _placeholder_kubeconfig(stack)}, "secretOutputNames": ["kubeconfig"]}


def fits_json(cfg: FleetConfig) -> dict[str, Any]:
    return {name: {"members": f.members(),
                   "candidates": [{"member": c.member, "pool": c.pool, "fits": c.fits, "fabric": c.fabric,
                                   "why": c.reasons} for c in f.candidates]}
            for name, f in cfg.fits.items()}


def prepare_mocks() -> None:
    """What the mock monitor answers for a member's StackReference (multinode/plan.py runs the program)."""
    recording.OUTPUTS.setdefault(STACK_REFERENCE, _stack_reference_outputs)


def write_extra(out: Path, cfg: FleetConfig) -> None:
    (out / "fit.json").write_text(json.dumps(fits_json(cfg), indent=1))


def summary(result: Any) -> str:
    cfg: FleetConfig = result.fleet
    f = cfg.fleet
    host = f.host.stack or f"kubeconfig {f.host.kubeconfig_secret}"
    vg = f.volcano_global.version if f.volcano_global.enabled else "off"
    lines = [f"fleet {result.stack}: Karmada {f.karmada.version} on {host}, Volcano Global {vg}, "
             f"{len(result.registrations)} resources"]
    for m in f.members:
        mc = cfg.members[m.name]
        gpus = sum(p.node_count * mc.machine(p).gpus for p in mc.node_pools)
        src = f"stack {m.stack}" if m.stack else f"kubeconfig {m.kubeconfig_secret}"
        lines.append(f"member {m.name} ({src}, {m.sync_mode}): cloud {mc.cloud}, fabric {mc.fabric_kind()}, "
                     f"{sum(p.node_count for p in mc.node_pools)} nodes, {gpus} GPUs")
    for q in f.queues:
        lines.append(f"queue {q.name}: weight {q.weight}, priority {q.priority}, GPUs {q.gpus}")
    by_name = {w.name: w for w in f.workloads}
    for name, fit in cfg.fits.items():
        lines.append(f"workload {name}: placed whole in one of {', '.join(fit.members())}")
        lines += failover_lines(by_name.get(name), fit.members())
        for c in fit.candidates:
            if not c.fits:
                lines.append(f"  not on {c.member} pool {c.pool}: {' / '.join(c.reasons)}")
    mandatory = [v for v in result.violations if v.get("enforcementLevel") == "mandatory"]
    lines.append(f"policy: {len(mandatory)} mandatory violation(s), {len(result.violations) - len(mandatory)} advisory")
    for v in result.violations:
        lines.append(f"  [{v.get('enforcementLevel')}] {v.get('policy')}: {v.get('message')}")
    if result.out_dir:
        lines.append(f"wrote {len(result.k8s_objects)} Kubernetes objects and resources.json to {result.out_dir}")
    return "\n".join(lines)


def failover_lines(w: Any, members: list[str]) -> list[str]:
    """What happens when the member running the gang fails (issue 31): Karmada's application failover moves it
    whole to another member that holds it, or nothing moves it."""
    if w is None:
        return []
    if w.failover is None:
        return ["  if its member fails: no failover set, Karmada leaves it there (fleet.workloads[].failover)"]
    others = len(members) - 1
    if others < 1:
        return [f"  if its member fails: failover is set, but {members[0]} is the only member that holds it, so "
                f"Karmada has nowhere to move it"]
    return [f"  if its member fails: after {w.failover.toleration_seconds}s unhealthy Karmada moves it whole to one of "
            f"the {others} other member{'s' if others != 1 else ''} (purgeMode {w.failover.purge_mode}); it resumes "
            f"from a checkpoint only if that member's storage holds one"]
