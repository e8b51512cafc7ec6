"""Issue 40 item 9: the stack's `addons.<name>.values` are checked against the chart's values.yaml at plan time (Helm
ignores a key no template reads, in silence), and a fractional byte count (which the API server admits with a
warning only) is refused (multinode/helm_values.py, checks.addon_values_findings, quantity.fractional_byte_problems)."""
from __future__ import annotations

from typing import Any

import pytest

from multinode import checks, helm_values, quantity
from multinode import config as mconfig
from multinode.manifests import addons as maddons

from .cloudrun import problems
from .conftest import EXAMPLE_STACKS, example_raw


def _with_values(stack: str, key: str, values: dict[str, Any], **addon: Any) -> tuple[dict, set]:
    raw, secrets = example_raw(stack)
    raw.setdefault("addons", {})[key] = {**raw.get("addons", {}).get(key, {}), "values": values, **addon}
    return raw, secrets


def _advisories(raw: dict, secrets: set) -> list[tuple[str, str]]:
    cfg = checks.load(raw, secrets)
    return [(a.path, a.message) for a in checks.advisories(cfg)]


# ------------------------------------------------------------------ misspelt keys are refused, with the nearest ones
def test_a_misspelt_key_is_refused_naming_it_and_the_nearest_valid_key():
    raw, secrets = _with_values("aws-dev", "kyverno", {"admissionController": {"replicaz": 3}})
    found = dict(problems(raw, secrets))
    msg = found["addons.kyverno.values.admissionController.replicaz"]
    assert "did you mean replicas?" in msg and "schemas/kyverno/values.yaml" in msg
    raw, secrets = _with_values("aws-dev", "kyverno", {"admissionController": {"replicas": 3}})
    assert not [p for p, _ in problems(raw, secrets) if p.startswith("addons.kyverno.values")]


def test_an_unknown_top_level_key_lists_the_valid_ones_when_none_is_near():
    raw, secrets = _with_values("aws-dev", "lws", {"zzzz": 1})
    msg = dict(problems(raw, secrets))["addons.lws.values.zzzz"]
    assert "valid keys there:" in msg


def test_a_map_given_where_the_chart_has_a_value_is_refused():
    raw, secrets = _with_values("aws-dev", "kyverno", {"admissionController": {"revisionHistoryLimit": {"max": 3}}})
    msg = dict(problems(raw, secrets))["addons.kyverno.values.admissionController.revisionHistoryLimit.max"]
    assert "a value, not a map" in msg


def test_nvsentinel_stored_subchart_is_checked_and_the_others_are_open():
    raw, secrets = _with_values("aws-dev", "nvsentinel", {"gpu-health-monitor": {"runtimeClasName": "nvidia"}})
    msg = dict(problems(raw, secrets))["addons.nvsentinel.values.gpu-health-monitor.runtimeClasName"]
    assert "did you mean runtimeClassName?" in msg
    # a dependency of the chart whose values are not stored (labeler, Chart.yaml dependencies): accepted
    raw, secrets = _with_values("aws-dev", "nvsentinel", {"labeler": {"assumeDriverInstalled": True}})
    assert not [p for p, _ in problems(raw, secrets) if p.startswith("addons.nvsentinel.values")]
    # the misspelt NVSentinel key of the issue: podMonitor is the parent's own
    raw, secrets = _with_values("aws-dev", "nvsentinel", {"podMonitr": {"enabled": False}})
    assert "did you mean podMonitor?" in dict(problems(raw, secrets))["addons.nvsentinel.values.podMonitr"]


def test_a_key_below_an_unstored_subchart_is_an_advisory_not_a_refusal():
    raw, secrets = _with_values("aws-dev", "kyverno", {"grafana": {"enabeld": True}})
    assert not [p for p, _ in problems(raw, secrets) if p.startswith("addons.kyverno.values")]
    adv = dict(_advisories(raw, secrets))
    assert "sub-chart grafana" in adv["addons.kyverno.values.grafana.enabeld"]
    assert "did you mean enabled" in adv["addons.kyverno.values.grafana.enabeld"]


# ------------------------------------------------------------------ free-form maps: decided from values.yaml
def _open_paths(node: Any, path: tuple[str, ...] = ()) -> list[tuple[tuple[str, ...], str]]:
    """(path, why) of open nodes in a values.yaml: {} / [] / null, or a Kubernetes-object key with content."""
    out: list[tuple[tuple[str, ...], str]] = []
    if isinstance(node, dict):
        for k, v in node.items():
            p = (*path, str(k))
            if v == {} or v == [] or v is None:
                out.append((p, "empty"))
            elif isinstance(v, dict) and str(k) in helm_values.FREE_FORM_KEYS:
                out.append((p, "object"))
            elif isinstance(v, dict):
                out.extend(_open_paths(v, p))
    return out


