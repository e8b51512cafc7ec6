"""`multinode check-cluster <stack>`: what the stack expects of a live cluster, checked from inside it.

    multinode check-cluster <stack> [--file F] [--kubeconfig PATH]    (default: $KUBECONFIG, then ~/.kube/config)

Read-only (GET/LIST only). The stack is planned in memory (no build/ written) and every expectation that the stack
does not fulfil itself is checked against the cluster, one line per check:

- the API server answers, and its version (a warning below the version the project's objects are checked
  against: k8s.io/kubernetes v1.33, conformance/apiserver and conformance/cluster);
- every kind the stack applies is served by the cluster, unless the stack brings its CustomResourceDefinition
  (k8s/) or installs the add-on whose chart brings it: so the CRDs of each add-on declared `provided`, and the
  built-in API versions the objects use;
- Kyverno, where the stack renders the fabric policies and the cluster provides Kyverno: the version of its
  admission controller's image is >= 1.17.0 (the CEL policy types, multinode.checks.KYVERNO_CEL_MIN);
- every RuntimeClass a pod template or an add-on's values name that the stack does not create (NVSentinel's
  chart default `nvidia` where the stack creates none: multinode/nvsentinel.py);
- the nodes of every pool the stack does not create (cloud `existing`): enough nodes carry the labels the pool
  selects on, and each advertises the GPUs and the fabric devices the pool's machine has (the device plugins);
  a created pool's nodes are checked when they exist already (a second run after `pulumi up`);
- storage the stack names but does not create: storage.existingStorageClass, storage.existingClaim.

Exit 0 when every check passes (warnings allowed), 1 when one fails, 2 on a bad stack or an unreachable cluster.
"""
from __future__ import annotations

import argparse
import os
import re
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

OK, WARN, FAIL = "ok", "warn", "FAIL"
CHECKED_MINOR = (1, 33)        # the API server version the objects are checked against (conformance/apiserver)


@dataclass(frozen=True)
class Line:
    status: str
    check: str
    detail: str

    def __str__(self) -> str:
        return f"{self.status:<4} {self.check}: {self.detail}"


@dataclass(frozen=True)
class Node:
    name: str
    labels: dict[str, str]
    allocatable: dict[str, str]


class Cluster(Protocol):
    """What check-cluster reads from a cluster (LiveCluster: the API server; the tests: a fake)."""

    def version(self) -> str: ...                                  # gitVersion, e.g. v1.33.13
    def served_kinds(self, group_version: str) -> set[str] | None: ...   # None: the group/version is not served
    def runtime_classes(self) -> set[str]: ...
    def nodes(self) -> list[Node]: ...
    def storage_classes(self) -> set[str]: ...
    def claim_exists(self, namespace: str, name: str) -> bool: ...
    def kyverno_images(self) -> list[str]: ...                    # images of Kyverno's admission controller


def _version_tuple(text: str) -> tuple[int, ...] | None:
    m = re.match(r"v?(\d+)\.(\d+)(?:\.(\d+))?", text.strip())
    return tuple(int(x or 0) for x in m.groups()) if m else None


def _walk_key(node: Any, key: str) -> Iterator[Any]:
    if isinstance(node, dict):
        for k, v in node.items():
            if k == key:
                yield v
            yield from _walk_key(v, key)
    elif isinstance(node, list):
        for v in node:
            yield from _walk_key(v, key)


def _quantity(v: str | None) -> float:
    from .placement import quantity
    try:
        q = quantity(v) if v is not None else None
    except (ValueError, TypeError):
        q = None
    return float(q) if q is not None else 0.0


