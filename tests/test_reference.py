"""docs/config-reference.md is what `multinode reference` prints, and covers every key of the config models;
`multinode explain <key>` prints the same entry (issue 46)."""
from __future__ import annotations

from pydantic import BaseModel

from multinode import config, reference

from .conftest import ROOT, run_command


def _model_keys(model: type[BaseModel], prefix: str = "") -> set[str]:
    """Every key of the models, walked independently of multinode/reference.py: field aliases, nested models."""
    out = set()
    for name, f in model.model_fields.items():
        key = prefix + (f.alias or name)
        out.add(key)
        for sub in reference._sub_models(f.annotation):
            out |= _model_keys(sub[1], f"{key}{sub[0]}.")
    return out


def test_the_committed_reference_is_the_generated_one():
    committed = (ROOT / "docs" / "config-reference.md").read_text(encoding="utf-8")
    assert committed == reference.markdown(), "docs/config-reference.md is stale: run `make reference`"


def test_every_key_of_the_models_has_a_complete_entry():
    es = reference.entries()
    keys = [e.key for e in es]
    assert len(keys) == len(set(keys))
    assert set(keys) == _model_keys(config.StackConfig)
    doc = (ROOT / "docs" / "config-reference.md").read_text(encoding="utf-8")
    for e in es:
        assert e.meaning and e.type and e.example and e.clouds, e.key
        assert e.required or e.default, e.key
        assert f"### `{e.key}`" in doc, e.key
    by = {e.key: e for e in es}
    assert by["nodePools[].diskSizeGb"].limits == ">= 100, <= 16384" and by["nodePools[].diskSizeGb"].default == "500"
    assert by["workloads[].kind"].allowed and "lws-inference" in by["workloads[].kind"].allowed
    assert by["cluster.region"].clouds == "aws, oci" and by["cloud"].required
    assert by["hfToken"].secret and "--secret" in by["hfToken"].example


def test_explain_prints_the_same_entry(capsys):
    code, out, _ = run_command(capsys, "explain", "nodePools[0].diskSizeGb")
    assert code == 0
    assert out.replace("# `", "### `", 1) == reference.entry_text(reference.lookup("nodePools[].diskSizeGb"))
    assert out.replace("# `", "### `", 1) in (ROOT / "docs" / "config-reference.md").read_text(encoding="utf-8")


def test_explain_an_unknown_key_names_the_close_ones(capsys):
    code, out, err = run_command(capsys, "explain", "nodePools[].diskSize")
    assert code == 2 and out == ""
    assert "no config key 'nodePools[].diskSize'" in err and "nodePools[].diskSizeGb" in err
    assert "Traceback" not in err
