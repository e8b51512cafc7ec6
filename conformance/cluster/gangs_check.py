"""The PyTorch gangs the box ran on real nodes (issue 43): did each rendezvous complete, with the world size plan
gives, and how long did it take.

A gang is one container of the pods of one workload (a Job, a Volcano Job) whose command runs PyTorch: the
trainer's `torchrun ...`, the NCCL preflight's `python3 -m torch.distributed.run ...`. The pods ran the real
launcher (Debian's PyTorch 1.13.1, in the stand-in image) with the rendered flags; every process that joined its
process group printed a MULTINODE_BOX_RANK line, every trainer stand-in a MULTINODE_BOX_TRAIN line
(conformance/realnode/standin/python/multinode_box_torch). The box kept those lines and the last lines of each
container (observed.json pods[].logs, gangs.go) while it waited, at most observed.json gangSettings.bound
seconds, for the pods to end.

Formed: every rank 0..W-1 joined, each saw world size W, where W is --nnodes (its maximum) x --nproc_per_node as
rendered (or the box's cap, gangSettings.nprocMax, when set: recorded), and --nnodes equals the pods plan gives the
workload. Otherwise a finding naming the pods, the node ranks that did not join and each container's last lines.

`gang_findings(obs, rendered)` returns (findings, report, not_checked); rendered(owner) is the object of
build/<stack>/k8s that "Kind ns/name" names (compare.py rendered_object). No Go, no box:
tests/test_gangs_check.py plants each finding in a hand-made observation.
"""
from __future__ import annotations

import json
import re
from collections.abc import Callable
from typing import Any

_NNODES = re.compile(r"--nnodes[= ](\d+)(?::(\d+))?")
_NPROC = re.compile(r"--nproc[_-]per[_-]node[= ](\d+)")
LAST_LINES = 5
# a LeaderWorkerSet's pods form one gang per group (kubernetes-sigs/lws@v0.9.0 api/leaderworkerset/v1/
# leaderworkerset_types.go GroupIndexLabelKey)
LWS_GROUP = "leaderworkerset.sigs.k8s.io/group-index"


def _words(c: dict[str, Any]) -> str:
    return " ".join((c.get("command") or []) + (c.get("args") or []))


def planned_pods(obj: dict[str, Any] | None) -> int | None:
    """The pods plan gives the workload: a Job runs min(parallelism, completions) at once, a Volcano Job the sum
    of its tasks' replicas."""
    if not obj:
        return None
    spec = obj.get("spec") or {}
    if obj.get("kind") == "Job" and str(obj.get("apiVersion", "")).startswith("batch/"):
        par = spec.get("parallelism", 1)
        comp = spec.get("completions", par)
        return min(par, comp) if comp is not None else par
    if obj.get("kind") == "Job" and str(obj.get("apiVersion", "")).startswith("batch.volcano.sh/"):
        return sum(int(t.get("replicas", 0)) for t in spec.get("tasks") or [])
    return None


def _marked(lines: list[str], tag: str) -> list[dict[str, Any]]:
    out = []
    for line in lines:
        if line.startswith(tag + " "):
            try:
                out.append(json.loads(line[len(tag) + 1:]))
            except ValueError:
                pass
    return out


def _tail(lines: list[str]) -> list[str]:
    if "--- last lines ---" in lines:
        lines = lines[lines.index("--- last lines ---") + 1:]
    return lines[-LAST_LINES:]