def expectations(cfg: Any, objects: list[dict[str, Any]]) -> dict[str, Any]:
    """What the stack expects of the cluster, from its config and its planned objects (pure)."""
    from . import config as mconfig
    from . import fabric, nvsentinel, pools
    from .manifests import addons, dynamo_platform

    releases: list[tuple[str, tuple[str, ...], dict[str, Any]]] = [
        (s.key, tuple(s.installs_crds), s.values) for s in addons.addon_releases(cfg) + addons.fabric_releases(cfg)]
    dyn = dynamo_platform.dynamo_platform_release(cfg)
    if dyn is not None:
        releases.append(("dynamo", tuple(dyn.get("installs_crds") or ()), dyn.get("values") or {}))
    installed_groups = {g for _, groups, _ in releases for g in groups}
    own_crds = {(o["spec"]["group"], o["spec"]["names"]["kind"]) for o in objects
                if o.get("kind") == "CustomResourceDefinition" and isinstance(o.get("spec"), dict)
                and "names" in o["spec"]}
    kinds: dict[tuple[str, str], str] = {}
    for o in objects:
        gv, kind = str(o.get("apiVersion", "")), str(o.get("kind", ""))
        group = gv.split("/")[0] if "/" in gv else ""
        if (group, kind) in own_crds:
            continue
        if any(group == g or group.endswith("." + g) for g in installed_groups):
            continue     # the add-on's chart installs the group's CRDs (kyverno.io: policies.kyverno.io too)
        name = (o.get("metadata") or {}).get("name", "?")
        kinds.setdefault((gv, kind), f"{kind} {name}")
    created_rc = {str((o.get("metadata") or {}).get("name")) for o in objects if o.get("kind") == "RuntimeClass"}
    wanted_rc: dict[str, str] = {}
    for o in objects:
        for v in _walk_key(o.get("spec"), "runtimeClassName"):
            if isinstance(v, str) and v:
                wanted_rc.setdefault(v, f"{o.get('kind')} {(o.get('metadata') or {}).get('name')}")
    for key, _, values in releases:
        for v in _walk_key(values, "runtimeClassName"):
            if isinstance(v, str) and v:
                wanted_rc.setdefault(v, f"addons.{key} values")
    if nvsentinel.installed(cfg) and nvsentinel.runtime_class(cfg) is None and not any(
            isinstance(v, str) and v for v in _walk_key(cfg.addons.nvsentinel.values, "runtimeClassName")):
        # the chart's default (charts/metadata-collector/values.yaml:31, multinode/nvsentinel.py)
        wanted_rc.setdefault(nvsentinel.NVIDIA_RUNTIME_CLASS, "addons.nvsentinel (the chart's default)")
    for name in created_rc:
        wanted_rc.pop(name, None)
    machines = mconfig.pool_machines(cfg)
    pool_checks = []
    for i, pool in enumerate(cfg.node_pools):
        m = machines.get(pool.name)
        prof = fabric.profile_for(cfg, pool) if m is not None else None
        resources = {"nvidia.com/gpu": float(m.gpus)} if m is not None else {}
        if prof is not None and prof.device_resource and cfg.fabric.enabled:
            resources[prof.device_resource] = float(prof.node_capacity or prof.devices_per_node)
        pool_checks.append({"at": f"nodePools[{i}]", "name": pool.name, "selector": pools.node_selector(cfg, pool),
                            "count": pool.node_count, "created": cfg.cloud != "existing", "resources": resources})
    k = cfg.addons.kyverno
    policies = any(o.get("kind") in ("MutatingPolicy", "ValidatingPolicy") for o in objects)
    storage = cfg.storage
    return {"kinds": kinds, "runtime_classes": wanted_rc, "pools": pool_checks,
            "kyverno_provided": bool(k.provided and policies),
            "storage_class": getattr(storage, "existing_storage_class", None) if storage is not None else None,
            "claim": getattr(storage, "existing_claim", None) if storage is not None else None,
            "namespace": _workload_namespace(objects)}


def _workload_namespace(objects: list[dict[str, Any]]) -> str:
    for o in objects:
        if o.get("kind") == "PersistentVolumeClaim":
            return str((o.get("metadata") or {}).get("namespace") or "default")
    return "multinode"


