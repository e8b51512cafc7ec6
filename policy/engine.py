"""The rule engine's vocabulary: what every rule file under policy/rules/ is written against.

Every rule is a plain function over resource records (`Resource`: type, name, urn, props) and a
`Context` (the stack config when there is one, the node pools, settings). policy/pack.py runs
them, two ways (it imports the rules; the rules import this module, so the two never form a cycle):

* `evaluate(records, cfg)` -- the offline `plan`: records are multinode.recording Registration dicts
  (keys type, name, urn, inputs, protect, retainOnDelete...). Returns violation dicts with keys
  policy, enforcementLevel, resource, type, urn, message.
* `policies()` -- the CrossGuard pack: each rule becomes a pulumi_policy ResourceValidationPolicy or
  StackValidationPolicy whose validate() calls the same function (the stack config is not available
  under `pulumi preview`; the rules then derive what they can from the props alone).
"""
from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, cast

from multinode import catalog, fabric
from multinode import pools as mpools

from . import objects

MANDATORY, ADVISORY = "mandatory", "advisory"


# ------------------------------------------------------------------ resources
@dataclass
class Resource:
    type: str
    name: str
    urn: str = ""
    props: dict[str, Any] = field(default_factory=dict)
    protect: bool = False
    retain_on_delete: bool | None = None      # None: not known (pulumi preview does not pass it)

    @property
    def is_k8s(self) -> bool:
        return self.type.startswith("kubernetes:") and "kind" in self.props

    @property
    def kind(self) -> tuple[str, str]:
        return objects.kind_of(self.props)

    @property
    def label(self) -> str:
        """How messages name the resource: the Kubernetes object if it is one, else the Pulumi name."""
        return objects.object_name(self.props, self.name) if self.is_k8s else f"{self.type} {self.name}"

    @classmethod
    def from_record(cls, rec: Mapping[str, Any]) -> Resource:
        return cls(type=str(rec.get("type", "")), name=str(rec.get("name", "")), urn=str(rec.get("urn", "")),
                   props=dict(rec.get("inputs") or rec.get("props") or {}), protect=bool(rec.get("protect")),
                   retain_on_delete=rec.get("retainOnDelete"))


_UNKNOWN_SENTINELS = {
    "1c4a061d-8072-4f0a-a4cb-0ff528b18fe7", "3eeb2bf0-c639-47a8-9e75-3b44932eb421",
    "04da6b54-80e4-46f7-96ec-b56ff0331ba9", "6a19a0b0-7e62-4c92-b797-7f8e31da9cc2",
    "030794c1-ac77-496b-92df-f27374a8bd58", "e48ece36-62e2-4504-bad9-02848725956a",
    "dd056dcd-154b-4c76-9bd3-c8f88648b5ff",
}


def _proxy_types() -> tuple[type, ...]:
    try:
        from pulumi_policy import proxy
        return tuple(t for t in (getattr(proxy, "_DictProxy", None), getattr(proxy, "_ListProxy", None))
                     if isinstance(t, type))
    except ImportError:  # pragma: no cover - pulumi_policy is a dependency
        return ()


def plain(value: Any) -> Any:
    """Props as pulumi_policy hands them (proxies that raise on unknown values during preview)
    -> plain dicts and lists, with unknown values replaced by objects.UNKNOWN so a rule can skip them."""
    unknown_error: type[Exception]
    try:
        from pulumi_policy.proxy import UnknownValueError
        unknown_error = UnknownValueError
    except ImportError:  # pragma: no cover - pulumi_policy is a dependency
        unknown_error = KeyError

    proxies = _proxy_types()         # imported here: the offline plan hands plain dicts and never loads it

    def walk(v: Any) -> Any:
        t = type(v)
        if t in proxies:
            # pulumi_policy's proxy hands out its target (dict or list of proxies) under the key "__target"
            # (pulumi_policy/proxy.py _DictProxy/_ListProxy.__getitem__): walking that skips the proxy's per-access
            # unknown check and path copy, ~40% of converting a resource. Same result: an unknown value is one of
            # the sentinel strings, which the str branch maps to objects.UNKNOWN as the proxy's raise would.
            target = v["__target"]
            if type(target) is dict:
                return {k: walk(x) for k, x in target.items()}
            return [walk(x) for x in target]
        if t is str:
            return objects.UNKNOWN if v in _UNKNOWN_SENTINELS else v
        if t is dict:
            return {k: walk(x) for k, x in v.items()}
        if t is list:
            return [walk(x) for x in v]
        if t is int or t is bool or v is None:
            return v
        if isinstance(v, str):
            return objects.UNKNOWN if v in _UNKNOWN_SENTINELS else v
        if isinstance(v, float) and v.is_integer():
            return int(v)
        if isinstance(v, Mapping):
            out = {}
            for k in list(v):
                try:
                    out[k] = walk(v[k])
                except unknown_error:
                    out[k] = objects.UNKNOWN
            return out
        if isinstance(v, (list, tuple)) or (hasattr(v, "__len__") and hasattr(v, "__getitem__")
                                            and not isinstance(v, (bytes, str))):
            out_l = []
            for i in range(len(v)):
                try:
                    out_l.append(walk(v[i]))
                except unknown_error:
                    out_l.append(objects.UNKNOWN)
            return out_l
        return v

    return walk(value)


