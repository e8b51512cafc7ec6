"""The verdict of the cluster box on one stack: build/<stack>/cluster.json from what the box observed
(engines/cluster/observed.json, written by the clusterbox binary) against plan's placement.json and effective/.

Findings (one line each, exit 1 if any):
  - an object the API server (or a webhook) refused;
  - a pod left Pending (with the scheduler's message), a gang partly bound, a gang of placement.json with fewer
    or more pods in the box than placement counts, a pod the box made that placement.json does not know;
  - a gang bound on other pools than placement.json names, or with another count of its pods per node
    (node names may differ: the scheduler picks among equal nodes);
  - with Kyverno in the box: a fabric pod as admitted that differs from effective/ in a field effective/ sets
    (the API server adds defaults; those fields are not compared);
  - a PodDisruptionBudget whose selected pods are all bound and Ready but whose status.disruptionsAllowed, as the
    real disruption controller wrote it, is below 1 (the drain of any of its nodes would be refused), or for which
    the controller wrote no status within the box's bounded wait; the finding carries the controller's
    DisruptionAllowed condition (reason SyncFailed and its message where it could not count the pods' owners).
    A budget whose pods were never all bound in a phase is listed under notChecked (issue 40);
  - with LWS in the box: a LeaderWorkerSet without LWS's own headless Service (named after the set, owned by it,
    clusterIP None) after the services phase: a Service of the stack under the set's name keeps it out and
    LWS_LEADER_ADDRESS never resolves (issue 40).
What the box could not check (a controller it does not run, a kind without a CRD) is listed under
notChecked and printed, never counted as a pass.

Volcano: when the box ran Volcano's scheduler and controller-manager (observed.json versions name "volcano"),
pods with schedulerName volcano and Volcano Jobs are checked like the others, and a gang Volcano holds back
(pods Pending, or a Volcano Job whose pods were never created because its PodGroup was not admitted) is a
finding that carries the PodGroup's phase, its Unschedulable condition and its Warning events: the reason.
Otherwise they are listed as not checked, with the reason Volcano did not run.

LeaderWorkerSet: when the box ran the LWS controller manager (observed.json versions name "lws"), the pods of a
LeaderWorkerSet are the real controller's (its StatefulSets, their pods through LWS's and Kyverno's webhooks):
fewer or more than placement.json counts, or none, is a finding, and so is a PodGroup of the gang scheduler that
LWS did not create as the stack says (one per group, minMember the group's size, the queue the LeaderWorkerSet's
annotation names). While no Volcano runs, those pods are "created, not scheduled (no Volcano)": listed under
notChecked, never a pass.

Usage: python conformance/cluster/compare.py build/<stack> [--kyverno]
"""
from __future__ import annotations

import json
import sys
from collections import Counter, defaultdict
from pathlib import Path
from typing import Any

import yaml

from multinode import k8sfiles

sys.path.insert(0, str(Path(__file__).resolve().parent))
from gang_check import gang_findings  # noqa: E402
from realnode_check import real_node_findings  # noqa: E402

# Controllers the box runs, by the group/kind of the object that owns a gang's pods (the top owner).
RUN_BY_KUBE_CONTROLLER_MANAGER = {"batch/Job", "apps/Deployment", "apps/DaemonSet", "apps/StatefulSet",
                                  "apps/ReplicaSet"}


BOX_SCHEDULER = "default-scheduler"
VOLCANO = "volcano"
POOL_ANNOTATION = "box.multinode.dev/pool"   # set on every node by prepare.py (the same name there)
RUN_BY_VOLCANO = {"batch.volcano.sh/Job"}
VOLCANO_NOT_RUN = ("Volcano did not run in this box (conformance/volcano is not built: its README says why; "
                   "the box runs it when conformance/bin/vc-scheduler exists)")
MPIJOB_KIND = "kubeflow.org/MPIJob"
TRAINER_NOT_RUN = ("the Kubeflow Trainer controller (and the JobSet controller it creates pods through) does not run "
                   "in the box: github.com/kubeflow/trainer/v2 v2.0.0 is served by the Go module proxy but was not "
                   "added (time; conformance/cluster/README.md)")
