"""The README's config reference and catalog list match the code."""
from __future__ import annotations

from typing import get_args

from pydantic import BaseModel

from multinode import catalog, config

from .conftest import ROOT

README = (ROOT / "README.md").read_text()


def _models(model, seen):
    if model in seen:
        return
    seen.add(model)
    for f in model.model_fields.values():
        for t in [f.annotation, *get_args(f.annotation)] + [a for x in get_args(f.annotation) for a in get_args(x)]:
            if isinstance(t, type) and issubclass(t, BaseModel):
                _models(t, seen)


def test_every_config_key_is_documented():
    seen = set()
    _models(config.StackConfig, seen)
    def documented(key):
        return any(f"{pre}{key}{post}" in README for pre in ("`", ".") for post in ("`", ".", "[]"))
    missing = sorted({f"{m.__name__}.{f.alias or n}" for m in seen for n, f in m.model_fields.items()
                      if not documented(f.alias or n)})
    assert not missing, f"README config reference lacks: {missing}"


def test_every_fleet_key_is_documented():
    from multinode.fleet import config as fleet_config
    seen = set()
    _models(fleet_config.Fleet, seen)
    cluster_models: set = set()            # documented in the cluster reference
    for m in (config.Workload, config.NodePool, config.FabricConfig, config.Storage):
        _models(m, cluster_models)
    seen -= cluster_models
    fleet_section = README[README.index("### Fleet stacks"):README.index("## Machine catalog")]
    def documented(key):      # `key`, `...key`, `...key[]`
        return any(f"{pre}{key}{post}" in fleet_section for pre in ("`", ".") for post in ("`", "[]`"))
    missing = sorted({f"{m.__name__}.{f.alias or n}" for m in seen for n, f in m.model_fields.items()
                      if n not in config.Workload.model_fields and not documented(f.alias or n)})
    assert not missing, f"README fleet reference lacks: {missing}"   # workload keys: the cluster reference


def test_every_catalog_machine_is_listed():
    missing = [m for m in catalog.MACHINES if m not in README]
    assert not missing, missing


def test_readme_quick_start_commands_exist_in_makefile():
    makefile = (ROOT / "Makefile").read_text()
    for target in ("plan", "test", "plan-all", "bench", "venv"):
        assert f"make {target}" in README and f"\n{target}:" in makefile
    assert "make test" in (ROOT / ".ci" / "run").read_text()


def test_readme_corpus_count_matches_the_corpus():
    import re
    n = len(list((ROOT / "tests" / "corpus").glob("*.yaml")))
    counts = {int(m) for m in re.findall(r"(\d+)\s+broken\s+stacks", README)}
    assert counts == {n}, (counts, n)


def test_every_heading_is_there_once():
    """Two edits of this README appended a second copy of most of it (a replace whose end marker matched earlier
    in the file than its start): every heading appears once."""
    headings, fenced = [], False
    for line in README.splitlines():
        fenced ^= line.startswith("```")
        if not fenced and line.startswith("#"):
            headings.append(line)
    assert headings and len(headings) == len(set(headings)), sorted(h for h in headings if headings.count(h) > 1)
