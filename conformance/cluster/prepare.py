"""Inputs of the cluster box for one stack, from the same code `plan` uses (no second catalog):

  build/<stack>/engines/cluster/nodes.yaml   a NodeList: for each pool nodeCount nodes named as placement.py
                                             names them (<pool>-<i>), with the labels and taints the pool's
                                             nodes carry (multinode.pools), the topology labels Volcano's
                                             HyperNode discovery reads (manifests.volcano_topology), and as
                                             allocatable exactly what placement.py counts (GPUs, the fabric
                                             device resource, cpu and memory after the system reserve of
                                             multinode.allocatable, pods = the cloud's maxPods)
  build/<stack>/engines/cluster/crds.yaml    "replace": the full upstream CRD for every CRD digest in k8s/
                                             (its spec's sha256 checked against the digest plan wrote);
                                             "extra": the CRDs of kinds the stack renders that a Helm chart
                                             would install (found under schemas/); "missing": kinds with none

With --kyverno-crds DIR (config/crds of the Kyverno module conformance/kyverno builds, from the Go module
cache), every CRD there joins "extra": Kyverno's controller waits for the informers of all its kinds.
With --lws-crds DIR (config/crd/bases of the LWS module conformance/lws builds) and a stack that installs LWS
(helm/addons-lws.yaml), the CRDs there that the stack does not already render join "extra" (the LWS manager runs
a DisaggregatedSet controller whatever the stack holds), and Volcano's PodGroup CRD (schemas/) when the chart
values give LWS Volcano as its gang scheduler: LWS then creates a PodGroup per group (the Volcano chart would
have installed that CRD).
With --volcano DIR (the volcano.sh/volcano module conformance/volcano builds, from the Go module cache) and a
stack that installs Volcano: engines/cluster/volcano.json (volcano_inputs.py), and Volcano's CRDs join "extra".

Usage: python conformance/cluster/prepare.py <build/<stack>> <stack file> [--kyverno-crds DIR] [--lws-crds DIR]
       [--volcano DIR]
"""
from __future__ import annotations

import hashlib
import json
import sys
from pathlib import Path
from typing import Any

import yaml

from multinode import allocatable, catalog, checks, k8sfiles, placement, stackfile
from multinode.manifests import crds as mcrds
from multinode.manifests import volcano_topology
from multinode.schemafiles import SCHEMA_DIR, crd_document, load_documents

sys.path.insert(0, str(Path(__file__).resolve().parent))
import volcano_inputs  # noqa: E402  (beside this file)

BUILTIN_GROUPS = {"", "apps", "batch", "rbac.authorization.k8s.io", "scheduling.k8s.io", "networking.k8s.io",
                  "policy", "admissionregistration.k8s.io", "storage.k8s.io", "apiextensions.k8s.io",
                  "coordination.k8s.io", "node.k8s.io", "discovery.k8s.io", "autoscaling"}
# Where a resource is not known (no source for the machine's cpu or memory), placement.py treats it as
# unconstrained; the box gives such a node this much so the scheduler does not constrain it either.
UNCONSTRAINED = {"cpu": "4096", "memory": "64Ti"}
EPHEMERAL = "100Ti"      # plan does not model ephemeral storage; nor does the box constrain it


POOL_ANNOTATION = "box.multinode.dev/pool"   # read by compare.py (the same name there)


def _group(api_version: str) -> str:
    return api_version.split("/")[0] if "/" in api_version else ""


def group_placement_keys(cfg: Any, pool: str) -> list[str]:
    """The topology keys of the groupPlacement of the workloads on this pool (lws-inference)."""
    return sorted({w.group_placement.topology_key for w in cfg.workloads
                   if w.group_placement is not None and w.node_pool == pool})