# Why a controller of a gang kind does not run in the box (compare's not-checked line names it).
NOT_RUN_WHY = {
    "grove.io/PodCliqueSet": "the Grove operator (and KAI-Scheduler) is not served by the Go module proxy "
                             "(403 on the version list and on exact versions), so the box cannot build it",
    "nvidia.com/DynamoGraphDeployment": "the Dynamo operator runs on Grove, whose operator (and KAI-Scheduler) is "
                                        "not served by the Go module proxy (403), so the box cannot build it",
    "trainer.kubeflow.org/ClusterTrainingRuntime": TRAINER_NOT_RUN,
    "trainer.kubeflow.org/TrainingRuntime": TRAINER_NOT_RUN,
    "trainer.kubeflow.org/TrainJob": TRAINER_NOT_RUN,
    MPIJOB_KIND: "conformance/mpi-operator is not built (make -C conformance/mpi-operator build); the box runs it "
                 "when conformance/bin/mpi-operator exists",
}
GROUP_NAME_ANNOTATION = "scheduling.k8s.io/group-name"     # the PodGroup of a pod (Volcano, LWS, our Jobs)



def _role(pod_name: str) -> str:
    """A pod's name without its index or random suffix (placement.json's launcher-0 and the operator's launcher-x7k2p
    are one role)."""
    return pod_name.rsplit("-", 1)[0]


def _asks_gpus(p: dict[str, Any]) -> bool:
    spec = (p.get("pod") or {}).get("spec") or {}
    for c in spec.get("containers") or []:
        res = c.get("resources") or {}
        for block in ("requests", "limits"):
            if str((res.get(block) or {}).get("nvidia.com/gpu", "0")) not in ("0", ""):
                return True
    return False

def podgroup_reasons(owner: str, pods: list[dict[str, Any]], phase: dict[str, Any]) -> list[str]:
    """What Volcano says about the gang of `owner`: each PodGroup it owns or its pods name (phase, minMember,
    the Unschedulable condition's message) and the Warning events on those PodGroups."""
    named = {(p["namespace"], ((p["pod"].get("metadata") or {}).get("annotations") or {}).get(GROUP_NAME_ANNOTATION))
             for p in pods}
    out = []
    for g in phase.get("podGroups") or []:
        if g.get("owner") != owner and (g["namespace"], g["name"]) not in named:
            continue
        conds = [c for c in g.get("conditions") or [] if c.get("status") == "True"
                 and c.get("type") in ("Unschedulable", "Scheduled")]
        text = f"PodGroup {g['namespace']}/{g['name']} {g.get('phase') or 'no phase'} (minMember {g.get('minMember')})"
        text += "".join(f"; {c['type']} {c.get('reason', '')}: {c.get('message', '')}" for c in conds
                        if c["type"] == "Unschedulable")
        events = [e for e in phase.get("events") or [] if e["object"] == f"PodGroup {g['namespace']}/{g['name']}"
                  and e["type"] == "Warning"]
        text += "".join(f"; event {e['reason']}: {e['message']}" for e in events[:2])
        out.append(text)
    return out


LWS_KIND = "leaderworkerset.x-k8s.io/LeaderWorkerSet"
LWS_QUEUE_ANNOTATION = "scheduling.volcano.sh/queue-name"      # LWS copies it into each PodGroup's spec.queue


def rendered_object(stack_dir: Path, owner: str) -> dict[str, Any] | None:
    """The object of build/<stack>/k8s that `owner` ("Kind ns/name") names."""
    kind, ref = owner.split(" ", 1)
    ns, _, name = ref.rpartition("/")
    for f in k8sfiles.find(stack_dir / "k8s", kind, name):
        doc: dict[str, Any] = yaml.safe_load(f.read_text())
        if (doc.get("metadata") or {}).get("namespace", "") == ns:
            return doc
    return None


EXCLUSIVE_KEY = "leaderworkerset.sigs.k8s.io/exclusive-topology"   # not the subgroup one: the workers do not wait


def exclusive_wait(lws: dict[str, Any] | None, pods: list[dict[str, Any]], groups: list[dict[str, Any]]) -> str:
    """Why an exclusive-placement LeaderWorkerSet has fewer pods than its groups count, and what it means under a
    gang scheduler (the workers wait for a bound leader, the PodGroup for its workers)."""
    annotations = ((lws or {}).get("metadata") or {}).get("annotations") or {}
    if EXCLUSIVE_KEY not in annotations or any(p["node"] for p in pods):
        return ""
    text = ("; with exclusive placement LWS creates a group's workers only once its leader is bound "
            "(sigs.k8s.io/lws@v0.9.0 pkg/controllers/pod_controller.go:161-166), and no leader is bound")
    short = [g for g in groups if int(g.get("minMember") or 0) > 1]
    if short:
        text += (f"; its PodGroups ask minMember {sorted({int(g['minMember']) for g in short})} and Volcano's gang "
                 "plugin holds a group with fewer pods than minMember (volcano.sh/volcano@v1.15.1 "
                 "pkg/scheduler/plugins/gang/gang.go:83-90): under Volcano the leader is never bound (with "
                 "Volcano in the box the PodGroup's reason is among the findings; multinode renders this placement "
                 "as pod affinity under Volcano instead, and the pack's rule lws-exclusive-placement-gang refuses it)")
    return text


