"""Readers that turn Kubernetes objects (resource props) into the facts the rules check.

Everything here reads plain dicts shaped like the upstream CRDs (camelCase), so the rules work on
objects our components did not produce: a hand-written LeaderWorkerSet, a Volcano Job copied from a
tutorial. Unknown or computed values (preview) are skipped, never guessed. A field of the wrong type
(a string where a list belongs, a number where a map belongs) reads as absent through mapping() / seq() /
text(): readers never raise on a badly typed object (pack.run_rules reports anything that still does).

A *gang* is one unit of pods that must run together: one LWS group (leader + workers), one Grove
scaling group (or a stand-alone clique), one Volcano Job, one Indexed Job, one MPIJob, one PyTorchJob, one
Kubeflow Trainer v2 training runtime (its trainer job's numNodes pods), one TrainJob (its numbers only: the
pod template lives in the runtime it names, so its gang has no roles and the rules read numProcPerNode
against resourcesPerNode).
"""
from __future__ import annotations

import contextlib
import contextvars
import functools
import re
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

from multinode import catalog, fabric, pools, quantity
from multinode.manifests.crds import is_crd

GPU = "nvidia.com/gpu"
UNKNOWN = "[unknown]"

# Fabric device resources and the cloud each belongs to (names from multinode.fabric).
FABRIC_RESOURCES: dict[str, str] = {
    fabric.EFA_RESOURCE: "aws",
    fabric.IB_SHARED_RESOURCE: "azure",
    fabric.IB_SRIOV_RESOURCE: "azure",
    fabric.OCI_VF_RESOURCE: "oci",
}


def fabric_resources(config: Any = None) -> dict[str, str]:
    """FABRIC_RESOURCES plus the stack's own InfiniBand resource name (fabric.rdmaResourceName, issue 18b), when the
    stack config is known: the rules that count fabric devices must see the name the stack renders."""
    out = dict(FABRIC_RESOURCES)
    fab = getattr(config, "fabric", None)
    if fab is not None and getattr(fab, "rdma_resource_name", None):
        out.setdefault(fabric.rdma_resource(config), "azure")
    return out


# GKE multi-networking (TCPX/TCPXO/RDMA NICs) shows up as annotations and Network objects, not devices.
GCP_FABRIC_ANNOTATIONS = ("networking.gke.io/interfaces", "devices.gke.io/container.tcpxo-daemon",
                          "devices.gke.io/container.tcpx-daemon")
GCP_FABRIC_GROUPS = ("networking.gke.io",)

# Node labels that name the machine directly.
INSTANCE_TYPE_LABELS = ("node.kubernetes.io/instance-type", "beta.kubernetes.io/instance-type",
                        pools.MACHINE_LABEL)


