"""Policy rules over DynamoGraphDeployment props (group nvidia.com), both served versions.

The rule comes from Dynamo's multinode guide: a component's total GPU count is
`multinode.nodeCount` x its GPUs per node, and the parallel sizes in its command/args must use
exactly that many GPUs. Dynamo users hit the mismatch as crash loops after long model downloads,
or as a "multi-node" worker that quietly runs on one node.

Both DGD shapes are read:
- v1alpha1: `spec.services` is a map name -> service; GPUs per node in
  `resources.limits.gpu` (or requests.gpu), command/args in `extraPodSpec.mainContainer`,
  pod labels in `extraPodMetadata.labels` / `labels` / `spec.labels`;
- v1beta1: `spec.components` is a list with `name`; GPUs per node in the `main` container's
  `resources.limits["nvidia.com/gpu"]` (or requests) under `podTemplate.spec.containers`,
  pod labels in `podTemplate.metadata.labels` / `spec.labels`.
A component without `multinode` runs on one node; `multinode: {}` means nodeCount 2 (the CRD
default in both versions).

Parallel sizes are read from the argv (command + args; a shell string after `-c` is split like a
shell would) with each backend's flag names, `--flag value` and `--flag=value`:
- vLLM: --tensor-parallel-size/-tp, --pipeline-parallel-size/-pp, --data-parallel-size/-dp
  (data parallel ranks each hold tp x pp GPUs, so they multiply);
- SGLang: --tp-size/--tensor-parallel-size/--tp, --pp-size/--pipeline-parallel-size,
  --dp-size/--data-parallel-size (multiplies unless --enable-dp-attention, where dp splits the
  tp group);
- TensorRT-LLM (dynamo.trtllm): --tensor-parallel-size, --pipeline-parallel-size, the
  DYN_TRTLLM_TENSOR/PIPELINE_PARALLEL_SIZE env vars, or tensor_parallel_size /
  pipeline_parallel_size in an --override-engine-args JSON. Sizes inside an --extra-engine-args
  YAML file cannot be read from the props: such a component is reported by the advisory rule
  `dynamo-parallelism-readable`, not failed.

Everything here is a pure function of the props; no Pulumi import, no side effects.

The checks are pure functions of the DGD props plus the machine's GPUs per node (`DGD_RULES`).
At the end of this file each is adapted into an engine `Rule` (`RULES`), so `evaluate(records,
cfg)` (plan) and `policies()` (CrossGuard) run them on any
`kubernetes:nvidia.com/<v1alpha1|v1beta1>:DynamoGraphDeployment`.

The machine comes from where the GPU components land, read like the other resource rules do
(Context.machine_for): the pod's own instance-type / multinode.dev/machine labels, else the one
stack node pool whose labels its node selector matches (known in plan, not under preview). When
the GPU components of one DGD land on different machines, or on none the rules can name, the
machine is None and the per-machine rule is skipped (never guessed).

The fabric-label rule follows the pack's `multinode-pod-fabric-label`: mandatory, only for
components with multinode.nodeCount > 1 (a multi-node pod without the label gets no fabric and
NCCL falls back to TCP), and silent when the stack turns the fabric off.
"""
from __future__ import annotations

import json
import re
import shlex
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from multinode import pools
from policy.objects import as_int as _int  # one integer reader for every rule

from .. import objects
from ..engine import ADVISORY, MANDATORY, Context, Resource, Rule

GROUP = "nvidia.com"
KIND = "DynamoGraphDeployment"

# flag names per backend: (tensor, pipeline, data)
FLAGS: dict[str, tuple[tuple[str, ...], tuple[str, ...], tuple[str, ...]]] = {
    "vllm": (("--tensor-parallel-size", "-tp"), ("--pipeline-parallel-size", "-pp"),
             ("--data-parallel-size", "-dp")),
    "sglang": (("--tp-size", "--tensor-parallel-size", "--tp"), ("--pp-size", "--pipeline-parallel-size"),
               ("--dp-size", "--data-parallel-size")),
    "trtllm": (("--tensor-parallel-size", "--tp-size", "--tp_size"),
               ("--pipeline-parallel-size", "--pp-size", "--pp_size"), ()),
}
# Any backend's names when the backend cannot be told (no backendFramework, no dynamo.<x> module).
FLAGS["unknown"] = tuple(tuple(dict.fromkeys(sum((FLAGS[b][i] for b in ("vllm", "sglang", "trtllm")), ())))
                         for i in range(3))  # type: ignore[assignment]