def gang_findings(obs: dict[str, Any], rendered: Callable[[str], dict[str, Any] | None]
                  ) -> tuple[list[str], list[dict[str, Any]], list[str]]:
    findings: list[str] = []
    report: list[dict[str, Any]] = []
    not_checked: list[str] = []
    settings = obs.get("gangSettings") or {}
    cap = int(settings.get("nprocMax") or 0)
    real = {n["name"] for n in obs.get("realNodes") or []}
    for ph in obs.get("phases") or []:
        if not ph.get("gangs"):
            continue
        bound = max(g.get("bound", 0) for g in ph["gangs"])
        waited = max(g.get("seconds", 0) for g in ph["gangs"])
        by_owner: dict[str, list[dict[str, Any]]] = {}
        for p in ph.get("pods") or []:
            owner = p.get("owner") or f"Pod {p['namespace']}/{p['name']}"
            group = (((p.get("pod") or {}).get("metadata") or {}).get("labels") or {}).get(LWS_GROUP)
            by_owner.setdefault(owner + (f" group {group}" if group is not None else ""), []).append(p)
        for owner, pods in sorted(by_owner.items()):
            spec0 = (pods[0].get("pod") or {}).get("spec") or {}
            conts = [(c, True) for c in spec0.get("initContainers") or []] + \
                [(c, False) for c in spec0.get("containers") or []]
            for c, is_init in conts:
                words = _words(c)
                if "torchrun" not in words and "torch.distributed.run" not in words:
                    continue
                gang = f"gang {owner} container {c['name']}"
                m, g = _NNODES.search(words), _NPROC.search(words)
                if not m or not g:
                    not_checked.append(f"{gang}: no --nnodes/--nproc_per_node in its command; its world size is "
                                       "not known to the box")
                    continue
                nnodes = int(m.group(2) or m.group(1))
                nproc = int(g.group(1))
                used = min(nproc, cap) if cap else nproc
                world = nnodes * used
                off = [p for p in pods if p.get("node") not in real]
                if off:
                    not_checked.append(f"{gang}: pods {[p['name'] for p in off]} not on real nodes: its rendezvous was "
                                       "not run")
                    continue
                planned = planned_pods(rendered(owner.split(" group ")[0]))
                logs = [(p.get("logs") or {}).get(c["name"], []) for p in pods]
                ranks = [r for lines in logs for r in _marked(lines, "MULTINODE_BOX_RANK")]
                trains = [t for lines in logs for t in _marked(lines, "MULTINODE_BOX_TRAIN")]
                seen_world = max((r.get("worldSize", 0) for r in ranks), default=0)
                joined = {r.get("rank") for r in ranks}
                formed = bool(ranks) and joined == set(range(world)) and all(r.get("worldSize") == world for r in ranks)
                seconds = max((r.get("seconds", 0) for r in ranks), default=None)
                entry: dict[str, Any] = {
                    "gang": owner, "container": c["name"], "initContainer": is_init,
                    "pods": [f"{p['namespace']}/{p['name']}" for p in pods], "plannedPods": planned,
                    "nnodes": nnodes, "nprocPerNode": nproc, "nprocUsed": used, "expectedWorldSize": world,
                    "worldSizeSeen": seen_world, "ranksJoined": len(joined), "formed": formed,
                    "secondsToForm": seconds if formed else None, "bound": bound, "waited": round(waited, 1),
                    "ran": "real kubelets, real torch.distributed.run (gloo)"}
                if cap and nproc > cap:
                    entry["boxOnly"] = f"--nproc_per_node {nproc} capped at {cap} in the box (MULTINODE_BOX_NPROC_MAX)"
                problems: list[str] = []
                if planned is not None and planned != nnodes:
                    problems.append(f"--nnodes={nnodes} but plan gives the workload {planned} pods")
                if not formed:
                    groups = {r.get("groupRank") for r in ranks}
                    missing = sorted(set(range(nnodes)) - groups)
                    why = f"world size seen {seen_world} of {world} ({nnodes} nodes x {used} processes), " \
                          f"{len(joined)} ranks joined; node ranks that did not join: {missing}"
                    if len(pods) < nnodes:
                        why += f"; only {len(pods)} pods of the gang ran for --nnodes={nnodes}"
                        if planned is not None and len(pods) < planned:
                            why += f" (plan gives {planned}: {planned - len(pods)} pod(s) short)"
                    launches = [_marked(lines, "MULTINODE_BOX_LAUNCH") for lines in logs]
                    states = ", ".join(f"{p['name']} on {p['node']} {p.get('phase')}" + (
                        f" (rendezvous {la[-1].get('rdzvEndpoint')})" if la else " (its launcher never started)")
                        for p, la in zip(pods, launches))
                    ends = {la[-1].get("rdzvEndpoint") for la in launches if la}
                    if len(ends) > 1:
                        why += f"; the pods name different rendezvous endpoints: {sorted(ends)}"
                    lines = "; ".join(f"{p['name']}/{c['name']}: " + " | ".join(_tail(log))
                                      for p, log in zip(pods, logs))
                    problems.append(f"not formed within {bound:.0f}s: {why}; pods: {states}; last lines: {lines}")
                for t in trains:
                    if not t.get("ok"):
                        problems.append(f"rank {t.get('rank')}: trainer stand-in: {'; '.join(t.get('problems') or [])}")
                entry["problems"] = problems
                entry["verdict"] = "formed" if formed and not problems else "not formed" if not formed else "failed"
                report.append(entry)
                findings += [f"{gang}: {m}" for m in problems]
    return findings, report, not_checked
