"""Does the whole stack fit? A placement simulation of every pod of every workload on the stack's nodes.

Input: the Kubernetes objects a stack renders (plan's records, or any hand-written objects) and the node
pools (count x machine). Every pod is enumerated the way its controller creates it:
  LeaderWorkerSet      replicas gangs of `size` pods (leader template + size-1 worker templates)
  Grove PodCliqueSet   per replica one base gang: every stand-alone clique's minAvailable pods and the
                       minAvailable replicas of every scaling group (each replica = all its cliques' pods);
                       the scaling-group replicas above minAvailable are gangs of their own; clique pods
                       above minAvailable are single pods
  Dynamo DGD           per component replica one gang of multinode.nodeCount pods (v1alpha1 services and
                       v1beta1 components; sharedMemorySize counts as a memory-backed /dev/shm)
  Volcano Job          one gang of every task's replicas
  MPIJob / PyTorchJob  one gang of the launcher (master) and the workers
  ClusterTrainingRuntime / TrainingRuntime (Kubeflow Trainer v2)   one gang of mlPolicy.numNodes pods of
                       the trainer job's template: the runtimes this project renders belong to one TrainJob
                       each, with the same numNodes (manifests/workloads/trainjob.py); a TrainJob itself
                       carries no pod template and is not read
  batch/v1 Job         Indexed: one gang of `parallelism` pods (torchrun waits for every rank);
                       otherwise `parallelism` single pods
  Deployment / StatefulSet / ReplicaSet / Pod   single pods;  DaemonSet   one pod per matching node
Pod requests follow the scheduler (k8s.io/component-helpers resource.PodRequests): the larger of
(containers + native sidecars) and (each init container + the sidecars started before it); a request
defaults to its limit. Memory-backed emptyDir sizeLimits are added to the pod's memory: the scheduler does
not count them, but their pages are charged to the pod and come out of the node's memory; the kubelet caps the
volume at the pod's memory limit, else the node's allocatable memory (pod_requests), and so does placement.
Pods that carry the fabric label are placed as the fabric policy mutates them (effective_pod), so the
fabric devices they will request are counted.

Placement: long-running services (LWS, Grove, DGD, Deployments, StatefulSets, DaemonSets) must all fit at
once; each batch job (Jobs, Volcano Jobs, MPIJobs, PyTorchJobs) must fit beside them. A gang is placed
all-or-nothing on the nodes whose labels hold its nodeSelector (and required node-affinity `In` terms)
and whose taints it tolerates, honouring required pod anti-affinity on kubernetes.io/hostname. Greedy
best-fit by GPUs (largest gangs first): a stack it accepts can be placed (the placement is the proof);
a stack it refuses could in rare mixed-size cases be placeable by a smarter packer.
Pure: no Pulumi, no I/O.
"""
from __future__ import annotations

import heapq
import math
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from . import allocatable as alloc
from . import quantity as quantities
from .catalog import Machine

GPU = "nvidia.com/gpu"
CPU, MEMORY = "cpu", "memory"
FABRIC_DEVICE_RESOURCES = ("vpc.amazonaws.com/efa", "rdma/shared_ib", "rdma/ib", "nvidia.com/rdma-vf")
HOSTNAME = "kubernetes.io/hostname"
SERVICE, BATCH = "service", "batch"

# ------------------------------------------------------------------ quantities
def quantity(value: Any) -> float | None:
    """A Kubernetes quantity ("500m", "64Gi", 8, "1e3") as a float in base units; None if Kubernetes refuses
    it or it is out of range (multinode/quantity.py parses every quantity, once, as Kubernetes does)."""
    return quantities.as_float(value)


def _gib(n: float) -> str:
    return f"{n / 2 ** 30:.0f}Gi" if n >= 2 ** 30 or n == 0 else f"{n / 2 ** 20:.0f}Mi"


# ------------------------------------------------------------------ pod requests
def _dict(v: Any) -> dict[str, Any]:
    return v if isinstance(v, dict) else {}


def _list(v: Any) -> list[Any]:
    return v if isinstance(v, list) else []


def _container_requests(c: dict[str, Any]) -> dict[str, float]:
    res = _dict(c.get("resources"))
    req, lim = _dict(res.get("requests")), _dict(res.get("limits"))
    out: dict[str, float] = {}
    for name in set(req) | set(lim):
        q = quantity(req.get(name, lim.get(name)))
        if q:
            out[str(name)] = q
    return out


def _add(a: dict[str, float], b: dict[str, float]) -> dict[str, float]:
    out = dict(a)
    for k, v in b.items():
        out[k] = out.get(k, 0.0) + v
    return out


def _max(a: dict[str, float], b: dict[str, float]) -> dict[str, float]:
    return {k: max(a.get(k, 0.0), b.get(k, 0.0)) for k in set(a) | set(b)}


def _pod_memory_limit(spec: dict[str, Any]) -> float | None:
    """The pod's memory limit as the kubelet sets the pod cgroup (k8s.io/kubernetes@v1.33.13
    pkg/kubelet/cm/helpers_linux.go ResourceConfigForPod: a limit only when every container has one), or None."""
    containers = [c for c in _list(spec.get("containers")) if isinstance(c, dict)]
    limits = [quantity(_dict(_dict(c.get("resources")).get("limits")).get(MEMORY)) for c in containers]
    if not containers or any(not q for q in limits):
        return None
    return sum(q for q in limits if q)


def pod_requests(spec: dict[str, Any], extra_shm_bytes: float = 0.0,
                 node_memory: float | None = None) -> dict[str, float]:
    """What the pod takes from a node: scheduler requests (native sidecars = initContainers with
    restartPolicy Always run beside the containers) + memory-backed emptyDir sizeLimits + overhead.
    `node_memory`: the node's allocatable memory (bytes), when known: the kubelet sizes a memory-backed emptyDir
    at most at the pod's memory limit, else at the node's allocatable memory (k8s.io/kubernetes@v1.33.13
    pkg/volume/emptydir/empty_dir.go:114-146 calculateEmptyDirMemorySize), and the pages it holds are charged to
    the pod's cgroup, so the pod takes at most that much memory however large the sizeLimit (issue 31)."""
    containers = [c for c in _list(spec.get("containers")) if isinstance(c, dict)]
    main: dict[str, float] = {}
    for c in containers:
        main = _add(main, _container_requests(c))
    sidecars: dict[str, float] = {}
    init_peak: dict[str, float] = {}
    for c in _list(spec.get("initContainers")):
        if not isinstance(c, dict):
            continue
        r = _container_requests(c)
        if c.get("restartPolicy") == "Always":
            sidecars = _add(sidecars, r)
            init_peak = _max(init_peak, sidecars)
        else:
            init_peak = _max(init_peak, _add(r, sidecars))
    total = _max(_add(main, sidecars), init_peak)
    total = _add(total, {k: q for k, v in _dict(spec.get("overhead")).items() if (q := quantity(v))})
    shm = extra_shm_bytes
    for v in _list(spec.get("volumes")):
        ed = v.get("emptyDir") if isinstance(v, dict) else None
        if isinstance(ed, dict) and ed.get("medium") == "Memory":
            shm += quantity(ed.get("sizeLimit")) or 0.0
    if shm:
        asked = total.get(MEMORY, 0.0)
        caps = [x for x in (_pod_memory_limit(spec), node_memory) if x]
        cap = min(caps) if caps else None
        if cap is not None and asked + shm > cap:
            shm = min(shm, cap)
            total[MEMORY] = max(asked, cap)
        else:
            total[MEMORY] = asked + shm
        total["shm"] = shm
    return total


# ------------------------------------------------------------------ pools and nodes
@dataclass
class PoolSpec:
    name: str
    node_count: int
    machine: Machine
    labels: dict[str, str]                       # labels every node of the pool carries
    taints: list[dict[str, Any]] = field(default_factory=list)
    profile: Any = None                          # multinode.fabric.FabricProfile (None: no injection)
    cloud: str = "existing"
    webhook_timeout_seconds: int = 15

    def capacity(self) -> tuple[dict[str, float], alloc.Allocatable]:
        a = alloc.estimate(self.machine, self.cloud)
        cap: dict[str, float] = {GPU: float(self.machine.gpus)}
        res = getattr(self.profile, "device_resource", None) if self.profile is not None else None
        if res and self.profile.node_capacity is not None:
            # the shared RDMA device plugin advertises its rdmaHcaMax per node, not one device per HCA
            cap[res] = float(self.profile.node_capacity)
        elif res:
            cap[res] = float(self.profile.devices_per_node)
        if a.cpu_millis is not None:
            cap[CPU] = a.cpu_millis / 1000.0
        if a.memory_mib is not None:
            cap[MEMORY] = a.memory_mib * 2.0 ** 20
        return cap, a


