"""Stack rules: checks that join several resources (workloads to node pools, fabric policies to machines)."""
from __future__ import annotations

import json
import re
from collections import defaultdict
from collections.abc import Iterator
from fractions import Fraction
from typing import Any

from multinode import catalog, safeyaml
from multinode import pools as mpools
from multinode.errors import ConfigError

from .. import objects
from ..engine import ADVISORY, MANDATORY, Context, PoolInfo, Resource, Rule, default_profile
from ..objects import Gang, Role

# Labels every node carries whatever its pool: they never decide which pool a pod lands on.
WELL_KNOWN = ("kubernetes.io/os", "kubernetes.io/arch", "kubernetes.io/hostname", "topology.kubernetes.io/zone",
              "topology.kubernetes.io/region")


def _gangs(resources: list[Resource]) -> Iterator[tuple[Resource, Gang]]:
    for r in resources:
        if r.is_k8s:
            for g in objects.gangs(r.props, r.name):
                if g.gpu_roles:
                    yield r, g


def _significant(sel: dict[str, str]) -> dict[str, str]:
    return {k: v for k, v in sel.items() if k not in WELL_KNOWN}


def _pool_selector(p: PoolInfo) -> str:
    if mpools.POOL_LABEL in p.labels:
        return f"{mpools.POOL_LABEL}: {p.labels[mpools.POOL_LABEL]}"
    return ", ".join(f"{k}: {v}" for k, v in p.labels.items()) or p.name


def _landing(role: Role, ctx: Context) -> list[tuple[dict[str, str], list[PoolInfo]]]:
    out = []
    for sel in role.selectors():
        sig = _significant(sel)
        out.append((sig, ctx.pools_for(sig) if sig else list(ctx.pools)))
    return out


# ------------------------------------------------------------------ workload -> node pool
def check_workload_pool(resources: list[Resource], ctx: Context) -> Iterator[tuple[Resource, str]]:
    if not ctx.pools:
        return
    for r, g in _gangs(resources):
        for role in g.gpu_roles:
            for sel, matched in _landing(role, ctx):
                if sel and not matched:
                    known = "; ".join(f"{p.name} ({_pool_selector(p)})" for p in ctx.pools)
                    yield r, (f"{g.name} {role.name}: nodeSelector {sel} matches none of the stack's GPU node "
                              f"pools, so its {role.gpus}-GPU pods stay Pending; select one of: {known}")
                    continue
                machines = {p.machine.name: (p, p.machine) for p in matched if p.machine}
                if len(machines) != 1 or ctx.resource_rules_see_pools:
                    continue          # offline, gpus-per-pod-within-machine already judged this pod
                pool, m = next(iter(machines.values()))
                if role.gpus > m.gpus:
                    yield r, (f"{g.name} {role.name}: {role.gpus} nvidia.com/gpu per pod, but node pool "
                              f"{pool.name!r} runs {m.name} with {m.gpus} GPUs per node; request {m.gpus} or "
                              f"fewer and add pods")


def check_fills_nodes(resources: list[Resource], ctx: Context) -> Iterator[tuple[Resource, str]]:
    for r, g in _gangs(resources):
        if not g.multi_node:
            continue
        role = g.gpu_roles[0]
        m, pool = ctx.machine_for(_significant(role.selectors()[0]))
        if m is None or g.gpus_per_pod >= m.gpus:
            continue
        yield r, (f"{g.name}: a multi-node gang of {g.pods} pods x {g.gpus_per_pod} GPUs on {m.name} "
                  f"({m.gpus} GPUs per node) leaves {m.gpus - g.gpus_per_pod} GPUs of every node idle or packs "
                  f"ranks unevenly; request nvidia.com/gpu {m.gpus} and "
                  f"{max(1, -(-g.total_gpus // m.gpus))} pods instead")


