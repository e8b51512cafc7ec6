"""RFC 6902 JSON Patch (with RFC 6901 JSON Pointers), as Kubernetes applies a MutatingAdmissionPolicy /
Kyverno MutatingPolicy `patchType: JSONPatch` mutation: the operations in order, each on the result of the one
before; any failing operation (a missing parent, an index out of range, a failed `test`) fails the whole patch
(with failurePolicy Fail the pod is refused). Pure functions over JSON-like data; the input is not changed."""
from __future__ import annotations

import copy
from typing import Any


class PatchError(ValueError):
    """An operation that RFC 6902 says fails."""


def unescape(token: str) -> str:
    """RFC 6901 section 4: '~1' is '/', then '~0' is '~'."""
    return token.replace("~1", "/").replace("~0", "~")


def escape(key: str) -> str:
    """RFC 6901: '~' -> '~0', '/' -> '~1' (what Kubernetes' jsonpatch.escapeKey does)."""
    return key.replace("~", "~0").replace("/", "~1")


def _tokens(pointer: str) -> list[str]:
    if pointer == "":
        return []
    if not pointer.startswith("/"):
        raise PatchError(f"JSON pointer {pointer!r} does not start with '/'")
    return [unescape(t) for t in pointer[1:].split("/")]


def _index(container: list[Any], token: str, pointer: str, allow_end: bool) -> int:
    if token == "-" and allow_end:
        return len(container)
    if not token.isdigit() or (len(token) > 1 and token.startswith("0")):
        raise PatchError(f"{pointer}: {token!r} is not an array index")
    i = int(token)
    if i > len(container) or (i == len(container) and not allow_end):
        raise PatchError(f"{pointer}: index {i} is out of range (array of {len(container)})")
    return i


def _walk(doc: Any, tokens: list[str], pointer: str) -> Any:
    """The value `tokens` lead to from `doc` (RFC 6901), or PatchError naming where the path breaks."""
    node = doc
    for t in tokens:
        if isinstance(node, dict):
            if t not in node:
                raise PatchError(f"{pointer}: {t!r} does not exist")
            node = node[t]
        elif isinstance(node, list):
            node = node[_index(node, t, pointer, allow_end=False)]
        else:
            raise PatchError(f"{pointer}: {t!r} is inside a value that is neither object nor array")
    return node


def _parent(doc: Any, pointer: str) -> tuple[Any, str]:
    tokens = _tokens(pointer)
    if not tokens:
        raise PatchError("the whole document cannot be the target here")
    return _walk(doc, tokens[:-1], pointer), tokens[-1]


def get(doc: Any, pointer: str) -> Any:
    return _walk(doc, _tokens(pointer), pointer)


def _add(doc: Any, pointer: str, value: Any) -> Any:
    if pointer == "":
        return value
    parent, key = _parent(doc, pointer)
    if isinstance(parent, dict):
        parent[key] = value                      # RFC 6902 4.1: an existing member is replaced
    elif isinstance(parent, list):
        parent.insert(_index(parent, key, pointer, allow_end=True), value)
    else:
        raise PatchError(f"{pointer}: the parent is neither object nor array")
    return doc


def _remove(doc: Any, pointer: str) -> tuple[Any, Any]:
    parent, key = _parent(doc, pointer)
    if isinstance(parent, dict):
        if key not in parent:
            raise PatchError(f"{pointer}: nothing to remove")
        return doc, parent.pop(key)
    if isinstance(parent, list):
        return doc, parent.pop(_index(parent, key, pointer, allow_end=False))
    raise PatchError(f"{pointer}: the parent is neither object nor array")


def copy_doc(doc: Any) -> Any:
    """copy.deepcopy(doc) for JSON-like data, the same result (a dict or list reached twice is copied once and
    shared in the copy, as deepcopy's memo does) with less Python per node: dict, list, str, int, float, bool and
    None take a direct path, anything else (a subclass, a tuple, an object, a key that is not a str) goes to
    copy.deepcopy with the same memo. About 3x faster than deepcopy on a pod template, which `plan` copies before
    patching it."""
    memo: dict[int, Any] = {}
    return _copy(doc, memo, memo.setdefault(id(memo), []))


# copy.deepcopy returns these unchanged (its _deepcopy_atomic)
_ATOMS = frozenset({str, int, float, bool, type(None)})


def _copy(doc: Any, memo: dict[int, Any], keep: list[Any]) -> Any:
    t = type(doc)
    if t is dict:
        found = memo.get(id(doc))
        if found is not None:
            return found
        out: dict[Any, Any] = {}
        memo[id(doc)] = out
        keep.append(doc)            # as deepcopy's _keep_alive: no id in the memo is reused while it is in use
        for k, v in doc.items():
            out[k if type(k) is str else copy.deepcopy(k, memo)] = v if type(v) in _ATOMS else _copy(v, memo, keep)
        return out
    if t is list:
        found = memo.get(id(doc))
        if found is not None:
            return found
        items: list[Any] = []
        memo[id(doc)] = items
        keep.append(doc)
        for v in doc:
            items.append(v if type(v) in _ATOMS else _copy(v, memo, keep))
        return items
    if t in _ATOMS:
        return doc
    return copy.deepcopy(doc, memo)


def apply(doc: Any, operations: list[dict[str, Any]]) -> Any:
    """The document after the operations (RFC 6902 section 4), a new object."""
    return apply_in_place(copy_doc(doc), operations)


def _same(value: Any) -> Any:
    return value


def apply_in_place(doc: Any, operations: list[dict[str, Any]], copy_values: bool = True) -> Any:
    """apply() on a document the caller owns: changed in place (and returned: an op on the root replaces it).
    On a failing operation the document may be partly patched; the caller discards it (the patch fails whole).
    copy_values=False: the operations' values are the caller's to give away (fresh from a CEL evaluation, read
    by nothing else): an add / replace puts the value itself into the document instead of a copy."""
    out = doc
    take = copy_doc if copy_values else _same
    for n, op in enumerate(operations):
        kind, path = op.get("op"), op.get("path")
        if not isinstance(path, str):
            raise PatchError(f"operation {n}: no path")
        if kind == "add":
            out = _add(out, path, take(op.get("value")))
        elif kind == "remove":
            out, _ = _remove(out, path)
        elif kind == "replace":
            get(out, path)                           # 4.3: the target must exist
            if path == "":
                out = take(op.get("value"))
            else:
                out, _ = _remove(out, path)
                out = _add(out, path, take(op.get("value")))
        elif kind == "move":
            src = str(op.get("from", ""))
            if path.startswith(src + "/"):
                raise PatchError(f"operation {n}: cannot move {src} into its own child {path}")
            out, value = _remove(out, src)
            out = _add(out, path, value)
        elif kind == "copy":
            out = _add(out, path, copy_doc(get(out, str(op.get("from", "")))))
        elif kind == "test":
            if get(out, path) != op.get("value"):
                raise PatchError(f"operation {n}: test of {path} failed")
        else:
            raise PatchError(f"operation {n}: unknown op {kind!r}")
    return out


__all__ = ["PatchError", "apply", "apply_in_place", "copy_doc", "escape", "unescape", "get"]