@dataclass
class Node:
    name: str
    pool: str
    labels: dict[str, str]
    taints: list[dict[str, Any]]
    capacity: dict[str, float]          # only the resources we know; others are unconstrained
    used: dict[str, float] = field(default_factory=dict)
    pods: list[tuple[str, dict[str, str]]] = field(default_factory=list)   # (pod name, its labels)

    def free(self, r: str) -> float:
        return self.capacity.get(r, math.inf) - self.used.get(r, 0.0)


def build_nodes(pools: list[PoolSpec]) -> tuple[list[Node], dict[str, alloc.Allocatable]]:
    nodes: list[Node] = []
    estimates: dict[str, alloc.Allocatable] = {}
    for p in pools:
        cap, a = p.capacity()
        estimates[p.name] = a
        for i in range(p.node_count):           # one capacity dict per pool: never written, only read
            nodes.append(Node(f"{p.name}-{i}", p.name, {**p.labels, HOSTNAME: f"{p.name}-{i}"},
                              list(p.taints), cap))
    return nodes, estimates


def pools_from_config(cfg: Any) -> list[PoolSpec]:
    """The stack's pools as the simulation sees them (labels, taints and fabric profile from the same
    functions the node pools and policies are built with)."""
    from . import catalog, fabric
    from . import pools as mpools
    out = []
    for p in cfg.node_pools:
        try:
            m = cfg.machine(p)
        except (KeyError, catalog.UnknownMachine):
            continue
        out.append(PoolSpec(p.name, p.node_count, m, {**mpools.node_labels(cfg, p, m), **mpools.node_selector(cfg, p)},
                            mpools.node_taints(cfg), fabric.profile_for(cfg, p), cfg.cloud,
                            cfg.fabric.webhook_timeout_seconds))
    return out


# ------------------------------------------------------------------ pods and gangs
@dataclass
class Pod:
    name: str
    template: dict[str, Any]           # {"metadata": {...}, "spec": {...}}
    extra_shm: float = 0.0
    part: str = ""                     # the gang's part it belongs to (a Grove scaling group or clique)
    weight: int = 1                    # counted objects (too large to simulate): how many pods alike it stands for

    @property
    def spec(self) -> dict[str, Any]:
        return self.template.get("spec") or {}

    @property
    def labels(self) -> dict[str, str]:
        return {str(k): str(v) for k, v in _dict(_dict(self.template.get("metadata")).get("labels")).items()}


@dataclass
class Gang:
    name: str                          # "llama-405b", "r1-disagg prefill", "train (job)"
    owner: str                         # "LeaderWorkerSet multinode/llama-405b"
    kind: str                          # service | batch
    pods: list[Pod]
    whole: bool = True                 # all-or-nothing (False: pods are independent)
    daemon: bool = False               # one pod per matching node

    @property
    def detail(self) -> str:
        """What the pods are when the gang has parts, e.g. "prefill 2 + decode 2"."""
        parts: dict[str, int] = {}
        for p in self.pods:
            parts[p.part] = parts.get(p.part, 0) + 1
        return " + ".join(f"{k} {v}" for k, v in parts.items()) if len(parts) > 1 else ""


def _t(meta: Any, spec: Any) -> dict[str, Any]:
    return {"metadata": meta if isinstance(meta, dict) else {}, "spec": spec if isinstance(spec, dict) else {}}


# Hostile counts (parallelism: 1000000000000) must not make the simulation enumerate them (placing n pods with
# anti-affinity is quadratic in the pods per node): one count may be at most MAX_COUNT and one object may make
# at most MAX_PODS_PER_OBJECT pods (nested counts: replicas x size). Past either, the object is
# not simulated pod by pod but counted (`counted_of`: one weighted pod per template and count), and decided by
# arithmetic: its pods x GPUs against the pools it selects. Placement never passes an object it did not place:
# a counted object is a finding either way (more GPUs than the pool: refused; else: not proven).
MAX_PODS_PER_OBJECT = 2_000
MAX_COUNT = MAX_PODS_PER_OBJECT
MAX_COUNTED_PODS = 20_000              # counting: weighted pods and loop steps at most (past it: not counted either)
_budget = [MAX_PODS_PER_OBJECT]
_counting = [False]                    # counted_of is reading: _pods makes one weighted pod, _spend is free
_capped = [False]                      # counting: a count above MAX_COUNT was read as MAX_COUNT (a lower bound)


class _TooManyPods(Exception):
    pass


_UNREAD = -(1 << 100)


def _int(v: Any, default: int, makes_pods: bool = True) -> int:
    """A count read from the object; a count of pods above MAX_COUNT makes the object counted (_TooManyPods), a
    floor (minAvailable: it makes no pods) is only capped."""
    if isinstance(v, bool):
        return default
    n: int | None = None
    if isinstance(v, int):
        n = v
    elif isinstance(v, str) and v.strip().isascii() and v.strip().isdigit():
        n = int(v) if len(v.strip()) < 12 else MAX_COUNT + 1
    elif isinstance(v, float) and v.is_integer():
        n = int(min(v, MAX_COUNT + 1))
    if n is None:
        return default
    if n > MAX_COUNT:
        if makes_pods and not _counting[0]:
            raise _TooManyPods()       # never simulate part of a count: the object is counted instead
        _capped[0] = _capped[0] or makes_pods
        return MAX_COUNT
    return n


def _spend(n: int) -> None:
    _budget[0] -= 1 if _counting[0] else max(1, n)
    if _budget[0] < 0:
        raise _TooManyPods()


def _pods(prefix: str, n: int, template: dict[str, Any], shm: float = 0.0, part: str = "") -> list[Pod]:
    if _counting[0]:
        _spend(1)
        return [Pod(f"{prefix}-x{n}", template, shm, part, weight=n)] if n > 0 else []
    _spend(n)
    return [Pod(f"{prefix}-{i}", template, shm, part) for i in range(max(0, n))]


def _lws(o: dict[str, Any], name: str, owner: str) -> list[Gang]:
    lwt = (o.get("spec") or {}).get("leaderWorkerTemplate") or {}
    size = _int(lwt.get("size"), 1)
    worker = lwt.get("workerTemplate") or {}
    leader = lwt.get("leaderTemplate") or worker
    out = []
    for r in range(_int((o.get("spec") or {}).get("replicas"), 1)):
        pods = _pods(f"{name}-{r}-leader", 1, leader) + _pods(f"{name}-{r}-worker", size - 1, worker)
        out.append(Gang(f"{name}" + (f" replica {r}" if r else ""), owner, SERVICE, pods))
    return out


def _grove(o: dict[str, Any], name: str, owner: str) -> list[Gang]:
    tmpl = (o.get("spec") or {}).get("template") or {}
    cliques = {c.get("name"): c for c in tmpl.get("cliques") or [] if isinstance(c, dict)}

    def clique_pods(c: dict[str, Any], prefix: str, n: int | None = None, part: str = "") -> list[Pod]:
        spec = c.get("spec") or {}
        t = _t({"labels": c.get("labels") or {}, "annotations": c.get("annotations") or {}}, spec.get("podSpec"))
        return _pods(f"{prefix}-{c.get('name')}", _int(spec.get("replicas"), 1) if n is None else n, t,
                     part=part or str(c.get("name")))

    out: list[Gang] = []
    grouped: set[str] = set()
    for rep in range(_int((o.get("spec") or {}).get("replicas"), 1)):
        base: list[Pod] = []
        extra: list[Gang] = []
        for sg in tmpl.get("podCliqueScalingGroups") or []:
            members = [cliques[n] for n in sg.get("cliqueNames") or [] if n in cliques]
            grouped.update(sg.get("cliqueNames") or [])
            reps = _int(sg.get("replicas"), 1)
            floor = min(reps, _int(sg.get("minAvailable"), 1, makes_pods=False))
            for i in range(reps):
                _spend(1)
                pods = [p for c in members
                        for p in clique_pods(c, f"{name}-{rep}-{sg.get('name')}-{i}", part=str(sg.get("name")))]
                if i < floor:
                    base += pods
                elif pods:
                    extra.append(Gang(f"{name} {sg.get('name')} replica {i}", owner, SERVICE, pods))
        for cname, c in cliques.items():
            if cname in grouped:
                continue
            spec = c.get("spec") or {}
            reps = _int(spec.get("replicas"), 1)
            floor = min(reps, _int(spec.get("minAvailable"), reps, makes_pods=False))
            base += clique_pods(c, f"{name}-{rep}", floor)
            extra += [Gang(f"{name} {cname} pod {i}", owner, SERVICE, [p], whole=False)
                      for i, p in enumerate(clique_pods(c, f"{name}-{rep}-extra", reps - floor))]
        out.append(Gang(name + (f" replica {rep}" if rep else ""), owner, SERVICE, base))
        out += extra
    return out