def check(exp: dict[str, Any], cluster: Cluster) -> list[Line]:
    from .checks import KYVERNO_CEL_MIN
    out: list[Line] = []
    version = cluster.version()
    have = _version_tuple(version)
    if have is None or have[0] == 0:
        out.append(Line(WARN, "api-server", f"{version}: no release version (a development build); the stack's "
                                            f"objects are checked against v{CHECKED_MINOR[0]}.{CHECKED_MINOR[1]}"))
    elif have[:2] < CHECKED_MINOR:
        out.append(Line(WARN, "api-server", f"{version}: older than v{CHECKED_MINOR[0]}.{CHECKED_MINOR[1]}, the "
                                            f"version the stack's objects are checked against (conformance/apiserver)"))
    else:
        out.append(Line(OK, "api-server", f"{version}"))
    served: dict[str, set[str] | None] = {}
    for (gv, kind), example in sorted(exp["kinds"].items()):
        if gv not in served:
            served[gv] = cluster.served_kinds(gv)
        kinds = served[gv]
        if kinds is not None and kind in kinds:
            out.append(Line(OK, "kind", f"{gv} {kind} served"))
        else:
            why = "the group/version is not served" if kinds is None else f"{gv} does not serve {kind}"
            out.append(Line(FAIL, "kind", f"{gv} {kind} ({example}): {why}; the stack neither brings its CRD nor "
                                          f"installs its add-on: install the add-on (or its CRDs) on the cluster, or "
                                          f"let the stack install it (addons.<name>.provided false)"))
    if exp["kyverno_provided"]:
        want = ".".join(map(str, KYVERNO_CEL_MIN))
        images = cluster.kyverno_images()
        versions = [(img, _version_tuple(img.rsplit(":", 1)[-1]) if ":" in img else None) for img in images]
        known = [(img, v) for img, v in versions if v is not None]
        if not images:
            out.append(Line(FAIL, "kyverno", "addons.kyverno.provided is true but no Kyverno admission controller "
                                             "runs (no Deployment labelled app.kubernetes.io/component="
                                             "admission-controller, app.kubernetes.io/part-of=kyverno); install "
                                             f"Kyverno >= {want}"))
        elif not known:
            out.append(Line(WARN, "kyverno", f"version not read from the image(s) {', '.join(images)}: make sure it "
                                             f"is >= {want}"))
        elif all(v >= KYVERNO_CEL_MIN for _, v in known):
            out.append(Line(OK, "kyverno", f"{', '.join(img for img, _ in known)} (>= {want})"))
        else:
            old = ", ".join(img for img, v in known if v < KYVERNO_CEL_MIN)
            out.append(Line(FAIL, "kyverno", f"{old}: below {want}, which serves the CEL policy types "
                                             f"(https://kyverno.io/docs/policy-types/overview); upgrade Kyverno"))
    have_rc = cluster.runtime_classes() if exp["runtime_classes"] else set()
    for name, who in sorted(exp["runtime_classes"].items()):
        if name in have_rc:
            out.append(Line(OK, "runtimeclass", f"{name} ({who})"))
        else:
            out.append(Line(FAIL, "runtimeclass", f"{name} ({who}) does not exist and the stack does not create it: "
                                                  f"create RuntimeClass {name} for the node's NVIDIA runtime"))
    nodes = cluster.nodes() if exp["pools"] else []
    for p in exp["pools"]:
        sel = p["selector"]
        match = [n for n in nodes if all(n.labels.get(k) == v for k, v in sel.items())]
        label = ",".join(f"{k}={v}" for k, v in sorted(sel.items()))
        if p["created"] and not match:
            out.append(Line(OK, "nodes", f"{p['at']} ({p['name']}): created by the stack ({label}); checked once "
                                         f"they exist"))
            continue
        if len(match) < p["count"]:
            out.append(Line(FAIL, "nodes", f"{p['at']} ({p['name']}): {len(match)} node(s) carry {label}, the pool "
                                           f"has nodeCount {p['count']}: label the nodes or fix nodeSelector"))
        else:
            out.append(Line(OK, "nodes", f"{p['at']} ({p['name']}): {len(match)} node(s) carry {label}"))
        for res, want_n in sorted(p["resources"].items()):
            short = [n.name for n in match if _quantity(n.allocatable.get(res)) < want_n]
            if short:
                out.append(Line(FAIL, "resources", f"{p['at']} ({p['name']}): {len(short)} node(s) advertise "
                                                   f"fewer than {want_n:g} {res} (e.g. {short[0]}): its device "
                                                   f"plugin is not running or not ready there"))
            elif match:
                out.append(Line(OK, "resources", f"{p['at']} ({p['name']}): {res} {want_n:g} on every node"))
    if exp["storage_class"]:
        name = exp["storage_class"]
        ok = name in cluster.storage_classes()
        out.append(Line(OK if ok else FAIL, "storage", f"StorageClass {name} (storage.existingStorageClass)"
                                                       + ("" if ok else " does not exist: create it or name another")))
    if exp["claim"]:
        ok = cluster.claim_exists(exp["namespace"], exp["claim"])
        out.append(Line(OK if ok else FAIL, "storage", f"PersistentVolumeClaim {exp['namespace']}/{exp['claim']} "
                                                       f"(storage.existingClaim)" + ("" if ok else " does not exist")))
    return out


