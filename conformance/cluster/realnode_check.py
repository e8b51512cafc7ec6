"""What the box saw on its real nodes (issue 42): its network namespace, each real node, and every pod a real
kubelet ran: its init containers completed, its containers started, every env var its spec defines expanded in
the process's environment (observed.json `env`, read from /proc/<pid>/environ of the container's process).

`real_node_findings(obs)` returns (findings, report); compare.py adds both to cluster.json. No Go, no box:
tests/test_realnode_check.py plants each finding in a hand-made observation.
"""
from __future__ import annotations

import json
import re
from typing import Any

# $(VAR) as the kubelet expands it in env values, command and args; $$(VAR) is the escaped literal
# (k8s.io/kubernetes@v1.33.13 third_party/forked/golang/expansion/expand.go: "$$" -> "$", undefined "$(VAR)" kept).
_REF = re.compile(r"(?<!\$)\$\(([A-Za-z_][A-Za-z0-9_]*)\)")
# waiting reasons of a container that has not come to an error (the kubelet is still working on it)
_STARTING = {"ContainerCreating", "PodInitializing", ""}
# a pull that failed (the kubelet's back-off alternates the two)
_PULL_FAILED = {"waiting:ErrImagePull", "waiting:ImagePullBackOff"}
_NO_SPACE = "no space left on device"


# how many of a failing container's last log lines its finding carries (observed.json keeps 80 a container:
# gangs.go logTail); the whole log is in the copy the finding names (observed.json `logFiles`, podlogs.go)
FAIL_LINES = 60


def _failed(state: str) -> bool:
    """A container that ran and failed: exited non-zero, or restarted after it did (CrashLoopBackOff)."""
    return (state.startswith("terminated:") and state != "terminated:0") or state == "waiting:CrashLoopBackOff"


def log_evidence(p: dict[str, Any], container: str, n: int = FAIL_LINES) -> str:
    """'; its last lines: a | b ...; its whole log: <file>' for a container of a real-node pod (observed.json
    `logs` in the kubelet's CRI format '<time> <stream> <tag> <message>', `logFiles`)."""
    lines = (p.get("logs") or {}).get(container)
    whole = (p.get("logFiles") or {}).get(container)
    out = ""
    if lines is not None or whole:
        msgs = [ln.split(" ", 3)[3] if ln.count(" ") >= 3 else ln for ln in (lines or [])[-n:]]
        if msgs:
            out += f"; its last {len(msgs)} lines: " + " | ".join(m.rstrip() for m in msgs)
        else:
            out += "; its log is empty"
    if whole:
        out += f"; its whole log: {whole}"
    return out


def _state(c: dict[str, Any]) -> tuple[str, str]:
    st = c.get("state") or {}
    if "running" in st:
        return "running", ""
    if "terminated" in st:
        t = st["terminated"]
        return f"terminated:{t.get('exitCode')}", f"{t.get('reason', '')} {t.get('message', '')}".strip()
    if "waiting" in st:
        w = st["waiting"]
        return f"waiting:{w.get('reason', '')}", w.get("message", "")
    return "unknown", ""


def _unexpanded(spec_env: list[dict[str, Any]], seen: dict[str, str]) -> list[str]:
    """Env vars the spec defines whose value in the process still holds a $(VAR) reference, and those missing."""
    out = []
    for e in spec_env:
        name = e.get("name", "")
        if name not in seen:
            src = "downward API " + e["valueFrom"]["fieldRef"].get("fieldPath", "") \
                if (e.get("valueFrom") or {}).get("fieldRef") else "its value"
            out.append(f"{name}: not in the process's environment ({src})")
            continue
        val = e.get("value")
        if val is None:
            if (e.get("valueFrom") or {}).get("fieldRef") and seen[name] == "":
                out.append(f"{name}: downward API {e['valueFrom']['fieldRef'].get('fieldPath')} resolved empty")
            continue
        left = [m for m in _REF.findall(val) if f"$({m})" in seen[name]]
        if left:
            out.append(f"{name}={seen[name]!r}: $({left[0]}) left unexpanded (no env var {left[0]} defined before it)")
    return out