def _dgd(o: dict[str, Any], name: str, owner: str) -> list[Gang]:
    spec = o.get("spec") or {}
    comps: list[tuple[str, dict[str, Any], dict[str, Any], dict[str, Any]]] = []
    for i, c in enumerate(spec.get("components") or []):          # v1beta1
        if isinstance(c, dict):
            comps.append((str(c.get("name") or i), c, c.get("podTemplate") or {}, {}))
    for cname, svc in (spec.get("services") or {}).items():       # v1alpha1
        if not isinstance(svc, dict):
            continue
        eps = dict(svc.get("extraPodSpec") or {})
        main = dict(eps.pop("mainContainer", None) or {"name": "main"})
        res = dict(main.get("resources") or {})
        for part in ("limits", "requests"):                         # resources.limits.gpu -> nvidia.com/gpu
            g = ((svc.get("resources") or {}).get(part) or {}).get("gpu")
            if g is not None:
                res.setdefault(part, {})
                res[part] = {**res[part], GPU: g}
        main["resources"] = res
        eps["containers"] = [main] + list(eps.get("containers") or [])
        comps.append((str(cname), svc, {"metadata": svc.get("extraPodMetadata") or {}, "spec": eps}, {}))
    out = []
    for cname, c, tmpl, _ in comps:
        mn = c.get("multinode")
        nodes = _int(mn.get("nodeCount"), 2) if isinstance(mn, dict) else 1     # CRD default nodeCount 2
        shm = quantity(c.get("sharedMemorySize")) or 0.0
        for r in range(_int(c.get("replicas"), 1)):
            pods = _pods(f"{name}-{cname}-{r}", nodes, _t(tmpl.get("metadata"), tmpl.get("spec")), shm)
            out.append(Gang(f"{name} {cname}" + (f" replica {r}" if r else ""), owner, SERVICE, pods))
    return out


def _volcano(o: dict[str, Any], name: str, owner: str) -> list[Gang]:
    pods: list[Pod] = []
    for t in (o.get("spec") or {}).get("tasks") or []:
        pods += _pods(f"{name}-{t.get('name')}", _int(t.get("replicas"), 1), t.get("template") or {})
    return [Gang(name, owner, BATCH, pods)]


def _replica_specs(key: str, order: tuple[str, ...]) -> Callable[[dict[str, Any], str, str], list[Gang]]:
    def read(o: dict[str, Any], name: str, owner: str) -> list[Gang]:
        specs = (o.get("spec") or {}).get(key) or {}
        pods: list[Pod] = []
        for role in order:
            rs = specs.get(role)
            if isinstance(rs, dict):
                pods += _pods(f"{name}-{role.lower()}", _int(rs.get("replicas"), 1), rs.get("template") or {})
        return [Gang(name, owner, BATCH, pods)]
    return read


def _training_runtime(o: dict[str, Any], name: str, owner: str) -> list[Gang]:
    spec = _dict(o.get("spec"))
    n = _int(_dict(spec.get("mlPolicy")).get("numNodes"), 1)
    jobs = _dict(_dict(spec.get("template")).get("spec")).get("replicatedJobs")
    pods: list[Pod] = []
    for job in jobs if isinstance(jobs, list) else []:
        job = _dict(job)
        tmpl = _dict(job.get("template"))
        labels = _dict(_dict(tmpl.get("metadata")).get("labels"))
        # the trainer job (upstream's label; named `node` in the torch runtimes) runs numNodes pods
        if labels.get("trainer.kubeflow.org/trainjob-ancestor-step") == "trainer" or job.get("name") == "node":
            pods += _pods(f"{name}-{job.get('name', 'node')}", n, _dict(_dict(tmpl.get("spec")).get("template")))
    return [Gang(name, owner, BATCH, pods)] if pods else []


def _job(o: dict[str, Any], name: str, owner: str) -> list[Gang]:
    spec = o.get("spec") or {}
    n = _int(spec.get("parallelism"), _UNREAD)
    if n == _UNREAD:                   # completions only matter (and are only read) without a parallelism
        n = _int(spec.get("completions"), 1)
    pods = _pods(name, n, spec.get("template") or {})
    if spec.get("completionMode") == "Indexed":
        return [Gang(name, owner, BATCH, pods)]
    return [Gang(f"{name} pod {i}", owner, BATCH, [p], whole=False) for i, p in enumerate(pods)]


def _replicated(o: dict[str, Any], name: str, owner: str) -> list[Gang]:
    spec = o.get("spec") or {}
    pods = _pods(name, _int(spec.get("replicas"), 1), spec.get("template") or {})
    return [Gang(f"{name} pod {i}", owner, SERVICE, [p], whole=False) for i, p in enumerate(pods)]


def _daemonset(o: dict[str, Any], name: str, owner: str) -> list[Gang]:
    return [Gang(name, owner, SERVICE, _pods(name, 1, (o.get("spec") or {}).get("template") or {}), daemon=True)]


def _pod(o: dict[str, Any], name: str, owner: str) -> list[Gang]:
    return [Gang(name, owner, SERVICE, [Pod(name, _t(o.get("metadata"), o.get("spec")))], whole=False)]


READERS: dict[tuple[str, str], Callable[[dict[str, Any], str, str], list[Gang]]] = {
    ("leaderworkerset.x-k8s.io", "LeaderWorkerSet"): _lws,
    ("grove.io", "PodCliqueSet"): _grove,
    ("nvidia.com", "DynamoGraphDeployment"): _dgd,
    ("batch.volcano.sh", "Job"): _volcano,
    ("kubeflow.org", "MPIJob"): _replica_specs("mpiReplicaSpecs", ("Launcher", "Worker")),
    ("kubeflow.org", "PyTorchJob"): _replica_specs("pytorchReplicaSpecs", ("Master", "Worker")),
    ("trainer.kubeflow.org", "ClusterTrainingRuntime"): _training_runtime,
    ("trainer.kubeflow.org", "TrainingRuntime"): _training_runtime,
    ("batch", "Job"): _job,
    ("apps", "Deployment"): _replicated,
    ("apps", "StatefulSet"): _replicated,
    ("apps", "ReplicaSet"): _replicated,
    ("apps", "DaemonSet"): _daemonset,
    ("", "Pod"): _pod,
}


def gangs_of(obj: dict[str, Any]) -> list[Gang]:
    """Every gang (or single pod) an object runs; [] for objects that run no pods."""
    if not isinstance(obj, dict):
        return []
    group = str(obj.get("apiVersion") or "").rpartition("/")[0]
    reader = READERS.get((group, str(obj.get("kind") or "")))
    if reader is None:
        return []
    return _clean(_read(obj, reader, counting=False))


def _owner(obj: dict[str, Any]) -> tuple[str, str]:
    meta = _dict(obj.get("metadata"))
    name = str(meta.get("name") or obj.get("kind"))
    return name, f"{obj.get('kind')} {str(meta['namespace']) + '/' if meta.get('namespace') else ''}{name}"


def _read(obj: dict[str, Any], reader: Callable[[dict[str, Any], str, str], list[Gang]],
          counting: bool) -> list[Gang]:
    """The reader's gangs; [] for an object of the wrong shape or (not counting) one of too many pods."""
    name, owner = _owner(obj)
    _budget[0] = MAX_COUNTED_PODS if counting else MAX_PODS_PER_OBJECT
    _counting[0], _capped[0] = counting, False
    try:
        return reader(obj, name, owner)
    except _TooManyPods:
        if counting:
            raise
        return []
    except (AttributeError, TypeError, ValueError):
        # a field of the wrong type (a list where the CRD has an object...): the API server refuses such an
        # object, and the schema checks name the field; it runs no pods we can count
        return []
    finally:
        _counting[0] = False