# ------------------------------------------------------------------ small helpers
def as_int(value: Any) -> int | None:
    """An integer from an int, a whole float or a numeric string; None for anything else."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    if isinstance(value, float) and value.is_integer():
        return int(value)
    if isinstance(value, str) and re.fullmatch(r"\s*\d+\s*", value):
        return int(value)
    return None


def mapping(value: Any) -> dict[str, Any]:
    """`value` if it is a map, else {}: a field of the wrong type reads as absent, never raises."""
    return value if isinstance(value, dict) else {}


def seq(value: Any) -> list[Any]:
    """`value` if it is a list, else []: a string is not a list of its characters here."""
    return value if isinstance(value, list) else []


def text(value: Any) -> str | None:
    """`value` if it is a string, else None (names and keys compared by value must be hashable text)."""
    return value if isinstance(value, str) else None


def get(obj: Any, *path: Any, default: Any = None) -> Any:
    for key in path:
        if isinstance(obj, dict):
            obj = obj.get(key)
        elif isinstance(obj, list) and isinstance(key, int) and -len(obj) <= key < len(obj):
            obj = obj[key]
        else:
            return default
        if obj is None:
            return default
    return obj


def kind_of(props: dict[str, Any]) -> tuple[str, str]:
    """(api group, kind) of an object, e.g. ('leaderworkerset.x-k8s.io', 'LeaderWorkerSet')."""
    api = str(props.get("apiVersion") or "")
    group = api.rpartition("/")[0]
    return group, str(props.get("kind") or "")


def object_name(props: dict[str, Any], fallback: str = "") -> str:
    meta = mapping(props.get("metadata"))
    name = meta.get("name") or fallback
    kind = props.get("kind") or "object"
    ns = text(meta.get("namespace"))
    return f"{kind} {ns + '/' if ns else ''}{name}"


# ------------------------------------------------------------------ command lines
def tokens_of(container: dict[str, Any]) -> list[str]:
    """The container's command + args as shell words. A single string such as the script of
    `sh -c "ray start ... && vllm serve ... --tensor-parallel-size 8"` is split into its words too."""
    out: list[str] = []
    for part in seq(container.get("command")) + seq(container.get("args")):
        if not isinstance(part, str):
            continue
        if len(part.split(None, 1)) > 1:            # whitespace inside the stripped text (str.isspace's set)
            words = _shell_words(part)
            # scripts often continue lines with a backslash; drop the leftover markers
            out.extend(w for w in words if w not in ("\\", "&&", ";", "||", "|"))
        else:
            out.append(part)
    return out


# Characters after which shlex.split and str.split may differ: quotes and backslash (shlex), and the ASCII
# separators str.split breaks on but shlex (whitespace " \t\r\n") does not.
_SHLEX_SPECIAL = frozenset("'\"\\\x0b\x0c\x1c\x1d\x1e\x1f")


# shlex's posix rules with whitespace_split (what shlex.split does, Lib/shlex.py read_token), as regular
# expressions: words are separated by " \t\r\n" only; in a word, a backslash takes the next character as it is,
# '...' is literal, and in "..." a backslash escapes only '"' and itself (else it is kept); an empty quoted word
# counts. A character no piece takes (an unclosed quote, a last lone backslash: shlex's ValueError) is the
# third group. Possessive quantifiers: no backtracking on a long line that fails.
_SHELL_PIECE = r"[^ \t\r\n'\"\\]++|\\[\s\S]|'[^']*+'|\"(?:[^\"\\]++|\\[\s\S])*+\""
_SHELL_TOKEN = re.compile(rf"((?:{_SHELL_PIECE})++)|[ \t\r\n]++|([\s\S])")
_SHELL_PIECES = re.compile(_SHELL_PIECE)
_DQ_ESCAPE = re.compile(r'\\(["\\])')


def _unquote(piece: str) -> str:
    c = piece[0]
    if c == "\\":
        return piece[1]
    if c == "'":
        return piece[1:-1]
    if c == '"':
        return _DQ_ESCAPE.sub(r"\1", piece[1:-1]) if "\\" in piece else piece[1:-1]
    return piece


# _shell_words of the scripts read lately: a pure function of the text, asked for the same script by every pod
# template of a workload (a Volcano master and worker, an LWS leader and worker run one script) and by several rules
# (parallelism-matches-gpus, c10d-store-host); bounded: cleared when full
_WORDS: dict[str, tuple[str, ...]] = {}
_WORDS_MAX = 4096
_WORDS_TEXT_MAX = 65536       # longer texts are split every time (none of ours is)


def _shell_words(text: str) -> list[str]:
    """shlex.split(text) (posix, no comments); unbalanced quotes: the whitespace-separated words. A plain ASCII
    line (no quote, backslash or separator character) splits the same with str.split, in C; any other line by
    the same rules in regular expressions (_SHELL_PIECE): shlex's tokenizer reads a character at a time in
    Python, ~1 ms per training command line. tests/test_policy_rules.py compares both with shlex.split. The
    regular-expression path's answer is kept per text (_WORDS; a new list each call)."""
    if text.isascii() and _SHLEX_SPECIAL.isdisjoint(text):
        return text.split()
    if len(text) > _WORDS_TEXT_MAX:
        return _split_words(text)
    kept = _WORDS.get(text)
    if kept is None:
        if len(_WORDS) >= _WORDS_MAX:
            _WORDS.clear()
        kept = _WORDS[text] = tuple(_split_words(text))
    return list(kept)


def _split_words(text: str) -> list[str]:
    words: list[str] = []
    for word, bad in _SHELL_TOKEN.findall(text):
        if bad:
            return text.split()                     # shlex.split raises ValueError (no closing quotation)
        if word:
            words.append("".join(map(_unquote, _SHELL_PIECES.findall(word))))
    return words