# The kubelet gives a pod its node's resolv.conf, not the cluster DNS, for dnsPolicy Default and for ClusterFirst
# (the API server's default) with hostNetwork; only ClusterFirstWithHostNet puts a hostNetwork pod on the cluster
# DNS (k8s.io/kubernetes@v1.33.13 pkg/kubelet/network/dns/dns.go:303-318 getPodDNSType). A real node's resolv.conf
# names the cloud's resolver, which serves no cluster.local (the box's real kubelets have `resolvConf: ""`).
NODE_DNS_HINT = ("the pod resolves names through its node's resolv.conf, not the cluster DNS (hostNetwork with "
                 "dnsPolicy ClusterFirst falls back to Default: k8s.io/kubernetes@v1.33.13 "
                 "pkg/kubelet/network/dns/dns.go:310-317); a hostNetwork pod that names a cluster name needs "
                 "dnsPolicy ClusterFirstWithHostNet")


def node_dns(spec: dict[str, Any]) -> bool:
    """The pod gets its node's resolv.conf instead of the cluster DNS (NODE_DNS_HINT)."""
    policy = spec.get("dnsPolicy") or "ClusterFirst"
    return policy == "Default" or (policy == "ClusterFirst" and bool(spec.get("hostNetwork")))


def judged_names(checks: list[dict[str, Any]], spec: dict[str, Any]) -> list[dict[str, Any]]:
    """The names a pod is held to. names.go resolves every Service of the pod's namespace from every pod, as a
    pod on the cluster DNS would find them; a pod on its node's DNS names none of them itself (a hostNetwork
    DaemonSet in kube-system does not look up kube-dns), so only the names it carries (env, command line,
    hostfile) are judged for it."""
    if not node_dns(spec):
        return checks
    return [c for c in checks if not str(c.get("from", "")).startswith("Service ")]


def _name_problems(checks: list[dict[str, Any]], on_node_dns: bool = False) -> list[str]:
    """Host names resolved from inside the pod (names.go) that did not resolve, or not to what they stand for."""
    out = []
    for c in checks:
        where = f"name {c['name']!r} ({c['from']})"
        target, expect, got = c.get("target") or "", c.get("expect") or [], c.get("resolved") or []
        hint = f"; {c['hint']}" if c.get("hint") else ""
        if on_node_dns:
            hint += f"; {NODE_DNS_HINT}"
        if not got and target and not expect and not hint:
            continue   # a headless Service with no ready endpoint: no address is the right answer
        if not got:
            what = f"it names {target}" + (f" at {expect}" if expect else "") if target else \
                "it names no Service or pod of the box"
            out.append(f"{where} does not resolve from inside the pod ({c.get('error') or 'no address'}); {what}{hint}")
        elif target and not expect:
            out.append(f"{where} resolves to {got}, but {target} has no address{hint}")
        elif target and (not set(got) & set(expect) or set(got) - set(expect)):
            out.append(f"{where} resolves to {got}, not to {target} at {expect}{hint}")
    return out


def _probe_problems(spec: dict[str, Any], status: dict[str, Any], listening: list[int] | None) -> list[str]:
    """Probes (tcpSocket, httpGet, grpc) of running containers on a port nothing listens on in the pod's network
    namespace (observed.json `listening`, read from /proc/<pid>/net/tcp{,6} once the phase settled)."""
    if listening is None:
        return []
    running = {c["name"] for c in status.get("containerStatuses") or [] if "running" in (c.get("state") or {})}
    out = []
    for c in spec.get("containers") or []:
        if c["name"] not in running:
            continue
        named = {p.get("name"): p.get("containerPort") for p in c.get("ports") or [] if p.get("name")}
        for kind in ("startupProbe", "readinessProbe", "livenessProbe"):
            probe = c.get(kind) or {}
            for how in ("tcpSocket", "httpGet", "grpc"):
                if how not in probe:
                    continue
                port = probe[how].get("port")
                num = named.get(port) if isinstance(port, str) else port
                if num is None:
                    out.append(f"container {c['name']}: {kind} {how} names port {port!r}, which the container "
                               "does not declare")
                elif num not in listening:
                    out.append(f"container {c['name']}: {kind} {how} on port {num}: nothing listens on it in the "
                               f"pod (listening: {listening})")
    return out