@dataclass
class Counted:
    """An object of more than MAX_PODS_PER_OBJECT pods, read without enumerating them: its gangs hold one pod per
    template and count, each with the number of pods it stands for (Pod.weight)."""
    owner: str
    gangs: list[Gang]                  # [] when even counting took too many steps (MAX_COUNTED_PODS)
    at_least: bool                     # a count above MAX_COUNT was read as MAX_COUNT

    @property
    def pods(self) -> int:
        return sum(p.weight for g in self.gangs for p in g.pods)


def counted_of(obj: dict[str, Any]) -> Counted | None:
    """The object counted, when it makes too many pods to simulate one by one; None otherwise."""
    if not isinstance(obj, dict):
        return None
    reader = READERS.get((str(obj.get("apiVersion") or "").rpartition("/")[0], str(obj.get("kind") or "")))
    if reader is None:
        return None
    _budget[0] = MAX_PODS_PER_OBJECT
    try:
        reader(obj, *_owner(obj))
        return None                                 # simulated pod by pod (or unreadable)
    except _TooManyPods:
        pass
    except (AttributeError, TypeError, ValueError):
        return None
    try:
        gangs = _clean(_read(obj, reader, counting=True))
    except _TooManyPods:
        return Counted(_owner(obj)[1], [], True)
    return Counted(_owner(obj)[1], gangs, _capped[0])


def _clean(gangs: list[Gang]) -> list[Gang]:
    clean: dict[int, dict[str, Any]] = {}          # one checked copy per template: pods keep sharing it
    for g in gangs:
        for p in g.pods:
            t = p.template if isinstance(p.template, dict) else {}
            if id(p.template) not in clean:
                clean[id(p.template)] = {"metadata": _dict(t.get("metadata")), "spec": _dict(t.get("spec"))}
            p.template = clean[id(p.template)]
    return gangs


# ------------------------------------------------------------------ where a pod may go
def _expr_holds(e: dict[str, Any], labels: dict[str, str]) -> bool:
    key, op, values = str(e.get("key")), e.get("operator"), [str(v) for v in e.get("values") or []]
    if op == "In":
        return labels.get(key) in values
    if op == "NotIn":
        return labels.get(key) not in values
    if op == "Exists":
        return key in labels
    if op == "DoesNotExist":
        return key not in labels
    if op in ("Gt", "Lt") and values and str(labels.get(key, "")).lstrip("-").isdigit():
        return int(labels[key]) > int(values[0]) if op == "Gt" else int(labels[key]) < int(values[0])
    return False


def _node_affinity_terms(spec: dict[str, Any]) -> list[dict[str, Any]]:
    return _list(_dict(_dict(_dict(spec.get("affinity")).get("nodeAffinity"))
                       .get("requiredDuringSchedulingIgnoredDuringExecution")).get("nodeSelectorTerms"))


def _labels_match(spec: dict[str, Any], labels: dict[str, str]) -> bool:
    """nodeSelector (all of it) and the required node affinity (any term, every expression of it)."""
    if not all(labels.get(str(k)) == str(v) for k, v in _dict(spec.get("nodeSelector")).items()):
        return False
    terms = [t for t in _node_affinity_terms(spec) if isinstance(t, dict)]
    return not terms or any(all(_expr_holds(e, labels) for e in _list(t.get("matchExpressions")) if isinstance(e, dict))
                            for t in terms)


def _tolerates(tolerations: list[dict[str, Any]], taint: dict[str, Any]) -> bool:
    for t in tolerations or []:
        if not isinstance(t, dict):
            continue
        if t.get("effect") and t.get("effect") != taint.get("effect"):
            continue
        if t.get("operator") == "Exists" and (not t.get("key") or t.get("key") == taint.get("key")):
            return True
        if t.get("key") == taint.get("key") and str(t.get("value", "")) == str(taint.get("value", "")):
            return True
    return False


def selects(spec: dict[str, Any], node: Node) -> bool:
    if not _labels_match(spec, node.labels):
        return False
    return all(_tolerates(_list(spec.get("tolerations")), t) for t in node.taints
               if t.get("effect") in ("NoSchedule", "NoExecute"))


def _anti_affinity_blocks(spec: dict[str, Any], labels: dict[str, str], node: Node) -> bool:
    """Required pod anti-affinity on the host: the node already runs a pod its selector matches (or the
    pod would be matched by a term of a pod already there: the scheduler checks both ways, we check ours)."""
    terms = _list(_dict(_dict(spec.get("affinity")).get("podAntiAffinity")).get(
        "requiredDuringSchedulingIgnoredDuringExecution"))
    for term in terms:
        if not isinstance(term, dict) or term.get("topologyKey") != HOSTNAME:
            continue
        sel = _dict(_dict(term.get("labelSelector")).get("matchLabels"))
        exprs = [e for e in _list(_dict(term.get("labelSelector")).get("matchExpressions")) if isinstance(e, dict)]
        for _, other in node.pods:
            if all(other.get(k) == str(v) for k, v in sel.items()) and all(_expr_matches(e, other) for e in exprs):
                return True
    return False


def _expr_matches(expr: dict[str, Any], labels: dict[str, str]) -> bool:
    """One matchExpressions entry against a pod's labels: In and Exists (other operators never match here)."""
    key = expr.get("key")
    if not isinstance(key, str):
        return False
    if expr.get("operator") == "In":
        return labels.get(key) in (expr.get("values") or [])
    return expr.get("operator") == "Exists" and key in labels


def _fits(req: dict[str, float], node: Node) -> bool:
    """Every request within what the node has free; resources the node's capacity does not list (a fabric
    device of another pool, hugepages, cpu / memory of a machine without those facts) are not judged here."""
    return all(node.free(r) + 1e-9 >= v for r, v in req.items())


# ------------------------------------------------------------------ the simulation
@dataclass
class PodPlan:
    pod: Pod
    requests: dict[str, float]
    candidates: list[Node]


@dataclass
class Outcome:
    gang: Gang
    placed: dict[str, str] = field(default_factory=dict)      # pod name -> node name
    ok: bool = True
    pools: list[str] = field(default_factory=list)             # pools its pods may land on
    alone_ok: bool = True                                      # fits an empty cluster on its own
    # a batch job placed beside the services: what it adds, per node (the peak of its pools: peak_use)
    added: dict[str, dict[str, float]] = field(default_factory=dict)


def _names_host(spec: dict[str, Any]) -> bool:
    """The pod spec selects nodes by their host name label (nodeSelector or a required node-affinity term)."""
    if HOSTNAME in _dict(spec.get("nodeSelector")):
        return True
    return any(isinstance(e, dict) and e.get("key") == HOSTNAME for t in _node_affinity_terms(spec)
               if isinstance(t, dict) for e in _list(t.get("matchExpressions")))


def _state(n: Node) -> tuple[Any, ...]:
    """What placement reads of a node besides its labels and taints (which the candidate list already judged):
    two nodes of one state fit the same pods, block the same anti-affinity and have the same free GPUs. An unused
    node's state is its capacity dict (build_nodes gives the nodes of one pool the same one; other nodes with
    equal capacities are then classes of their own, which changes no choice, only how many nodes are looked at)."""
    if not n.pods and not n.used:
        return (id(n.capacity),)
    return (tuple(sorted(n.capacity.items())), tuple(sorted(n.used.items())),
            tuple(tuple(sorted(labels.items())) for _, labels in n.pods))


class _Classes:
    """One candidate list of a gang's pods, its nodes grouped by state: state -> heap of positions in the list
    (stale entries, of nodes that have since changed state, are dropped when they reach the top)."""

    def __init__(self, nodes: list[Node]):
        self.nodes = nodes
        self.position = {id(n): i for i, n in enumerate(nodes)}
        self.heaps: dict[tuple[Any, ...], list[int]] = {}

    def fill(self, state: dict[int, tuple[Any, ...]]) -> None:
        # once per gang over every candidate node (4,096 nodes x 800 gang placements in the largest bench stack):
        # _state's unused-node case and the heap lookup inlined
        heaps = self.heaps
        for i, n in enumerate(self.nodes):
            key = id(n)
            s = state.get(key)
            if s is None:
                s = state[key] = (id(n.capacity),) if not n.pods and not n.used else _state(n)
            heap = heaps.get(s)
            if heap is None:
                heaps[s] = [i]                            # positions ascending: already a heap
            else:
                heap.append(i)

    def moved(self, node: Node, state: dict[int, tuple[Any, ...]]) -> None:
        i = self.position.get(id(node))
        if i is not None:
            heapq.heappush(self.heaps.setdefault(state[id(node)], []), i)

    def best(self, pl: PodPlan, state: dict[int, tuple[Any, ...]]) -> Node | None:
        """The node the scan over the whole list would choose: the fewest free GPUs that still hold the pod, the
        earliest of those; only the first node of each state is looked at."""
        best: Node | None = None
        best_at = -1
        for s, heap in list(self.heaps.items()):
            while heap and state[id(self.nodes[heap[0]])] != s:
                heapq.heappop(heap)
            if not heap:
                del self.heaps[s]
                continue
            n = self.nodes[heap[0]]
            if not _fits(pl.requests, n) or _anti_affinity_blocks(pl.pod.spec, pl.pod.labels, n):
                continue
            if best is None or n.free(GPU) < best.free(GPU) or (n.free(GPU) == best.free(GPU) and heap[0] < best_at):
                best, best_at = n, heap[0]
        return best