def flag_values(tokens: Sequence[str], names: Iterable[str]) -> list[str]:
    """Every value given to one of `names` (`--flag=value` or `--flag value`), in order."""
    names = tuple(names)
    found: list[str] = []
    for i, tok in enumerate(tokens):
        for name in names:
            if tok == name and i + 1 < len(tokens):
                found.append(tokens[i + 1])
            elif tok.startswith(name + "="):
                found.append(tok[len(name) + 1:])
    return found


def first_int_flag(tokens: Sequence[str], names: Iterable[str]) -> int | None:
    for value in flag_values(tokens, names):
        n = as_int(value.strip("'\""))
        if n is not None:
            return n
    return None


def env_literal(container: dict[str, Any], name: str) -> str | None:
    for e in seq(container.get("env")):
        value = e.get("value") if isinstance(e, dict) and e.get("name") == name else None
        if isinstance(value, str):
            return value
    return None


# ------------------------------------------------------------------ pods
def container_resource(container: dict[str, Any], resource: str) -> int:
    """A whole count (GPUs, fabric devices) read as Kubernetes reads the quantity ("8", 8, "8.0", "1e1")."""
    res = mapping(container.get("resources"))
    for section in ("limits", "requests"):
        n = quantity.as_whole(mapping(res.get(section)).get(resource))
        if n is not None:
            return n
    return 0


def gpus_of(pod_spec: dict[str, Any]) -> int:
    return sum(container_resource(c, GPU) for c in seq(pod_spec.get("containers")) if isinstance(c, dict))


def fabric_resources_of(pod_spec: dict[str, Any]) -> dict[str, int]:
    """Fabric devices the pod's containers request, summed over containers (limits, else requests)."""
    out: dict[str, int] = {}
    for c in seq(pod_spec.get("containers")):
        if isinstance(c, dict):
            for res in FABRIC_RESOURCES:
                n = container_resource(c, res)
                if n:
                    out[res] = out.get(res, 0) + n
    return out


def pod_specs_anywhere(obj: Any) -> Iterator[dict[str, Any]]:
    """Every pod spec (a dict with a `containers` list) anywhere inside an object, whatever its kind (a
    CustomResourceDefinition, a schema, holds none: not walked). Inside kept_gangs() an object is walked once
    (three rules ask for every object's pod specs)."""
    if is_crd(obj):
        return iter(())
    kept = _KEPT.get()
    if kept is None:
        return _pod_specs(obj)
    hit = kept.specs.get(id(obj))
    if hit is None or hit[0] is not obj:
        hit = kept.specs[id(obj)] = (obj, list(_pod_specs(obj)))
    return iter(hit[1])


def named_pod_specs(obj: Any) -> list[tuple[str, dict[str, Any]]]:
    """(template name, pod spec) for every pod spec of an object; the name is empty when the object has one pod
    spec, else what tells them apart: the LWS leader / worker template, a Volcano task or replica's name, a Grove
    clique, else the spec's key path. A finding on two templates then says which (issue 46: the same message twice
    read as a repeat)."""
    if is_crd(obj):
        return []
    kept = _KEPT.get()
    if kept is not None:
        hit = kept.named.get(id(obj))
        if hit is None or hit[0] is not obj:
            hit = kept.named[id(obj)] = (obj, _named_pod_specs(obj))
        return list(hit[1])
    return _named_pod_specs(obj)


def _named_pod_specs(obj: Any) -> list[tuple[str, dict[str, Any]]]:
    found = list(_pod_specs_at(obj, ""))
    if len(found) <= 1:
        return [("", spec) for _, spec in found]
    return [(_template_name(obj, path), spec) for path, spec in found]


_TEMPLATE_KEYS = {"leaderTemplate": "leader", "workerTemplate": "worker"}


def _template_name(obj: Any, path: str) -> str:
    import re
    parts = re.findall(r"[^.\[\]]+|\[\d+\]", path)
    node, label = obj, ""
    for part in parts:
        node = node[int(part[1:-1])] if part.startswith("[") and isinstance(node, list) else (
            node.get(part) if isinstance(node, dict) else None)
        if part in _TEMPLATE_KEYS:
            label = _TEMPLATE_KEYS[part]
        elif isinstance(node, dict) and isinstance(node.get("name"), str) and part.startswith("["):
            label = f"{node['name']}"                        # a Volcano task, a Grove clique, a DGD component
        elif part in ("Launcher", "Worker", "Master") or (isinstance(node, dict) and "replicas" in node
                                                              and part[:1].isupper()):
            label = part                                      # MPIJob / PyTorchJob replica specs
    return f"{label} template" if label else path or "(object)"