def lws_podgroup_findings(owner: str, lws: dict[str, Any] | None, gangs: list[dict[str, Any]],
                          phase: dict[str, Any]) -> tuple[list[str], list[dict[str, Any]]]:
    """The PodGroups LWS made for `owner` against the stack: one per group (placement.json's gangs of the
    LeaderWorkerSet), minMember the group's size (1 with startupPolicy LeaderReady), spec.queue the queue the
    LeaderWorkerSet's annotation names (sigs.k8s.io/lws pkg/schedulerprovider/volcano_provider.go)."""
    groups = [g for g in phase.get("podGroups") or [] if g.get("owner") == owner]
    spec = (lws or {}).get("spec") or {}
    queue = ((lws or {}).get("metadata") or {}).get("annotations", {}).get(LWS_QUEUE_ANNOTATION)
    out = []
    if len(groups) != len(gangs):
        out.append(f"{owner}: {len(groups)} PodGroups made by LWS, placement.json counts {len(gangs)} groups")
    leader_ready = spec.get("startupPolicy") == "LeaderReady"
    sizes = sorted(1 if leader_ready else g["pods"] for g in gangs)
    got = sorted(int(g.get("minMember") or 0) for g in groups)
    if len(groups) == len(gangs) and got != sizes:
        out.append(f"{owner}: PodGroup minMember {got}, the stack's groups {sizes}")
    for g in groups:
        if (g.get("queue") or None) != queue:
            out.append(f"{owner}: PodGroup {g['namespace']}/{g['name']} queue {g.get('queue')!r}, the "
                       f"LeaderWorkerSet names {queue!r}")
    return out, [{"name": g["name"], "minMember": g.get("minMember"), "queue": g.get("queue"),
                  "phase": g.get("phase")} for g in groups]


def mpijob_podgroup_findings(owner: str, mpijob: dict[str, Any] | None,
                             phase: dict[str, Any]) -> tuple[list[str], list[dict[str, Any]]]:
    """The PodGroup the MPI operator (--gang-scheduling=volcano) made for `owner` against the stack: one, minMember
    runPolicy.schedulingPolicy.minAvailable (else workers + 1), spec.queue schedulingPolicy.queue (else the
    scheduling.volcano.sh/queue-name annotation) (github.com/kubeflow/mpi-operator@v0.6.0
    pkg/controller/podgroup.go:109-137 newPodGroup, :387-392 calculateMinAvailable)."""
    groups = [g for g in phase.get("podGroups") or [] if g.get("owner") == owner]
    spec = (mpijob or {}).get("spec") or {}
    policy = (spec.get("runPolicy") or {}).get("schedulingPolicy") or {}
    workers = int(((spec.get("mpiReplicaSpecs") or {}).get("Worker") or {}).get("replicas") or 0)
    want_min = int(policy["minAvailable"]) if policy.get("minAvailable") is not None else workers + 1
    want_queue = policy.get("queue") or ((mpijob or {}).get("metadata") or {}).get("annotations", {}).get(
        LWS_QUEUE_ANNOTATION)
    out = []
    if len(groups) != 1:
        out.append(f"{owner}: {len(groups)} PodGroups made by the MPI operator, want 1")
    for g in groups:
        if int(g.get("minMember") or 0) != want_min:
            out.append(f"{owner}: PodGroup {g['namespace']}/{g['name']} minMember {g.get('minMember')}, the MPIJob "
                       f"asks {want_min}")
        if (g.get("queue") or None) != (want_queue or None):
            out.append(f"{owner}: PodGroup {g['namespace']}/{g['name']} queue {g.get('queue')!r}, the MPIJob names "
                       f"{want_queue!r}")
    return out, [{"name": g["name"], "minMember": g.get("minMember"), "queue": g.get("queue"),
                  "phase": g.get("phase")} for g in groups]


def _quantity_equal(a: Any, b: Any) -> bool:
    from multinode.placement import quantity
    qa, qb = quantity(a), quantity(b)
    return qa is not None and qa == qb