TRTLLM_ENV = ("DYN_TRTLLM_TENSOR_PARALLEL_SIZE", "DYN_TRTLLM_PIPELINE_PARALLEL_SIZE")

_MODULES = (("dynamo.vllm", "vllm"), ("dynamo.sglang", "sglang"), ("dynamo.trtllm", "trtllm"),
            ("sglang.launch_server", "sglang"), ("trtllm-serve", "trtllm"), ("vllm serve", "vllm"),
            ("vllm.entrypoints.openai.api_server", "vllm"))
_FLAG_LIKE = re.compile(r"(^|\s)--?[A-Za-z]")


# ------------------------------------------------------------------ normalized view
@dataclass
class Component:
    """One DGD service (v1alpha1) or component (v1beta1), as the rules need it."""
    name: str
    where: str                          # spec.services.<name> | spec.components[i]
    version: str                        # v1alpha1 | v1beta1
    node_count: int                     # 1 without `multinode`
    multinode: bool                     # a `multinode` block is present
    gpus_per_node: int | None
    gpu_field: str                      # where the GPU count was read
    argv: list[str]
    env: dict[str, str]
    labels: dict[str, str]
    backend: str                        # vllm | sglang | trtllm | unknown
    component_type: str = ""
    annotations: dict[str, str] = field(default_factory=dict)   # pod annotations (NeMo's fabric trigger)


@dataclass
class Parallelism:
    tensor: int = 1
    pipeline: int = 1
    data: int = 1
    tp_flag: str | None = None       # how the size was given (flag name or env var), None: default
    pp_flag: str | None = None
    dp_flag: str | None = None
    explicit: bool = False              # any size given at all
    unreadable: list[str] = field(default_factory=list)   # why the sizes cannot be known

    @property
    def gpus(self) -> int:
        return self.tensor * self.pipeline * self.data

    def describe(self) -> str:
        tp = f"{self.tp_flag or 'tensor parallel (default)'} {self.tensor}"
        pp = f"{self.pp_flag or 'pipeline parallel (default)'} {self.pipeline}"
        dp = f" x {self.dp_flag} {self.data}" if self.data > 1 else ""
        return f"{tp} x {pp}{dp} = {self.gpus} GPUs"


def _dict(v: Any) -> Mapping[str, Any]:
    return v if isinstance(v, Mapping) else {}


def _list(v: Any) -> list[Any]:
    return list(v) if isinstance(v, (list, tuple)) else []


def _str_map(v: Any) -> dict[str, str]:
    return {str(k): str(x) for k, x in _dict(v).items()}


def _plain_env(items: Any) -> dict[str, str]:
    return {str(e.get("name")): str(e.get("value")) for e in _list(items)
            if isinstance(e, Mapping) and e.get("name") and isinstance(e.get("value"), (str, int, float))}


def _gpu_from_native(resources: Any) -> tuple[int | None, str]:
    """GPUs of a corev1 ResourceRequirements: nvidia.com/gpu, else any */gpu, limits before requests."""
    res = _dict(resources)
    for part in ("limits", "requests"):
        values = _dict(res.get(part))
        keys = ["nvidia.com/gpu"] + sorted(k for k in values if str(k).endswith("/gpu") and k != "nvidia.com/gpu")
        for k in keys:
            n = _int(values.get(k))
            if n is not None:
                return n, f"resources.{part}[{k}]"
    return None, ""


def _node_count(service: Mapping[str, Any]) -> tuple[int, bool]:
    mn = service.get("multinode")
    if not isinstance(mn, Mapping):
        return 1, False
    n = _int(mn.get("nodeCount"))
    return (n if n is not None else 2), True   # CRD default nodeCount 2 (both versions)


def _backend(argv: Sequence[str], framework: Any) -> str:
    text = " ".join(argv)
    for needle, backend in _MODULES:
        if re.search(rf"(^|[\s/=]){re.escape(needle)}(\s|$)", text):
            return backend
    return framework if framework in ("vllm", "sglang", "trtllm") else "unknown"