def _pod_specs_at(obj: Any, path: str) -> list[tuple[str, dict[str, Any]]]:
    """(key path, pod spec) of every pod spec inside `obj` (`path`: obj's own), in document order. One recursive
    function over the maps and lists only, the path text built for a pod spec found, not for every value passed
    (the generator per value with an f-string each was ~10% of an Analyze request of a training workload)."""
    found: list[tuple[str, dict[str, Any]]] = []
    steps: list[tuple[bool, Any]] = []          # (is a list index, key or index) from obj down

    def text() -> str:
        out = path
        for is_index, k in steps:
            out = f"{out}[{k}]" if is_index else (f"{out}.{k}" if out else str(k))
        return out

    def walk(node: Any) -> None:
        if isinstance(node, dict):
            if isinstance(node.get("containers"), list):
                found.append((text(), node))
            for k, v in node.items():
                if isinstance(v, (dict, list)):
                    steps.append((False, k))
                    walk(v)
                    steps.pop()
        else:
            for i, v in enumerate(node):
                if isinstance(v, (dict, list)):
                    steps.append((True, i))
                    walk(v)
                    steps.pop()

    if isinstance(obj, (dict, list)):
        walk(obj)
    return found


def _pod_specs(obj: Any) -> Iterator[dict[str, Any]]:
    found: list[dict[str, Any]] = []

    def walk(node: Any) -> None:
        if isinstance(node, dict):
            if isinstance(node.get("containers"), list):
                found.append(node)
            for v in node.values():
                if isinstance(v, (dict, list)):
                    walk(v)
        else:
            for v in node:
                if isinstance(v, (dict, list)):
                    walk(v)

    if isinstance(obj, (dict, list)):
        walk(obj)
    return iter(found)


@dataclass
class Role:
    """Pods of one template inside a gang (the LWS leader, a Volcano task, the MPIJob workers...)."""
    name: str
    pods: int                            # pods of this template in one gang
    template: dict[str, Any]             # {"metadata": {...}, "spec": pod spec}
    compute: bool = True                 # takes part in the collective (GPU uniformity applies)

    @property
    def spec(self) -> dict[str, Any]:
        return mapping(mapping(self.template).get("spec"))

    @property
    def labels(self) -> dict[str, Any]:
        return mapping(get(self.template, "metadata", "labels"))

    @property
    def annotations(self) -> dict[str, Any]:
        return mapping(get(self.template, "metadata", "annotations"))

    @functools.cached_property
    def gpus(self) -> int:
        """Read once per Role: a Role is a read-only view of its template (the rules only read), and the pack's
        rules ask each role of each gang many times (gpu_roles, pods, total_gpus...)."""
        return gpus_of(self.spec)

    @property
    def fabric(self) -> dict[str, int]:
        return fabric_resources_of(self.spec)

    @property
    def containers(self) -> list[dict[str, Any]]:
        return [c for c in seq(self.spec.get("containers")) if isinstance(c, dict)]

    @property
    def gpu_containers(self) -> list[dict[str, Any]]:
        return [c for c in self.containers if container_resource(c, GPU) > 0]

    @property
    def scheduler(self) -> str:
        return str(self.spec.get("schedulerName") or "default-scheduler")

    def tokens(self) -> list[str]:
        out: list[str] = []
        for c in self.containers:
            out.extend(tokens_of(c))
        return out

    def selectors(self) -> list[dict[str, str]]:
        """Label sets this pod may land on: the nodeSelector merged with each required node-affinity
        term's single-valued `In` expressions (one set per term; [nodeSelector] when there is none)."""
        base = {str(k): str(v) for k, v in mapping(self.spec.get("nodeSelector")).items()}
        terms = seq(get(self.spec, "affinity", "nodeAffinity", "requiredDuringSchedulingIgnoredDuringExecution",
                        "nodeSelectorTerms"))
        sets: list[dict[str, str]] = []
        for term in terms:
            extra: dict[str, str] = {}
            for expr in seq(mapping(term).get("matchExpressions")):
                expr = mapping(expr)
                vals = seq(expr.get("values"))
                if expr.get("operator") == "In" and len(vals) == 1:
                    extra[str(expr.get("key"))] = str(vals[0])
            sets.append({**base, **extra})
        return sets or [base]