# ------------------------------------------------------------------ node pools
@dataclass
class PoolInfo:
    """A node pool as the rules see it: from the stack config, or from a cloud node-pool resource."""
    name: str
    machine: catalog.Machine | None
    labels: dict[str, str]               # labels its nodes carry (a pod selector must be a subset)
    node_count: int | None = None
    reservation_nodes: int | None = None
    reservation_id: str | None = None
    profile: fabric.FabricProfile | None = None
    source: str = "stack config"


def pools_from_config(cfg: Any) -> list[PoolInfo]:
    out: list[PoolInfo] = []
    for p in cfg.node_pools:
        try:
            m = cfg.machine(p)
        except (KeyError, catalog.UnknownMachine):
            continue
        labels = {**mpools.node_labels(cfg, p, m), **mpools.node_selector(cfg, p)}
        cr = p.capacity_reservation
        out.append(PoolInfo(p.name, m, labels, p.node_count, cr.nodes if cr else None, cr.id if cr else None,
                            fabric.profile_for(cfg, p)))
    return out


def _kv_list(items: Any) -> dict[str, str]:
    return {str(i.get("key")): str(i.get("value")) for i in objects.seq(items) if isinstance(i, dict)}


# Cloud node-pool resources (what `pulumi preview` shows when there is no stack config to read).
# type token -> (machine, labels, node count) readers; tolerant of missing fields.
POOL_READERS: dict[str, Callable[[dict[str, Any]], tuple[Any, Any, Any]]] = {
    "aws:eks/nodeGroup:NodeGroup": lambda p: ((objects.seq(p.get("instanceTypes")) or [None])[0], p.get("labels"),
                                              objects.get(p, "scalingConfig", "desiredSize")),
    "azure-native:containerservice:AgentPool": lambda p: (p.get("vmSize"), p.get("nodeLabels"), p.get("count")),
    "gcp:container/nodePool:NodePool": lambda p: (objects.get(p, "nodeConfig", "machineType"),
                                                  objects.get(p, "nodeConfig", "labels"), p.get("nodeCount")),
    "oci:ContainerEngine/nodePool:NodePool": lambda p: (p.get("nodeShape"), _kv_list(p.get("initialNodeLabels")),
                                                        objects.get(p, "nodeConfigDetails", "size")),
}


def pools_from_resources(resources: Iterable[Resource]) -> list[PoolInfo]:
    out: list[PoolInfo] = []
    for r in resources:
        reader = POOL_READERS.get(r.type)
        if reader is None:
            continue
        machine_name, labels, count = reader(r.props)
        m = catalog.MACHINES.get(machine_name) if isinstance(machine_name, str) else None
        labels = {str(k): str(v) for k, v in (labels or {}).items()} if isinstance(labels, dict) else {}
        if m is not None:
            labels.setdefault("node.kubernetes.io/instance-type", m.name)
        out.append(PoolInfo(labels.get(mpools.POOL_LABEL, r.name), m, labels, objects.as_int(count),
                            source=f"{r.type} {r.name}"))
    return out


def default_profile(machine: catalog.Machine, resource_name: str | None = None) -> fabric.FabricProfile:
    """The catalog's fabric profile for a machine when there is no stack config (preview): built by
    multinode.fabric.profile_for from a one-pool config, so the numbers come from the one table."""
    from multinode.config import CloudName, FabricConfig, NodePool, StackConfig
    rdma_mode = "sriov" if resource_name == fabric.IB_SRIOV_RESOURCE else "shared"
    # catalog.CLOUDS holds exactly the four cloud values of config.CloudName (the fifth is "existing")
    cloud = cast(CloudName, machine.cloud) if machine.cloud in catalog.CLOUDS else "existing"
    pool = NodePool(name="pool", machine=machine.name if machine.name in catalog.MACHINES else None,
                    node_count=1)
    cfg = StackConfig.model_construct(cloud=cloud, node_pools=[pool],
                                      fabric=FabricConfig(rdma_mode=rdma_mode,
                                                          kind=machine.fabric if cloud == "existing" else None))
    if pool.machine is None:
        return fabric.FabricProfile(machine.fabric, cloud, machine.name, machine.gpus, None, 0, None)
    return fabric.profile_for(cfg, pool)


