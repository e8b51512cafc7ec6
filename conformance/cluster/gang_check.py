"""Gangs on real nodes (issue 43): did each MPIJob and each LeaderWorkerSet group whose pods a real kubelet ran
form, with the world size plan says, and how long did it take. A Volcano Job with the mpi plugin (the NCCL check)
is judged like an MPIJob: its master runs mpirun over its workers' sshd, ranks on every pod.

The stand-ins in the pods run the real coordination layer (mpirun over ssh with the MPI operator's hostfile and
keys, Ray's `ray start`, the NIM stand-in's rendezvous) and print one verdict line, `MULTINODE_GANG {json}`, on the
gang's leading pod (the MPIJob's launcher: mpirun forwards rank 0's output; the LWS group's leader). The box
(gangs.go) waits for it, bounded (observed.json `gangTimeout`), and records it with each container's last log
lines. Judged here against placement.json: an MPIJob's world size is its GPUs (one rank per GPU: `mpirun -n` as
rendered, `slotsPerWorker` = the GPUs of a node), with that many ranks on each worker; an LWS group's Ray or NIM
cluster holds the group's pods.

PyTorch gangs: one container that launches torchrun / torch.distributed.run (a trainer, the NCCL preflight) of the
pods of one workload (an LWS group's pods for an LWS), e.g. "Job ns/train container trainer". The pods ran the
real launcher with the rendered flags (Debian's PyTorch 1.13.1 in the image's PyTorch layer); rank 0 of the
process group printed the verdict in whichever pod it ran (standin/python/multinode_standin/torch_hooks.py: world
size, ranks per host, the ranks' own checks), each pod's launcher a `MULTINODE_GANG_LAUNCH {json}` line (its
endpoint, its node rank). Judged against placement.json: `--nnodes` equals the pods plan gives the gang,
`--nproc_per_node` the GPUs plan gives each of its nodes (one process per GPU), the world size seen equals
pods x processes per node (processes per node: the box-only cap observed.json `torchNprocMax` where it is lower,
recorded), every pod holds that many ranks. A gang that did not form names its pods, the node ranks whose
launcher never started or whose pod ran no rank, the endpoints the launchers used when they differ, and the last
lines of each pod's container. A gang with a pod on a fake node is not checked (its rendezvous was not run).
The finding of a gang that did not form (or formed wrong) also names the copies of its containers' whole logs
under the stack's folder (observed.json `logFiles`: build/<stack>/pod-logs/..., conformance/cluster/podlogs.go).

No Go, no box: tests/test_gang_check.py plants each finding.
"""
from __future__ import annotations

import json
import re
from datetime import datetime
from typing import Any

MARKER = "MULTINODE_GANG "
LAUNCH_MARKER = "MULTINODE_GANG_LAUNCH "
_NNODES = re.compile(r"--nnodes[= ](\d+)(?::(\d+))?")
_NPROC = re.compile(r"--nproc[_-]per[_-]node[= ](\d+)")
MPI_ROLE, MPI_JOB = "training.kubeflow.org/job-role", "training.kubeflow.org/job-name"
VC_JOB, VC_MPI_HOST = "volcano.sh/job-name", "MPI_HOST"
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


def parse_verdict(line: str, marker: str = MARKER) -> tuple[str, datetime | None, dict[str, Any]] | None:
    """'<container> <time> <stream> <tag> MULTINODE_GANG {json}' (gangs.go PodView.Gang) -> (container, time,
    record); marker LAUNCH_MARKER reads the PyTorch launchers' lines."""
    head, sep, js = line.partition(marker)
    if not sep:
        return None
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
    if labels.get(VC_JOB):
        return "Job", labels[VC_JOB]   # a Volcano Job: a gang of ours only with an MPI master (_volcano_mpi_master)
    return None


def _volcano_mpi_master(pod: dict[str, Any]) -> bool:
    """The master of a Volcano Job with the mpi plugin, which runs mpirun: the plugin gives the master task's
    containers the env MPI_HOST, its workers' host names, when it makes the pod (volcano.sh/volcano@v1.14.1
    pkg/controllers/job/plugins/distributed-framework/mpi/mpi.go OnPodCreate; gangs.go volcanoMPIMaster)."""
    return any(e.get("name") == VC_MPI_HOST for c in ((pod.get("spec") or {}).get("containers") or [])
               for e in c.get("env") or [])