@dataclass
class Gang:
    """One unit of pods that must all run for any of them to make progress."""
    kind: str                            # LeaderWorkerSet, PodCliqueSet, Job, VolcanoJob, MPIJob, PyTorchJob,
                                         # TrainJob, ClusterTrainingRuntime, TrainingRuntime
    name: str                            # "LeaderWorkerSet ns/name" (+ " clique x")
    roles: list[Role]
    copies: int = 1                      # how many such gangs the object runs (LWS replicas...)
    inference: bool = False
    min_available: int | None = None  # declared gang size, where the kind has one
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def compute_roles(self) -> list[Role]:
        return [r for r in self.roles if r.compute and r.pods > 0]

    @property
    def gpu_roles(self) -> list[Role]:
        return [r for r in self.compute_roles if r.gpus > 0]

    @property
    def pods(self) -> int:
        return sum(r.pods for r in self.gpu_roles)

    @property
    def total_gpus(self) -> int:
        return sum(r.pods * r.gpus for r in self.gpu_roles)

    @property
    def gpus_per_pod(self) -> int:
        """GPUs per pod of the gang's GPU pods (the largest, if they differ: another rule reports that)."""
        return max((r.gpus for r in self.gpu_roles), default=0)

    @property
    def multi_node(self) -> bool:
        """More than one GPU pod works on one instance. A stand-alone Grove clique runs one instance
        per pod unless its engine's tp x pp spans pods."""
        if self.pods <= 1:
            return False
        if self.kind == "PodCliqueSet" and not self.extra.get("grouped"):
            par = next((p for p in (engine_parallelism(r) for r in self.gpu_roles) if p), None)
            return par is not None and par.gpus > self.gpus_per_pod
        return True


def _template(meta: dict[str, Any] | None, spec: dict[str, Any] | None) -> dict[str, Any]:
    return {"metadata": dict(mapping(meta)), "spec": dict(mapping(spec))}


def _lws(props: dict[str, Any], name: str) -> list[Gang]:
    lwt = mapping(get(props, "spec", "leaderWorkerTemplate"))
    size = as_int(lwt.get("size"))
    size = 1 if size is None else size
    worker = mapping(lwt.get("workerTemplate"))
    leader = mapping(lwt.get("leaderTemplate")) or worker
    roles = [Role("leader", 1, leader)]
    if size > 1:
        roles.append(Role("worker", size - 1, worker))
    copies = as_int(get(props, "spec", "replicas"))
    return [Gang("LeaderWorkerSet", name, roles, 1 if copies is None else copies, inference=True,
                 extra={"size": size})]


def _grove(props: dict[str, Any], name: str) -> list[Gang]:
    tmpl = mapping(get(props, "spec", "template"))
    # a clique's name is compared with cliqueNames: only text names can match (a map or list never does)
    cliques = {(text(c.get("name")) or repr(c.get("name"))): c for c in seq(tmpl.get("cliques"))
               if isinstance(c, dict)}
    copies = as_int(get(props, "spec", "replicas"))
    copies = 1 if copies is None else copies

    def role(c: dict[str, Any]) -> Role:
        spec = mapping(c.get("spec"))
        r = as_int(spec.get("replicas"))
        return Role(str(c.get("name")), 1 if r is None else r,
                    _template({"labels": mapping(c.get("labels")), "annotations": mapping(c.get("annotations"))},
                              spec.get("podSpec")))

    gangs: list[Gang] = []
    grouped = set()
    for sg in seq(tmpl.get("podCliqueScalingGroups")):
        if not isinstance(sg, dict):
            continue
        names = [n for n in seq(sg.get("cliqueNames")) if isinstance(n, str)]
        members = [cliques[n] for n in names if n in cliques]
        grouped.update(names)
        sg_reps = as_int(sg.get("replicas"))
        gangs.append(Gang("PodCliqueSet", f"{name} scaling group {sg.get('name')}", [role(c) for c in members],
                          copies * (1 if sg_reps is None else sg_reps), inference=True,
                          extra={"cliques": members, "grouped": True}))
    for cname, c in cliques.items():
        if cname in grouped:
            continue
        gangs.append(Gang("PodCliqueSet", f"{name} clique {cname}", [role(c)], copies, inference=True,
                          extra={"cliques": [c], "grouped": False}))
    return gangs


