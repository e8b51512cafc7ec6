"""Resource rules over one workload object: topology, gang shape, GPUs per pod, fabric label, /dev/shm."""
from __future__ import annotations

from collections.abc import Iterator

from multinode import pools, topology

from .. import objects
from ..engine import ADVISORY, MANDATORY, Context, PoolInfo, Resource, Rule
from ..objects import Gang, Role
from . import dynamo as rules_dynamo


def pod_roles(res: Resource) -> list[tuple[str, Role]]:
    """(owner name, role) for every pod template of a workload; any other object's pod specs too."""
    if not res.is_k8s:
        return []
    gs = objects.gangs(res.props, res.name)
    if gs:
        return [(g.name, r) for g in gs for r in g.roles]
    return [(res.label, Role("pod", 1, {"spec": spec})) for spec in objects.pod_specs_anywhere(res.props)]


def _pair(n: int, word: str) -> str:
    return f"{n} {word}{'' if n == 1 else 's'}"


# ------------------------------------------------------------------ parallelism
def _inference(g: Gang, ctx: Context) -> Iterator[str]:
    par = next((p for p in (objects.engine_parallelism(r) for r in g.gpu_roles) if p), None)
    if par is None:
        return
    gpn, pods, total = g.gpus_per_pod, g.pods, g.total_gpus
    used = par.gpus
    dp = f" x data parallel {par.data}" if par.data > 1 else ""
    stated = f"{par.source} {par.tp_name} {par.tensor} x {par.pp_name} {par.pipeline}{dp} = {used} GPUs"
    standalone = g.kind == "PodCliqueSet" and not g.extra.get("grouped")
    if standalone:
        # one instance per pod, or one instance over every pod of the clique
        if used in (gpn, total):
            return
        yield (f"{g.name}: {stated}, but each pod has {gpn} GPUs (nvidia.com/gpu) and the clique "
               f"{_pair(pods, 'pod')} x {gpn} = {total}; set {par.tp_name} {gpn} with {par.pp_name} 1 for one "
               f"instance per pod, or put the clique in a podCliqueScalingGroup sized "
               f"{max(1, used // max(gpn, 1))} pods")
        return
    if topology.check_parallelism(par.tensor * par.data, par.pipeline, pods, gpn):
        tp, pp = topology.suggest_parallel(pods, gpn, par.pipeline)
        tensor = tp // par.data if par.data > 1 and tp % par.data == 0 else tp
        fix = f"set {par.tp_name} {tensor} and {par.pp_name} {pp}"
        if used % gpn == 0 and used // gpn != pods:
            fix += f", or run {_pair(used // gpn, 'pod')} of {gpn} GPUs"
        yield (f"{g.name}: {stated}, but one group is {_pair(pods, 'pod')} x {gpn} GPUs (nvidia.com/gpu) = "
               f"{total}; {fix}")
    if par.nnodes is not None and par.nnodes != pods:
        yield (f"{g.name}: SGLang --nnodes {par.nnodes}, but one group is {_pair(pods, 'pod')}; "
               f"set --nnodes {pods}")


_LAUNCH_WORDS = {
    "deepspeed": (("torchrun --nnodes", "deepspeed --num_nodes"), ("torchrun --nproc_per_node", "deepspeed --num_gpus"),
                  ("--nnodes", "--num_nodes"), ("--nproc_per_node", "--num_gpus")),
    "PET_* env": (("torchrun --nnodes", "PET_NNODES"), ("torchrun --nproc_per_node", "PET_NPROC_PER_NODE"),
                  ("use --nnodes", "set PET_NNODES"), ("use --nproc_per_node", "set PET_NPROC_PER_NODE")),
}