def node_objects(cfg: Any) -> list[dict[str, Any]]:
    pools = placement.pools_from_config(cfg)
    nodes, estimates = placement.build_nodes(pools)
    by_pool = {p.name: p for p in pools}
    cfg_pools = {p.name: p for p in cfg.node_pools}
    out = []
    for n in nodes:
        spec = by_pool[n.pool]
        m: catalog.Machine = spec.machine
        max_pods = allocatable.DEFAULT_MAX_PODS.get(cfg.cloud, 110)
        alloc: dict[str, str] = {"pods": str(max_pods), "ephemeral-storage": EPHEMERAL}
        cap: dict[str, str] = dict(alloc)
        for res, v in n.capacity.items():
            if res == placement.CPU:
                alloc[res] = f"{round(v * 1000)}m"
                cap[res] = str(m.vcpus) if m.vcpus else alloc[res]
            elif res == placement.MEMORY:
                alloc[res] = str(int(v))
                cap[res] = f"{m.memory_gib}Gi" if m.memory_gib else alloc[res]
            else:
                alloc[res] = cap[res] = str(int(v))
        for res, q in UNCONSTRAINED.items():
            alloc.setdefault(res, q)
            cap.setdefault(res, q)
        labels = dict(n.labels)
        labels.update({"kubernetes.io/os": "linux", "kubernetes.io/arch": "amd64",
                       "node.kubernetes.io/instance-type": m.name})
        # One network domain per pool (the assumption of plan's placement and of the tier-1 HyperNodes):
        # every node of the pool gets the same value on each topology tier.
        for i, label in enumerate(volcano_topology.topology_labels(cfg, cfg_pools[n.pool])):
            labels[label] = f"{n.pool}-tier{i}"
        # The label a workload's groupPlacement names (LWS exclusive placement, or the pod affinity rendered for it
        # under Volcano), where the cloud module gives the pool none: the user's nodes carry it (a cloud's tier
        # label, a rack label), and a pod whose required pod affinity names a topology key no node carries is
        # unschedulable. Same rule: one domain per pool.
        for key in group_placement_keys(cfg, n.pool):
            labels.setdefault(key, f"{n.pool}-domain")
        out.append({"apiVersion": "v1", "kind": "Node",
                    "metadata": {"name": n.name, "labels": labels,
                                 "annotations": {"multinode.dev/box-allocatable-source":
                                                 estimates[n.pool].source[:200],
                                                 # the pool of the node for compare.py: a pool of an existing
                                                 # cluster carries the user's labels, not multinode.dev/node-pool
                                                 POOL_ANNOTATION: n.pool}},
                    "spec": {"taints": [dict(t) for t in n.taints]},
                    "status": {"capacity": cap, "allocatable": alloc}})
    return out


def _schema_crds() -> dict[tuple[str, str], dict[str, Any]]:
    index: dict[tuple[str, str], dict[str, Any]] = {}
    for path in sorted(SCHEMA_DIR.rglob("*.yaml")):
        doc = crd_document(path) if path.name != "values.yaml" else None
        if doc:
            spec = doc["spec"]
            index.setdefault((spec["group"], spec["names"]["kind"]),
                             {**doc, "_file": str(path.relative_to(SCHEMA_DIR))})
    return index


def crd_inputs(k8s_dir: Path, cfg: Any) -> dict[str, Any]:
    objs = [load_documents(p)[0] for p in k8sfiles.ordered_files(k8s_dir)]
    stored = {}
    for key in mcrds.OWNED:
        s = mcrds.crd_set(cfg, key) if cfg is not None else None
        for c in (mcrds.crd_objects(s) if s else []):
            stored[c["metadata"]["name"]] = c
    replace, served = {}, set()
    for o in objs:
        if o.get("kind") != "CustomResourceDefinition":
            continue
        name = o["metadata"]["name"]
        full = stored.get(name)
        if full is None:
            raise SystemExit(f"{k8s_dir}: CRD {name}: no stored upstream file (multinode/manifests/crds.py STORED)")
        digest = hashlib.sha256(json.dumps(full["spec"], sort_keys=True, default=str).encode()).hexdigest()
        text = k8sfiles.find(k8s_dir, "CustomResourceDefinition", name)[0].read_text()
        if digest not in text:
            raise SystemExit(f"{k8s_dir}: CRD {name}: the stored file's spec (sha256 {digest}) "
                             "is not the one plan wrote")
        replace[name] = full
        served.add((full["spec"]["group"], full["spec"]["names"]["kind"]))
    index = _schema_crds()
    extra, missing = [], []
    for o in objs:
        gk = (_group(str(o.get("apiVersion", ""))), str(o.get("kind")))
        if gk[0] in BUILTIN_GROUPS or gk in served:
            continue
        served.add(gk)
        doc = index.get(gk)
        if doc is None:
            missing.append(f"{gk[1]}.{gk[0]}")
            continue
        src = doc.pop("_file")
        meta = {**doc["metadata"], "annotations": {**(doc["metadata"].get("annotations") or {}),
                                                   "multinode.dev/box-crd-from": f"schemas/{src}"}}
        extra.append({**doc, "metadata": meta})
    return {"replace": replace, "extra": extra, "missing": missing}