def _volcano(props: dict[str, Any], name: str) -> list[Gang]:
    spec = mapping(props.get("spec"))
    roles = []
    tasks = [t for t in seq(spec.get("tasks")) if isinstance(t, dict)]
    for t in tasks:
        r = as_int(t.get("replicas"))
        roles.append(Role(str(t.get("name") or "task"), 1 if r is None else r, mapping(t.get("template"))))
    gang = Gang("VolcanoJob", name, roles, min_available=as_int(spec.get("minAvailable")),
                extra={"tasks": tasks, "scheduler": spec.get("schedulerName") or "volcano"})
    # tasks that request no GPU (a CPU launcher) do not take part in the GPU checks
    for task in gang.roles:
        task.compute = task.gpus > 0 or not any(x.gpus for x in gang.roles)
    return [gang]


def _indexed_job(props: dict[str, Any], name: str) -> list[Gang]:
    spec = mapping(props.get("spec"))
    if spec.get("completionMode") != "Indexed":
        return []
    n = as_int(spec.get("parallelism"))
    if n is None:
        n = as_int(spec.get("completions"))
    return [Gang("Job", name, [Role("index", 1 if n is None else n, mapping(spec.get("template")))])]


def _mpijob(props: dict[str, Any], name: str) -> list[Gang]:
    spec = mapping(props.get("spec"))
    specs = mapping(spec.get("mpiReplicaSpecs"))
    roles = []
    as_worker = bool(spec.get("runLauncherAsWorker"))
    for rname in ("Launcher", "Worker"):
        rs = specs.get(rname)
        if not isinstance(rs, dict):
            continue
        r = as_int(rs.get("replicas"))
        roles.append(Role(rname, 1 if r is None else r, mapping(rs.get("template")),
                          compute=(rname == "Worker" or as_worker)))
    return [Gang("MPIJob", name, roles,
                 min_available=as_int(get(spec, "runPolicy", "schedulingPolicy", "minAvailable")),
                 extra={"slotsPerWorker": as_int(spec.get("slotsPerWorker")),
                        "launcherCreationPolicy": spec.get("launcherCreationPolicy")})]


def _pytorchjob(props: dict[str, Any], name: str) -> list[Gang]:
    spec = mapping(props.get("spec"))
    specs = mapping(spec.get("pytorchReplicaSpecs"))
    roles = []
    for rname in ("Master", "Worker"):
        rs = specs.get(rname)
        if not isinstance(rs, dict):
            continue
        r = as_int(rs.get("replicas"))
        roles.append(Role(rname, 1 if r is None else r, mapping(rs.get("template"))))
    return [Gang("PyTorchJob", name, roles,
                 min_available=as_int(get(spec, "runPolicy", "schedulingPolicy", "minAvailable")),
                 extra={"nprocPerNode": spec.get("nprocPerNode")})]


def _training_runtime(props: dict[str, Any], name: str) -> list[Gang]:
    """Kubeflow Trainer v2 (Cluster)TrainingRuntime: the trainer job (label trainjob-ancestor-step=trainer,
    named `node` in the torch runtimes) runs mlPolicy.numNodes pods of its template. A runtime shared by
    several TrainJobs with other numNodes is read at its own default."""
    spec = mapping(props.get("spec"))
    n = as_int(get(spec, "mlPolicy", "numNodes"))
    roles = []
    for job in seq(get(spec, "template", "spec", "replicatedJobs")):
        job = mapping(job)
        if get(job, "template", "metadata", "labels", "trainer.kubeflow.org/trainjob-ancestor-step") == "trainer" \
                or job.get("name") == "node":
            roles.append(Role(text(job.get("name")) or "node", 1 if n is None else n,
                              mapping(get(job, "template", "spec", "template"))))
    return [Gang(text(props.get("kind")) or "ClusterTrainingRuntime", name, roles)] if roles else []


def _trainjob(props: dict[str, Any], name: str) -> list[Gang]:
    """Kubeflow Trainer v2 TrainJob: numNodes, numProcPerNode and resourcesPerNode of spec.trainer (the pod
    template is its runtime's, read by _training_runtime), so its gang has no roles."""
    trainer = mapping(get(props, "spec", "trainer"))
    res = mapping(trainer.get("resourcesPerNode"))
    return [Gang("TrainJob", name, [], extra={
        "numNodes": as_int(trainer.get("numNodes")), "numProcPerNode": trainer.get("numProcPerNode"),
        "gpusPerNode": gpus_of({"containers": [{"resources": res}]}) if res else None,
        "runtime": text(get(props, "spec", "runtimeRef", "name"))})]


