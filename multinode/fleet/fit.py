"""Which members can hold each fleet workload whole: the single-cluster rules, once per member pool.

For every candidate (member, pool) the fleet workload is put into that member's own config as if the
member stack declared it on that pool, and checked with the same code a cluster stack runs:
  1. the config contract (config.semantic_problems + checks.problems: machine, GPUs per node, parallel
     sizes, model fit, nodes <= pool, storage, engine, image ...), limited to what it says about the workload;
  2. a multi-node gang needs the member's GPU fabric (a cluster stack only warns; across clusters Karmada
     would otherwise be free to send it to a member where NCCL runs over TCP);
  3. the placement simulation (multinode.placement) of the member's own workloads plus this one on the
     member's pools: the workload must fit beside what the member already runs (a finding the member
     has without it is the member's own, reported by its plan, not here).
A workload fits the fleet when at least one candidate passes; otherwise one Problem names every member and
pool with why. Pure: no Pulumi (the builders and the simulation are the pure core's).
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from .. import checks as mchecks
from .. import config as mconfig
from .. import placement
from ..config import StackConfig, Workload
from ..errors import Problem
from ..manifests import workloads as wbuild
from .config import FleetConfig, FleetWorkload

FLEET_ONLY_FIELDS = {"members", "images", "priority_class_name", "failover"}


@dataclass
class Candidate:
    member: str
    pool: str
    reasons: list[str] = field(default_factory=list)
    objects: list[dict[str, Any]] = field(default_factory=list)      # the workload as built for this member
    fabric: str = "none"

    @property
    def fits(self) -> bool:
        return not self.reasons


@dataclass
class WorkloadFit:
    workload: str
    candidates: list[Candidate]

    @property
    def fitting(self) -> list[Candidate]:
        return [c for c in self.candidates if c.fits]

    def members(self) -> list[str]:
        """The members that can hold it, in fleet order, once each."""
        return list(dict.fromkeys(c.member for c in self.fitting))


def member_workload(cfg: FleetConfig, w: FleetWorkload, member: str, pool: str) -> Workload:
    """The fleet workload as the member would declare it on `pool` (its image for that member; no queue:
    the fleet's queues live on the Karmada control plane, not in the member's config)."""
    data = w.model_dump(exclude=FLEET_ONLY_FIELDS)
    data.update(node_pool=pool, image=w.images.get(member, w.image), queue=None)
    return Workload.model_validate(data)


def member_config(cfg: FleetConfig, member_cfg: StackConfig, wl: Workload) -> StackConfig:
    """The member's config with only this workload, and the fleet's model credentials (the workload's
    Secrets are the fleet's, propagated with it)."""
    return member_cfg.model_copy(update={"workloads": [wl], "hf_token": cfg.hf_token, "ngc_api_key": cfg.ngc_api_key,
                                         "image_pull_secret": cfg.image_pull_secret})


def _contract_reasons(cfg2: StackConfig) -> list[str]:
    found = mconfig.semantic_problems(cfg2) + mchecks.problems(cfg2)
    out = []
    for p in found:
        text = str(p)
        if p.path.startswith("workloads[0]") or "workloads[0]" in p.message:
            out.append(text.replace("workloads[0].", "").replace("workloads[0]", "the workload"))
    return out


def member_objects(member_cfg: StackConfig) -> list[dict[str, Any]]:
    """What the member stack itself runs (its workloads and hand-written objects), built offline."""
    objs: list[dict[str, Any]] = []
    for w in member_cfg.workloads:
        objs += wbuild.build(member_cfg, w).objects
    return objs + list(member_cfg.manifests)


def _placement_reasons(member_cfg: StackConfig, own: list[dict[str, Any]], mine: list[dict[str, Any]],
                       baseline: set[str]) -> list[str]:
    res = placement.simulate(own + mine, placement.pools_from_config(member_cfg))
    return [f.message for f in res.findings if f.message not in baseline]


def _pools(member_cfg: StackConfig, w: FleetWorkload) -> list[str]:
    if w.node_pool is not None:
        return [w.node_pool]
    return [p.name for p in member_cfg.node_pools]


def check_workload(cfg: FleetConfig, w: FleetWorkload, baselines: dict[str, tuple[list[dict[str, Any]], set[str]]]
                   ) -> WorkloadFit:
    out: list[Candidate] = []
    for name in (w.members or [m.name for m in cfg.fleet.members]):
        member_cfg = cfg.members[name]
        pools = _pools(member_cfg, w)
        if w.node_pool is not None and w.node_pool not in {p.name for p in member_cfg.node_pools}:
            known = ", ".join(p.name for p in member_cfg.node_pools)
            out.append(Candidate(name, w.node_pool, [f"no node pool {w.node_pool!r} (it has {known})"]))
            continue
        if any(x.name == w.name and x.namespace == w.namespace for x in member_cfg.workloads):
            out.append(Candidate(name, "-", [f"the member stack already runs a workload named {w.name!r} in "
                                             f"namespace {w.namespace!r}; rename the fleet workload"]))
            continue
        own, baseline = baselines[name]
        for pool in pools:
            wl = member_workload(cfg, w, name, pool)
            cfg2 = member_config(cfg, member_cfg, wl)
            reasons = _contract_reasons(cfg2)
            installs_lws, why = mconfig.lws_install(member_cfg)
            if w.kind == "lws-inference" and not installs_lws:
                # issue 46: the member's own stack decides whether LWS is installed there (not on a training-only one)
                reasons.append(f"the member stack does not install LeaderWorkerSet ({why}); set addons.lws.enabled "
                               f"true in its stack file")
            cand = Candidate(name, pool, reasons, fabric=cfg2.fabric_kind())
            multi = w.nodes > 1 or (w.disaggregated is not None)
            if multi and (cfg2.fabric_kind() == "none" or not cfg2.fabric.enabled):
                why = "fabric.enabled is false" if not cfg2.fabric.enabled else \
                    f"{cfg2.machine(cfg2.pool(pool)).name} has no GPU fabric"
                cand.reasons.append(f"a gang over {w.nodes} nodes needs a GPU fabric, but {why}")
            if not cand.reasons:
                cand.objects = wbuild.build(cfg2, wl).objects
                cand.reasons += _placement_reasons(member_cfg, own, cand.objects, baseline)
            out.append(cand)
    return WorkloadFit(w.name, out)


def check(cfg: FleetConfig) -> tuple[dict[str, WorkloadFit], list[Problem]]:
    """Every fleet workload's candidates; one Problem per workload that fits no member."""
    baselines: dict[str, tuple[list[dict[str, Any]], set[str]]] = {}
    for name, member_cfg in cfg.members.items():
        own = member_objects(member_cfg)
        base = placement.simulate(own, placement.pools_from_config(member_cfg))
        baselines[name] = (own, {f.message for f in base.findings})
    fits: dict[str, WorkloadFit] = {}
    problems: list[Problem] = []
    for i, w in enumerate(cfg.fleet.workloads):
        f = check_workload(cfg, w, baselines)
        fits[w.name] = f
        if not f.fitting:
            why = "; ".join(f"member {c.member} pool {c.pool}: {' / '.join(c.reasons)}" for c in f.candidates)
            problems.append(Problem(f"fleet.workloads[{i}]", f"{w.name!r} fits in no member cluster ({why}); "
                                                             f"shrink the workload (nodes, GPUs per node), add "
                                                             f"nodes to a member's pool, or add a member that "
                                                             f"holds it"))
    return fits, problems