def diff(want: Any, got: Any, path: str, out: list[str]) -> None:
    """Fields `want` sets that `got` lacks or holds otherwise; lists of named items are matched by name."""
    if isinstance(want, dict):
        if not isinstance(got, dict):
            out.append(f"{path}: want an object, admitted {json.dumps(got)[:80]}")
            return
        for k, v in want.items():
            if k not in got and v in (False, 0, "", None, [], {}):
                continue    # a zero value: the API server's JSON omits it (omitempty), the pod holds the same
            if k not in got:
                out.append(f"{path}.{k}: missing in the admitted pod (want {json.dumps(v)[:80]})")
            else:
                diff(v, got[k], f"{path}.{k}", out)
    elif isinstance(want, list):
        if not isinstance(got, list):
            out.append(f"{path}: want a list, admitted {json.dumps(got)[:80]}")
            return
        named = all(isinstance(x, dict) and "name" in x for x in want) and want
        if named:
            by = {x.get("name"): x for x in got if isinstance(x, dict)}
            for x in want:
                if x["name"] not in by:
                    out.append(f"{path}[{x['name']}]: missing in the admitted pod")
                else:
                    diff(x, by[x["name"]], f"{path}[{x['name']}]", out)
            return
        if want and all(isinstance(x, dict) for x in want):
            # unnamed objects (tolerations, ...): each must be admitted; admission plugins may add others
            # (DefaultTolerationSeconds adds the not-ready/unreachable tolerations)
            for x in want:
                if not any(not _diff_list(x, y) for y in got):
                    out.append(f"{path}: {json.dumps(x)[:100]} not in the admitted pod")
            return
        if len(want) != len(got):
            out.append(f"{path}: {len(want)} items in effective/, {len(got)} admitted")
            return
        for i, (a, b) in enumerate(zip(want, got)):
            diff(a, b, f"{path}[{i}]", out)
    elif want != got and not (str(want) == str(got) or _quantity_equal(want, got)):
        out.append(f"{path}: effective/ {json.dumps(want)[:80]}, admitted {json.dumps(got)[:80]}")


def _diff_list(want: Any, got: Any) -> list[str]:
    out: list[str] = []
    diff(want, got, "", out)
    return out


def expected_gangs(placement: dict[str, Any]) -> list[tuple[str, dict[str, Any]]]:
    """(phase, gang) for each gang of placement.json: services in the first phase, each batch job in its own."""
    out = [("services", g) for g in placement.get("services", [])]
    out += [(f"batch {g['owner'].split(' ')[0]} {g['owner'].split(' ', 1)[1]}", g)
            for g in placement.get("batchEachBesideServices", [])]
    return out


def _conditions(b: dict[str, Any]) -> str:
    return "; ".join(f"{c.get('type')}={c.get('status')} reason {c.get('reason')}: {c.get('message')}"
                     for c in b.get("conditions") or []) or "no condition written"


def budget_findings(phases: list[dict[str, Any]]) -> tuple[list[str], list[str], list[dict[str, Any]]]:
    """Every PodDisruptionBudget as the disruption controller left it in each phase (observed.json `budgets`,
    conformance/cluster/budgets.go): (findings, not checked, one summary per budget). Judged in the phases where
    every pod it selects is bound (the gang is bound) and Ready: status.disruptionsAllowed must be >= 1, written by
    the controller for those pods (settled). A gang that is whole and allows no disruption blocks every drain."""
    findings: list[str] = []
    summary: dict[str, dict[str, Any]] = {}
    for ph in phases:
        for b in ph.get("budgets") or []:
            key = f"{b['namespace']}/{b['name']}"
            s = summary.setdefault(key, {"budget": key, "spec": b.get("spec"), "judged": [], "verdict": "not checked"})
            if not b.get("selected") or b.get("bound") != b.get("selected") or b.get("ready") != b.get("selected"):
                continue
            judged = {"phase": ph["name"], "pods": b["selected"], "disruptionsAllowed": b.get("disruptionsAllowed"),
                      "currentHealthy": b.get("currentHealthy"), "desiredHealthy": b.get("desiredHealthy"),
                      "expectedPods": b.get("expectedPods"), "conditions": _conditions(b)}
            s["judged"].append(judged)
            if not b.get("settled"):
                findings.append(f"PodDisruptionBudget {key} (phase {ph['name']}): the disruption controller wrote no "
                                f"status for its {b['selected']} bound pods within the box's wait ({_conditions(b)})")
                s["verdict"] = "differs"
            elif (b.get("disruptionsAllowed") or 0) < 1:
                spec = ", ".join(f"{k} {v}" for k, v in (b.get("spec") or {}).items())
                findings.append(f"PodDisruptionBudget {key} ({spec}; phase {ph['name']}): status.disruptionsAllowed "
                                f"{b.get('disruptionsAllowed') or 0} with all {b['selected']} of its pods bound and "
                                f"Ready: every drain of their nodes is refused (currentHealthy "
                                f"{b.get('currentHealthy')}, desiredHealthy {b.get('desiredHealthy')}, expectedPods "
                                f"{b.get('expectedPods')}; {_conditions(b)})")
                s["verdict"] = "differs"
            elif s["verdict"] != "differs":
                s["verdict"] = "ok"
    not_checked = [f"PodDisruptionBudget {k}: its pods were never all bound and Ready in the box (their controller "
                   f"or scheduler does not run here, or the gang was held back): disruptionsAllowed not judged"
                   for k, s in summary.items() if not s["judged"]]
    return findings, not_checked, list(summary.values())