def _training(g: Gang) -> Iterator[str]:
    gpn, pods = g.gpus_per_pod, g.pods
    if g.kind == "MPIJob":
        slots = g.extra.get("slotsPerWorker")
        if slots is not None and slots != gpn:
            yield (f"{g.name}: slotsPerWorker {slots}, but each worker has {gpn} GPUs (nvidia.com/gpu); "
                   f"set slotsPerWorker {gpn}")
        ranks = next((n for n in (objects.mpirun_processes(r) for r in g.roles) if n is not None), None)
        if ranks is not None and ranks != pods * gpn:
            yield (f"{g.name}: mpirun -np {ranks}, but {_pair(pods, 'worker')} x {gpn} GPUs = {pods * gpn} "
                   f"ranks; use -np {pods * gpn}")
        return
    if g.kind == "PyTorchJob":
        npn = objects.as_int(g.extra.get("nprocPerNode"))
        if npn is not None and npn != gpn:
            yield (f"{g.name}: nprocPerNode {npn}, but each pod has {gpn} GPUs (nvidia.com/gpu); "
                   f"set nprocPerNode \"{gpn}\"")
    launch = next((x for x in (objects.training_launch(r) for r in g.gpu_roles) if x), None)
    if launch is None:
        return
    nnodes = pods if launch.nnodes is None else launch.nnodes
    nproc = gpn if launch.nproc_per_node is None else launch.nproc_per_node
    for f in topology.check_training(nnodes, nproc, pods, gpn):
        msg = f.message
        for old, new in _LAUNCH_WORDS.get(launch.source, ()):
            msg = msg.replace(old, new)
        yield f"{g.name}: {msg}"


def _trainjob(g: Gang) -> Iterator[str]:
    """TrainJob: torchrun's processes per node (numProcPerNode) equal the GPUs each node gets
    (resourcesPerNode), as PyTorchJob's nprocPerNode; the pods themselves are its runtime's gang."""
    npn, gpn = objects.as_int(g.extra.get("numProcPerNode")), g.extra.get("gpusPerNode")
    if npn is not None and gpn and npn != gpn:
        yield (f"{g.name}: trainer.numProcPerNode {npn}, but trainer.resourcesPerNode gives each node {gpn} GPUs "
               f"(nvidia.com/gpu); set numProcPerNode {gpn}")
    nodes = g.extra.get("numNodes")
    if nodes is not None and nodes < 1:
        yield f"{g.name}: trainer.numNodes {nodes}; a TrainJob needs at least one node"


def check_parallelism(res: Resource, ctx: Context) -> Iterator[str]:
    for g in objects.gangs(res.props, res.name) if res.is_k8s else []:
        if g.kind == "TrainJob":
            yield from _trainjob(g)
            continue
        if not g.gpu_roles:
            continue
        yield from (_inference(g, ctx) if g.inference else _training(g))


# ------------------------------------------------------------------ uniform pods
def _fmt(d: dict[str, int]) -> str:
    return ", ".join(f"{k}: {v}" for k, v in sorted(d.items())) or "none"


def check_uniform(res: Resource, ctx: Context) -> Iterator[str]:
    for g in objects.gangs(res.props, res.name) if res.is_k8s else []:
        roles = g.compute_roles
        if len(roles) < 2 or not g.gpu_roles:
            continue
        gpus = {r.name: r.gpus for r in roles}
        if len(set(gpus.values())) > 1:
            want = max(gpus.values())
            yield (f"{g.name}: pods of one gang request different GPUs ("
                   + ", ".join(f"{n} {v}" for n, v in gpus.items())
                   + f" nvidia.com/gpu); every rank needs the same, leader included: set nvidia.com/gpu {want} "
                     f"on every pod template")
        fab = {r.name: r.fabric for r in roles}
        if len({tuple(sorted(v.items())) for v in fab.values()}) > 1:
            yield (f"{g.name}: pods of one gang request different fabric devices ("
                   + "; ".join(f"{n}: {_fmt(v)}" for n, v in fab.items())
                   + "); give every pod template the same fabric resources (or none, and let the fabric "
                     "policy inject them)")


# ------------------------------------------------------------------ GPUs per pod vs the machine
def _where(sel: dict[str, str], pool: PoolInfo | None) -> str:
    if pool is not None and not objects.machine_from_labels(sel):
        return f"node pool {pool.name!r}"
    return "nodeSelector " + ", ".join(f"{k}={v}" for k, v in sel.items())


def check_gpus_within_machine(res: Resource, ctx: Context) -> Iterator[str]:
    if rules_dynamo.is_dgd(res.props):
        return      # dynamo-gpus-per-node-within-machine judges DGDs (both versions, per component)
    for owner, role in pod_roles(res):
        gpus = role.gpus
        if gpus <= 0:
            continue
        for sel in role.selectors():
            m, pool = ctx.machine_for(sel)
            if m is None or not topology.check_gpus_per_pod(gpus, m.gpus, m.name):
                continue
            yield (f"{owner} {role.name}: {gpus} nvidia.com/gpu per pod, but it lands on {m.name} "
                   f"({_where(sel, pool)}) which has {m.gpus} GPUs per node, so the pod can never be scheduled; "
                   f"request {m.gpus} or fewer and add pods instead")
            break