class Simulation:
    def __init__(self, pools: list[PoolSpec]):
        self.pools = pools
        self.by_name = {p.name: p for p in pools}
        self.nodes, self.estimates = build_nodes(pools)
        self._effective: dict[tuple[int, str], dict[str, Any]] = {}
        self._requests: dict[tuple[Any, ...], dict[str, float]] = {}
        self._selects: dict[tuple[int, str], bool] = {}     # (id of a pod spec, node name): node labels never change
        # (label, value) -> names of the nodes carrying it, so a pod's nodeSelector narrows the nodes before the
        # full check: without it every pod was checked against every node of every pool (a workload x pool term)
        self._label_index: dict[tuple[str, str], set[str]] = {}
        for n in self.nodes:
            for k, v in n.labels.items():
                self._label_index.setdefault((str(k), str(v)), set()).add(n.name)
        self._preselected: dict[tuple[tuple[str, str], ...], set[str] | None] = {}
        self._on_all: dict[int, tuple[dict[str, Any], list[Node]]] = {}     # id(spec) -> (spec, candidates)
        # runs of consecutive nodes alike but for their host name (same other labels, same taints): every pool of
        # build_nodes is one run
        self._runs: list[tuple[int, int]] = []
        last: Any = None
        for i, n in enumerate(self.nodes):
            alike = (sorted((str(k), str(v)) for k, v in n.labels.items() if k != HOSTNAME), repr(n.taints))
            if alike != last:
                self._runs.append((i, i + 1))
                last = alike
            else:
                self._runs[-1] = (self._runs[-1][0], i + 1)

    # effective pods: the fabric policy of the pool the pod lands on
    def effective(self, tmpl: dict[str, Any], pool: str) -> dict[str, Any]:
        from . import pools as mpools
        key = (id(tmpl), pool)
        if key not in self._effective:
            meta = _dict(tmpl.get("metadata"))
            labelled = mpools.asks_for_fabric(meta.get("labels"), meta.get("annotations"))
            prof = self.by_name[pool].profile
            out = tmpl
            if labelled and prof is not None and getattr(prof, "enabled", False):
                from .manifests.effective_pod import apply_profile_to_template
                try:
                    out = apply_profile_to_template(tmpl, prof, self.by_name[pool].webhook_timeout_seconds)
                except (AttributeError, TypeError, ValueError):
                    out = tmpl     # a malformed pod (a list for a name...): the schema checks name the field

            self._effective[key] = out
        return self._effective[key]

    def requests(self, tmpl: dict[str, Any], pool: str | None, extra_shm: float) -> dict[str, float]:
        """The effective pod's requests, memoised on what they depend on: the pool (its fabric policy), the
        fabric label / annotation that policy matches, and the containers' resources, volumes and overhead.
        (Templates of many workloads differ only in names, commands and env: one policy evaluation serves
        them all.)"""
        import json

        from . import pools as mpools
        meta, spec = _dict(tmpl.get("metadata")), _dict(tmpl.get("spec"))
        key = (pool, extra_shm, str(_dict(meta.get("labels")).get(mpools.FABRIC_POD_LABEL)),
               str(_dict(meta.get("annotations")).get(mpools.NEMO_ANNOTATION)),
               json.dumps([[(c.get("name"), c.get("resources"), c.get("restartPolicy"))
                            for c in _list(spec.get(k)) if isinstance(c, dict)]
                           for k in ("containers", "initContainers")]
                          + [spec.get("volumes"), spec.get("overhead")], sort_keys=True, default=str))
        if key not in self._requests:
            eff = self.effective(tmpl, pool) if pool else tmpl
            mib = self.estimates[pool].memory_mib if pool in self.estimates else None
            self._requests[key] = pod_requests(_dict(eff.get("spec")), extra_shm,
                                               mib * 2 ** 20 if mib is not None else None)
        return self._requests[key]

    def selects(self, spec: dict[str, Any], node: Node) -> bool:
        key = (id(spec), node.name)
        if key not in self._selects:
            self._selects[key] = selects(spec, node)
        return self._selects[key]

    def _preselect(self, spec: dict[str, Any]) -> set[str] | None:
        """Names of the nodes whose labels hold the spec's whole nodeSelector (a necessary condition of
        `selects`, read from the label index); None when the spec has no nodeSelector."""
        key = tuple(sorted((str(k), str(v)) for k, v in _dict(spec.get("nodeSelector")).items()))
        if key not in self._preselected:
            names: set[str] | None = None
            for pair in key:
                have = self._label_index.get(pair, set())
                names = set(have) if names is None else names & have
            self._preselected[key] = names
        return self._preselected[key]

    def candidates(self, spec: dict[str, Any], nodes: list[Node]) -> list[Node]:
        """The nodes of `nodes` (in their order) the pod spec selects: labels, affinity, taints."""
        allowed = self._preselect(spec)
        if allowed is None:
            return [n for n in nodes if self.selects(spec, n)]
        return [n for n in nodes if n.name in allowed and self.selects(spec, n)]

    def reach(self, gang: Gang) -> list[Node]:
        """The simulation's nodes any pod of the gang selects (in node order): the only nodes placing it can use."""
        names = {n.name for p in gang.pods for n in self.candidates(p.spec, self.nodes)}
        return [n for n in self.nodes if n.name in names]

    def plan_pod(self, pod: Pod, nodes: list[Node]) -> PodPlan:
        cands = self.candidates(pod.spec, nodes)
        pool = cands[0].pool if cands else None
        return PodPlan(pod, dict(self.requests(pod.template, pool, pod.extra_shm)), cands)

    def _all_candidates(self, spec: dict[str, Any]) -> list[Node]:
        """candidates(spec, self.nodes), memoised on the spec (the nodes' labels and taints never change). A spec
        that does not name the host label selects all the nodes of one run alike (_runs), so one node per run is
        judged, not every node (a pool of 256 nodes is one run)."""
        key = id(spec)
        got = self._on_all.get(key)
        if got is None or got[0] is not spec:
            if _names_host(spec):
                cands = self.candidates(spec, self.nodes)
            else:
                cands = [n for start, end in self._runs if self.selects(spec, self.nodes[start])
                         for n in self.nodes[start:end]]
            got = self._on_all[key] = (spec, cands)
        return got[1]

    def place(self, gang: Gang, nodes: list[Node], keep: bool = True) -> Outcome:
        """Place one gang on `nodes` (mutated only when the whole gang fits, or not at all with keep=False).

        Counts, not scans: nodes in the same state (capacity, use, and the labels of the pods they run, in order)
        answer every question placement asks alike (fits, anti-affinity, free GPUs), so of each such class only
        its first node in candidate order can be the best fit (ties go to the earlier node). Each pod looks at one
        node per class (_Classes): a 256-node gang on an empty pool is 256 looks, not 256 x 256 fit checks; the
        choice, and so placement.json, is the one the scan over every candidate node made."""
        plans: list[PodPlan] = []
        seen: dict[tuple[int, int], PodPlan] = {}
        for p in gang.pods:
            key = (id(p.template), id(p.spec))
            like = seen.get(key)
            if like is None or like.pod.extra_shm != p.extra_shm:
                cands = self._all_candidates(p.spec) if nodes is self.nodes else self.candidates(p.spec, nodes)
                pool = cands[0].pool if cands else None
                like = seen[key] = PodPlan(p, dict(self.requests(p.template, pool, p.extra_shm)), cands)
            plans.append(PodPlan(p, like.requests, like.candidates))
        lists = {id(pl.candidates): pl.candidates for pl in plans}
        out = Outcome(gang, pools=sorted({n.pool for c in lists.values() for n in c}))
        classes = {k: _Classes(c) for k, c in lists.items()}
        state: dict[int, tuple[Any, ...]] = {}
        for c in classes.values():
            c.fill(state)
        saved: dict[int, tuple[Node, dict[str, float], list[tuple[str, dict[str, str]]]]] = {}
        order = sorted(plans, key=lambda pl: -pl.requests.get(GPU, 0.0))
        for pl in order:
            best = classes[id(pl.candidates)].best(pl, state)
            if best is None:
                out.ok = False
                break
            if id(best) not in saved:
                saved[id(best)] = (best, dict(best.used), list(best.pods))
            for r, v in pl.requests.items():
                best.used[r] = best.used.get(r, 0.0) + v
            best.pods.append((pl.pod.name, pl.pod.labels))
            out.placed[pl.pod.name] = best.name
            state[id(best)] = _state(best)
            for c in classes.values():
                c.moved(best, state)
        if not keep and out.ok:
            # what the gang adds per node (a batch job beside the services: placement.pool_use's peak)
            added = {n.name: {r: v - used.get(r, 0.0) for r, v in n.used.items() if v - used.get(r, 0.0) > 1e-9}
                     for n, used, _pods in saved.values()}
            out.added = {k: v for k, v in added.items() if v}
        if (not out.ok and gang.whole) or not keep:
            for n, used, pods in saved.values():
                n.used, n.pods = used, pods
            if not out.ok and gang.whole:
                out.placed = {}
        return out

    def place_daemon(self, gang: Gang, nodes: list[Node]) -> Outcome:
        pod = gang.pods[0]
        out = Outcome(gang)
        for n in nodes:
            if not selects(pod.spec, n):
                continue
            req = self.requests(pod.template, n.pool, pod.extra_shm)
            out.pools = sorted(set(out.pools) | {n.pool})
            if _fits(req, n):
                for r, v in req.items():
                    n.used[r] = n.used.get(r, 0.0) + v
                n.pods.append((f"{pod.name}-{n.name}", pod.labels))
                out.placed[f"{pod.name}-{n.name}"] = n.name
            else:
                out.ok = False
        return out