def normalize_image(ref: str) -> str:
    """An image reference as containerd names it (docker.io/library/x:latest), as the box's registry keys it
    (distribution/reference ParseNormalizedNamed + TagNameOnly)."""
    name, _, digest = ref.partition("@")
    first = name.split("/", 1)[0]
    if "/" not in name or ("." not in first and ":" not in first and first != "localhost"):
        name = ("docker.io/library/" if "/" not in name else "docker.io/") + name
    if digest:
        return f"{name}@{digest}"
    return name if ":" in name.rsplit("/", 1)[1] else f"{name}:latest"


def _pull_hint(image: str, registry: dict[str, Any] | None) -> str:
    """Why a pull failed, from what the box's registry (registry.go) recorded."""
    if registry is None:
        return ""
    ref = normalize_image(image)
    if ref in (registry.get("held") or []):
        return ""
    return (f" (the box's registry {registry.get('address')} holds no image {ref}: it serves the stand-in under the "
            f"{len(registry.get('held') or [])} references the stack's objects name, and no digest reference: a digest "
            f"reference is only a name in the nodes' image stores, for a kubelet that does not pull it)")


# within this much of its size the nodes' tmpfs counts as full (its use is read every 2 s: a pull that fails
# "no space left on device" drops what it had unpacked right after)
_TMPFS_FULL_SLACK = 64 << 20


def _gib(n: int) -> str:
    return f"{n / (1 << 30):.1f} GiB"


def tmpfs_problems(tmpfs: dict[str, Any] | None, enospc: list[str]) -> list[str]:
    """The real nodes' tmpfs (nodestmpfs.go) filled up, or a container could not start for want of space on it
    (`enospc`: the pods whose container's waiting message says "no space left on device")."""
    if not tmpfs:
        return []
    size, peak = tmpfs.get("sizeBytes") or 0, tmpfs.get("peakUsedBytes") or 0
    if not enospc and not (size and peak >= size - _TMPFS_FULL_SLACK):
        return []
    pods = f"; pods that could not start for want of space on it: {sorted(set(enospc))}" if enospc else ""
    return [f"the real nodes' tmpfs {tmpfs.get('path')} filled up: {_gib(peak)} of its {_gib(size)} in use at the "
            f"most ({tmpfs.get('why')}; MemAvailable {_gib(tmpfs.get('memAvailableBytes') or 0)} when mounted){pods}: "
            "an error of the box, not of the stack: free memory on this machine, or give a larger size "
            "(clusterbox --nodes-tmpfs-gib)"]


def _service_problems(conns: list[dict[str, Any]]) -> list[str]:
    """Service ports dialled from a client pod (svcconn.go): nothing answered, or a selected pod does not listen
    on the targetPort (kube-proxy sends a share of the connections to each ready pod)."""
    out = []
    for c in conns:
        where = f"Service {c['service']} port {c['port']} (targetPort {c['targetPort']})"
        parts = []
        for a in c.get("attempts") or []:
            if not a.get("connected"):
                parts.append(f"connecting to {a['dial']} ({a['via']}) from pod {c.get('client') or '-'}: "
                             f"{a.get('error') or 'no answer'}")
        read = [p for p in c.get("pods") or [] if p.get("listening") is not None]
        undeclared = [p["pod"] for p in read if not p.get("targetPort")]
        silent = [p for p in read if p.get("targetPort") and p["targetPort"] not in p["listening"]]
        if undeclared:
            parts.append(f"pods {undeclared} declare no container port named {c['targetPort']!r}")
        if silent:
            parts.append("nothing listens on " + ", ".join(
                f"{p['targetPort']} in pod {p['pod']} (listening: {p['listening']})" for p in silent))
        if parts and c.get("pods") and not any(p.get("ready") for p in c["pods"]):
            parts.append("no selected pod is Ready, so kube-proxy has no endpoint for it")
        if parts:
            out.append(f"{where}, selecting pods {[p['pod'] for p in c.get('pods') or []]}: " + "; ".join(parts))
    return out


# the NCCL check's verdict line (multinode/manifests/workloads/nccl_test.py), which its script then writes into the
# workload's ConfigMap through the API server (`https://kubernetes.default.svc`, conformance/cluster/apiservice.go)
NCCL_VERDICT = "MULTINODE_NCCL_VERDICT "
WORKLOAD_LABEL = "multinode.dev/workload"