class LiveCluster:
    """A cluster read through its kubeconfig (the kubernetes client; GET and LIST only)."""

    def __init__(self, kubeconfig: str | None) -> None:
        from kubernetes import client, config
        self.api: Any = config.new_client_from_config(config_file=kubeconfig)
        self.client: Any = client            # the generated models' Optional fields: read as the API returns them

    def version(self) -> str:
        return str(self.client.VersionApi(self.api).get_code().git_version)

    def served_kinds(self, group_version: str) -> set[str] | None:
        from kubernetes.client.exceptions import ApiException
        try:
            if "/" in group_version:
                group, version = group_version.split("/", 1)
                data = self.client.CustomObjectsApi(self.api).get_api_resources(group, version)
            else:
                data = self.client.CoreV1Api(self.api).get_api_resources()
        except ApiException as e:
            if e.status == 404:
                return None
            raise
        return {r.kind for r in (data.resources or []) if "/" not in r.name}

    def runtime_classes(self) -> set[str]:
        items = self.client.NodeV1Api(self.api).list_runtime_class().items
        return {i.metadata.name for i in items}

    def nodes(self) -> list[Node]:
        items = self.client.CoreV1Api(self.api).list_node().items
        return [Node(i.metadata.name, dict(i.metadata.labels or {}),
                     {k: str(v) for k, v in ((i.status.allocatable if i.status else None) or {}).items()})
                for i in items]

    def storage_classes(self) -> set[str]:
        return {i.metadata.name for i in self.client.StorageV1Api(self.api).list_storage_class().items}

    def claim_exists(self, namespace: str, name: str) -> bool:
        from kubernetes.client.exceptions import ApiException
        try:
            self.client.CoreV1Api(self.api).read_namespaced_persistent_volume_claim(name, namespace)
        except ApiException as e:
            if e.status == 404:
                return False
            raise
        return True

    def kyverno_images(self) -> list[str]:
        deps = self.client.AppsV1Api(self.api).list_deployment_for_all_namespaces(
            label_selector="app.kubernetes.io/component=admission-controller,app.kubernetes.io/part-of=kyverno").items
        return [c.image for d in deps for c in (d.spec.template.spec.containers or []) if c.image]


def run(stack: str, file: Path | None, cluster: Cluster) -> tuple[int, list[Line]]:
    import logging

    from . import plan as mplan
    root = logging.getLogger()
    level = root.level
    root.setLevel(logging.ERROR)      # the program's advisories (plan prints them): not this command's lines
    try:
        result = mplan.plan(stack, out_root=None, path=file)
    finally:
        root.setLevel(level)
    if result.config is None:
        raise ValueError(result.error)
    lines = check(expectations(result.config, result.k8s_objects), cluster)
    return (1 if any(ln.status == FAIL for ln in lines) else 0), lines


def main(argv: list[str] | None = None, prog: str = "multinode check-cluster") -> int:
    ap = argparse.ArgumentParser(prog=prog, description="check a live cluster against what the stack expects of "
                                                        "it (read-only); exit 0 ok, 1 a check failed, 2 bad stack "
                                                        "or cluster unreachable")
    ap.add_argument("stack", help="stack name (stacks/Pulumi.<stack>.yaml)")
    ap.add_argument("--file", type=Path, help="the stack file (default stacks/Pulumi.<stack>.yaml)")
    ap.add_argument("--kubeconfig", help="default: $KUBECONFIG, then ~/.kube/config")
    a = ap.parse_args(argv)
    kubeconfig = a.kubeconfig or os.environ.get("KUBECONFIG") or None
    try:
        cluster = LiveCluster(kubeconfig)
        code, lines = run(a.stack, a.file, cluster)
    except ValueError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    except Exception as e:  # noqa: BLE001 - an unreachable or refusing cluster: one line, no traceback
        print(f"error: cannot read the cluster ({type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''})",
              file=sys.stderr)
        return 2
    for ln in lines:
        print(ln)
    fails = sum(ln.status == FAIL for ln in lines)
    print(f"check-cluster {a.stack}: {len(lines)} checks, {fails} failed, "
          f"{sum(ln.status == WARN for ln in lines)} warning(s)")
    return code