def _demand(sim: Simulation, g: Gang) -> float:
    return sum(pod_requests(p.spec).get(GPU, 0.0) for p in g.pods)


def _pinned(sim: Simulation, pod: Pod) -> bool:
    """A pod takes part when it chooses its nodes (a node selector or affinity, or GPUs) and one of the
    stack's nodes takes it. The rest run on other nodes (system pools: not ours to size), or select no pool
    at all (the rule workload-matches-node-pool reports those)."""
    chooses = bool(pod.spec.get("nodeSelector") or _node_affinity_terms(pod.spec) or pod_requests(pod.spec).get(GPU))
    return chooses and bool(sim._all_candidates(pod.spec))


# Finding kinds: a shortage of nodes when the gangs share a pool; one gang larger than its pool; a pod larger
# than any node; a DaemonSet pod that does not fit a node it selects.
SHORTAGE, GANG_TOO_LARGE, POD_TOO_LARGE, DAEMON = "shortage", "gang-larger-than-pool", "pod-larger-than-node", "daemon"
COUNTED = "counted-not-simulated"     # an object too large to simulate: decided by arithmetic, never passed


@dataclass(frozen=True)
class Finding:
    owner: str                               # the Kubernetes object, e.g. "LeaderWorkerSet ns/name"
    message: str
    kind: str = SHORTAGE
    resources: tuple[str, ...] = ()          # pod-larger-than-node: the resources a pod asks too much of


@dataclass
class Result:
    pools: list[PoolSpec]
    nodes: list[Node]                        # after services
    estimates: dict[str, alloc.Allocatable]
    services: list[Outcome]
    batch: list[Outcome]
    unpinned: list[str]
    findings: list[Finding]
    counted: list[Counted] = field(default_factory=list)     # objects decided by arithmetic (counted_of)

    @property
    def fits(self) -> bool:
        return not self.findings


def _copy_nodes(nodes: list[Node]) -> list[Node]:
    return [Node(n.name, n.pool, n.labels, n.taints, n.capacity, dict(n.used), list(n.pods)) for n in nodes]


def _label(o: Outcome) -> str:
    n = len(o.gang.pods)
    return f"{o.gang.name} ({o.gang.detail})" if o.gang.detail and " + " in o.gang.detail else f"{o.gang.name} ({n})"


def _joined(labels: list[str], most: int = 8) -> str:
    """'a (2) + b (2)', with at most `most` names (a stack of hundreds of replicas gets a readable message)."""
    if len(labels) <= most:
        return " + ".join(labels)
    return " + ".join(labels[:most]) + f" + {len(labels) - most} more"


def _nodes_needed(sim: Simulation, gangs: list[Gang], pool: PoolSpec) -> int:
    """Nodes of `pool` the gangs take when the pool is as large as they need (same packing)."""
    big = PoolSpec(pool.name, sum(len(g.pods) for g in gangs) + 1, pool.machine, pool.labels, pool.taints,
                   pool.profile, pool.cloud, pool.webhook_timeout_seconds)
    s2 = Simulation([big])
    s2._effective, s2._requests = sim._effective, sim._requests
    for g in sorted(gangs, key=lambda g: (g.daemon, -_demand(sim, g))):
        if g.daemon:
            continue
        # every node of `big` is alike, so the used nodes plus as many empty ones as the gang has pods offer
        # the same choices as all of them (scanning thousands of empty nodes per gang made this quadratic)
        used = [n for n in s2.nodes if n.pods]
        fresh = [n for n in s2.nodes if not n.pods][:len(g.pods)]
        s2.place(g, used + fresh)
    return sum(1 for n in s2.nodes if n.pods)


def _usage(nodes: list[Node], pool: str) -> dict[str, tuple[float, float | None]]:
    """resource -> (used, capacity or None when unknown) over the pool's nodes."""
    mine = [n for n in nodes if n.pool == pool]
    keys = sorted({k for n in mine for k in list(n.capacity) + list(n.used)})
    out = {}
    for k in keys:
        used = sum(n.used.get(k, 0.0) for n in mine)
        cap = sum(n.capacity[k] for n in mine) if all(k in n.capacity for n in mine) and mine else None
        out[k] = (used, cap)
    return out


