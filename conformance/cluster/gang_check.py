"""Gangs on real nodes (issue 43): did each MPIJob and each LeaderWorkerSet group whose pods a real kubelet ran
form, with the world size plan says, and how long did it take.

The stand-ins in the pods run the real coordination layer (mpirun over ssh with the MPI operator's hostfile and
keys, Ray's `ray start`, the NIM stand-in's rendezvous) and print one verdict line, `MULTINODE_GANG {json}`, on the
gang's leading pod (the MPIJob's launcher: mpirun forwards rank 0's output; the LWS group's leader). The box
(gangs.go) waits for it, bounded (observed.json `gangTimeout`), and records it with each container's last log
lines. Judged here against placement.json: an MPIJob's world size is its GPUs (one rank per GPU: `mpirun -n` as
rendered, `slotsPerWorker` = the GPUs of a node), with that many ranks on each worker; an LWS group's Ray or NIM
cluster holds the group's pods. No Go, no box: tests/test_gang_check.py plants each finding.
"""
from __future__ import annotations

import json
from datetime import datetime
from typing import Any

MARKER = "MULTINODE_GANG "
MPI_ROLE, MPI_JOB = "training.kubeflow.org/job-role", "training.kubeflow.org/job-name"
LWS_NAME, LWS_GROUP, LWS_WORKER = ("leaderworkerset.sigs.k8s.io/name", "leaderworkerset.sigs.k8s.io/group-index",
                                   "leaderworkerset.sigs.k8s.io/worker-index")


def _time(s: str) -> datetime | None:
    """An RFC 3339 time with up to nanoseconds (CRI log lines, pod statuses) as a datetime."""
    s = s.strip().replace("Z", "+00:00")
    if "." in s:
        head, rest = s.split(".", 1)
        frac = rest[:len(rest) - len(rest.lstrip("0123456789"))]   # the leading digits, not the offset's
        s = head + "." + frac[:6].ljust(6, "0") + rest[len(frac):]
    try:
        return datetime.fromisoformat(s)
    except ValueError:
        return None


def parse_verdict(line: str) -> tuple[str, datetime | None, dict[str, Any]] | None:
    """'<container> <time> <stream> <tag> MULTINODE_GANG {json}' (gangs.go PodView.Gang) -> (container, time,
    record)."""
    head, _, js = line.partition(MARKER)
    f = head.split()
    try:
        rec = json.loads(js)
    except ValueError:
        return None
    return (f[0] if f else "?"), (_time(f[1]) if len(f) > 1 else None), rec


def _gang_key(labels: dict[str, str]) -> tuple[str, str] | None:
    if labels.get(MPI_JOB) and labels.get(MPI_ROLE) in ("launcher", "worker"):
        return "MPIJob", labels[MPI_JOB]
    if labels.get(LWS_NAME):
        return "LeaderWorkerSet", f"{labels[LWS_NAME]} group {labels.get(LWS_GROUP, '0')}"
    return None


def _leader(kind: str, labels: dict[str, str]) -> bool:
    return labels.get(MPI_ROLE) == "launcher" if kind == "MPIJob" else labels.get(LWS_WORKER) == "0"


def _started(pod: dict[str, Any]) -> list[datetime]:
    out = []
    for c in (pod.get("status") or {}).get("containerStatuses") or []:
        st = c.get("state") or {}
        t = (st.get("running") or st.get("terminated") or {}).get("startedAt")
        if t and (d := _time(t)):
            out.append(d)
    return out


def _state(pod: dict[str, Any]) -> str:
    status = pod.get("status") or {}
    parts = []
    for c in (status.get("initContainerStatuses") or []) + (status.get("containerStatuses") or []):
        st = c.get("state") or {}
        for k, v in st.items():
            why = (v or {}).get("reason") or ""
            parts.append(f"{c['name']} {k}" + (f" {why}" if why else "")
                         + (f" exit {v.get('exitCode')}" if k == "terminated" else ""))
    return f"phase {status.get('phase')}" + (f" ({', '.join(parts)})" if parts else "")


def _last_lines(p: dict[str, Any], n: int = 4) -> list[str]:
    out = []
    for c, lines in sorted((p.get("logs") or {}).items()):
        msgs = [ln.split(" ", 3)[3] if ln.count(" ") >= 3 else ln for ln in lines[-n:]]
        out.append(f"{p['name']}/{c}: " + (" | ".join(m.strip() for m in msgs) if msgs else "(no output)"))
    return out or [f"{p['name']}: no container log"]


def _plan(placement: dict[str, Any]) -> tuple[dict[str, dict[str, Any]], dict[str, dict[str, Any]]]:
    """placement.json's gangs by owner ("MPIJob ns/name") and its workloads' use (nodes, gpus) by gang name."""
    gangs = (placement.get("services") or []) + (placement.get("batchEachBesideServices") or [])
    by_owner = {g["owner"]: g for g in gangs if g.get("owner")}
    use = {w["gang"]: w for pool in placement.get("pools") or []
           for w in (pool.get("use") or {}).get("workloads") or []}
    return by_owner, use