def _lines_of(p: dict[str, Any], container: str) -> list[str]:
    """A container's whole log as the box kept it (observed.json `logFiles`: its copy, which holds what the
    container wrote after the phase's snapshot too), else the last lines the snapshot kept (`logs`)."""
    path = (p.get("logFiles") or {}).get(container)
    if path:
        try:
            with open(path, encoding="utf-8", errors="replace") as f:
                return f.read().splitlines()
        except OSError:
            pass
    return (p.get("logs") or {}).get(container) or []


def verdict_configmaps(obs: dict[str, Any], real: set[str]) -> tuple[list[str], list[dict[str, Any]]]:
    """Each real-node pod that printed an NCCL verdict line (in any phase; the last such line of its container):
    its workload's ConfigMap with a `verdict.json` key, as the run left it (observed.json `configMaps`), must hold
    that verdict, and its `status` the verdict's status."""
    problems: list[str] = []
    report: list[dict[str, Any]] = []
    cms = obs.get("configMaps")
    if cms is None:
        return problems, report   # a box that did not read them (no real nodes, or an older observation)
    seen: dict[tuple[str, str, str], tuple[dict[str, Any], str]] = {}
    for ph in obs.get("phases") or []:
        for p in ph.get("pods") or []:
            if p.get("node") not in real:
                continue
            for cont in sorted(set(p.get("logs") or {}) | set(p.get("logFiles") or {})):
                said = [ln.split(NCCL_VERDICT, 1)[1] for ln in _lines_of(p, cont) if NCCL_VERDICT in ln]
                if said:
                    seen[(p["namespace"], p["name"], cont)] = (p, said[-1])
    for (ns, name, cont), (p, line) in sorted(seen.items()):
        where = f"pod {ns}/{name} container {cont}"
        try:
            verdict = json.loads(line)
        except ValueError:
            problems.append(f"{where}: its NCCL verdict line is not JSON: {line[:200]}")
            continue
        workload = (((p.get("pod") or {}).get("metadata") or {}).get("labels") or {}).get(WORKLOAD_LABEL)
        where += f" (workload {workload})"
        mine = [c for c in cms if c.get("namespace") == ns and workload and
                (c.get("labels") or {}).get(WORKLOAD_LABEL) == workload and "verdict.json" in (c.get("data") or {})]
        if not mine:
            problems.append(f"{where}: printed its NCCL verdict, but no ConfigMap of its workload with a "
                            "verdict.json key is in the box")
            continue
        for c in mine:
            data = c.get("data") or {}
            try:
                held = json.loads(data.get("verdict.json") or "null")
            except ValueError:
                held = data.get("verdict.json")
            written = held == verdict and data.get("status") == verdict.get("status")
            report.append({"pod": f"{ns}/{name}", "configMap": f"{c['namespace']}/{c['name']}",
                           "status": data.get("status"), "printed": verdict.get("status"), "written": written})
            if not written:
                problems.append(
                    f"{where}: its verdict ConfigMap {c['namespace']}/{c['name']} does not hold the verdict it "
                    f"printed (status {data.get('status')!r}, verdict.json {str(data.get('verdict.json'))[:200]!r}; "
                    f"printed status {verdict.get('status')!r}): the write through the API server failed"
                    + log_evidence(p, cont, 20))
    return problems, report