# ------------------------------------------------------------------ whole gangs
def check_gang_whole(res: Resource, ctx: Context) -> Iterator[str]:
    for g in objects.gangs(res.props, res.name) if res.is_k8s else []:
        if g.kind == "VolcanoJob":
            total = sum(r.pods for r in g.roles)
            parts = " + ".join(f"{r.name} {r.pods}" for r in g.roles)
            if g.min_available is not None and g.min_available != total:
                yield (f"{g.name}: minAvailable {g.min_available}, but the tasks run {parts} = {total} pods; "
                       f"a partial gang holds GPUs and never starts: set minAvailable {total}")
            for t in g.extra.get("tasks", []):
                tmin, reps = objects.as_int(t.get("minAvailable")), objects.as_int(t.get("replicas"))
                if tmin is not None and reps is not None and tmin < reps and reps > 1:
                    yield (f"{g.name}: task {t.get('name')} has minAvailable {tmin} of {reps} replicas; "
                           f"set it to {reps} (or remove it)")
        elif g.kind == "PodCliqueSet" and g.multi_node:
            for c in g.extra.get("cliques", []):
                spec = objects.mapping(c.get("spec"))
                reps, mn = objects.as_int(spec.get("replicas")), objects.as_int(spec.get("minAvailable"))
                if reps is not None and mn is not None and reps > 1 and mn < reps:
                    yield (f"{g.name}: clique {c.get('name')} has minAvailable {mn} of {reps} replicas, but its "
                           f"pods together hold one model instance; set minAvailable {reps} (or leave it unset)")
        elif g.kind in ("MPIJob", "PyTorchJob") and g.min_available is not None:
            need = sum(r.pods for r in g.compute_roles)
            # An MPIJob launcher created only once the workers are Ready (WaitForWorkersReady) cannot be in the
            # gang that places them (mpi-operator creates it later): then the workers are the whole gang.
            later = g.kind == "MPIJob" and g.extra.get("launcherCreationPolicy") == "WaitForWorkersReady"
            fix = need if later else sum(r.pods for r in g.roles)
            if g.min_available < need:
                yield (f"{g.name}: runPolicy.schedulingPolicy.minAvailable {g.min_available}, but the job needs "
                       f"{need} pods to run at all; set minAvailable {fix}")


# ------------------------------------------------------------------ LWS exclusive placement under a gang
LWS_EXCLUSIVE = "leaderworkerset.sigs.k8s.io/exclusive-topology"


def check_lws_exclusive_gang(res: Resource, ctx: Context) -> Iterator[str]:
    """A LeaderWorkerSet with LWS exclusive placement whose groups Volcano gang-schedules never starts.

    With the annotation LWS creates a group's worker StatefulSet only once the leader is bound (sigs.k8s.io/lws@v0.9.0
    pkg/controllers/pod_controller.go:161-166); LWS (gangSchedulingManagement volcano, as multinode's add-on sets
    it) made the group's PodGroup with minMember = size for startupPolicy LeaderCreated
    (pkg/schedulerprovider/volcano_provider.go:58-83), and Volcano's gang plugin binds no pod of a job with fewer
    pods than minMember (volcano.sh/volcano@v1.14.1 pkg/scheduler/plugins/gang/gang.go:83-91). LeaderReady
    (minMember 1) does not deadlock here."""
    if not res.is_k8s or res.kind != ("leaderworkerset.x-k8s.io", "LeaderWorkerSet"):
        return
    key = objects.text(objects.get(res.props, "metadata", "annotations", LWS_EXCLUSIVE))
    if not key or objects.get(res.props, "spec", "startupPolicy") == "LeaderReady":
        return
    for g in objects.gangs(res.props, res.name):
        if g.kind != "LeaderWorkerSet" or sum(r.pods for r in g.roles) < 2:
            continue
        if not any(r.scheduler == "volcano" for r in g.roles):
            continue
        yield (f"{g.name}: {LWS_EXCLUSIVE}: {key} with schedulerName: volcano never starts: LWS creates a group's "
               f"workers only once its leader is bound, and Volcano's gang (the PodGroup LWS makes, minMember = "
               f"{sum(r.pods for r in g.roles)}) never binds the leader alone; remove the annotation and give the "
               f"leader and worker templates required podAffinity (labelSelector leaderworkerset.sigs.k8s.io/name, "
               f"matchLabelKeys [leaderworkerset.sigs.k8s.io/group-key]) and podAntiAffinity (group-key Exists, "
               f"mismatchLabelKeys [leaderworkerset.sigs.k8s.io/group-key]) on topologyKey {key}, as multinode "
               f"renders groupPlacement under Volcano (docs/workloads.md)")