# ------------------------------------------------------------------ context
VOLCANO_GROUPS = ("batch.volcano.sh", "scheduling.volcano.sh", "bus.volcano.sh", "topology.volcano.sh")


@dataclass
class Context:
    config: Any = None                                   # multinode.config.StackConfig, or None (preview)
    pools: list[PoolInfo] = field(default_factory=list)
    volcano: bool | None = None                       # is Volcano part of the stack (None: unknown)
    settings: dict[str, dict[str, Any]] = field(default_factory=dict)   # policy config per rule
    # True when the resource rules run with these pools too (offline); under `pulumi preview` a resource
    # rule sees one resource and no pools, so the stack rules then judge GPUs per pod against the pools.
    resource_rules_see_pools: bool = False
    # plan's placement simulation of this stack (multinode.placement.Simulated), which stack-fits-node-pools
    # reuses when it was run on the same objects and pools; None under `pulumi preview` (the rule simulates)
    placement: Any = None
    # selector (its repr) -> the pools it matches: every pod of every workload asks, with one of few selectors
    _pools_by_selector: dict[str, list[PoolInfo]] = field(default_factory=dict, repr=False, compare=False)

    def setting(self, rule: str, key: str, default: Any = None) -> Any:
        return (self.settings.get(rule) or {}).get(key, default)

    @property
    def allow_delete(self) -> bool | None:
        if self.config is not None and getattr(self.config, "storage", None) is not None:
            return bool(self.config.storage.allow_delete)
        return None

    def fabric_enabled(self) -> bool:
        if self.config is None:
            return True
        return bool(self.config.fabric.enabled) and self.config.fabric_kind() != "none"

    def machine_for(self, selector: dict[str, str]) -> tuple[catalog.Machine | None, PoolInfo | None]:
        """The machine a pod with this node selector lands on: named by its own labels, else the one
        pool (by labels) that matches it."""
        m = objects.machine_from_labels(selector)
        matched = self.pools_for(selector) if selector else []
        pool = matched[0] if len(matched) == 1 else None
        if m is None and pool is not None:
            m = pool.machine
        return m, pool

    def pools_for(self, selector: dict[str, str]) -> list[PoolInfo]:
        key = repr(selector)
        if key not in self._pools_by_selector:
            self._pools_by_selector[key] = [p for p in self.pools if objects.selector_matches(selector, p.labels)]
        return list(self._pools_by_selector[key])


def volcano_in_stack(cfg: Any, resources: Iterable[Resource]) -> bool | None:
    for r in resources:
        if r.type == "kubernetes:helm.sh/v3:Release" and "volcano" in json.dumps(
                [r.props.get("chart"), r.props.get("name")]).lower():
            return True
        if r.kind[0] in VOLCANO_GROUPS:
            return True
    if cfg is not None:
        return bool(cfg.addons.volcano.enabled)
    return None


def build_context(cfg: Any, resources: list[Resource], settings: dict[str, Any] | None = None) -> Context:
    found = pools_from_config(cfg) if cfg is not None else []
    if not found:
        found = pools_from_resources(resources)
    return Context(cfg, found, volcano_in_stack(cfg, resources), dict(settings or {}))


# ------------------------------------------------------------------ rules
ResourceCheck = Callable[[Resource, Context], Iterable[str]]
StackCheck = Callable[[list[Resource], Context], Iterable[tuple[Resource | None, str]]]


@dataclass(frozen=True)
class Rule:
    name: str
    description: str
    level: str                                   # mandatory | advisory
    check: Callable[..., Iterable[Any]]
    scope: str = "resource"                      # resource | stack
    config: dict[str, dict[str, Any]] = field(default_factory=dict)   # JSON schema properties
    remediation: str = ""
    # a rule the docs mark as a team's choice (docs/policy-pack.md): a policy config may disable it; every other
    # rule is the topology contract, which a policy config may make advisory but never disable (policy/config.py)
    team_choice: bool = False


@dataclass(frozen=True)
class Violation:
    policy: str
    enforcementLevel: str
    resource: str
    type: str
    urn: str
    message: str

    def as_dict(self) -> dict[str, str]:
        return dict(self.__dict__)