def simulate(objects: Iterable[dict[str, Any]], pools: list[PoolSpec]) -> Result:
    sim = Simulation(pools)
    gangs: list[Gang] = []
    unpinned: list[str] = []
    counted: list[Counted] = []
    every: list[Gang] = []
    for obj in objects:
        got = gangs_of(obj)
        c = None if got else counted_of(obj)
        if c is not None:
            counted.append(c)
        every += got
    for g in every:
        keep = [p for p in g.pods if _pinned(sim, p)]
        if len(keep) < len(g.pods):
            unpinned.append(f"{g.name} ({len(g.pods) - len(keep)} pod{'s' if len(g.pods) - len(keep) != 1 else ''})")
        if keep:
            g.pods = keep
            gangs.append(g)
    services = [g for g in gangs if g.kind == SERVICE]
    batch = [g for g in gangs if g.kind == BATCH]
    findings: list[Finding] = []

    # Which gangs could never fit, even alone on empty nodes (reported once, not as a shortage).
    alone: dict[int, bool] = {}
    for g in gangs:
        if not g.daemon:
            # on the empty nodes, undone after (copying the nodes it can reach per gang was a gang x node term)
            alone[id(g)] = sim.place(g, sim.nodes, keep=False).ok

    outcomes: list[Outcome] = []
    for g in [g for g in services if g.daemon]:
        outcomes.append(sim.place_daemon(g, sim.nodes))
    for g in sorted([g for g in services if not g.daemon], key=lambda g: -_demand(sim, g)):
        o = sim.place(g, sim.nodes)
        o.alone_ok = alone[id(g)]
        outcomes.append(o)
    order = {id(g): i for i, g in enumerate(services)}
    outcomes.sort(key=lambda o: order[id(o.gang)])

    failed = [o for o in outcomes if not o.ok and not o.gang.daemon]
    for pool in sorted({o.pools[0] for o in failed if o.pools}):
        spec = sim.by_name[pool]
        here = [o for o in outcomes if o.pools[:1] == [pool] and not o.gang.daemon]
        too_big = [o for o in here if not o.ok and not o.alone_ok
                   and _nodes_needed(sim, [o.gang], spec) <= spec.node_count]     # a pod larger than any node
        findings += [_alone_finding(sim, o) for o in too_big]
        on_pool = [o for o in here if o not in too_big]
        if len(on_pool) == 1:
            if not on_pool[0].ok:
                findings.append(_alone_finding(sim, on_pool[0]))
            continue
        if all(o.ok for o in on_pool):
            continue
        need = _nodes_needed(sim, [o.gang for o in on_pool], spec)
        parts = _joined([_label(o) for o in on_pool])
        gpu_need = sum(_demand(sim, o.gang) for o in on_pool)
        add = max(1, need - spec.node_count)
        findings.append(Finding(next(o for o in on_pool if not o.ok).gang.owner, (
            f"pool {pool}: {spec.node_count} nodes of {spec.machine.name} "
            f"({spec.node_count * spec.machine.gpus} GPUs); "
            f"the long-running services {parts} need {need} nodes ({gpu_need:.0f} GPUs) at once; add {add} "
            f"node{'s' if add != 1 else ''} (nodeCount {spec.node_count + add}) or move a workload to another pool")))
    for o in outcomes:
        if o.gang.daemon and not o.ok:
            findings.append(Finding(o.gang.owner, f"{o.gang.owner}: its pod does not fit on every node it selects "
                                                  f"(pools {', '.join(o.pools)}); lower its requests", DAEMON))

    batch_out: list[Outcome] = []
    for g in batch:
        o = sim.place(g, sim.nodes, keep=False)           # beside the services, undone after
        o.alone_ok = alone[id(g)]
        batch_out.append(o)
        if o.ok:
            continue
        if not o.alone_ok:
            findings.append(_alone_finding(sim, o))
            continue
        pool = o.pools[0] if o.pools else "?"
        spec = sim.by_name[pool]
        free_nodes = [n for n in sim.nodes if n.pool == pool and not n.pods]
        gpus_free = sum(n.free(GPU) for n in sim.nodes if n.pool == pool)
        beside = [x for x in outcomes if x.pools[:1] == [pool] and not x.gang.daemon]
        busy = _joined([_label(x) for x in beside]) or "nothing"
        need = _nodes_needed(sim, [g], spec)
        total = _nodes_needed(sim, [x.gang for x in beside] + [g], spec)
        add = max(1, total - spec.node_count)
        findings.append(Finding(g.owner, (
            f"pool {pool}: {spec.node_count} nodes of {spec.machine.name}; the services {busy} leave "
            f"{len(free_nodes)} free nodes ({gpus_free:.0f} GPUs), but batch job {_label(o)} needs {need} nodes "
            f"({_demand(sim, g):.0f} GPUs) beside them; add {add} node{'s' if add != 1 else ''} "
            f"(nodeCount {spec.node_count + add}) or run it on another pool")))
    for c in counted:
        f = _counted_finding(sim, c)
        if f is None:
            unpinned.append(f"{c.owner} ({'at least ' if c.at_least else ''}{c.pods} pods, counted)")
        else:
            findings.append(f)
    return Result(pools, sim.nodes, sim.estimates, outcomes, batch_out, unpinned, findings,
                  [c for c in counted])


def _counted_finding(sim: Simulation, c: Counted) -> Finding | None:
    """Count arithmetic for an object too large to simulate: its pods x GPUs (each pod as the fabric policy of
    its pool makes it) against the GPUs of the pools its pods select. More than the pools have: refused. Else
    still a finding: a count cannot show that cpu, memory, devices and anti-affinity fit. None when its pods
    select none of the stack's nodes (reported with the pods not on the stack's pools)."""
    reach: dict[str, Node] = {}
    need = 0.0
    for g in c.gangs:
        for p in g.pods:
            cands = sim.candidates(p.spec, sim.nodes)
            reach.update((n.name, n) for n in cands)
            pool = cands[0].pool if cands else None
            need += p.weight * sim.requests(p.template, pool, p.extra_shm).get(GPU, 0.0)
    if not c.gangs:
        return Finding(c.owner, f"{c.owner} makes more pods than can be counted one template and count at a time "
                                f"({MAX_COUNTED_PODS} steps): not simulated, not counted, so placement is not proven; "
                                f"split it into objects of at most {MAX_PODS_PER_OBJECT} pods", COUNTED)
    if not reach:
        return None
    names = sorted({n.pool for n in reach.values()})
    specs = [sim.by_name[x] for x in names]
    supply = sum(s.node_count * s.machine.gpus for s in specs)
    nodes = sum(s.node_count for s in specs)
    whole = [sum(p.weight for p in g.pods) for g in c.gangs if g.whole]
    gangs = len(whole) + sum(p.weight for g in c.gangs if not g.whole for p in g.pods)
    at = "at least " if c.at_least else ""
    shape = f" in {at}{gangs} gangs of up to {max(whole)} pods" if whole else ""
    where = (f"pool{'s' if len(names) > 1 else ''} {', '.join(names)}: {nodes} nodes of "
             f"{', '.join(sorted({s.machine.name for s in specs}))} ({supply} GPUs)")
    head = f"{where}; {c.owner} makes {at}{c.pods} pods{shape} asking {at}{need:.0f} GPUs"
    how = (f"decided by count arithmetic, pods x GPUs against the pool: an object of over {MAX_PODS_PER_OBJECT} "
           f"pods is not simulated pod by pod")
    if need > supply:
        per = max(1, specs[0].machine.gpus)
        add = math.ceil((need - supply) / per)
        return Finding(c.owner, f"{head}, more than the pool has ({how}); lower its replicas or add about {add} "
                                f"nodes of {specs[0].machine.name}", COUNTED)
    return Finding(c.owner, f"{head}; the GPUs suffice by count, but placement is not proven ({how}, and a count "
                            f"cannot show that cpu, memory, fabric devices and anti-affinity fit); split it into "
                            f"objects of at most {MAX_PODS_PER_OBJECT} pods", COUNTED)


def _alone_finding(sim: Simulation, o: Outcome) -> Finding:
    pool = o.pools[0] if o.pools else "?"
    spec = sim.by_name[pool]
    need = _nodes_needed(sim, [o.gang], spec)
    if need > spec.node_count:
        add = need - spec.node_count
        return Finding(o.gang.owner, (
            f"pool {pool}: {spec.node_count} nodes of {spec.machine.name}; one gang {_label(o)} needs {need} nodes "
            f"at once, so it can never be scheduled whole; add {add} node{'s' if add != 1 else ''} "
            f"(nodeCount {need}) or shrink the gang"), GANG_TOO_LARGE)
    plans = [sim.plan_pod(p, sim.nodes) for p in o.gang.pods]
    cap = spec.capacity()[0]
    over: list[str] = []
    names: tuple[str, ...] = ()
    for pl in plans:
        big = [(r, v) for r, v in pl.requests.items() if r in cap and v > cap[r] + 1e-9]
        if big:
            over = [f"{r} {_fmt(r, v)} > {_fmt(r, cap[r])}" for r, v in big]
            names = tuple(r for r, _ in big)
            break
    why = f": one pod asks {', '.join(over)} (allocatable per node)" if over else ""
    return Finding(o.gang.owner, (
        f"pool {pool}: {spec.node_count} nodes of {spec.machine.name}; {_label(o)} cannot be placed even on empty "
        f"nodes{why}; lower its requests or use a larger machine"), POD_TOO_LARGE, names)


def _fmt(r: str, v: float) -> str:
    if r in (MEMORY, "shm") or r.startswith("hugepages"):
        return _gib(v)
    if r == CPU:
        return f"{v:g}"
    return f"{v:.0f}"


@dataclass(frozen=True)
class PoolUse:
    """One pool's GPUs and nodes in use: by the long-running services together, and at peak (the services plus the
    batch job that adds the most GPUs, the contract upgrades.nodes_in_use also counts), with every workload's
    share (issue 46: the summary and placement.json say the same numbers)."""
    pool: str
    nodes: int
    gpus: float
    service_nodes: int
    service_gpus: float
    peak_nodes: int
    peak_gpus: float
    peak_batch: str | None                 # the batch job counted at peak, None when none runs on the pool
    by_workload: tuple[tuple[str, str, int, float], ...]   # (gang, service | batch, nodes, GPUs)


def _gpu_of(n: Node) -> float:
    return n.capacity.get(GPU, 0.0)