def _v1alpha1(spec: Mapping[str, Any]) -> list[Component]:
    out = []
    base_labels = _str_map(spec.get("labels"))
    base_env = _plain_env(spec.get("envs"))
    for name, svc in _dict(spec.get("services")).items():
        svc = _dict(svc)
        main = _dict(_dict(svc.get("extraPodSpec")).get("mainContainer"))
        argv = [str(x) for x in _list(main.get("command")) + _list(main.get("args"))]
        gpus, gpu_field = None, ""
        res = _dict(svc.get("resources"))
        for part in ("limits", "requests"):
            n = _int(_dict(res.get(part)).get("gpu"))
            if n is not None:
                gpus, gpu_field = n, f"resources.{part}.gpu"
                break
        if gpus is None:
            gpus, gpu_field = _gpu_from_native(main.get("resources"))
            gpu_field = f"extraPodSpec.mainContainer.{gpu_field}" if gpus is not None else ""
        labels = {**base_labels, **_str_map(svc.get("labels")),
                  **_str_map(_dict(svc.get("extraPodMetadata")).get("labels"))}
        env = {**base_env, **_plain_env(svc.get("envs")), **_plain_env(main.get("env"))}
        nodes, multinode = _node_count(svc)
        annotations = {**_str_map(spec.get("annotations")), **_str_map(svc.get("annotations")),
                       **_str_map(_dict(svc.get("extraPodMetadata")).get("annotations"))}
        out.append(Component(str(name), f"spec.services.{name}", "v1alpha1", nodes, multinode, gpus, gpu_field,
                             argv, env, labels, _backend(argv, spec.get("backendFramework")),
                             str(svc.get("subComponentType") or svc.get("componentType") or ""), annotations))
    return out


def _main_container(pod_spec: Mapping[str, Any]) -> dict[str, Any]:
    containers = [c for c in _list(pod_spec.get("containers")) if isinstance(c, Mapping)]
    for c in containers:
        if c.get("name") == "main":
            return dict(c)
    return dict(containers[0]) if containers else {}


def _v1beta1(spec: Mapping[str, Any]) -> list[Component]:
    out = []
    base_labels = _str_map(spec.get("labels"))
    base_env = _plain_env(spec.get("env"))
    for i, comp in enumerate(_list(spec.get("components"))):
        comp = _dict(comp)
        tmpl = _dict(comp.get("podTemplate"))
        main = _main_container(_dict(tmpl.get("spec")))
        argv = [str(x) for x in _list(main.get("command")) + _list(main.get("args"))]
        gpus, gpu_field = _gpu_from_native(main.get("resources"))
        labels = {**base_labels, **_str_map(_dict(tmpl.get("metadata")).get("labels"))}
        env = {**base_env, **_plain_env(main.get("env"))}
        nodes, multinode = _node_count(comp)
        name = str(comp.get("name") or f"#{i}")
        out.append(Component(name, f"spec.components[{i}]", "v1beta1", nodes, multinode, gpus,
                             f"podTemplate container {main.get('name', '?')} {gpu_field}" if gpu_field else "",
                             argv, env, labels, _backend(argv, spec.get("backendFramework")),
                             str(comp.get("type") or ""),
                             {**_str_map(spec.get("annotations")),
                              **_str_map(_dict(tmpl.get("metadata")).get("annotations"))}))
    return out


def is_dgd(props: Mapping[str, Any]) -> bool:
    api = str(props.get("apiVersion") or "")
    return props.get("kind") == KIND and api.split("/", 1)[0] == GROUP


def components(props: Mapping[str, Any]) -> list[Component]:
    """Every service/component of a DGD in either served version ([] for anything else)."""
    if not is_dgd(props):
        return []
    spec = _dict(props.get("spec"))
    version = str(props.get("apiVersion") or "").split("/", 1)[-1]
    if version == "v1alpha1" or ("services" in spec and "components" not in spec):
        return _v1alpha1(spec)
    return _v1beta1(spec)


# ------------------------------------------------------------------ argv parsing
def tokens(argv: Sequence[str]) -> list[str]:
    """argv with shell strings split: the script after `-c`, or any element that holds flags.
    JSON values (starting with { or [) are kept whole so they can be parsed."""
    out: list[str] = []
    prev = ""
    for a in argv:
        s = str(a)
        stripped = s.strip()
        shellish = prev == "-c" or (" " in stripped and not stripped.startswith(("{", "["))
                                    and _FLAG_LIKE.search(stripped) is not None)
        if shellish:
            try:
                out.extend(shlex.split(s))
            except ValueError:          # unbalanced quotes: fall back to whitespace
                out.extend(s.split())
        else:
            out.append(s)
        prev = s
    return out