def real_node_findings(obs: dict[str, Any], idle_why: str | None = None) -> tuple[list[str], dict[str, Any]]:
    """idle_why: why no pod of the stack can reach a node in the box (compare.py: every workload is of a kind whose
    controller the box does not run); real nodes with no pod are then listed as not checked, not a finding."""
    findings: list[str] = []
    report: dict[str, Any] = {}
    ns, ns_end = obs.get("netns"), obs.get("netnsEnd")
    if ns is not None:
        report["netns"] = {"start": ns, "end": ns_end}
        links = [link["ifname"] for link in ns.get("links") or []]
        if links != ["lo"] or ns.get("defaultRoute"):
            findings.append(f"network namespace: at start it held {links} (default route: {ns.get('defaultRoute')}); "
                            "only the loopback may be there")
        for o in (ns_end or {}).get("outside") or []:
            findings.append(f"network namespace: {o} (not the loopback or an interface of the box)")
        if ns_end is None:
            findings.append("network namespace: not read at the end of the run")
    nodes = obs.get("realNodes") or []
    if not nodes:
        return findings, report
    real = {n["name"] for n in nodes}
    report["nodes"] = nodes
    for n in nodes:
        if n.get("error"):
            findings.append(f"real node {n['name']}: {n['error']}")
        elif not n.get("ready"):
            findings.append(f"real node {n['name']}: not Ready")
    registry = obs.get("registry")
    if registry is not None:
        report["registry"] = {"address": registry.get("address"), "held": len(registry.get("held") or []),
                              "manifestRequests": len(registry.get("manifests") or []),
                              "blobRequests": registry.get("blobs", 0), "misses": registry.get("misses") or []}
    pods_out = []
    services_out = []
    not_judged = 0
    enospc: list[str] = []
    for ph in obs.get("phases") or []:
        for m in _service_problems(ph.get("serviceConnections") or []):
            findings.append(f"phase {ph['name']}: {m}")

        services_out += [{"phase": ph["name"], "service": c["service"], "port": c["port"],
                          "connected": bool(c.get("attempts")) and all(a.get("connected") for a in c["attempts"])}
                         for c in ph.get("serviceConnections") or []]
        for p in ph.get("pods") or []:
            if p.get("node") not in real:
                continue
            pod = p.get("pod") or {}
            spec, status = pod.get("spec") or {}, pod.get("status") or {}
            key = f"pod {p['namespace']}/{p['name']} on real node {p['node']} (phase {ph['name']})"
            if p.get("gone"):
                # deleted by its controller before the phase's snapshot (a Volcano Job completed by its master's
                # end deletes the pods still running): its view is its last before the deletion, its end unseen;
                # it counts in its gang and its workload (gang_check.py, compare.py), its logs are kept
                pods_out.append({"pod": f"{p['namespace']}/{p['name']}", "node": p["node"], "phase": ph["name"],
                                 "podPhase": status.get("phase"), "gone": p["gone"], "problems": [],
                                 "verdict": "gone", "logFiles": p.get("logFiles") or {}})
                continue
            problems: list[str] = []
            inits = {c["name"]: c for c in status.get("initContainerStatuses") or []}
            for c in spec.get("initContainers") or []:
                sidecar = c.get("restartPolicy") == "Always"
                s = inits.get(c["name"])
                state, why = _state(s) if s else ("not started", "")
                if sidecar and state == "running":
                    continue
                if state != "terminated:0":
                    hint = _pull_hint(c.get("image", ""), registry) if state in _PULL_FAILED else ""
                    if _NO_SPACE in why:
                        enospc.append(f"{p['namespace']}/{p['name']}")
                    logs = log_evidence(p, c["name"]) if _failed(state) else ""
                    problems.append(f"init container {c['name']}: {state}{': ' + why if why else ''}{hint}{logs}")
            conts = {c["name"]: c for c in status.get("containerStatuses") or []}
            for c in spec.get("containers") or []:
                s = conts.get(c["name"])
                state, why = _state(s) if s else ("not started", "")
                # exit 0 under restartPolicy Never or OnFailure is final (the kubelet does not restart it): the pod
                # may still read Running, its phase not yet posted, or be deleted by its controller once its job
                # completed (aws-dev's Volcano Job worker, read terminated 0 while Volcano ended the job)
                done = state == "terminated:0" and (status.get("phase") == "Succeeded" or
                                                    spec.get("restartPolicy") in ("Never", "OnFailure"))
                if state == "running" or done:
                    continue
                if not problems or state.split(":")[0] != "waiting" or state[8:] not in _STARTING:
                    hint = _pull_hint(c.get("image", ""), registry) if state in _PULL_FAILED else ""
                    if _NO_SPACE in why:
                        enospc.append(f"{p['namespace']}/{p['name']}")
                    logs = log_evidence(p, c["name"]) if _failed(state) else ""
                    problems.append(f"container {c['name']}: {state}{': ' + why if why else ''}{hint}{logs}")
            env_checked, env_problems = 0, []
            for c in (spec.get("initContainers") or []) + (spec.get("containers") or []):
                seen = (p.get("env") or {}).get(c["name"])
                if seen is None:
                    continue
                env_checked += 1
                env_problems += [f"container {c['name']}: env {m}" for m in _unexpanded(c.get("env") or [], seen)]
            for c in (spec.get("initContainers") or []) + (spec.get("containers") or []):
                line = (p.get("cmdline") or {}).get(c["name"])
                if line is None:
                    continue
                words = (c.get("command") or []) + (c.get("args") or [])
                for ref in sorted({m for a in words for m in _REF.findall(a)}):
                    if any(f"$({ref})" in a for a in line):
                        env_problems.append(f"container {c['name']}: command line: $({ref}) left unexpanded "
                                            f"(no env var {ref} in the container's spec)")
            problems += env_problems
            names = judged_names(p.get("names") or [], spec)
            not_judged += len(p.get("names") or []) - len(names)
            problems += _name_problems(names, node_dns(spec))
            problems += _probe_problems(spec, status, p.get("listening"))
            if problems and status.get("phase") != "Failed":
                # what the kubelet said about it (FailedMount, FailedCreatePodSandBox, BackOff ...)
                obj = f"Pod {p['namespace']}/{p['name']}"
                said = sorted({f"{e['reason']}: {e['message']}" for e in ph.get("events") or []
                               if e.get("object") == obj and e.get("type") == "Warning"
                               and e.get("reason") != "MissingClusterDNS"})
                problems += [f"kubelet event {m}" for m in said[:3]]
            pods_out.append({"pod": f"{p['namespace']}/{p['name']}", "node": p["node"], "phase": ph["name"],
                             "podPhase": status.get("phase"), "containersEnvRead": env_checked,
                             "namesResolved": len(names or []),
                             "problems": problems, "verdict": "ok" if not problems else "failed",
                             "logFiles": p.get("logFiles") or {}})
            findings += [f"{key}: {m}" for m in problems]
    if obs.get("nodesTmpfs"):
        report["nodesTmpfs"] = obs["nodesTmpfs"]
    if obs.get("podLogs"):
        report["podLogs"] = obs["podLogs"]   # every container's whole log (podlogs.go)
    findings += tmpfs_problems(obs.get("nodesTmpfs"), enospc)
    report["pods"] = pods_out
    report["serviceConnections"] = services_out
    v_problems, report["verdictConfigMaps"] = verdict_configmaps(obs, real)
    findings += v_problems
    report["notChecked"] = ["real nodes: headless Services' ports are not dialled (their clients reach the pods by "
                            "name: the names check)"]
    if not_judged:
        report["notChecked"].append(f"real nodes: {not_judged} lookups of their namespace's Services from pods on "
                                    "their node's DNS (hostNetwork, dnsPolicy ClusterFirst or Default) not judged: "
                                    "such a pod does not use the cluster DNS, and names none of them itself")
    if "coredns" not in (obs.get("versions") or {}):
        # without CoreDNS the kubelet has no clusterDNS and falls back to dnsPolicy Default (MissingClusterDNS)
        report["notChecked"].append("real nodes: no cluster DNS (CoreDNS) in this run: the host names the pods "
                                    "carry are not resolved")
    if not pods_out:
        if idle_why:
            report["notChecked"].append(f"real nodes {sorted(real)}: no pod was placed on them: {idle_why}")
        else:
            findings.append(f"real nodes {sorted(real)}: no pod was placed on them")
    return findings, report