def gang_findings(obs: dict[str, Any], placement: dict[str, Any]) -> tuple[list[str], list[dict[str, Any]]]:
    real = {n["name"] for n in obs.get("realNodes") or []}
    if not real:
        return [], []
    by_owner, use = _plan(placement)
    timeout = obs.get("gangTimeout")
    findings: list[str] = []
    report: list[dict[str, Any]] = []
    for ph in obs.get("phases") or []:
        gangs: dict[tuple[str, str, str], list[dict[str, Any]]] = {}
        for p in ph.get("pods") or []:
            labels = ((p.get("pod") or {}).get("metadata") or {}).get("labels") or {}
            key = _gang_key(labels)
            if key:
                gangs.setdefault((key[0], p["namespace"], key[1]), []).append(p)
        for (kind, ns, name), pods in sorted(gangs.items(), key=lambda kv: kv[0]):
            if not any(p.get("node") in real for p in pods):
                continue
            owner = f"{kind} {ns}/{name.split(' group ')[0]}"
            plan = by_owner.get(owner) or {}
            w = use.get(plan.get("gang", "")) or {}
            labels_of = {p["name"]: ((p.get("pod") or {}).get("metadata") or {}).get("labels") or {} for p in pods}
            leaders = [p for p in pods if _leader(kind, labels_of[p["name"]])]
            verdicts = [v for p in leaders for line in p.get("gang") or [] if (v := parse_verdict(line))]
            gang = f"{kind} {ns}/{name}"
            names = sorted(p["name"] for p in pods)
            entry: dict[str, Any] = {"gang": gang, "phase": ph["name"], "pods": names,
                                     "onRealNodes": sorted(p["name"] for p in pods if p.get("node") in real)}
            if kind == "MPIJob":
                want = int(w["gpus"]) if w.get("gpus") else None
                # GPUs per worker: plan's nodes of the gang include the launcher's when it has a node of its own
                # (existing-dev's mpi-alltoall: 3 nodes, 16 GPUs on its 2 workers), which asks no GPU
                n_workers = sum("-worker-" in pod for pod in plan.get("nodes") or {}) or w.get("nodes")
                per_node = int(w["gpus"] // n_workers) if w.get("gpus") and n_workers else None
            else:
                want = plan.get("pods")   # the pods of one group: LWS's size
                per_node = None
            entry["expected"] = want
            if not verdicts:
                entry.update(formed=False, worldSize=None, secondsToForm=None)
                why = [f"{p['name']}: {_state(p.get('pod') or {})}" for p in leaders] or \
                    ["no leading pod (MPIJob launcher / LWS leader) in the box"]
                findings.append(f"gang {gang} (pods {', '.join(names)}): not formed: no verdict within "
                                f"{timeout or '?'}s of its phase settling; {'; '.join(why)}; last lines: "
                                + "; ".join(ln for p in sorted(pods, key=lambda x: x['name']) for ln in _last_lines(p)))
                report.append(entry)
                continue
            cont, when, rec = verdicts[-1]
            seen = rec.get("worldSize")
            starts = [t for p in pods for t in _started(p.get("pod") or {})]
            took = round((when - min(starts)).total_seconds(), 1) if when and starts else None
            entry.update(formed=bool(rec.get("formed")), worldSize=seen, engine=rec.get("engine"),
                         secondsToForm=took, verdict=rec)
            problems = []
            if not rec.get("formed"):
                missing = rec.get("missing")
                problems.append(f"not formed: the {rec.get('engine')} stand-in saw {seen} of {rec.get('expected')}"
                                + (f", missing ranks {missing}" if missing else ""))
            if want is not None and seen != want:
                problems.append(f"world size {seen}, plan says {want}"
                                + (" (one rank per GPU)" if kind == "MPIJob" else " (the group's pods)"))
            if kind == "MPIJob":
                per_host = rec.get("ranksPerHost") or {}
                workers = sorted(p["pod"]["spec"].get("hostname") or p["name"] for p in pods
                                 if labels_of[p["name"]].get(MPI_ROLE) == "worker")
                idle = [h for h in workers if h not in per_host]
                if idle:
                    problems.append(f"workers with no rank (did not join): {idle}")
                if per_node is not None:
                    off = {h: n for h, n in per_host.items() if n != per_node}
                    if off:
                        problems.append(f"ranks per host {off}, plan says {per_node} per node (its GPUs)")
            elif rec.get("engine") == "ray":
                ips = {(p.get("pod") or {}).get("status", {}).get("podIP"): p["name"] for p in pods}
                out = sorted(n for ip, n in ips.items() if ip and ip not in (rec.get("members") or []))
                if out:
                    problems.append(f"pods whose Ray node did not join: {out}")
            if problems:
                findings.append(f"gang {gang} (pods {', '.join(names)}): " + "; ".join(problems) + "; last lines: "
                                + "; ".join(ln for p in sorted(pods, key=lambda x: x['name']) for ln in _last_lines(p)))
            report.append(entry)
    return findings, report