def _flag_value(toks: Sequence[str], names: Sequence[str]) -> tuple[str | None, str | None]:
    """(flag, raw value) of the last occurrence of any of `names` (argparse: the last one wins)."""
    found: tuple[str | None, str | None] = (None, None)
    for i, t in enumerate(toks):
        for n in names:
            if t == n:
                found = (n, toks[i + 1] if i + 1 < len(toks) else "")
            elif t.startswith(n + "="):
                found = (n, t[len(n) + 1:])
    return found


_VAR = re.compile(r"^\$(?:\((\w+)\)|\{(\w+)\}|(\w+))\Z")


def _resolve(raw: str, env: Mapping[str, str]) -> int | None:
    n = _int(raw)
    if n is not None:
        return n
    m = _VAR.match(raw.strip().strip('"\''))
    if m:
        return _int(env.get(next(g for g in m.groups() if g), ""))
    return None


def parallelism(comp: Component) -> Parallelism:
    toks = tokens(comp.argv)
    tp_names, pp_names, dp_names = FLAGS[comp.backend]
    par = Parallelism()
    for attr, names in (("tensor", tp_names), ("pipeline", pp_names), ("data", dp_names)):
        if not names:
            continue
        flag, raw = _flag_value(toks, names)
        if flag is None:
            continue
        par.explicit = True
        value = _resolve(raw or "", comp.env)
        if value is None or value < 1:
            par.unreadable.append(f"{flag} {raw!r} is not a number this rule can resolve")
            continue
        setattr(par, attr, value)
        setattr(par, {"tensor": "tp_flag", "pipeline": "pp_flag", "data": "dp_flag"}[attr], flag)
    if comp.backend == "sglang" and "--enable-dp-attention" in toks:
        par.data, par.dp_flag = 1, None        # dp attention splits the tp group, no extra GPUs
    if comp.backend in ("trtllm", "unknown"):
        _trtllm_sources(comp, toks, par)
    return par


def _trtllm_sources(comp: Component, toks: Sequence[str], par: Parallelism) -> None:
    """dynamo.trtllm: env vars and --override-engine-args JSON count when no flag set the size;
    an --extra-engine-args file makes sizes not given elsewhere unknowable."""
    for attr, var, flag_attr in (("tensor", TRTLLM_ENV[0], "tp_flag"), ("pipeline", TRTLLM_ENV[1], "pp_flag")):
        if getattr(par, flag_attr) is None and _int(comp.env.get(var, "")) is not None:
            setattr(par, attr, _int(comp.env[var]))
            setattr(par, flag_attr, f"env {var}")
            par.explicit = True
    flag, raw = _flag_value(toks, ("--override-engine-args",))
    if flag and raw:
        try:
            over = json.loads(raw)
        except ValueError:
            over = None
        if isinstance(over, Mapping):
            for attr, key, flag_attr in (("tensor", "tensor_parallel_size", "tp_flag"),
                                         ("pipeline", "pipeline_parallel_size", "pp_flag")):
                n = _int(over.get(key))
                if n is not None and n >= 1:
                    setattr(par, attr, n)
                    setattr(par, flag_attr, f"--override-engine-args {key}")
                    par.explicit = True
    eflag, efile = _flag_value(toks, ("--extra-engine-args",))
    if eflag and par.tp_flag is None:
        par.unreadable.append(f"tensor parallel size is set in the --extra-engine-args file {efile!r}, which "
                              f"the policy cannot read; also pass --tensor-parallel-size on the command line")


# ------------------------------------------------------------------ rules
def _who(comp: Component) -> str:
    return f"component {comp.name} ({comp.version} {comp.where})"


def _gpus_word(n: int) -> str:
    return f"{n} GPU{'' if n == 1 else 's'}"


def _fix(comp: Component, par: Parallelism, total: int) -> str:
    tp_name = par.tp_flag if par.tp_flag and not par.tp_flag.startswith(("env ", "--override")) else \
        FLAGS[comp.backend][0][0]
    others = par.pipeline * par.data
    parts = []
    if total % others == 0:
        keep = f" (keeping pipeline {par.pipeline}" + (f", data parallel {par.data})" if par.data > 1 else ")")
        parts.append(f"set {tp_name} {total // others}{keep}")
    gpn = comp.gpus_per_node or 0
    if gpn and par.gpus % gpn == 0 and par.gpus // gpn >= 1:
        nodes = par.gpus // gpn
        parts.append(f"set multinode.nodeCount {nodes}" if nodes > 1 else "remove multinode (one node)")
    return " or ".join(parts) if parts else f"make the parallel sizes multiply to {total}"