def pool_use(res: Result) -> list[PoolUse]:
    out = []
    for p in res.pools:
        mine = {n.name: n for n in res.nodes if n.pool == p.name}
        share: list[tuple[str, str, int, float]] = []
        service_nodes: set[str] = set()
        service_gpus = 0.0
        for o in res.services:
            if o.gang.daemon or not o.ok:
                continue
            here = {node for node in o.placed.values() if node in mine}
            if not here:
                continue
            gpus = sum(pod_requests(pod.spec).get(GPU, 0.0) for pod in o.gang.pods if o.placed.get(pod.name) in mine)
            service_nodes |= here
            service_gpus += gpus
            share.append((o.gang.name, "service", len(here), gpus))
        peak_extra_nodes, peak_extra_gpus, peak_batch = 0, 0.0, None
        for o in res.batch:
            here = {node for node in o.added if node in mine}
            if not o.ok or not here:
                continue
            gpus = sum(o.added[node].get(GPU, 0.0) for node in here)
            share.append((o.gang.name, "batch", len(here), gpus))
            new_nodes = len(here - service_nodes)
            if (gpus, new_nodes) > (peak_extra_gpus, peak_extra_nodes):
                peak_extra_nodes, peak_extra_gpus, peak_batch = new_nodes, gpus, o.gang.name
        total_gpus = sum(_gpu_of(n) for n in mine.values())
        out.append(PoolUse(p.name, p.node_count, total_gpus, len(service_nodes), service_gpus,
                           len(service_nodes) + peak_extra_nodes, service_gpus + peak_extra_gpus, peak_batch,
                           tuple(share)))
    return out


def _use_json(u: PoolUse) -> dict[str, Any]:
    return {"nodes": u.nodes, "gpus": u.gpus,
            "services": {"nodes": u.service_nodes, "gpus": u.service_gpus},
            "peak": {"nodes": u.peak_nodes, "gpus": u.peak_gpus, "withBatch": u.peak_batch},
            "workloads": [{"gang": g, "kind": k, "nodes": n, "gpus": x} for g, k, n, x in u.by_workload]}


def use_lines(res: Result) -> list[str]:
    """Per pool and for the stack: nodes and GPUs in use by every workload (services together, each batch job
    beside them) and at peak; the same numbers as placement.json's `use`."""
    lines = []
    uses = pool_use(res)
    for u in uses:
        parts = ", ".join(f"{g} ({k}) {n} node(s) {x:.0f} GPUs" for g, k, n, x in u.by_workload) or "no workload"
        lines.append(f"  use {u.pool}: {parts}; peak {u.peak_nodes}/{u.nodes} nodes, {u.peak_gpus:.0f}/{u.gpus:.0f} "
                     f"GPUs (the services" + (f" + batch {u.peak_batch})" if u.peak_batch else ")"))
    if len(uses) > 1:
        lines.append(f"  use (stack): peak {sum(u.peak_nodes for u in uses)}/{sum(u.nodes for u in uses)} nodes, "
                     f"{sum(u.peak_gpus for u in uses):.0f}/{sum(u.gpus for u in uses):.0f} GPUs")
    return lines


# ------------------------------------------------------------------ output
def as_json(res: Result) -> dict[str, Any]:
    pools = []
    uses = pool_use(res)
    for p in res.pools:
        a = res.estimates[p.name]
        usage = _usage(res.nodes, p.name)
        pools.append({
            "pool": p.name, "machine": p.machine.name, "nodes": p.node_count,
            # issue 34: the nodes placed on are those the stack expects healthy: all of them at plan time (a node
            # health-tainted later is skipped by the scheduler; upgrades.json says how many bad nodes a pool survives)
            "healthyNodes": p.node_count,
            "allocatablePerNode": {"cpu": a.cpu_millis / 1000 if a.cpu_millis is not None else None,
                                   "memoryMiB": a.memory_mib, "source": a.source, "skipped": list(a.skipped)},
            "resources": {k: {"used": round(u, 3), "capacity": None if c is None else round(c, 3),
                              "free": None if c is None else round(c - u, 3)} for k, (u, c) in usage.items()},
            "nodesUsed": {n.name: [name for name, _ in n.pods] for n in res.nodes if n.pool == p.name},
            "use": _use_json(next(u for u in uses if u.pool == p.name)),
        })

    def outcome(o: Outcome) -> dict[str, Any]:
        return {"gang": o.gang.name, "owner": o.gang.owner, "pods": len(o.gang.pods), "whole": o.gang.whole,
                "placed": o.ok, "pools": o.pools, "nodes": o.placed}
    return {"fits": res.fits, "pools": pools, "services": [outcome(o) for o in res.services],
            "batchEachBesideServices": [outcome(o) for o in res.batch],
            "notOnStackPools": res.unpinned,
            **({"countedNotSimulated": [{"owner": c.owner, "pods": c.pods, "atLeast": c.at_least}
                                        for c in res.counted]} if res.counted else {}),
            "findings": [{"resource": f.owner, "kind": f.kind, "message": f.message} for f in res.findings]}


def table(res: Result) -> list[str]:
    """Per pool: nodes, GPUs, fabric devices, cpu, memory as used / free after the services."""
    lines = ["placement (long-running services at once; each batch job beside them):",
             f"  {'pool':<12}{'nodes':>6}  {'GPUs used/free':<16}{'fabric used/free':<34}{'cpu used/free':<16}"
             f"{'memory used/free':<18}"]
    for p in res.pools:
        u = _usage(res.nodes, p.name)

        def cell(r: str) -> str:
            used, cap = u.get(r, (0.0, None))
            return f"{_fmt(r, used)}/{'?' if cap is None else _fmt(r, cap - used)}"
        named = getattr(p.profile, "device_resource", None)     # the pool's own (fabric.rdmaResourceName)
        fab = named if named in u else next((r for r in FABRIC_DEVICE_RESOURCES if r in u), None)
        fabric_cell = f"{fab} {cell(fab)}" if fab else "-"
        lines.append(f"  {p.name:<12}{p.node_count:>6}  {cell(GPU):<16}{fabric_cell:<34}"
                     f"{cell(CPU):<16}{cell(MEMORY):<18}")
        for why in res.estimates[p.name].skipped:
            lines.append(f"    advisory: {why}")
    placed = sum(1 for o in res.services if o.ok)
    lines.append(f"  services: {placed} of {len(res.services)} gangs placed"
                 + ("" if placed == len(res.services) else " (the table shows the ones placed)"))
    for o in res.batch:
        lines.append(f"  batch {o.gang.name}: {'fits' if o.ok else 'does not fit'} beside the services")
    lines += use_lines(res)
    for c in res.counted:
        lines.append(f"  counted, not simulated (over {MAX_PODS_PER_OBJECT} pods): {c.owner}, "
                     f"{'at least ' if c.at_least else ''}{c.pods} pods")
    if res.unpinned:
        lines.append(f"  not on the stack's pools (no GPU, no pool selected): {', '.join(res.unpinned)}")
    return lines


def for_stack(cfg: Any, objects: Iterable[dict[str, Any]]) -> Result:
    """What `plan` runs: the stack's rendered objects on the stack's pools."""
    return simulate(list(objects), pools_from_config(cfg))


@dataclass
class Simulated:
    """A simulation already run (by plan), with the objects it was given: the pack's stack-fits-node-pools rule
    reuses it instead of simulating the same stack a second time (see reuse_or_simulate)."""
    objects: list[dict[str, Any]]
    result: Result


def _pod_objects(objects: Iterable[dict[str, Any]]) -> list[dict[str, Any]]:
    """The objects simulate takes gangs from (those of a kind it reads), in order; the rest it ignores."""
    return [o for o in objects if isinstance(o, dict) and (str(o.get("apiVersion") or "").rpartition("/")[0],
                                                           str(o.get("kind") or "")) in READERS]


def _same_object(a: dict[str, Any], b: dict[str, Any]) -> bool:
    """The same object, or a shallow copy of it (the pack's Resource.props is dict(inputs)): the same keys in the
    same order, each value the very same object."""
    return a is b or (list(a) == list(b) and all(a[k] is b[k] for k in a))


def reuse_or_simulate(objects: list[dict[str, Any]], pools: list[PoolSpec], known: Simulated | None) -> Result:
    """simulate(objects, pools), or `known`'s result when it is that very simulation: the same pools and the same
    objects of the kinds simulate reads, in the same order (shallow copies count as the same object). Anything
    else, or no `known` (CrossGuard, a test), is simulated here."""
    if known is not None and known.result.pools == pools:
        mine, theirs = _pod_objects(objects), _pod_objects(known.objects)
        if len(mine) == len(theirs) and all(_same_object(a, b) for a, b in zip(mine, theirs, strict=True)):
            return known.result
    return simulate(objects, pools)