# ------------------------------------------------------------------ fabric label and /dev/shm
def _multi_node_roles(res: Resource) -> Iterator[tuple[Gang, Role]]:
    for g in objects.gangs(res.props, res.name) if res.is_k8s else []:
        if g.multi_node:
            for r in g.gpu_roles:
                yield g, r


def check_fabric_label(res: Resource, ctx: Context) -> Iterator[str]:
    if not ctx.fabric_enabled():
        return
    key, want = pools.FABRIC_POD_LABEL, pools.FABRIC_POD_LABEL_VALUE
    for g, r in _multi_node_roles(res):
        # NeMo's annotation is the other trigger the Kyverno fabric policies match (pools.asks_for_fabric).
        if pools.asks_for_fabric(r.labels, r.annotations):
            continue
        have = r.labels.get(key)
        state = "lacks it" if have is None else f"has {key}={have}"
        yield (f"{g.name} {r.name}: a multi-node pod ({_pair(g.pods, 'pod')} per gang) needs the label "
               f"{key}={want} (or NeMo's annotation {pools.NEMO_ANNOTATION}: \"true\") so the fabric policy "
               f"injects its devices and NCCL settings, but its template {state}; add metadata.labels "
               f"{key}: {want!r}")


# A Kubernetes quantity, the pattern the API server's OpenAPI publishes for resource.Quantity
# (k8s.io/apimachinery pkg/api/resource/quantity.go, OpenAPISchemaFormat "quantity"; the CRDs' x-kubernetes-int-or-
# string pattern): the fix repeats it, so it is text a user can paste.
QUANTITY_PATTERN = (r"^(\+|-)?(([0-9]+(\.[0-9]*)?)|(\.[0-9]+))(([KMGTPE]i)|[numkMGTPE]|([eE](\+|-)?(([0-9]+"
                    r"(\.[0-9]*)?)|(\.[0-9]+))))?$")


def check_shm(res: Resource, ctx: Context) -> Iterator[str]:
    size = ctx.setting("multinode-pod-shm", "sizeHint", "64Gi")
    for g, r in _multi_node_roles(res):
        volumes = {v["name"]: v for v in objects.seq(r.spec.get("volumes"))
                   if isinstance(v, dict) and isinstance(v.get("name"), str)}
        for c in r.gpu_containers:
            mount = next((m for m in objects.seq(c.get("volumeMounts"))
                          if objects.mapping(m).get("mountPath") == "/dev/shm"), None)
            cname = c.get("name", "?")
            if mount is None:
                yield (f"{g.name} {r.name}: container {cname} has no /dev/shm mount; NCCL and the engine's "
                       f"workers need a large shared memory: add volume {{name: dshm, emptyDir: {{medium: Memory, "
                       f"sizeLimit: {size}}}}} mounted at /dev/shm")
                continue
            vol = volumes.get(objects.text(mount.get("name")) or "") or {}
            medium = objects.get(vol, "emptyDir", "medium")
            if medium != "Memory":
                yield (f"{g.name} {r.name}: container {cname} mounts volume {mount.get('name')!r} at /dev/shm, "
                       f"but it is not memory-backed (emptyDir.medium {medium!r}); use emptyDir {{medium: Memory, "
                       f"sizeLimit: {size}}}")


# ------------------------------------------------------------------ the c10d rendezvous's store host
_TORCH_LAUNCHERS = ("torchrun", "torch.distributed.run", "torch.distributed.launch")


def _c10d_endpoint_hosts(c: dict) -> list[str]:
    """The host of each c10d rendezvous endpoint a container's torchrun names without `is_host` in its
    --rdzv_conf (one per launcher word; [] when every launch says who hosts the store)."""
    toks = objects.tokens_of(c)
    starts = [i for i, t in enumerate(toks) if t.endswith("torchrun") or t in _TORCH_LAUNCHERS]
    out = []
    for n, i in enumerate(starts):
        words = toks[i:starts[n + 1] if n + 1 < len(starts) else len(toks)]
        backend = objects.flag_values(words, ("--rdzv_backend", "--rdzv-backend"))
        endpoint = objects.flag_values(words, ("--rdzv_endpoint", "--rdzv-endpoint"))
        if "c10d" not in [b.strip("'\"") for b in backend] or not endpoint:
            continue
        conf = ",".join(objects.flag_values(words, ("--rdzv_conf", "--rdzv-conf")))
        if any(kv.split("=", 1)[0].strip() == "is_host" for kv in conf.split(",")):
            continue
        host = endpoint[-1].strip("'\"").rpartition(":")[0] if ":" in endpoint[-1] else endpoint[-1].strip("'\"")
        if host in ("", "localhost") or host.replace(".", "").isdigit() or host.startswith(("127.", "[")):
            continue
        out.append(host)
    return out