def check_dgd_parallelism(props: Mapping[str, Any], machine_gpus: int | None = None) -> list[str]:
    """tensor x pipeline (x data) parallel == multinode.nodeCount x GPUs per node, per component."""
    out: list[str] = []
    for comp in components(props):
        par = parallelism(comp)
        if not comp.multinode and not (par.explicit and comp.gpus_per_node):
            continue          # single-node without parallel flags (frontends, planners, ...)
        if comp.gpus_per_node is None or comp.gpus_per_node < 1:
            if comp.multinode:
                out.append(f"{_who(comp)}: multinode.nodeCount {comp.node_count} but no GPU request; the operator "
                           f"spans nodeCount x the container's GPUs, so set the GPU limit per node "
                           + ("(resources.limits.gpu)" if comp.version == "v1alpha1"
                              else "(nvidia.com/gpu on the main container)"))
            continue
        if par.unreadable:
            continue          # reported by the advisory rule; never guess
        total = comp.node_count * comp.gpus_per_node
        if par.gpus == total:
            continue
        nodes = (f"multinode.nodeCount {comp.node_count}" if comp.multinode else "1 node (no multinode)")
        out.append(f"{_who(comp)}: {par.describe()}, but {nodes} x {_gpus_word(comp.gpus_per_node)} per node "
                   f"({comp.gpu_field}) = {total}; {_fix(comp, par, total)}")
    return out