def lws_service_findings(stack_dir: Path, phases: list[dict[str, Any]]) -> list[str]:
    """Every LeaderWorkerSet of the stack has LWS's own headless Service, named after the set and owned by it (the
    pods' subdomain, so LWS_LEADER_ADDRESS resolves): LWS creates it only when no Service has that name
    (sigs.k8s.io/lws@v0.9.0 and v0.10.0 pkg/utils/controller/controller_utils.go:33-65
    CreateHeadlessServiceIfNotExists). A Service of ours under the set's name (the rendering before issue 40)
    keeps it out. Judged on the services phase, with LWS in the box."""
    services = {(s["namespace"], s["name"]): s for ph in phases if ph.get("name") == "services"
                for s in ph.get("services") or []}
    if not any(ph.get("name") == "services" and "services" in ph for ph in phases):
        return []                               # an observation of a box that did not record Services
    out: list[str] = []
    for f in k8sfiles.find(stack_dir / "k8s", "LeaderWorkerSet"):
        lws = yaml.safe_load(f.read_text()) or {}
        md = lws.get("metadata") or {}
        ns, name = md.get("namespace") or "default", md.get("name")
        svc = services.get((ns, name))
        if svc is None:
            out.append(f"LeaderWorkerSet {ns}/{name}: LWS made no headless Service {name} (the pods' subdomain): "
                       "LWS_LEADER_ADDRESS has no DNS record")
        elif f"LeaderWorkerSet/{name}" not in (svc.get("owners") or []) or svc.get("clusterIP") != "None":
            out.append(f"LeaderWorkerSet {ns}/{name}: the Service {name} is not LWS's headless Service (owners "
                       f"{svc.get('owners') or 'none'}, clusterIP {svc.get('clusterIP')}): a Service of the stack "
                       "takes the set's name, so LWS never creates its own and LWS_LEADER_ADDRESS has no DNS record")
    return out


def day_two_findings(stack_dir: Path, obs: dict[str, Any]) -> dict[str, Any]:
    """build/<stack>/day-two.json, written by the box's day-two scenarios (daytwo.go): their findings fail the box
    like the others; a box asked to play them that wrote no report is a finding itself."""
    path = stack_dir / "day-two.json"
    if not path.exists():
        why = f" ({obs['error']})" if obs.get("error") else ""
        return {"findings": [f"day two: the box wrote no {path.name}{why}"], "notChecked": []}
    rep = json.loads(path.read_text())
    return {"findings": [f"day two: {f}" if not f.startswith("day two") else f for f in rep.get("findings") or []],
            "notChecked": [f"day two: {n}" for n in rep.get("notChecked") or []]}