READERS = {
    ("leaderworkerset.x-k8s.io", "LeaderWorkerSet"): _lws,
    ("grove.io", "PodCliqueSet"): _grove,
    ("batch.volcano.sh", "Job"): _volcano,
    ("batch", "Job"): _indexed_job,
    ("kubeflow.org", "MPIJob"): _mpijob,
    ("kubeflow.org", "PyTorchJob"): _pytorchjob,
    ("trainer.kubeflow.org", "TrainJob"): _trainjob,
    ("trainer.kubeflow.org", "ClusterTrainingRuntime"): _training_runtime,
    ("trainer.kubeflow.org", "TrainingRuntime"): _training_runtime,
}


@dataclass
class _Kept:
    """What kept_gangs() keeps. Each entry holds its object, so no other object takes its id meanwhile."""
    gangs: dict[tuple[int, str], tuple[dict[str, Any], list[Gang]]] = field(default_factory=dict)  # (id, name)
    specs: dict[int, tuple[Any, list[dict[str, Any]]]] = field(default_factory=dict)   # pod_specs_anywhere
    named: dict[int, tuple[Any, list[tuple[str, dict[str, Any]]]]] = field(default_factory=dict)  # named_pod_specs


_KEPT: contextvars.ContextVar[_Kept | None] = contextvars.ContextVar("kept_gangs", default=None)


def new_kept() -> _Kept:
    """An empty store for kept_gangs(store): the analyzer keeps one per request (policy/pack.py)."""
    return _Kept()


def call_kept(store: _Kept, fn: Any, *args: Any) -> Any:
    """fn(*args) inside kept_gangs(store), without a context manager's cost (the analyzer calls it once per policy
    and resource: ~18,000 times for 1,000 resources)."""
    token = _KEPT.set(store)
    try:
        return fn(*args)
    finally:
        _KEPT.reset(token)


@contextlib.contextmanager
def kept_gangs(store: _Kept | None = None) -> Iterator[None]:
    """Within: gangs(props, name) reads each object once and gives the same Gang objects to every later ask for
    the very same props object (a new list each time); so do pod_specs_anywhere and named_pod_specs. pack.evaluate
    runs its rules in it: a dozen rules ask for every workload's gangs, each a full read of its pod templates.
    `store`: what an earlier kept_gangs(store) kept (the analyzer runs each policy of a request apart, one store per
    request). The objects must not change meanwhile (the rules only read); a kept entry holds its props, so no
    other object takes its id."""
    token = _KEPT.set(store if store is not None else _KEPT.get() or _Kept())
    try:
        yield
    finally:
        _KEPT.reset(token)


def gangs(props: dict[str, Any], fallback_name: str = "") -> list[Gang]:
    """The gangs an object runs ([] for objects that are not multi-pod workloads)."""
    kept = _KEPT.get()
    if kept is not None:
        hit = kept.gangs.get((id(props), fallback_name))
        if hit is not None and hit[0] is props:
            return list(hit[1])
    reader = READERS.get(kind_of(props))
    out = [] if reader is None else reader(props, object_name(props, fallback_name))
    if kept is not None:
        kept.gangs[(id(props), fallback_name)] = (props, out)
        return list(out)
    return out


# ------------------------------------------------------------------ engines
@dataclass(frozen=True)
class Parallelism:
    tensor: int
    pipeline: int = 1
    data: int = 1
    nnodes: int | None = None
    source: str = ""          # "vLLM flags", "SGLang flags", "NIM env"
    tp_name: str = "--tensor-parallel-size"
    pp_name: str = "--pipeline-parallel-size"

    @property
    def gpus(self) -> int:
        return self.tensor * self.pipeline * self.data


VLLM_TP = ("--tensor-parallel-size", "-tp")
VLLM_PP = ("--pipeline-parallel-size", "-pp")
VLLM_DP = ("--data-parallel-size", "-dp")
SGLANG_TP = ("--tp-size", "--tp", "--tensor-parallel-size")
SGLANG_PP = ("--pp-size", "--pp", "--pipeline-parallel-size")
NIM_TP, NIM_PP = "NIM_TENSOR_PARALLEL_SIZE", "NIM_PIPELINE_PARALLEL_SIZE"