def check_dgd_machine(props: Mapping[str, Any], machine_gpus: int | None = None) -> list[str]:
    """GPUs per node not above the machine's GPUs (when the machine is known)."""
    if not machine_gpus:
        return []
    out = []
    for comp in components(props):
        if comp.gpus_per_node and comp.gpus_per_node > machine_gpus:
            total = comp.node_count * comp.gpus_per_node
            fix_nodes = -(-total // machine_gpus)
            out.append(f"{_who(comp)}: {_gpus_word(comp.gpus_per_node)} per node ({comp.gpu_field}), but the "
                       f"machine has {machine_gpus}; set the GPU limit to {machine_gpus} and "
                       f"multinode.nodeCount {fix_nodes} to keep {total} GPUs")
    return out


def check_dgd(props: Mapping[str, Any], machine_gpus: int | None = None) -> list[str]:
    """The multinode rule on a DGD (either version): parallel sizes match nodeCount x GPUs per node,
    and GPUs per node fit the machine. [] when it holds or the props are not a DGD."""
    return check_dgd_parallelism(props, machine_gpus) + check_dgd_machine(props, machine_gpus)


def check_dgd_fabric_label(props: Mapping[str, Any], machine_gpus: int | None = None) -> list[str]:
    """Multi-node components label their pods for the fabric policies."""
    out = []
    key, value = pools.FABRIC_POD_LABEL, pools.FABRIC_POD_LABEL_VALUE
    for comp in components(props):
        # NeMo's annotation is the other trigger the Kyverno fabric policies match.
        if comp.node_count > 1 and not pools.asks_for_fabric(comp.labels, comp.annotations):
            where = ("podTemplate.metadata.labels" if comp.version == "v1beta1"
                     else "extraPodMetadata.labels")
            out.append(f"{_who(comp)}: multinode.nodeCount {comp.node_count} but its pods lack the label "
                       f"{key}={value} (found {comp.labels.get(key)!r}), so the fabric policies do not give them "
                       f"their fabric devices and NCCL settings; add it under {where} (or spec.labels), or "
                       f"NeMo's annotation {pools.NEMO_ANNOTATION}: \"true\"")
    return out


def check_dgd_readable(props: Mapping[str, Any], machine_gpus: int | None = None) -> list[str]:
    """Components whose parallel sizes the policy cannot read (so the multinode rule cannot judge them)."""
    out = []
    for comp in components(props):
        par = parallelism(comp)
        if par.unreadable and (comp.multinode or comp.gpus_per_node):
            out.append(f"{_who(comp)}: cannot check multinode.nodeCount {comp.node_count} x "
                       f"{comp.gpus_per_node} GPUs per node against the parallel sizes: " + "; ".join(par.unreadable))
    return out


@dataclass(frozen=True)
class DgdRule:
    name: str
    description: str
    enforcement: str                                              # mandatory | advisory
    check: Callable[[Mapping[str, Any], int | None], list[str]]  # (props, machine GPUs) -> messages
    remediation: str = ""


DGD_RULES: list[DgdRule] = [
    DgdRule("dynamo-parallelism-matches-gpus",
            "DynamoGraphDeployment (v1alpha1 services / v1beta1 components): tensor x pipeline (x data) parallel "
            "read from the worker's command/args (vLLM, SGLang, TensorRT-LLM flag names) equals "
            "multinode.nodeCount x GPUs per node.",
            MANDATORY, check_dgd_parallelism,
            "Make the parallel flags multiply to nodeCount x GPUs per node, or change nodeCount / the GPU limit."),
    DgdRule("dynamo-gpus-per-node-within-machine",
            "A DynamoGraphDeployment component requests no more GPUs per node than the machine has.",
            MANDATORY, check_dgd_machine,
            "Lower the per-node GPU limit to the machine's GPUs and raise multinode.nodeCount."),
    # Mandatory like the pack's multinode-pod-fabric-label rule: without the label the Kyverno
    # fabric policies skip the pods and NCCL falls back to TCP sockets in silence.
    DgdRule("dynamo-multinode-fabric-label",
            f"Multi-node DynamoGraphDeployment components carry {pools.FABRIC_POD_LABEL}="
            f"{pools.FABRIC_POD_LABEL_VALUE} on their pods so the fabric policies inject devices and NCCL settings.",
            MANDATORY, check_dgd_fabric_label,
            "Add the label to podTemplate.metadata.labels (v1beta1) or extraPodMetadata.labels (v1alpha1)."),
    DgdRule("dynamo-parallelism-readable",
            "The parallel sizes of every GPU component of a DynamoGraphDeployment can be read from its props "
            "(not only from an engine config file), so the multinode rule can check them.",
            ADVISORY, check_dgd_readable,
            "Pass the parallel sizes as command-line flags too."),
]


# ------------------------------------------------------------------ engine rules
FABRIC_RULE = "dynamo-multinode-fabric-label"


def dgd_props(res: Resource) -> dict[str, Any] | None:
    """The DGD's props, or None for anything else. apiVersion/kind come from the props, else from the
    type token (kubernetes:nvidia.com/v1beta1:DynamoGraphDeployment) when a provider leaves them out."""
    props = dict(res.props)
    if "kind" not in props or "apiVersion" not in props:
        parts = res.type.split(":")
        if len(parts) == 3 and parts[0] == "kubernetes":
            props.setdefault("apiVersion", parts[1])
            props.setdefault("kind", parts[2])
    return props if is_dgd(props) else None


def _pod_spec(props: Mapping[str, Any], comp: Component) -> dict[str, Any]:
    """The pod spec of one component: v1beta1 podTemplate.spec, v1alpha1 extraPodSpec."""
    spec = props.get("spec") or {}
    if comp.version == "v1alpha1":
        svc = objects.get(spec, "services", comp.name, default={}) or {}
        return (svc.get("extraPodSpec") or {}) if isinstance(svc, dict) else {}
    index = int(comp.where[comp.where.index("[") + 1:-1])
    return objects.get(spec, "components", index, "podTemplate", "spec", default={}) or {}


def machine_gpus(props: Mapping[str, Any], ctx: Context) -> int | None:
    """GPUs per node of the one machine every GPU component of the DGD lands on (None: not known)."""
    found = set()
    for comp in components(props):
        if not comp.gpus_per_node:
            continue
        for sel in objects.Role(comp.name, 1, {"spec": _pod_spec(props, comp)}).selectors():
            m, _ = ctx.machine_for(sel)
            found.add(m.gpus if m is not None else None)
    if len(found) != 1:
        return None
    return next(iter(found))


def _adapt(rule: DgdRule) -> Rule:
    def check(res: Resource, ctx: Context) -> Iterator[str]:
        props = dgd_props(res)
        if props is None:
            return
        if rule.name == FABRIC_RULE and not ctx.fabric_enabled():
            return
        yield from rule.check(props, machine_gpus(props, ctx))
    check.__name__ = f"check_{rule.name.replace('-', '_')}"
    return Rule(rule.name, rule.description, rule.enforcement, check, remediation=rule.remediation)


RULES = [_adapt(r) for r in DGD_RULES]
