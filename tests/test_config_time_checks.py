"""Config-time checks of issue 46: each refused with exit 2 and the key path, before anything is registered."""
from __future__ import annotations

import pytest
import yaml

from multinode import checks
from multinode import plan as mplan
from multinode.errors import ConfigError

from .conftest import example_raw


def _load(raw, secrets):
    return checks.load(raw, secrets)


def _error(raw, secrets) -> str:
    with pytest.raises(ConfigError) as e:
        _load(raw, secrets)
    return str(e.value)


def test_a_gated_model_without_a_token_is_refused_and_a_token_clears_it():
    raw, secrets = example_raw("aws-dev")
    assert raw["workloads"][0]["model"].startswith("meta-llama/")
    _load(raw, secrets)                                       # the example sets hfToken: clean
    raw.pop("hfToken")
    secrets.discard("hfToken")
    msg = _error(raw, secrets)
    assert "workloads[0].model" in msg and "gated Hugging Face model" in msg and "multinode:hfToken" in msg
    # the fix the message names, or a token of the user's own in the workload's env, clears it
    raw["workloads"][0].setdefault("env", {})["HF_TOKEN"] = "$(HF)"
    assert "gated" not in str(_try(raw, secrets))


def _try(raw, secrets):
    try:
        _load(raw, secrets)
    except ConfigError as e:
        return e
    return ""


def test_an_ungated_model_needs_no_token():
    raw, secrets = example_raw("aws-dev")
    raw.pop("hfToken")
    secrets.discard("hfToken")
    for w in raw["workloads"]:
        if str(w.get("model", "")).startswith("meta-llama/"):
            w["model"] = "deepseek-ai/DeepSeek-R1"
            w["modelParamsB"] = 405
    assert "gated" not in str(_try(raw, secrets))


def test_a_zone_outside_the_aws_region_is_refused():
    raw, secrets = example_raw("aws-dev")
    raw["nodePools"][0]["zone"] = "us-west-2a"
    msg = _error(raw, secrets)
    assert "nodePools[0].zone" in msg and "'us-east-1'" in msg
    raw["nodePools"][0]["zone"] = "use1-az4"        # an AZ ID names no region: not refused for it
    assert "nodePools[0].zone" not in str(_try(raw, secrets))


def test_a_provided_kyverno_older_than_the_cel_policy_types_is_refused():
    raw, secrets = example_raw("existing-dev")
    raw.setdefault("addons", {})["kyverno"] = {"provided": True, "version": "1.16.2"}
    msg = _error(raw, secrets)
    assert "addons.kyverno.version" in msg and "1.17.0" in msg
    raw["addons"]["kyverno"]["version"] = "v1.17.0"
    assert "addons.kyverno" not in str(_try(raw, secrets))
    raw["addons"]["kyverno"]["version"] = "1.16.2"
    raw["fabric"] = {**raw.get("fabric", {}), "enabled": False}         # no fabric policies rendered
    assert "addons.kyverno" not in str(_try(raw, secrets))


def test_plan_exits_2_on_a_new_check_before_writing(tmp_path):
    doc = yaml.safe_load((mplan.stackfile.stack_path("aws-dev")).read_text())
    doc["config"]["multinode:nodePools"][0]["zone"] = "eu-west-1a"
    f = tmp_path / "Pulumi.zone.yaml"
    f.write_text(yaml.safe_dump(doc, sort_keys=False))
    result = mplan.plan("zone", tmp_path / "build", path=f)
    assert result.exit_code == mplan.EXIT_CONFIG and "nodePools[0].zone" in result.error
    assert not (tmp_path / "build").exists()
