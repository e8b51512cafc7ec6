"""The package's public components: what `pulumi package add` publishes to every Pulumi language.

Each takes typed `args` (components/args.py, generated from multinode/config.py) and runs exactly what the
Python program runs: the same config validation (one error naming every bad key, before any resource), the
same cloud module, the same children. `Platform` is the whole stack; `GpuNodePool` is one pool with its
fabric on an existing cluster. Hosted by provider/__main__.py; `multinode schema` prints the schema.
"""
# No `from __future__ import annotations`: Pulumi's analyzer reads these annotations as objects.
import asyncio
import inspect
import re
import typing
from collections.abc import Mapping
from typing import Any

import pulumi
from pulumi.output import Unknown
from pulumi.provider import ConstructResult
from pulumi.provider.experimental.component import ComponentProvider
from pulumi.runtime import rpc
from pydantic import BaseModel

from components import clouds
from components.args import GpuNodePoolArgs, PlatformArgs
from components.clouds.base import TYPE_PREFIX, ClusterAccessArgs, PoolOutputsMixin
from components.clouds.base import GpuNodePoolArgs as _CloudPoolArgs
from components.platform import Platform as _Platform
from multinode import checks, config, identities
from multinode.errors import ConfigError, Problem
from multinode.numbers import whole_numbers

PACKAGE = "multinode"


class NodePoolOutput(typing.TypedDict):
    """What a node pool exports."""
    machine: str
    "The pool's machine type."
    node_count: int
    "Nodes in the pool."
    gpus_per_node: int
    "GPUs per node."
    node_selector: dict[str, str]
    "The labels that select the pool's nodes (workloads use them)."
    fabric: dict[str, typing.Any]
    "The pool's fabric: kind, device resource, devices per node and per GPU, NCCL net plugin, networks."


class WorkloadOutput(typing.TypedDict):
    """What a workload exports."""
    kind: str
    "The workload's kind."
    objects: list[str]
    "The Kubernetes objects it created, as Kind/name."


# ---------------------------------------------------------------- args -> the program's config
def _to_raw(model: type[BaseModel], value: Any) -> Any:
    """Args as the provider hands them (snake_case keys, plain values) -> the stack file's camelCase raw
    mapping, directed by the pydantic model so user data (labels, Helm values, manifests) keeps its keys.
    Unknown values are refused before (refuse_unknowns)."""
    if not isinstance(value, Mapping):
        return value                       # pydantic reports the wrong type with the key's path
    by_name = {n: f for n, f in model.model_fields.items()}
    by_alias = {f.alias: n for n, f in model.model_fields.items() if f.alias}
    out: dict[str, Any] = {}
    for key, v in value.items():
        name = key if key in by_name else by_alias.get(key)
        if name is None:
            out[key] = v                   # unknown key: config.load names it and the fix
            continue
        field = by_name[name]
        alias = field.alias or name
        out[alias] = _convert(field.annotation, v)
    return out


def _convert(annotation: Any, value: Any) -> Any:
    for t in [annotation, *typing.get_args(annotation)]:
        if isinstance(t, type) and issubclass(t, BaseModel):
            return _to_raw(t, value)
        if typing.get_origin(t) is list:
            (inner,) = typing.get_args(t)
            if isinstance(inner, type) and issubclass(inner, BaseModel) and isinstance(value, list):
                return [_to_raw(inner, v) for v in value]
    return value


def _is_output(value: Any) -> bool:
    """An Output, an unknown (a preview's computed value) or a secret as the engine sends it (wrapped)."""
    return isinstance(value, (Unknown, pulumi.Output)) or value == rpc.UNKNOWN or rpc.is_rpc_secret(value)


def unknown_paths(value: Any, path: str = "") -> list[str]:
    """Key paths (camelCase, as the caller wrote them) whose value is unknown (a preview's computed value), an
    Output or a secret, except the identities that may be Outputs (multinode/identities.py): the plain inputs must
    be known before the topology contract can be checked."""
    if _is_output(value):
        return [] if _dotted(path) in identities.OUTPUT_KEYS else [path]
    if isinstance(value, Mapping):
        return [p for k, v in value.items() for p in unknown_paths(v, f"{path}.{k}" if path else str(k))]
    if isinstance(value, list):
        return [p for i, v in enumerate(value) for p in unknown_paths(v, f"{path}[{i}]")]
    return []


def _dotted(path: str) -> str:
    """A key path in the camelCase of identities.OUTPUT_KEYS (a Python caller writes snake_case keys)."""
    return re.sub(r"_([a-z])", lambda m: m.group(1).upper(), path)