def _leader(kind: str, p: dict[str, Any]) -> bool:
    labels = ((p.get("pod") or {}).get("metadata") or {}).get("labels") or {}
    if kind == "MPIJob":
        return labels.get(MPI_ROLE) == "launcher"
    if kind == "Job":
        return _volcano_mpi_master(p.get("pod") or {})
    return labels.get(LWS_WORKER) == "0"


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
        lines = lines or []   # a container whose log file is empty: null in observed.json
        msgs = [ln.split(" ", 3)[3] if ln.count(" ") >= 3 else ln for ln in lines[-n:]]
        out.append(f"{p['name']}/{c}: " + (" | ".join(m.strip() for m in msgs) if msgs else "(no output)"))
    return out or [f"{p['name']}: no container log"]


def _last_lines_of(p: dict[str, Any], container: str, n: int = 4) -> str:
    lines = (p.get("logs") or {}).get(container) or []
    msgs = [ln.split(" ", 3)[3] if ln.count(" ") >= 3 else ln for ln in lines[-n:]]
    return f"{p['name']}/{container}: " + (" | ".join(m.strip() for m in msgs) if msgs else "(no output)")


def _whole_logs(pods: list[dict[str, Any]], container: str | None = None) -> list[str]:
    """The copies of the whole logs of the pods' containers (or of one container) under the stack's folder
    (observed.json `logFiles`, gangs.go podLogs / podlogs.go)."""
    return [f for p in sorted(pods, key=lambda x: x["name"])
            for c, f in sorted((p.get("logFiles") or {}).items()) if container is None or c == container]


def _with_logs(finding: str, files: list[str]) -> str:
    return finding + (f"; whole logs: {', '.join(files)}" if files else "")


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
            leaders = [p for p in pods if _leader(kind, p)]
            if kind == "Job" and not leaders:
                continue   # a Volcano Job without the mpi plugin's master: its PyTorch gangs are judged below
            if leaders and all(_torch_only(p) for p in leaders):
                continue   # a group whose containers all launch PyTorch: judged as a PyTorch gang (below)
            verdicts = [v for p in leaders for line in p.get("gang") or [] if (v := parse_verdict(line))
                        and v[2].get("engine") != "torchrun"]   # not its PyTorch preflight's
            gang = f"{kind} {ns}/{name}"
            names = sorted(p["name"] for p in pods)
            entry: dict[str, Any] = {"gang": gang, "phase": ph["name"], "pods": names,
                                     "onRealNodes": sorted(p["name"] for p in pods if p.get("node") in real)}
            if kind == "Job":
                # a Volcano Job's mpirun runs ranks on every pod, its master's too (the rendered NCCL check's
                # --host names $HOSTNAME and each MPI_HOST with the GPUs of a node as slots): one rank per GPU
                want = int(w["gpus"]) if w.get("gpus") else None
                per_node = int(w["gpus"] // w["nodes"]) if w.get("gpus") and w.get("nodes") else None
            elif kind == "MPIJob":
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
                entry["logFiles"] = _whole_logs(pods)
                findings.append(_with_logs(
                    f"gang {gang} (pods {', '.join(names)}): not formed: no verdict within "
                    f"{timeout or '?'}s of its phase settling; {'; '.join(why)}; last lines: "
                    + "; ".join(ln for p in sorted(pods, key=lambda x: x['name']) for ln in _last_lines(p)),
                    entry["logFiles"]))
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
                                + (" (one rank per GPU)" if kind in ("MPIJob", "Job") else " (the group's pods)"))
            if kind in ("MPIJob", "Job"):
                per_host = rec.get("ranksPerHost") or {}
                workers = sorted(p["pod"]["spec"].get("hostname") or p["name"] for p in pods
                                 if kind == "Job" or labels_of[p["name"]].get(MPI_ROLE) == "worker")
                idle = [h for h in workers if h not in per_host]
                if idle:
                    problems.append(f"{'pods' if kind == 'Job' else 'workers'} with no rank (did not join): {idle}")
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
                entry["logFiles"] = _whole_logs(pods)
                findings.append(_with_logs(
                    f"gang {gang} (pods {', '.join(names)}): " + "; ".join(problems) + "; last lines: "
                    + "; ".join(ln for p in sorted(pods, key=lambda x: x['name']) for ln in _last_lines(p)),
                    entry["logFiles"]))
            report.append(entry)
        t_findings, t_report = _torch_gangs(ph, real, by_owner, use, timeout, int(obs.get("torchNprocMax") or 0))
        findings += t_findings
        report += t_report
    return findings, report


