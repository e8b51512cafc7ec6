"""The upstream files stored under schemas/ (CRDs, chart values): where they are, and their parsed content.

Why a module of its own: `plan` needs the CRD files it applies (manifests/crds.py) but not the validator
(schema_check imports jsonschema and builds validators); both read the files through here, so each file is
parsed once per process and both see the same objects.

Why a cache on disk: the CRDs are multi-MB YAML. libyaml (CSafeLoader) scans them in C, but PyYAML builds
every node's Python object in Python: the 2.8 MB of LWS and Grove CRDs a plan applies cost ~0.4 s CPU per
process, the same data from JSON ~0.03 s. So a parsed file is stored as JSON under the cache folder, named by
the sha256 of the file's bytes (an edited file has a new name and is parsed again; nothing is ever stale) and
a format number. A file is cached only when its data survives JSON unchanged (YAML can hold timestamps and
non-string keys, JSON cannot): otherwise it is parsed every time, never changed. A cache that cannot be read
or written (read-only home, a full disk) is skipped without a word: it only ever saves time.

Cache folder: $MULTINODE_CACHE_DIR, else $XDG_CACHE_HOME/multinode, else ~/.cache/multinode; the files are
`yaml-v1/<sha256>.json`. `MULTINODE_CACHE_DIR=off` turns the cache off.
"""
from __future__ import annotations

import hashlib
import json
import os
import tempfile
import threading
from pathlib import Path
from typing import Any

import yaml

_PACKAGE = Path(__file__).resolve().parent
# Package data: the wheel carries the repository's schemas/ as multinode/schemas/ (hatch_build.py,
# a build hook, standard wheels only); run from the checkout (editable install), the package reads that
# same source folder beside it. Nothing else is looked at: an installed package without its data stops with the
# path it looked in (a FileNotFoundError naming multinode/schemas/...), never reads some other copy.
SCHEMA_DIR: Path = _PACKAGE / "schemas" if (_PACKAGE / "schemas").is_dir() else _PACKAGE.parent / "schemas"

_LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
_FORMAT = "yaml-v1"            # bump when what is stored per file changes
_LOCK = threading.RLock()
_DOCS: dict[Path, list[Any]] = {}    # file -> its documents, parsed once per process (shared: never mutate)
_CRDS: dict[Path, dict] = {}          # file -> its first CustomResourceDefinition ({} when none)


def cache_dir() -> Path | None:
    """The folder of the parsed-YAML cache, or None when turned off."""
    env = os.environ.get("MULTINODE_CACHE_DIR")
    if env:
        return None if env == "off" else Path(env) / _FORMAT
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "multinode" / _FORMAT


def _read_cached(path: Path, data: bytes) -> tuple[list[Any] | None, Path | None]:
    folder = cache_dir()
    if folder is None:
        return None, None
    entry = folder / f"{hashlib.sha256(data).hexdigest()}.json"
    try:
        with open(entry, encoding="utf-8") as f:
            docs = json.load(f)
        return (docs if isinstance(docs, list) else None), entry
    except (OSError, ValueError):
        return None, entry


def _write_cached(entry: Path, docs: list[Any]) -> None:
    try:
        text = json.dumps(docs, separators=(",", ":"))
    except (TypeError, ValueError):
        return                                  # a value JSON has no form for (a YAML timestamp)
    if json.loads(text) != docs:
        return                                  # changed by JSON (a non-string key): never cache that
    try:
        entry.parent.mkdir(parents=True, exist_ok=True)
        # write then rename: concurrent plans (test workers) never read a half-written entry
        fd, tmp = tempfile.mkstemp(dir=entry.parent, prefix=".tmp-", suffix=".json")
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(text)
        os.replace(tmp, entry)
    except OSError:
        pass


def load_documents(path: Path) -> list[Any]:
    """Every YAML document in `path`, parsed once per process (through the disk cache). Shared between
    callers: do not mutate what this returns."""
    path = Path(path)
    with _LOCK:
        docs = _DOCS.get(path)
        if docs is None:
            data = path.read_bytes()
            docs, entry = _read_cached(path, data)
            if docs is None:
                docs = list(yaml.load_all(data, Loader=_LOADER))
                if entry is not None:
                    _write_cached(entry, docs)
            _DOCS[path] = docs
        return docs


def crd_document(path: Path) -> dict | None:
    """The (first) CustomResourceDefinition in `path`, or None. Shared: do not mutate it."""
    path = Path(path)
    with _LOCK:
        if path not in _CRDS:
            crds = [d for d in load_documents(path)
                    if isinstance(d, dict) and d.get("kind") == "CustomResourceDefinition"]
            _CRDS[path] = crds[0] if crds else {}
        return _CRDS[path] or None
