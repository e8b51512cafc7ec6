"""The parsed-YAML disk cache of the stored upstream files (multinode/schemafiles.py)."""
from __future__ import annotations

import hashlib
import json

import pytest
import yaml

from multinode import schemafiles
from multinode.manifests import crds


@pytest.fixture
def cache(tmp_path, monkeypatch):
    folder = tmp_path / "cache"
    monkeypatch.setenv("MULTINODE_CACHE_DIR", str(folder))
    return folder / "yaml-v1"


def _fresh(path):
    """Forget the per-process parse of `path` so the next load goes to the disk cache."""
    schemafiles._DOCS.pop(path, None)
    schemafiles._CRDS.pop(path, None)


def test_a_stored_crd_loads_the_same_from_the_cache(cache, tmp_path):
    # the smallest stored CRD (11 KB): the reference parse below is PyYAML's pure-Python loader, ~2 s for LWS's
    src = min((p for stored in crds.STORED.values() for s in stored.values() for p in s.paths()),
              key=lambda p: p.stat().st_size)
    assert src.name == "grove.io_clustertopologybindings.yaml"
    path = tmp_path / src.name
    path.write_bytes(src.read_bytes())
    parsed = list(yaml.safe_load_all(src.read_text(encoding="utf-8")))
    first = schemafiles.load_documents(path)
    entry = cache / f"{hashlib.sha256(path.read_bytes()).hexdigest()}.json"
    assert first == parsed
    assert json.loads(entry.read_text(encoding="utf-8")) == parsed
    _fresh(path)
    assert schemafiles.load_documents(path) == parsed           # now read from the entry
    assert schemafiles.crd_document(path) == parsed[0]


def test_an_edited_file_is_parsed_again(cache, tmp_path):
    path = tmp_path / "values.yaml"
    path.write_text("a: 1\n", encoding="utf-8")
    assert schemafiles.load_documents(path) == [{"a": 1}]
    _fresh(path)
    path.write_text("a: 2\n", encoding="utf-8")
    assert schemafiles.load_documents(path) == [{"a": 2}]
    assert len(list(cache.glob("*.json"))) == 2


@pytest.mark.parametrize("text", ["when: 2024-01-02\n", "200: ok\n", "true: yes\n"])
def test_data_json_would_change_is_never_cached(cache, tmp_path, text):
    path = tmp_path / "odd.yaml"
    path.write_text(text, encoding="utf-8")
    assert schemafiles.load_documents(path) == [yaml.safe_load(text)]
    assert not cache.exists() or not list(cache.glob("*.json"))
    _fresh(path)
    assert schemafiles.load_documents(path) == [yaml.safe_load(text)]


def test_a_broken_entry_is_parsed_past(cache, tmp_path):
    path = tmp_path / "v.yaml"
    path.write_text("k: [1, 2]\n", encoding="utf-8")
    cache.mkdir(parents=True)
    entry = cache / f"{hashlib.sha256(path.read_bytes()).hexdigest()}.json"
    entry.write_text("{not json", encoding="utf-8")
    assert schemafiles.load_documents(path) == [{"k": [1, 2]}]
    assert json.loads(entry.read_text(encoding="utf-8")) == [{"k": [1, 2]}]     # rewritten


def test_off_writes_nothing(tmp_path, monkeypatch):
    monkeypatch.setenv("MULTINODE_CACHE_DIR", "off")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    path = tmp_path / "v.yaml"
    path.write_text("k: v\n", encoding="utf-8")
    assert schemafiles.cache_dir() is None
    assert schemafiles.load_documents(path) == [{"k": "v"}]
    assert not (tmp_path / "xdg").exists()


def test_an_unwritable_cache_only_costs_time(tmp_path, monkeypatch):
    blocker = tmp_path / "file"
    blocker.write_text("", encoding="utf-8")
    monkeypatch.setenv("MULTINODE_CACHE_DIR", str(blocker / "sub"))       # under a file: mkdir fails
    path = tmp_path / "v.yaml"
    path.write_text("k: v\n", encoding="utf-8")
    assert schemafiles.load_documents(path) == [{"k": "v"}]