def check_c10d_store_host(res: Resource, ctx: Context) -> Iterator[str]:
    for owner, r in pod_roles(res):
        for c in [*objects.seq(r.spec.get("initContainers")), *r.containers]:
            if not isinstance(c, dict):
                continue
            for host in _c10d_endpoint_hosts(c):
                yield (f"{owner} {r.name}: container {c.get('name', '?')} runs torchrun's c10d rendezvous at {host} "
                       f"without --rdzv_conf is_host: torchrun then picks the pod that hosts the store by matching "
                       f"{host} against the pod's host name (its FQDN with setHostnameAsFQDN) and the addresses "
                       f"{host} resolves to, and a pod's DNS record may not exist yet when its launcher starts: no "
                       f"pod hosts the store and every launcher fails (RendezvousConnectionError). Pass "
                       f"--rdzv_conf=is_host=1 on the pod {host} names and is_host=0 on the others, e.g. "
                       f"RDZV_IS_HOST=$([ \"${{HOSTNAME%%.*}}\" = \"{host.split('.')[0]}\" ] && echo 1 || echo 0)")


RULES = [
    Rule("parallelism-matches-gpus",
         "Tensor x pipeline parallel (vLLM/SGLang flags, NIM env) equals pods x GPUs per pod of one gang; "
         "torchrun --nnodes x --nproc_per_node, MPIJob slots and -np, PyTorchJob nprocPerNode, TrainJob "
         "numProcPerNode match the pods and their GPUs (LWS, Grove, Volcano Job, Indexed Job, MPIJob, PyTorchJob, "
         "TrainJob and its training runtime).",
         MANDATORY, check_parallelism,
         remediation="Make the engine's parallel sizes multiply to the gang's GPUs, or resize the gang."),
    Rule("gang-pods-uniform",
         "Every pod of a gang (the LWS leader included) requests the same GPUs and the same fabric devices.",
         MANDATORY, check_uniform),
    Rule("gpus-per-pod-within-machine",
         "A pod requests no more GPUs than the machine it is pinned to (instance-type / multinode.dev/machine "
         "labels, or the stack's node pool) has.",
         MANDATORY, check_gpus_within_machine),
    Rule("gang-whole",
         "Gangs are whole: Volcano minAvailable equals the sum of task replicas; a multi-node Grove clique never "
         "has minAvailable below its replicas; MPIJob/PyTorchJob minAvailable covers every worker.",
         MANDATORY, check_gang_whole),
    Rule("lws-exclusive-placement-gang",
         "A LeaderWorkerSet with LWS exclusive placement (leaderworkerset.sigs.k8s.io/exclusive-topology) is not "
         "gang-scheduled by Volcano: LWS waits for a bound leader, Volcano's gang for the workers (a deadlock).",
         MANDATORY, check_lws_exclusive_gang),
    Rule("multinode-pod-fabric-label",
         f"Multi-node pods carry {pools.FABRIC_POD_LABEL}={pools.FABRIC_POD_LABEL_VALUE} (or NeMo's annotation "
         f"{pools.NEMO_ANNOTATION}=true) so the fabric policy injects their devices, env and volumes.",
         MANDATORY, check_fabric_label),
    Rule("multinode-pod-shm",
         "Multi-node GPU containers mount a memory-backed emptyDir at /dev/shm.",
         MANDATORY, check_shm,
         config={"sizeHint": {"type": "string", "default": "64Gi", "maxLength": 64, "pattern": QUANTITY_PATTERN,
                              "description": "sizeLimit suggested in the fix (a Kubernetes quantity)"}}),
    Rule("c10d-store-host-explicit",
         "torchrun's c10d rendezvous at a host name says which pod hosts its store (--rdzv_conf is_host), rather "
         "than leaving it to torchrun's match of host names and DNS answers, which a pod whose record is not yet "
         "published fails (pytorch/pytorch torch/distributed/elastic/rendezvous/c10d_rendezvous_backend.py "
         "create_backend: is_host).",
         ADVISORY, check_c10d_store_host),
]