def folder_crds(folder: Path) -> list[dict[str, Any]]:
    out = volcano_inputs.crds_from(sorted(folder.rglob("*.yaml")))
    if not out:
        raise SystemExit(f"{folder}: no CustomResourceDefinition")
    return out


def lws_crds(folder: Path, out_dir: Path, have: set[str]) -> list[dict[str, Any]]:
    """The CRDs the box adds for the LWS controller manager of a stack that installs LWS (none otherwise)."""
    helm = out_dir / "helm" / "addons-lws.yaml"
    if not helm.is_file():
        return []
    values = (yaml.safe_load(helm.read_text()) or {}).get("values") or {}
    out = [c for c in folder_crds(folder) if c["metadata"]["name"] not in have]
    if ((values.get("gangSchedulingManagement") or {}).get("schedulerProvider")) == "volcano":
        doc = _schema_crds().get(("scheduling.volcano.sh", "PodGroup"))
        if doc is None:
            raise SystemExit("schemas/: no PodGroup CRD (scheduling.volcano.sh) for LWS's gang scheduling")
        src = doc.pop("_file")
        if doc["metadata"]["name"] not in have:
            out.append({**doc, "metadata": {**doc["metadata"], "annotations": {
                **(doc["metadata"].get("annotations") or {}), "multinode.dev/box-crd-from": f"schemas/{src}"}}})
    return out


def _take_dir(argv: list[str], flag: str) -> tuple[Path | None, list[str]]:
    if flag not in argv:
        return None, argv
    i = argv.index(flag)
    return Path(argv[i + 1]), argv[:i] + argv[i + 2:]


def main(argv: list[str]) -> int:
    kyverno_dir, argv = _take_dir(argv, "--kyverno-crds")
    lws_dir, argv = _take_dir(argv, "--lws-crds")
    volcano_dir, argv = _take_dir(argv, "--volcano")
    out_dir, stack_file = Path(argv[0]), Path(argv[1])
    raw, secrets, _ = stackfile.read_stack_file(stack_file)
    if "fleet" in raw:
        print(f"{out_dir.name}: a fleet stack (no node pools of its own): no box", file=sys.stderr)
        return 4
    cfg = checks.load(raw, secrets, source=str(stack_file))
    box = out_dir / "engines" / "cluster"
    box.mkdir(parents=True, exist_ok=True)
    nodes = node_objects(cfg)
    node_list = {"apiVersion": "v1", "kind": "NodeList", "items": nodes}
    (box / "nodes.yaml").write_text(yaml.safe_dump(node_list, sort_keys=False))
    crds = crd_inputs(out_dir / "k8s", cfg)
    if kyverno_dir is not None:
        ky = folder_crds(kyverno_dir)
        names = {c["metadata"]["name"] for c in ky}
        crds["extra"] = [c for c in crds["extra"] if c["metadata"]["name"] not in names] + ky
    if lws_dir is not None:
        have = set(crds["replace"]) | {c["metadata"]["name"] for c in crds["extra"]}
        crds["extra"] += lws_crds(lws_dir, out_dir, have)
    (box / "volcano.json").unlink(missing_ok=True)
    vc = volcano_inputs.volcano_inputs(out_dir, volcano_dir) if volcano_dir is not None else None
    if vc is not None:
        names = {c["metadata"]["name"] for c in vc["crds"]}
        crds["extra"] = [c for c in crds["extra"] if c["metadata"]["name"] not in names] + vc.pop("crds")
        (box / "volcano.json").write_text(json.dumps(vc, indent=1))
    (box / "crds.yaml").write_text(json.dumps(crds))
    print(f"{out_dir.name}: {len(nodes)} nodes, {len(crds['replace'])} CRDs, {len(crds['extra'])} add-on CRDs"
          + (f", no CRD for {', '.join(crds['missing'])}" if crds["missing"] else ""))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