def compare(stack_dir: Path, kyverno: bool, day_two_expected: bool = False) -> dict[str, Any]:
    obs = json.loads((stack_dir / "engines" / "cluster" / "observed.json").read_text())
    lws_ran = "lws" in (obs.get("versions") or {})
    run_by = RUN_BY_KUBE_CONTROLLER_MANAGER | ({LWS_KIND} if lws_ran else set())
    # the MPI operator (conformance/mpi-operator) when the box ran it: its launcher Job and worker pods are checked
    mpi_ran = "mpi-operator" in (obs.get("versions") or {})
    run_by |= {MPIJOB_KIND} if mpi_ran else set()
    placement = json.loads((stack_dir / "placement.json").read_text())
    crds = json.loads((stack_dir / "engines" / "cluster" / "crds.yaml").read_text())
    findings: list[str] = []
    not_checked: list[str] = [f"kind {k}: no CRD stored under schemas/ (not applied)" for k in crds.get("missing", [])]
    if obs.get("error"):
        findings.append(f"box: {obs['error']}")
    volcano_ran = VOLCANO in (obs.get("versions") or {})
    schedulers = {BOX_SCHEDULER, ""} | ({VOLCANO} if volcano_ran else set())
    run_by |= RUN_BY_VOLCANO if volcano_ran else set()
    nodes_pool = {}
    for n in yaml.safe_load((stack_dir / "engines" / "cluster" / "nodes.yaml").read_text())["items"]:
        md = n["metadata"]
        # prepare.py names each node's pool in an annotation (an existing cluster's pools carry the user's labels,
        # not multinode.dev/node-pool); the label is the fallback for older box inputs
        nodes_pool[md["name"]] = ((md.get("annotations") or {}).get(POOL_ANNOTATION)
                                  or (md.get("labels") or {}).get("multinode.dev/node-pool") or "?")
    for p in obs.get("phases") or []:
        p["pods"], p["events"], p["applied"] = p.get("pods") or [], p.get("events") or [], p.get("applied") or []
    phases = {p["name"]: p for p in obs.get("phases") or []}
    group_of = {a["object"]: a.get("apiVersion", "").rsplit("/", 1)[0] if "/" in a.get("apiVersion", "") else ""
                for p in phases.values() for a in p["applied"]}
    for p in obs.get("phases") or []:
        if not p.get("settled"):
            findings.append(f"phase {p['name']}: pods still changing after {p['seconds']:.0f}s (bounded wait)")
        for a in p.get("applied", []):
            if a["result"] == "refused":
                findings.append(f"k8s/{a['file']}: {a['object']}: refused: {a['error']}")
            elif a["result"] == "stand-in":
                not_checked.append(a["error"])
            elif a["result"] == "not-served":
                not_checked.append(f"k8s/{a['file']}: {a['object']}: kind not served (no CRD): {a['error']}")

    workloads: list[dict[str, Any]] = []
    seen: set[tuple[str, str, str]] = set()
    by_owner: dict[tuple[str, str], list[dict[str, Any]]] = defaultdict(list)
    for phase, g in expected_gangs(placement):
        by_owner[(phase, g["owner"])].append(g)
    for (phase, owner), gangs in by_owner.items():
        kind = owner.split(" ")[0]
        ph = phases.get(phase)
        pods = [p for p in (ph or {}).get("pods", []) if p["owner"] == owner]
        for p in pods:
            seen.add((phase, p["namespace"], p["name"]))
        want_nodes: dict[str, str] = {}
        for g in gangs:
            want_nodes.update(g.get("nodes") or {})
        want_count = sum(len(g.get("nodes") or {}) if g.get("placed") else g["pods"] for g in gangs)
        w: dict[str, Any] = {"owner": owner, "phase": phase, "gangs": [g["gang"] for g in gangs],
                             "placement": {"placed": all(g.get("placed") for g in gangs), "pods": want_count,
                                           "nodes": want_nodes},
                             "pods": [{"name": p["name"], "node": p["node"] or None,
                                       "pool": nodes_pool.get(p["node"]) if p["node"] else None,
                                       **({} if p["node"] else
                                          {"pending": (p.get("scheduled") or {}).get("message", "")})}
                                      for p in pods]}
        workloads.append(w)
        if ph is None:
            if f"{group_of.get(owner, '?')}/{kind}" in run_by:
                findings.append(f"{owner}: the box ran no phase {phase!r}")
            else:
                gk = f"{group_of.get(owner, '?')}/{kind}"
                not_checked.append(f"{owner}: not applied as such in the box (its pods come from another object)"
                                   + (f": {NOT_RUN_WHY[gk]}" if gk in NOT_RUN_WHY else ""))
                w["verdict"] = "not checked"
            continue
        if not pods:
            gk = f"{group_of.get(owner, '?')}/{kind}"
            if gk not in run_by:
                why = f"; {VOLCANO_NOT_RUN}" if gk in RUN_BY_VOLCANO else (f": {NOT_RUN_WHY[gk]}" if gk in NOT_RUN_WHY
                                                                             else "")
                not_checked.append(f"{owner}: no pods in the box: the {gk} controller does not run in the box{why}")
                w["verdict"] = "not checked"
                continue
            events = [e for e in ph.get("events", [])
                      if e["type"] == "Warning" and owner.split(" ", 1)[1] in e["object"]
                      and not e["object"].startswith("PodGroup ")]
            groups = podgroup_reasons(owner, [], ph) if volcano_ran else []
            held = " (held back whole by Volcano)" if groups else ""
            findings.append(f"{owner}: no pods created{held} (placement: {want_count})"
                            + "".join(f"; {e['object']} {e['reason']}: {e['message']}" for e in events[:3])
                            + "".join(f"; {g}" for g in groups))
            w["volcano"] = groups
            continue
        other = sorted({s for p in pods if (s := p["pod"]["spec"].get("schedulerName", BOX_SCHEDULER))
                        not in schedulers})
        if (mpi_ran and volcano_ran and f"{group_of.get(owner, '?')}/{kind}" == MPIJOB_KIND
                and any(p["pod"]["spec"].get("schedulerName") == VOLCANO for p in pods)):
            mpi_findings, w["podGroups"] = mpijob_podgroup_findings(owner, rendered_object(stack_dir, owner), ph)
            findings.extend(mpi_findings)
        if lws_ran and f"{group_of.get(owner, '?')}/{kind}" == LWS_KIND:
            lws_findings, w["podGroups"] = lws_podgroup_findings(owner, rendered_object(stack_dir, owner), gangs, ph)
            findings.extend(lws_findings)
            wait = exclusive_wait(rendered_object(stack_dir, owner), pods, w["podGroups"])
            if wait and len(pods) == len(gangs) and len(pods) < want_count:
                # only the leaders, none bound: what LWS does before a scheduler acts, not a difference the box saw;
                # what it means under Volcano is read from the sources, so it is a warning, not a finding
                w["warning"] = f"only the {len(pods)} leaders made, placement.json counts {want_count} pods{wait}"
                not_checked.append(f"{owner}: WARNING: {w['warning']}")
            elif len(pods) != want_count:
                findings.append(f"{owner}: {len(pods)} pods made by LWS, placement.json counts {want_count}{wait}")
            if other and not any(p["node"] for p in pods):
                not_checked.append(f"{owner}: {len(pods)} pods created by LWS, not scheduled (no "
                                   f"{', '.join(other)} in the box)"
                                   + (f": {VOLCANO_NOT_RUN}" if VOLCANO in other else ""))
                w["verdict"] = "created, not scheduled (no Volcano)" if other == ["volcano"] else "not checked"
                continue
        if other and not any(p["node"] for p in pods):
            why = f": {VOLCANO_NOT_RUN}" if VOLCANO in other else ""
            not_checked.append(f"{owner}: {len(pods)} pods for scheduler {', '.join(other)}, "
                               f"which does not run in the box{why}")
            w["verdict"] = "not checked"
            continue
        bound = [p for p in pods if p["node"]]
        pending = [p for p in pods if not p["node"]]
        for p in pending:
            msg = (p.get("scheduled") or {}).get("message") or "no scheduler message"
            findings.append(f"{owner}: pod {p['namespace']}/{p['name']} Pending: {msg}")
        if bound and pending:
            findings.append(f"{owner}: gang half-bound ({len(bound)} of {len(pods)} pods bound)")
        if pending and volcano_ran and any(p["pod"]["spec"].get("schedulerName") == VOLCANO for p in pods):
            groups = podgroup_reasons(owner, pods, ph)
            w["volcano"] = groups
            findings.append(f"{owner}: {len(pending)} of {len(pods)} pods Pending under Volcano"
                            + ("".join(f"; {g}" for g in groups) if groups else "; no PodGroup names these pods"))
        if len(pods) != want_count:
            findings.append(f"{owner}: {len(pods)} pods in the box, placement.json counts {want_count}")
        got_pools = sorted({nodes_pool.get(p["node"], "?") for p in bound})
        if "?" in got_pools:
            findings.append(f"{owner}: bound on node(s) of no known pool "
                            f"{sorted(p['node'] for p in bound if nodes_pool.get(p['node'], '?') == '?')}: the "
                            "pool comparison cannot be made")
        want_pools = sorted({nodes_pool.get(n, n.rsplit("-", 1)[0]) for n in want_nodes.values()})
        if bound and got_pools != want_pools:
            findings.append(f"{owner}: bound on pools {got_pools}, placement.json: {want_pools}")
        # Pods per node, for the pods that ask for GPUs. A pod without GPUs (an MPIJob's launcher) fits on many nodes:
        # placement.json packs it beside the gang's first pod with room, the schedulers score nodes (least
        # allocated by default) and may put it on an emptier node of the same pool (seen: torchrun-recipe's Horovod
        # launcher on a free GPU node). Feasibility is the same; its pool is still checked above.
        # (Only when the gang has GPU pods beside GPU-less ones; otherwise every pod counts, as before.)
        gpu_bound = [p for p in bound if _asks_gpus(p)]
        want_left = dict(want_nodes)
        if gpu_bound and len(gpu_bound) < len(bound):
            for p in bound:
                if not _asks_gpus(p):   # one placement.json entry of the same role leaves the count with it
                    key = next((k for k in sorted(want_left) if _role(k) == _role(p["name"])), None)
                    if key is not None:
                        del want_left[key]
        counted = gpu_bound if gpu_bound else bound
        got_per_node = sorted(Counter(p["node"] for p in counted).values())
        want_per_node = sorted(Counter(want_left.values()).values())
        if bound and not pending and got_per_node != want_per_node:
            findings.append(f"{owner}: pods per node {got_per_node}, placement.json: {want_per_node}")
        w["verdict"] = "ok" if not pending and len(pods) == want_count and got_pools == want_pools \
            and got_per_node == want_per_node else "differs"
    # the services' pods stay up while each batch job runs beside them: checked in the services phase
    services = {(ns, name) for ph, ns, name in seen if ph == "services"}
    for ph in (obs.get("phases") or []):
        for p in ph.get("pods", []):
            if (ph["name"], p["namespace"], p["name"]) not in seen and (p["namespace"], p["name"]) not in services:
                findings.append(f"pod {p['namespace']}/{p['name']} (owner {p['owner'] or 'none'}, phase {ph['name']}): "
                                "not a pod of placement.json")

    effective: list[dict[str, Any]] = []
    eff_dir = stack_dir / "effective"
    if eff_dir.is_dir():
        for f in sorted(eff_dir.glob("*.yaml")):
            want = yaml.safe_load(f.read_text())
            labels = (want.get("metadata") or {}).get("labels") or {}
            if not kyverno:
                not_checked.append(f"effective/{f.name}: Kyverno does not run in this box; the admitted pod was not "
                                   "compared")
                effective.append({"file": f.name, "verdict": "not checked"})
                continue
            cands = [p for ph in (obs.get("phases") or []) for p in ph.get("pods", [])
                     if all(((p["pod"].get("metadata") or {}).get("labels") or {}).get(k) == v
                            for k, v in labels.items())]
            if not cands:
                effective.append({"file": f.name, "verdict": "not checked"})
                not_checked.append(f"effective/{f.name}: no pod with its labels in the box (its controller does not "
                                   "run here)")
                continue
            out: list[str] = []
            diff(want.get("spec") or {}, cands[0]["pod"].get("spec") or {}, "spec", out)
            effective.append({"file": f.name, "pod": cands[0]["name"], "differences": out,
                              "verdict": "equal" if not out else "differs"})
            findings += [f"effective/{f.name}: pod {cands[0]['namespace']}/{cands[0]['name']}: {d}" for d in out]
    # a stack whose every workload is of a kind the box does not run (Dynamo, Grove) places nothing on real nodes
    idle = [w["owner"] for w in workloads if w.get("verdict") == "not checked"]
    idle_why = (f"every workload of the stack is of a kind whose controller the box does not run ({', '.join(idle)})"
                if workloads and len(idle) == len(workloads) and obs.get("phases") else None)
    real_findings, real_report = real_node_findings(obs, idle_why)
    findings += real_findings
    # the gangs real kubelets ran (issue 43): formed or not, world size against plan, time to form
    gang_f, gang_report = gang_findings(obs, placement)
    findings += gang_f
    not_checked += [g["notChecked"] for g in gang_report if g.get("notChecked")]
    if gang_report:
        real_report["gangs"] = gang_report
    not_checked += real_report.get("notChecked", [])
    admitted = {f"{p['namespace']}/{p['name']}": p["pod"]
                for ph in (obs.get("phases") or []) for p in ph.get("pods", [])}
    b_findings, b_not_checked, budgets = budget_findings(obs.get("phases") or [])
    findings += b_findings
    if lws_ran:
        findings += lws_service_findings(stack_dir, obs.get("phases") or [])
    not_checked += b_not_checked
    day_two = day_two_findings(stack_dir, obs) if day_two_expected else None
    if day_two is not None:
        findings += day_two["findings"]
        not_checked += day_two["notChecked"]
    return {"stack": stack_dir.name, "pass": not findings, "findings": findings, "notChecked": not_checked,
            "workloads": workloads, "effective": effective, "budgets": budgets, "versions": obs.get("versions"),
            "seconds": obs.get("seconds"), "admittedPods": admitted,
            **({"realNodes": real_report} if real_report else {})}


def main(argv: list[str]) -> int:
    stack_dir = Path(argv[0])
    result = compare(stack_dir, "--kyverno" in argv, "--day-two" in argv)
    (stack_dir / "cluster.json").write_text(json.dumps(result, indent=1, sort_keys=False) + "\n")
    for f in result["findings"]:
        print(f"build/{stack_dir.name}: {f}")
    for n in result["notChecked"]:
        print(f"build/{stack_dir.name}: not checked: {n}")
    ok = [w for w in result["workloads"] if w.get("verdict") == "ok"]
    print(f"build/{stack_dir.name}: {len(ok)} of {len(result['workloads'])} workloads bound as placement.json says; "
          f"{len(result['findings'])} findings, {len(result['notChecked'])} not checked "
          f"-> build/{stack_dir.name}/cluster.json")
    return 1 if result["findings"] else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