def refuse_unknowns(args: Mapping[str, Any], source: str) -> None:
    """One ConfigError naming every plain input (all but the secret keys and the identities) that is unknown, an
    Output or a secret: the topology contract needs the numbers before anything is registered. Called by the
    provider before the SDK maps the inputs (it fails on an unknown with a bare conversion error) and by
    config_from_args for Python callers."""
    secret = set(config.SECRET_KEYS) | {_python_name(k) for k in config.SECRET_KEYS}
    paths = unknown_paths({k: v for k, v in dict(args or {}).items() if k not in secret})
    if paths:
        raise ConfigError([Problem(p, "is unknown at preview or secret (a value computed by another resource, or "
                                      "an Output); give a plain value: the topology contract is checked before "
                                      "anything deploys. Only "
                                      + ", ".join(identities.OUTPUT_KEYS) + " and the secrets may be Outputs")
                           for p in paths], source=source)


def _as_output(value: Any, resources: set[Any], secret: bool) -> Any:
    """An identity as an Output: a plain value unchanged unless it carries dependencies or secrecy; an unknown
    or an engine-wrapped secret as the Output it stands for."""
    if isinstance(value, pulumi.Output):
        return pulumi.Output.secret(value) if secret else value
    if rpc.is_rpc_secret(value):
        return _as_output(rpc.unwrap_rpc_secret(value), resources, True)
    known = not (isinstance(value, Unknown) or value == rpc.UNKNOWN)
    if known and not resources and not secret:
        return value
    from pulumi.output import _OutputData
    data: asyncio.Future[Any] = asyncio.Future()
    data.set_result(_OutputData(resources=set(resources), value=value if known else None, is_known=known,
                                is_secret=secret))
    return pulumi.Output._from_data(data)


def lift_inputs(inputs: Mapping[str, Any]) -> dict[str, Any]:
    """The engine's inputs with every identity (identities.OUTPUT_KEYS) an Output where it sits in the args.

    The provider server wraps a whole top-level input in one Output when it has dependencies or is secret (e.g.
    `cluster`, when another resource computed `cluster.name`), and the SDK's mapping of an object-typed input
    drops an Output (it maps an empty object). Its value is already resolved (the server builds it from the
    request): unwrap it, and give its dependencies and secrecy to the identities inside it. Other inputs stay as
    they are (a secret key's Output; an unknown in a plain key, which refuse_unknowns then names)."""
    out = dict(inputs or {})
    heads = {p.split(".", 1)[0] for p in identities.OUTPUT_KEYS}
    for key in heads & set(out):
        value, resources, secret = out[key], set(), False
        if isinstance(value, pulumi.Output):
            data = value._data
            if not data.done():
                continue                   # not the server's resolved wrapper: left to refuse_unknowns
            resolved = data.result()
            if not isinstance(resolved.value, Mapping):
                continue
            value, resources, secret = dict(resolved.value), set(resolved.resources), resolved.is_secret
        if not isinstance(value, Mapping):
            continue
        value = dict(value)
        for path, takers in identities.OUTPUT_KEYS.items():
            head, _, leaf = path.partition(".")
            if head != key or leaf not in value:
                continue
            if out.get("cloud") in takers or _is_output(value[leaf]):
                value[leaf] = _as_output(value[leaf], resources, secret)
            # else a plain value beside another identity: kept plain (this cloud needs it known, and it is)
        out[key] = value
    return out


def _take_identities(args: dict[str, Any], source: str) -> dict[str, Any]:
    """Take every identity Output out of `args` (identities.OUTPUT_KEYS), leaving a placeholder the config check
    accepts; return them by key path. A cloud that cannot take one as an Output gets a ConfigError naming the key,
    before any resource."""
    taken: dict[str, Any] = {}
    cloud = str(args.get("cloud"))                 # a Cloud enum member once the SDK mapped the inputs
    for path, takers in identities.OUTPUT_KEYS.items():
        head, _, leaf = path.partition(".")
        parent = args.get(head)
        if not isinstance(parent, Mapping):
            continue
        for k in {leaf, identities.field_of(path)[1]}:
            if k not in parent or not _is_output(parent[k]):
                continue
            if cloud not in takers:
                raise ConfigError([Problem(path, f"is an Output (computed by another resource), which cloud {cloud!r} "
                                                 "cannot take: it needs the value at preview (on gcp and oci the "
                                                 "cluster name is part of the names of what a pool creates); give a "
                                                 f"plain value (it may be an Output on {', '.join(takers)})")],
                                  source=source)
            taken[path] = _as_output(parent[k], set(), False)
            parent = {**parent, k: identities.PLACEHOLDER}
            args[head] = parent
    return taken