def _is_sglang(tokens: Sequence[str]) -> bool:
    return any("sglang" in t for t in tokens)


def engine_parallelism(role: Role) -> Parallelism | None:
    """tp/pp/dp the inference engine of this pod is started with (None: it states none)."""
    for c in role.containers:
        toks = tokens_of(c)
        if _is_sglang(toks):
            tp = first_int_flag(toks, SGLANG_TP)
            if tp is not None:
                tp_flag = next((f for f in SGLANG_TP if flag_values(toks, (f,))), "--tp-size")
                return Parallelism(tp, first_int_flag(toks, SGLANG_PP) or 1, 1,
                                   first_int_flag(toks, ("--nnodes",)), "SGLang", tp_flag, "--pp-size")
            continue
        tp = first_int_flag(toks, VLLM_TP)
        if tp is not None:
            return Parallelism(tp, first_int_flag(toks, VLLM_PP) or 1, first_int_flag(toks, VLLM_DP) or 1,
                               None, "vLLM")
        ntp = as_int(env_literal(c, NIM_TP))
        if ntp is not None:
            return Parallelism(ntp, as_int(env_literal(c, NIM_PP)) or 1, 1, None, "NIM", NIM_TP, NIM_PP)
    return None


@dataclass(frozen=True)
class Launch:
    nnodes: int | None
    nproc_per_node: int | None
    source: str


def _max_of_range(value: str) -> int | None:
    """torchrun --nnodes accepts N or MIN:MAX; the gang must hold MAX."""
    value = value.strip("'\"")
    if ":" in value:
        value = value.rpartition(":")[2]
    return as_int(value)


def training_launch(role: Role) -> Launch | None:
    """--nnodes / --nproc_per_node of torchrun (or deepspeed --num_nodes / --num_gpus, or the
    PET_NNODES / PET_NPROC_PER_NODE env torchrun reads) in this pod's containers."""
    for c in role.containers:
        toks = tokens_of(c)
        if any(t.endswith("torchrun") or t == "torch.distributed.run" for t in toks):
            nn = next((x for x in (_max_of_range(v) for v in flag_values(toks, ("--nnodes",))) if x), None)
            npn = first_int_flag(toks, ("--nproc_per_node", "--nproc-per-node"))
            if nn is not None or npn is not None:
                return Launch(nn, npn, "torchrun")
        if any(t.endswith("deepspeed") for t in toks):
            nn, npn = first_int_flag(toks, ("--num_nodes",)), first_int_flag(toks, ("--num_gpus",))
            if nn is not None or npn is not None:
                return Launch(nn, npn, "deepspeed")
        env_nn = env_literal(c, "PET_NNODES")
        env_np = as_int(env_literal(c, "PET_NPROC_PER_NODE"))
        if env_nn is not None or env_np is not None:
            return Launch(_max_of_range(env_nn) if env_nn else None, env_np, "PET_* env")
    return None


def mpirun_processes(role: Role) -> int | None:
    for c in role.containers:
        toks = tokens_of(c)
        if any(t.endswith("mpirun") or t.endswith("mpiexec") for t in toks):
            n = first_int_flag(toks, ("-np", "-n", "--np", "--n"))
            if n is not None:
                return n
    return None


# ------------------------------------------------------------------ machines and pools
def machine_from_labels(selector: dict[str, str]) -> catalog.Machine | None:
    """The catalog machine a node selector names (instance-type labels or multinode.dev/machine)."""
    for key in INSTANCE_TYPE_LABELS:
        value = selector.get(key)
        if not value:
            continue
        if value in catalog.MACHINES:
            return catalog.MACHINES[value]
        for m in catalog.MACHINES.values():      # multinode.dev/machine holds a label-safe spelling
            if machine_label(m.name) == value.lower():
                return m
    return None


def machine_label(name: str) -> str:
    """The label-safe spelling pools.node_labels uses for multinode.dev/machine."""
    return name.replace("_", "-").replace(".", "-").lower()[:63].strip("-")


def selector_matches(selector: dict[str, str], labels: dict[str, str]) -> bool:
    return all(labels.get(k) == v for k, v in selector.items())