@pytest.mark.parametrize("chart", ["kyverno", "lws", "network-operator", "nvsentinel"])
def test_free_form_maps_take_any_key(chart):
    """Every `{}` the chart's values.yaml leaves (nodeSelector, podAnnotations, extraArgs, resources ...) and every
    Kubernetes object key with example content takes a key the chart never lists; a closed map beside it does not."""
    opened = [(p, why) for p, why in _open_paths(helm_values.upstream_values(chart))
              if p[0] not in helm_values.CHART_DEPENDENCIES.get(chart, ()) and isinstance(
                  _get(helm_values.upstream_values(chart), p), dict)]
    assert opened, chart
    for p, _ in opened:
        values: dict[str, Any] = {}
        node = values
        for seg in p[:-1]:
            node = node.setdefault(seg, {})
        node[p[-1]] = {"example.com/anything": "x"}
        assert helm_values.findings(chart, values) == [], (chart, p)
        if len(p) > 1:                   # the closed map holding it refuses a key it does not list
            node["zzz-not-a-key"] = 1
            assert [f.path for f in helm_values.findings(chart, values)] == [".".join((*p[:-1], "zzz-not-a-key"))]


def _get(node: Any, path: tuple[str, ...]) -> Any:
    for seg in path:
        node = node[seg]
    return node


# ------------------------------------------------------------------ where it cannot be sure: advisories
def test_a_version_other_than_the_pinned_one_turns_refusals_into_advisories():
    raw, secrets = _with_values("aws-dev", "kyverno", {"admissionController": {"replicaz": 3}}, version="3.10.0")
    assert not [p for p, _ in problems(raw, secrets) if p.startswith("addons.kyverno.values")]
    adv = dict(_advisories(raw, secrets))
    assert "may have it" in adv["addons.kyverno.values.admissionController.replicaz"]


def test_a_chart_without_a_stored_values_file_is_said_not_checked():
    raw, secrets = _with_values("aws-dev", "nvidiaDevicePlugin", {"anything": 1})
    assert not [p for p, _ in problems(raw, secrets) if p.startswith("addons.nvidiaDevicePlugin")]
    assert "not checked" in dict(_advisories(raw, secrets))["addons.nvidiaDevicePlugin.values"]


@pytest.mark.parametrize("stack", EXAMPLE_STACKS)
def test_the_values_files_are_the_releases_own(stack):
    """checks.ADDON_VALUES_FILES names, per add-on, the same schemas/ folder its ReleaseSpec renders with."""
    raw, secrets = example_raw(stack)
    if raw.get("cloud") is None:
        pytest.skip("not a cluster stack")
    for a in ("gpuOperator", "grove", "kai", "dynamo", "trainer"):
        raw.setdefault("addons", {}).setdefault(a, {})["enabled"] = True
    cfg = mconfig.load(raw, secrets)
    for spec in maddons.addon_releases(cfg) + maddons.fabric_releases(cfg):
        folder = checks.ADDON_VALUES_FILES[spec.key]
        assert folder == (spec.chart_folder if spec.chart_folder in helm_values.HELM_CHARTS else None), spec.key


# ------------------------------------------------------------------ fractional byte counts
@pytest.mark.parametrize("value,fractional", [("1.5", True), ("100m", True), ("0.5Gi", False), ("1536Mi", False),
                                              ("2Gi", False), ("1", False), ("1500m", True), ("1e3", False),
                                              ("0.001", True), (3, False)])
def test_fractional_bytes_as_the_api_server_computes_them(value, fractional):
    # MilliValue() % 1000 != 0 (k8s.io/kubernetes@v1.33.13 pkg/api/pod/warnings.go:249-259)
    assert quantity.fractional_bytes(value) is fractional


def _manifest(memory: Any, where: str = "limits") -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p", "namespace": "default"},
            "spec": {"containers": [{"name": "c", "image": "busybox",
                                     "resources": {where: {"memory": memory, "ephemeral-storage": "1Gi"}}}],
                     "volumes": [{"name": "shm", "emptyDir": {"medium": "Memory", "sizeLimit": "1.5"}}]}}


@pytest.mark.parametrize("where", ["limits", "requests"])
def test_a_hand_written_pod_with_a_fractional_byte_count_is_refused(where):
    raw, secrets = example_raw("aws-dev")
    raw["manifests"] = [_manifest("1.5", where)]
    found = dict(problems(raw, secrets))
    key = f"manifests[0].spec.containers[0].resources.{where}.memory"
    assert "fractional number of bytes" in found[key] and "1536Mi" in found[key]
    # the API server does not warn on an emptyDir sizeLimit: neither do we
    assert not [p for p in found if "sizeLimit" in p]
    raw["manifests"] = [_manifest("1536Mi", where)]
    assert not [p for p, _ in problems(raw, secrets) if p.startswith("manifests")]


def test_overhead_is_checked_and_pod_level_resources_are_not():
    spec = {"containers": [{"name": "c", "image": "x"}], "overhead": {"memory": "100m"},
            "resources": {"limits": {"memory": "100m"}}}
    assert [p for p, _ in quantity.fractional_byte_problems(spec)] == ["overhead.memory"]


def test_addon_values_with_a_fractional_byte_count_are_refused():
    raw, secrets = _with_values("aws-dev", "kyverno", {"admissionController": {"container": {
        "resources": {"limits": {"memory": "0.5"}}}}})
    found = dict(problems(raw, secrets))
    assert "fractional number of bytes" in found[
        "addons.kyverno.values.admissionController.container.resources.limits.memory"]