def select_real_nodes(nodes: list[dict[str, Any]], most: int) -> list[str]:
    """The nodes a stack's box runs as real nodes: whole pools, in nodes.yaml order, as long as they fit in `most`
    (so that a gang the scheduler places anywhere in its pool lands on real kubelets); a pool larger than what is
    left is not taken."""
    pools: dict[str, list[str]] = {}
    for n in nodes:
        md = n["metadata"]
        pool = (md.get("annotations") or {}).get("box.multinode.dev/pool") or \
            (md.get("labels") or {}).get("multinode.dev/node-pool") or "?"
        pools.setdefault(pool, []).append(md["name"])
    out: list[str] = []
    for names in pools.values():
        if len(out) + len(names) <= most:
            out += names
    return out


if __name__ == "__main__":
    import sys
    from pathlib import Path

    import yaml
    if len(sys.argv) != 4 or sys.argv[1] != "select":
        print("usage: realnode_check.py select build/<stack> MAX", file=sys.stderr)
        sys.exit(2)
    items = yaml.safe_load((Path(sys.argv[2]) / "engines" / "cluster" / "nodes.yaml").read_text())["items"]
    chosen = select_real_nodes(items, int(sys.argv[3]))
    if not chosen:
        print(f"realnode_check.py: no pool of {sys.argv[2]} fits in {sys.argv[3]} real nodes", file=sys.stderr)
        sys.exit(2)
    print(",".join(chosen))