def _put_identities(cfg: config.StackConfig, taken: Mapping[str, Any]) -> config.StackConfig:
    """The validated config with each identity Output back in place of its placeholder (pydantic models are
    copied, never mutated; model_copy does not validate, so the Output stays as it is)."""
    for path, value in taken.items():
        cfg = _replace(cfg, path.split("."), value)
    return cfg


def _replace(model: Any, keys: list[str], value: Any) -> Any:
    name = _attr(model, keys[0])
    new = value if len(keys) == 1 else _replace(getattr(model, name), keys[1:], value)
    return model.model_copy(update={name: new})


def _attr(model: BaseModel, key: str) -> str:
    for n, f in type(model).model_fields.items():
        if (f.alias or n) == key or n == key:
            return n
    raise KeyError(key)


def config_from_args(args: Mapping[str, Any], source: str) -> config.StackConfig:
    """The validated StackConfig of a component's args, secrets kept as Pulumi secrets.

    Every key of config.SECRET_KEYS is a secret whichever way it arrives (a plain string from a program,
    or a secret Output from the engine): config.load sees "[secret]" and the loaded config holds the
    value as a secret Output, which the components pass on as they pass the stack file's secrets. An identity
    (identities.OUTPUT_KEYS) may be an Output too: the config check sees a placeholder, and the loaded config
    holds the Output, which the cloud's components pass to the SDK calls that take it as an Input."""
    args = dict(args or {})
    secret_values: dict[str, Any] = {}
    for key in config.SECRET_KEYS:
        name = _python_name(key)
        for k in (key, name):
            if k in args and args[k] is not None:
                secret_values[name] = pulumi.Output.secret(args.pop(k))
    args = lift_inputs(args)
    refuse_unknowns(args, source)
    taken = _take_identities(args, source)
    raw = _to_raw(config.StackConfig, whole_numbers(args))
    raw.update({config.StackConfig.model_fields[n].alias or n: config.SECRET_PLACEHOLDER for n in secret_values})
    cfg = checks.load(raw, [config.StackConfig.model_fields[n].alias or n for n in secret_values], source=source)
    return _put_identities(cfg.model_copy(update=secret_values), taken)


def _python_name(alias: str) -> str:
    for n, f in config.StackConfig.model_fields.items():
        if (f.alias or n) == alias:
            return n
    raise KeyError(alias)


def _pool_summaries(node_pools: Mapping[str, Any]) -> pulumi.Output:
    # Keys in the schema's camelCase: the provider renames the keys of an output that is itself a typed
    # object, not those of a map of them, so NodePoolOutput's values are written as the wire has them.
    return pulumi.Output.from_input({
        n: {"machine": p.machine, "nodeCount": p.node_count, "gpusPerNode": p.gpus_per_node,
            "nodeSelector": p.node_selector, "fabric": p.fabric} for n, p in node_pools.items()})


# ---------------------------------------------------------------- components
class Platform(_Platform):
    """The whole multi-node GPU stack on one existing cluster: GPU node pools with the cloud's fabric,
    ReadWriteMany checkpoint storage (kept through destroy), the schedulers and Kyverno add-ons, the
    Kyverno fabric policies, and the inference / training workloads. The args are a stack file's
    `multinode:` keys; the topology contract is checked before any resource is registered."""

    kubeconfig: pulumi.Output[str]
    "The cluster's kubeconfig (a secret)."
    node_pools: pulumi.Output[dict[str, NodePoolOutput]]
    "Each node pool by name: machine, node count, GPUs per node, node selector, fabric."
    checkpoint_claim: pulumi.Output[str | None]
    "The ReadWriteMany checkpoint claim's name (when storage is configured)."
    workloads: pulumi.Output[dict[str, WorkloadOutput]]
    "Each workload by name: its kind and the Kubernetes objects it created."

    def __init__(self, name: str, args: PlatformArgs, opts: pulumi.ResourceOptions | None = None):
        cfg = config_from_args(args, source=f"{PACKAGE}:index:Platform {name}")
        for problem in checks.advisories(cfg):
            pulumi.log.warn(str(problem))
        super().__init__(name, cfg, opts)
        # the program's Platform keeps its children as attributes; the package's outputs are these
        self.kubeconfig = self.cluster.kubeconfig
        # The program's Platform keeps its child components under these names; as package outputs they
        # are the plain summaries the program exports (the children stay reachable as pool_components /
        # workload_components for Python users of the package).
        self.pool_components = dict(self.node_pools)
        self.workload_components = dict(self.workloads)
        self.node_pools = _pool_summaries(self.pool_components)  # type: ignore[assignment]
        self.checkpoint_claim = self.storage.claim_name if self.storage else pulumi.Output.from_input(None)
        self.workloads = pulumi.Output.from_input(  # type: ignore[assignment]
            {n: {"kind": wl.kind, "objects": wl.objects} for n, wl in self.workload_components.items()})