def _words(c: dict[str, Any]) -> str:
    return " ".join((c.get("command") or []) + (c.get("args") or []))


def _launches_torch(c: dict[str, Any]) -> bool:
    """The container runs PyTorch's launcher (gangs.go launchesTorch)."""
    w = _words(c)
    return "torchrun" in w or "torch.distributed.run" in w


def _torch_only(p: dict[str, Any]) -> bool:
    conts = ((p.get("pod") or {}).get("spec") or {}).get("containers") or []
    return bool(conts) and all(_launches_torch(c) for c in conts)


def _started_of(pod: dict[str, Any], container: str) -> datetime | None:
    status = pod.get("status") or {}
    for c in (status.get("initContainerStatuses") or []) + (status.get("containerStatuses") or []):
        if c.get("name") == container:
            st = c.get("state") or {}
            t = (st.get("running") or st.get("terminated") or {}).get("startedAt")
            return _time(t) if t else None
    return None


def _torch_gangs(ph: dict[str, Any], real: set[str], by_owner: dict[str, dict[str, Any]],
                 use: dict[str, dict[str, Any]], timeout: Any, cap: int) -> tuple[list[str], list[dict[str, Any]]]:
    findings: list[str] = []
    report: list[dict[str, Any]] = []
    gangs: dict[tuple[str, str, bool], list[tuple[dict[str, Any], dict[str, Any]]]] = {}
    for p in ph.get("pods") or []:
        pod = p.get("pod") or {}
        labels = (pod.get("metadata") or {}).get("labels") or {}
        owner = p.get("owner") or f"Pod {p['namespace']}/{p['name']}"
        if labels.get(LWS_NAME):
            owner += f" group {labels.get(LWS_GROUP, '0')}"
        spec = pod.get("spec") or {}
        for c, init in [(c, True) for c in spec.get("initContainers") or []] + \
                [(c, False) for c in spec.get("containers") or []]:
            if _launches_torch(c):
                gangs.setdefault((owner, c["name"], init), []).append((p, c))
    for (owner, cname, init), members in sorted(gangs.items(), key=lambda kv: kv[0]):
        pods = [p for p, _ in members]
        if not any(p.get("node") in real for p in pods):
            continue
        gang = f"{owner} container {cname}"
        names = sorted(p["name"] for p in pods)
        entry: dict[str, Any] = {"gang": gang, "phase": ph["name"], "engine": "torchrun", "container": cname,
                                 "initContainer": init, "pods": names,
                                 "onRealNodes": sorted(p["name"] for p in pods if p.get("node") in real)}
        off = sorted(p["name"] for p in pods if p.get("node") not in real)
        words = _words(members[0][1])
        m, g = _NNODES.search(words), _NPROC.search(words)
        if off or not m or not g:
            entry.update(formed=None, worldSize=None, secondsToForm=None, notChecked=(
                f"gang {gang}: pods {off} not on real nodes: its rendezvous was not run" if off else
                f"gang {gang}: no --nnodes / --nproc_per_node in its command: its world size is not known"))
            report.append(entry)
            continue
        nnodes, nproc = int(m.group(2) or m.group(1)), int(g.group(1))
        used = min(nproc, cap) if cap else nproc
        plan = by_owner.get(owner.split(" group ")[0]) or {}
        w = use.get(plan.get("gang", "")) or {}
        planned = plan.get("pods")
        want = (planned if planned is not None else nnodes) * used
        entry.update(nnodes=nnodes, nprocPerNode=nproc, nprocUsed=used, plannedPods=planned, expected=want)
        if used != nproc:
            entry["boxOnly"] = f"--nproc_per_node {nproc} run as {used} processes per pod in the box (torchNprocMax)"
        launches = {p["name"]: v[2] for p in pods for line in p.get("gang") or []
                    if (v := parse_verdict(line, LAUNCH_MARKER)) and v[0] == cname}
        verdicts = [v for p in pods for line in p.get("gang") or []
                    if (v := parse_verdict(line)) and v[0] == cname and v[2].get("engine") == "torchrun"]
        problems = []
        if planned is not None and nnodes != planned:
            problems.append(f"--nnodes={nnodes}, plan gives the gang {planned} pods")
        if w.get("gpus") and w.get("nodes") and nproc != int(w["gpus"] // w["nodes"]):
            problems.append(f"--nproc_per_node={nproc}, plan gives {int(w['gpus'] // w['nodes'])} GPUs per node "
                            "(one process per GPU)")
        if planned is not None and len(pods) != planned:
            problems.append(f"{len(pods)} pods of the gang in the box, plan gives {planned}")
        if not verdicts:
            entry.update(formed=False, worldSize=None, secondsToForm=None)
            ranks = {r.get("nodeRank") for r in launches.values()}
            missing = sorted(set(range(nnodes)) - ranks) if None not in ranks else []
            why = (f"not formed: no rank of its process group reported within {timeout or '?'}s of its phase "
                   f"settling; {len(launches)} of --nnodes={nnodes} launchers started")
            if missing:
                why += f", node ranks that never joined: {missing}"
            ends = sorted({str(r.get("rdzvEndpoint")) for r in launches.values()})
            if len(ends) > 1:
                why += "; the launchers name different rendezvous endpoints: " + ", ".join(
                    f"{n} {r.get('rdzvEndpoint')}" for n, r in sorted(launches.items()))
            states = "; ".join(f"{p['name']} on {p.get('node')}: {_state(p.get('pod') or {})}"
                               for p in sorted(pods, key=lambda x: x["name"]))
            problems.insert(0, f"{why}; {states}")
        else:
            cont, when, rec = verdicts[-1]
            seen = rec.get("worldSize")
            took = rec.get("secondsToForm")
            if took is None:
                starts = [t for p in pods if (t := _started_of(p.get("pod") or {}, cname))]
                took = round((when - min(starts)).total_seconds(), 1) if when and starts else None
            entry.update(formed=bool(rec.get("formed")), worldSize=seen, secondsToForm=took, verdict=rec)
            if not rec.get("formed"):
                problems.append(f"not formed: the process group holds {seen} of {rec.get('expected')} ranks")
            if seen != want:
                problems.append(f"world size {seen}, plan says {want} ({planned} pods x {used} processes)")
            per_host = rec.get("ranksPerHost") or {}
            hosts = {(p.get("pod") or {}).get("spec", {}).get("hostname") or p["name"]: p["name"] for p in pods}
            # the hostname a pod's processes see: <hostname>[.<subdomain>...] (setHostnameAsFQDN gives the FQDN)
            seen_hosts = {h.split(".")[0] for h in per_host}
            idle = sorted(n for h, n in hosts.items() if h not in seen_hosts)
            if idle:
                problems.append(f"pods with no rank (did not join): {idle}")
            off_count = {h: n for h, n in per_host.items() if n != used}
            if off_count:
                problems.append(f"ranks per pod {off_count}, {used} expected (--nproc_per_node)")
            problems += [str(x) for x in rec.get("problems") or []]
        entry["problems"] = problems
        if problems:
            entry["logFiles"] = _whole_logs(pods, cname)
            findings.append(_with_logs(
                f"gang {gang} (pods {', '.join(names)}): " + "; ".join(problems) + "; last lines: "
                + "; ".join(_last_lines_of(p, cname) for p in sorted(pods, key=lambda x: x['name'])),
                entry["logFiles"]))
        report.append(entry)
    return findings, report