# ------------------------------------------------------------------ node counts
def check_node_count(resources: list[Resource], ctx: Context) -> Iterator[tuple[Resource | None, str]]:
    for p in ctx.pools:
        if p.reservation_nodes is not None and p.node_count is not None and p.node_count > p.reservation_nodes:
            yield None, (f"node pool {p.name!r}: {p.node_count} nodes, but capacity reservation "
                         f"{p.reservation_id} holds {p.reservation_nodes}; use nodeCount {p.reservation_nodes} "
                         f"or a larger reservation")
    for r, g in _gangs(resources):
        role = g.gpu_roles[0]
        sel = _significant(role.selectors()[0])
        matched = ctx.pools_for(sel) if sel else list(ctx.pools)
        if len(matched) != 1:
            continue
        pool, m, count = matched[0], matched[0].machine, matched[0].node_count
        if m is None or count is None:
            continue
        if g.gpus_per_pod > m.gpus or g.gpus_per_pod <= 0:
            continue          # another rule reports pods that fit no node
        per_node = m.gpus // g.gpus_per_pod
        need = -(-g.pods // per_node)
        if need > count:
            yield r, (f"{g.name}: one gang is {g.pods} pods x {g.gpus_per_pod} GPUs = {need} nodes of {m.name}, "
                      f"but node pool {pool.name!r} has {count}; it can never be scheduled whole: shrink "
                      f"the gang to {count * per_node} pods or raise the pool's nodeCount to {need}")


# ------------------------------------------------------------------ fabric: one cloud, right device count
def _walk(obj: Any, path: tuple[Any, ...] = ()) -> Iterator[tuple[tuple[Any, ...], Any, Any]]:
    if isinstance(obj, dict):
        for k, v in obj.items():
            yield path, k, v
            yield from _walk(v, path + (k,))
    elif isinstance(obj, list):
        for i, v in enumerate(obj):
            yield from _walk(v, path + (i,))


def _patch_read(key: Any, value: Any) -> Any:
    """A Kyverno patchesJson6902 string parsed as YAML, so its values can be read like the rest (any other
    value as it is). The strict reader: an alias bomb or deep nesting in a patch string is refused, not
    expanded (the string is kept)."""
    if key == "patchesJson6902" and isinstance(value, str):
        try:
            return safeyaml.load(value, "patchesJson6902")
        except ConfigError:
            pass
    return value


def _expand_patches(obj: Any) -> Any:
    """The object with every patchesJson6902 string parsed (_patch_read)."""
    if isinstance(obj, dict):
        return {k: _expand_patches(_patch_read(k, v)) for k, v in obj.items()}
    if isinstance(obj, list):
        return [_expand_patches(v) for v in obj]
    return obj


def _keys(obj: Any) -> list[tuple[Any, Any]]:
    """(key, value) of every mapping anywhere in obj, depth first in document order, with patchesJson6902 strings
    read as _expand_patches reads them: the keys and scalar values _walk(_expand_patches(obj)) yields, without
    the paths and the copy (fabric_signals reads every object of the stack, and only scalar values). A value
    that is a mapping or list is the object's own, patch strings inside it unread."""
    out: list[tuple[Any, Any]] = []

    def visit(o: Any) -> None:
        if isinstance(o, dict):
            for k, v in o.items():
                v = _patch_read(k, v)
                out.append((k, v))
                visit(v)
        elif isinstance(o, list):
            for v in o:
                visit(v)

    visit(obj)
    return out


def fabric_signals(r: Resource, known: dict[str, str] | None = None) -> dict[str, set[str]]:
    """cloud -> what in this resource uses that cloud's fabric (device resources, GKE networking). `known`:
    fabric resource -> cloud (default objects.FABRIC_RESOURCES; objects.fabric_resources(config) adds the stack's)."""
    known = objects.FABRIC_RESOURCES if known is None else known
    out: dict[str, set[str]] = defaultdict(set)
    if not r.is_k8s:
        return out
    group, _ = r.kind
    if group == "apiextensions.k8s.io":
        return out               # a CRD's schema (MBs for LWS/Grove) holds no pod of any fabric: not walked
    if group in objects.GCP_FABRIC_GROUPS:
        out["gcp"].add(f"{r.props.get('kind')} ({group})")
    for key, value in _keys(r.props):
        if key in known:
            out[known[key]].add(key)
        elif key in objects.GCP_FABRIC_ANNOTATIONS:
            out["gcp"].add(key)
        elif key == "path" and isinstance(value, str):       # JSON patch: /resources/limits/vpc.amazonaws.com~1efa
            decoded = value.replace("~1", "/").replace("~0", "~")
            for res, cloud in known.items():
                if decoded.endswith("/" + res):
                    out[cloud].add(res)
        elif key == "expression" and isinstance(value, str):
            for res in _cel_limit_resources(value, known):    # a CEL JSONPatch (Kyverno MutatingPolicy)
                out[known[res]].add(res)
    return out


def _cel_limit_resources(expression: str, known: dict[str, str] | None = None) -> list[str]:
    """Fabric resources a CEL JSONPatch expression writes as a container limit (its path names
    /resources/limits/<resource> with '/' escaped as '~1', as multinode.manifests.kyverno writes it: the path is
    string literals joined with +, read here as one)."""
    joined = re.sub(r"'\s*\+\s*'", "", expression)
    known = objects.FABRIC_RESOURCES if known is None else known
    return [res for res in known if "/resources/limits/" + res.replace("/", "~1") in joined]


def check_one_fabric(resources: list[Resource], ctx: Context) -> Iterator[tuple[Resource | None, str]]:
    pool_clouds: dict[str, set[str]] = defaultdict(set)
    for p in ctx.pools:
        if p.machine and p.machine.fabric in catalog.FABRIC_CLOUD:
            pool_clouds[catalog.FABRIC_CLOUD[p.machine.fabric]].add(f"pool {p.name} ({p.machine.name})")
    known = objects.fabric_resources(ctx.config)
    per_resource = [(r, fabric_signals(r, known)) for r in resources]
    clouds: dict[str, int] = defaultdict(int)
    for c in pool_clouds:
        clouds[c] += 1000            # the machines decide which fabric the stack really has
    for _, sig in per_resource:
        for c in sig:
            clouds[c] += 1
    if len(clouds) <= 1:
        return
    main = max(clouds, key=lambda c: clouds[c])
    basis = (f"the stack's node pools ({', '.join(sorted(pool_clouds[main]))}) use the {main} fabric"
             if main in pool_clouds else f"most of the stack uses the {main} fabric")
    for r, sig in per_resource:
        others = {c: v for c, v in sig.items() if c != main}
        if others:
            what = "; ".join(f"{c}: {', '.join(sorted(v))}" for c, v in sorted(others.items()))
            yield r, (f"{r.label} uses another cloud's fabric ({what}), but {basis}; a stack drives exactly one "
                      f"fabric: remove these or move them to a stack on that cloud")
    for c, names in pool_clouds.items():
        if c != main:
            yield None, (f"{', '.join(sorted(names))} use the {c} fabric, but {basis}; a stack drives exactly one "
                         f"fabric: move those pools to their own stack")


# A per-GPU device count written as JMESPath over the container's GPU count: ceil(divide(multiply(<gpus>,
# `A`), `B`)) = A/B per GPU (what multinode.manifests.kyverno writes), or multiply(<gpus>, `N`) = N per GPU.
# Anything else is not interpreted (no guessing).
_DIVIDED = re.compile(r"divide\(\s*multiply\(.*nvidia\.com/gpu.*?,\s*`(\d+)`\s*\)\s*,\s*`(\d+)`\s*\)", re.S)
_MULTIPLIED = [
    re.compile(r"multiply\(.*nvidia\.com/gpu.*,\s*`(\d+(?:\.\d+)?)`\s*\)\s*}}\s*$", re.S),
    re.compile(r"multiply\(\s*`(\d+(?:\.\d+)?)`\s*,.*nvidia\.com/gpu", re.S),
]


# The same in CEL integer arithmetic (a MutatingPolicy): (<gpus> * A + B - 1) / B = ceil(A/B per GPU).
_CEL_CEIL = re.compile(r"\*\s*(\d+)\s*\+\s*(\d+)\s*-\s*1\s*\)\s*/\s*(\d+)")


def per_gpu_factor(expr: str) -> Fraction | None:
    c = _CEL_CEIL.search(expr)
    if c and int(c.group(3)) and c.group(2) == c.group(3):
        return Fraction(int(c.group(1)), int(c.group(3)))
    m = _DIVIDED.search(expr)
    if m and int(m.group(2)):
        return Fraction(int(m.group(1)), int(m.group(2)))
    for rx in _MULTIPLIED:
        m = rx.search(expr)
        if m:
            return Fraction(m.group(1)).limit_denominator(64)
    return None


def _strings(obj: Any) -> set[str]:
    return {v for _, _, v in _walk(obj) if isinstance(v, str)} | {k for _, k, _ in _walk(obj) if isinstance(k, str)}


def _rule_pools(rule: dict[str, Any], ctx: Context, policy_name: str = "") -> list[PoolInfo]:
    """The pools a Kyverno rule is about: those whose name, machine or labels it mentions (or whose name ends
    the policy's name, as in multinode-fabric-<pool>), else all."""
    by_name = [p for p in ctx.pools if p.machine and policy_name.endswith("-" + p.name)]
    if len(by_name) == 1:
        return by_name
    words = _strings(rule)
    text = json.dumps(rule)
    hit = [p for p in ctx.pools if p.machine and (
        p.name in words or p.machine.name in words or objects.machine_label(p.machine.name) in words
        or any(f"{k}" in text and v in words for k, v in p.labels.items() if k == mpools.POOL_LABEL))]
    return hit or list(ctx.pools)


def kyverno_fabric_counts(policy_props: dict[str, Any],
                          known: dict[str, str] | None = None) -> list[tuple[str, str, Any]]:
    """(rule name, fabric resource, count as written) for every device count a Kyverno policy sets."""
    known = objects.FABRIC_RESOURCES if known is None else known
    out: list[tuple[str, str, Any]] = []
    for i, mutation in enumerate(objects.seq(objects.get(policy_props, "spec", "mutations"))):
        expression = objects.get(mutation, "jsonPatch", "expression")     # a Kyverno MutatingPolicy
        if isinstance(expression, str):
            out += [(f"mutations[{i}]", res, expression) for res in _cel_limit_resources(expression, known)]
    for rule in objects.seq(objects.get(policy_props, "spec", "rules")):
        rule = _expand_patches(rule)
        if not isinstance(rule, dict):
            continue
        for path, key, value in _walk(rule.get("mutate") or {}):
            if key in known:
                out.append((str(rule.get("name", "?")), key, value))
            elif key == "value" and isinstance(value, (int, str)) and path:
                # JSON patch op {"path": ".../vpc.amazonaws.com~1efa", "value": 32}
                parent = objects.get(rule.get("mutate"), *path)
                p = str(objects.mapping(parent).get("path", "")).replace("~1", "/")
                for res in known:
                    if p.endswith("/" + res):
                        out.append((str(rule.get("name", "?")), res, value))
    return out


# Kyverno kinds that inject devices: the legacy kyverno.io policies (hand-written ones are still read) and the CEL
# MutatingPolicy the stack renders.
_KYVERNO_MUTATING = {("kyverno.io", "ClusterPolicy"), ("kyverno.io", "Policy"),
                     ("policies.kyverno.io", "MutatingPolicy"), ("policies.kyverno.io", "NamespacedMutatingPolicy")}


def check_kyverno_devices(resources: list[Resource], ctx: Context) -> Iterator[tuple[Resource, str]]:
    known = objects.fabric_resources(ctx.config)
    for r in resources:
        if not r.is_k8s or (r.kind[0], r.props.get("kind")) not in _KYVERNO_MUTATING:
            continue
        rules = {str(x.get("name", "?")): x for x in objects.seq(objects.get(r.props, "spec", "rules"))
                 if isinstance(x, dict)}
        rules.update({f"mutations[{i}]": x for i, x in enumerate(objects.seq(objects.get(r.props, "spec", "mutations")))
                      if isinstance(x, dict)})
        for rule_name, res_name, value in kyverno_fabric_counts(r.props, known):
            pname = str(objects.get(r.props, "metadata", "name") or "")
            targets = [(p, p.machine) for p in _rule_pools(rules.get(rule_name, {}), ctx, pname) if p.machine
                       and catalog.FABRIC_CLOUD.get(p.machine.fabric) == known[res_name]]
            if not targets:
                continue      # no pool of this fabric's cloud: check_one_fabric reports the mix
            expected = {}
            for p, pm in targets:
                prof = p.profile if p.profile is not None and p.profile.device_resource else \
                    default_profile(pm, res_name)
                expected[pm.name] = (p, pm, prof)
            if len({(prof.device_resource, prof.devices_per_node) for _, _, prof in expected.values()}) != 1:
                continue      # pools with different machines and a rule that names none: nothing to compare
            pool, m, prof = next(iter(expected.values()))
            where = f"{r.label} rule {rule_name!r}"
            if prof.device_resource and prof.device_resource != res_name:
                yield r, (f"{where} injects {res_name}, but {m.name} (pool {pool.name!r}) exposes its fabric as "
                          f"{prof.device_resource}; inject {prof.device_resource}: {prof.devices_per_node}")
                continue
            n = objects.as_int(value)
            if n is not None:
                if n != prof.devices_per_node:
                    yield r, (f"{where} gives a full-node pod {res_name}: {n}, but {m.name} (pool {pool.name!r}) has "
                              f"{prof.devices_per_node} ({_per_gpu(prof.devices_per_node, m.gpus)} per GPU, "
                              f"{m.gpus} GPUs; catalog source {m.source}); set it to {prof.devices_per_node}")
                continue
            if isinstance(value, str):
                factor = per_gpu_factor(value)
                want = Fraction(prof.devices_per_node, m.gpus)
                if factor is not None and factor != want:
                    yield r, (f"{where} computes {res_name} as {float(factor):g} per GPU, but {m.name} (pool "
                              f"{pool.name!r}) has {prof.devices_per_node} for {m.gpus} GPUs = "
                              f"{_per_gpu(prof.devices_per_node, m.gpus)} per GPU; "
                              f"use {_per_gpu(prof.devices_per_node, m.gpus)}")


def _per_gpu(devices: int, gpus: int) -> str:
    f = Fraction(devices, gpus)
    return str(f.numerator) if f.denominator == 1 else f"{float(f):g}"


# ------------------------------------------------------------------ LWS gang scheduling
def _lws_not_gang(resources: list[Resource]) -> Iterator[tuple[Resource, Gang, list[str]]]:
    for r, g in _gangs(resources):
        if g.kind == "LeaderWorkerSet" and g.multi_node:
            off = [f"{ro.name} {ro.scheduler}" for ro in g.gpu_roles if ro.scheduler != "volcano"]
            if off:
                yield r, g, off


def check_lws_gang(resources: list[Resource], ctx: Context) -> Iterator[tuple[Resource, str]]:
    if not ctx.volcano:
        return
    for r, g, off in _lws_not_gang(resources):
        yield r, (f"{g.name}: groups of {g.pods} pods are not gang-scheduled (schedulerName: {', '.join(off)}) "
                  f"although Volcano runs in this stack; a half-placed group holds GPUs and never starts: set "
                  f"schedulerName: volcano on the leader and worker templates")


def check_lws_gang_available(resources: list[Resource], ctx: Context) -> Iterator[tuple[Resource, str]]:
    if ctx.volcano:
        return
    for r, g, off in _lws_not_gang(resources):
        yield r, (f"{g.name}: groups of {g.pods} pods run with no gang scheduler in the stack "
                  f"(schedulerName: {', '.join(off)}); a group can start half-placed and hold GPUs: enable "
                  f"addons.volcano and set schedulerName: volcano on its templates")


RULES = [
    Rule("workload-matches-node-pool",
         "A GPU workload's node selector lands on one of the stack's node pools, and its GPUs per pod fit that "
         "pool's machine (joined by node labels).",
         MANDATORY, check_workload_pool, scope="stack"),
    Rule("gang-fills-nodes",
         "A multi-node gang uses every GPU of the nodes it lands on.",
         ADVISORY, check_fills_nodes, scope="stack", team_choice=True),   # efficiency, not correctness
    Rule("node-count-within-pool",
         "One gang fits in the node pool it lands on, and a pool is no larger than its capacity reservation.",
         MANDATORY, check_node_count, scope="stack"),
    Rule("fabric-devices-match-catalog",
         "Fabric devices per GPU that the Kyverno policies inject match the machine catalog for the pool's "
         "machine.",
         MANDATORY, check_kyverno_devices, scope="stack"),
    Rule("exactly-one-fabric",
         "A stack uses exactly one cloud's fabric (EFA, InfiniBand, GPUDirect-TCPX/O or RDMA, OCI RDMA) in its "
         "pools, pods and policies.",
         MANDATORY, check_one_fabric, scope="stack"),
    Rule("lws-gang-scheduled",
         "When Volcano runs in the stack, multi-node LeaderWorkerSet groups are gang-scheduled by it.",
         MANDATORY, check_lws_gang, scope="stack", team_choice=True),       # which scheduler places groups
    Rule("lws-gang-scheduler-available",
         "Multi-node LeaderWorkerSet groups have a gang scheduler (Volcano) in the stack.",
         ADVISORY, check_lws_gang_available, scope="stack", team_choice=True)
]