class GpuNodePool(pulumi.ComponentResource, PoolOutputsMixin):
    """One GPU node pool with its cloud's fabric (EFA, InfiniBand, GPUDirect-TCPXO, RDMA over SR-IOV) on an
    existing cluster: the same cloud resources a Platform creates for the pool, checked the same way."""

    machine: pulumi.Output[str]
    "The pool's machine type."
    node_count: pulumi.Output[int]
    "Nodes in the pool."
    gpus_per_node: pulumi.Output[int]
    "GPUs per node."
    node_labels: pulumi.Output[dict[str, str]]
    "The labels the pool's nodes carry."
    node_selector: pulumi.Output[dict[str, str]]
    "The labels that select the pool's nodes (give them to workloads)."
    node_taints: pulumi.Output[list[dict[str, str]]]
    "The taints the pool's nodes carry."
    fabric: pulumi.Output[dict[str, typing.Any]]
    "The pool's fabric: kind, device resource, devices per node and per GPU, NCCL net plugin, networks."

    def __init__(self, name: str, args: GpuNodePoolArgs, opts: pulumi.ResourceOptions | None = None):
        cfg = pool_config(args, source=f"{PACKAGE}:index:GpuNodePool {name}")
        pool = cfg.node_pools[0]
        cm = clouds.load(cfg.cloud)
        super().__init__(TYPE_PREFIX + "GpuNodePool", name, None, opts)
        self.cluster = cm.ClusterAccess(f"{name}-cluster", ClusterAccessArgs(cfg), pulumi.ResourceOptions(parent=self))
        cm.build_pool(self, name, _CloudPoolArgs(cfg, pool, self.cluster))


def pool_config(args: Mapping[str, Any], source: str) -> config.StackConfig:
    """A standalone GpuNodePool's args as a stack config of one pool."""
    raw = {k: v for k, v in dict(args or {}).items() if k not in ("node_pool", "nodePool")}
    raw["node_pools"] = [dict((args or {}).get("node_pool") or (args or {}).get("nodePool") or {})]
    # a pool alone installs no add-ons: the add-on rules (e.g. Grove needs KAI) are the Platform's
    raw["addons"] = {n: {"enabled": False} for n in config.Addons.model_fields}
    return config_from_args(raw, source)


COMPONENTS: list[type[pulumi.ComponentResource]] = [Platform, GpuNodePool]
# The config check each component runs first, by component name (the provider runs it before the SDK maps the
# inputs, so a wrong enum value gets the config's message: the key, the allowed values, the closest one).
CONFIG_CHECKS = {"Platform": config_from_args, "GpuNodePool": pool_config}
# The analyzer takes a class's __doc__ as its schema description, indentation included (Python 3.11
# keeps it): give it the text as written.
for _component in COMPONENTS:
    _component.__doc__ = inspect.cleandoc(_component.__doc__ or "")


class Provider(ComponentProvider):
    """Pulumi's component provider with checks first, before the component or any resource is constructed: the
    identities another resource computed are lifted out of the server's wrapper (lift_inputs), a plain input
    (every key but the secrets and the identities) that is unknown is refused naming its key path (the SDK would
    otherwise fail on it with a bare conversion error), and the config check runs on the inputs as sent."""

    def construct(self, name: str, resource_type: str, inputs: Any,
                  options: pulumi.ResourceOptions | None = None) -> ConstructResult:
        component = resource_type.rsplit(":", 1)[-1]
        source = f"{PACKAGE}:index:{component} {name}"
        inputs = lift_inputs(inputs)
        refuse_unknowns(inputs, source=source)
        if component in CONFIG_CHECKS:
            CONFIG_CHECKS[component](inputs, source)
        return super().construct(name, resource_type, inputs, options)
