"""build/<stack>/k8s/: file names that do not depend on the other objects, and the apply order.

Each Kubernetes object plan renders is one file named after the object alone:
    <Kind>-<namespace>-<name>.yaml      a namespaced object (metadata.namespace set)
    <Kind>-<name>.yaml                  a cluster-scoped one
so adding, removing or reordering an unrelated object leaves every other file name unchanged (a committed
build/ diffs as the objects that changed). The apply order (dependencies first: CRDs and namespaces before what
uses them, multinode.plan.apply_order) is the file `k8s/apply-order.txt`, one file name per line. Every reader of
k8s/ takes the order from there (`ordered_files`); a folder without the index (a hand-made test fixture, the
chart-check's helm-objects/k8s/) is read in name order.
"""
from __future__ import annotations

import hashlib
import re
from collections.abc import Iterable
from pathlib import Path
from typing import Any

INDEX = "apply-order.txt"
_HEADER = ("# the apply order of the files of this folder, one per line, dependencies first "
           "(multinode/k8sfiles.py; written by `multinode plan`)\n")


def _slug(text: str, limit: int) -> str:
    return re.sub(r"[^A-Za-z0-9.-]+", "-", text).strip("-")[:limit]


def base_name(obj: dict[str, Any], fallback_name: str = "") -> str:
    """The file name of one object, from its own kind, namespace and name (the kind is slugged too: a hand-written
    kind may hold '/' or be longer than a file name may be)."""
    md = obj.get("metadata") if isinstance(obj.get("metadata"), dict) else {}
    assert isinstance(md, dict)
    parts = [_slug(str(obj.get("kind", "")), 60)]
    ns = md.get("namespace")
    if isinstance(ns, str) and ns:
        parts.append(_slug(ns, 63))
    parts.append(_slug(str(md.get("name") or fallback_name), 80))
    return "-".join(p for p in parts if p) + ".yaml"


def file_names(objects: Iterable[tuple[dict[str, Any], str, str]]) -> list[str]:
    """The file name of each (object, fallback name, identity), in the given order. The identity is what makes a
    registration unique in the stack (its URN). Two objects that slug to the same name (the same kind, namespace
    and name under two API groups, the same object applied to two clusters of a fleet, or names differing only in
    characters the slug drops) each get a suffix from their apiVersion and identity, so the name still depends on
    the object alone, never on its neighbours."""
    items = list(objects)
    names = [base_name(o, fb) for o, fb, _ in items]
    seen: dict[str, int] = {}
    for n in names:
        seen[n] = seen.get(n, 0) + 1
    out = []
    for (o, _, identity), n in zip(items, names, strict=True):
        if seen[n] > 1:
            ident = f"{o.get('apiVersion')}|{identity}"
            n = f"{n[:-5]}-{hashlib.sha256(ident.encode()).hexdigest()[:8]}.yaml"
        out.append(n)
    if len(set(out)) != len(out):       # the same apiVersion and identity twice: a registration repeated
        raise ValueError(f"two Kubernetes objects share a file name: {sorted(n for n in out if out.count(n) > 1)[:3]}")
    return out


def index_text(names: list[str]) -> str:
    return _HEADER + "".join(f"{n}\n" for n in names)


def read_index(k8s_dir: Path) -> list[str] | None:
    """The file names of k8s/apply-order.txt in order, or None when the folder has no index."""
    p = Path(k8s_dir) / INDEX
    if not p.is_file():
        return None
    return [ln.strip() for ln in p.read_text(encoding="utf-8").splitlines() if ln.strip() and not ln.startswith("#")]


def ordered_files(k8s_dir: Path) -> list[Path]:
    """Every *.yaml of a k8s/ folder in apply order: the index's order, or name order without an index. An index
    that does not list exactly the folder's files is an error (a hand edit or a partial copy), never guessed."""
    k8s_dir = Path(k8s_dir)
    present = sorted(p.name for p in k8s_dir.glob("*.yaml"))
    order = read_index(k8s_dir)
    if order is None:
        return [k8s_dir / n for n in present]
    if sorted(order) != present:
        missing = sorted(set(present) - set(order))
        extra = sorted(set(order) - set(present))
        raise ValueError(f"{k8s_dir / INDEX}: does not list the folder's files (not listed: {missing[:5]}, "
                         f"listed but absent: {extra[:5]}); run `multinode plan` again")
    return [k8s_dir / n for n in order]


def find(k8s_dir: Path, kind: str, name: str | None = None) -> list[Path]:
    """The files of `kind` (and `name`, when given) in a k8s/ folder, in apply order, matched on the objects'
    content rather than the file name."""
    import yaml
    out = []
    for f in ordered_files(k8s_dir):
        doc = yaml.safe_load(f.read_text(encoding="utf-8"))
        if isinstance(doc, dict) and doc.get("kind") == kind and (
                name is None or (doc.get("metadata") or {}).get("name") == name):
            out.append(f)
    return out
