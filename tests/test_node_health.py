"""Issue 34 part A: NVSentinel as an add-on (DCGM per cloud, NIC health monitor per fabric, values checked
against the stored chart values) and the clouds' own node repair."""
from __future__ import annotations

import re
from pathlib import Path

import pytest
import yaml

from multinode import config, stackfile
from multinode import schema_check as validation
from multinode.manifests import addons

STACKS = ["aws-dev", "azure-dev", "gcp-dev", "oci-dev", "existing-dev", "dynamo-dev"]


def load(stack: str, **over) -> config.StackConfig:
    from multinode import checks
    raw, secrets, _ = stackfile.read_stack_file(stackfile.stack_path(stack))
    raw = dict(raw)
    raw.update(over)
    return checks.load(raw, secrets)


def nvsentinel(cfg: config.StackConfig) -> addons.ReleaseSpec | None:
    return next((s for s in addons.addon_releases(cfg) if s.key == "nvsentinel"), None)


@pytest.mark.parametrize("stack", STACKS)
def test_every_stack_with_gpu_pools_renders_nvsentinel_with_known_values(stack):
    cfg = load(stack)
    spec = nvsentinel(cfg)
    assert spec is not None and cfg.node_pools
    assert (spec.chart, spec.version, spec.namespace) == ("oci://ghcr.io/nvidia/nvsentinel", "v1.19.0", "nvsentinel")
    assert validation.helm_values_unknown_keys("nvsentinel", spec.values) == []


def test_unknown_nvsentinel_keys_are_caught_in_the_parent_and_in_the_stored_subcharts():
    # a planted typo in each place the check reads: the parent chart, a stored sub-chart, a sub-chart key path
    assert validation.helm_values_unknown_keys("nvsentinel", {"global": {"dcgm": {"mod": "x"}}}) == ["global.dcgm.mod"]
    assert validation.helm_values_unknown_keys(
        "nvsentinel", {"gpu-health-monitor": {"runtimeClass": "nvidia"}}) == ["gpu-health-monitor.runtimeClass"]
    assert validation.helm_values_unknown_keys(
        "nvsentinel", {"nic-health-monitor": {"counterDetection": {"enabld": True}}}) == \
        ["nic-health-monitor.counterDetection.enabld"]
    # issue 40: the labeler and metadata collector sub-charts we now set keys of (or tell users to)
    assert validation.helm_values_unknown_keys(
        "nvsentinel", {"labeler": {"assumeDriverInstaled": True}}) == ["labeler.assumeDriverInstaled"]
    assert validation.helm_values_unknown_keys(
        "nvsentinel", {"metadata-collector": {"runtimeClassName": "x", "runtimeClas": "x"}}) == \
        ["metadata-collector.runtimeClas"]
    # a sub-chart that is not stored is not a key of the parent: reported
    assert validation.helm_values_unknown_keys("nvsentinel", {"node-drainer": {"x": 1}}) == ["node-drainer"]


def test_a_users_bad_key_reaches_the_check():
    # issue 40: refused when the stack loads (checks.addon_values_findings), no longer left to a test of ours
    with pytest.raises(config.ConfigError) as e:
        load("aws-dev", addons={"nvsentinel": {"values": {"global": {"nicHealthMonitr": {"enabled": True}}}}})
    assert "addons.nvsentinel.values.global.nicHealthMonitr" in str(e.value)
    assert "did you mean nicHealthMonitor" in str(e.value)


def test_opt_out_and_provided_install_nothing():
    assert nvsentinel(load("aws-dev", addons={"nvsentinel": {"enabled": False}})) is None
    assert nvsentinel(load("aws-dev", addons={"nvsentinel": {"provided": True}})) is None
    assert addons.nvsentinel_advisories(load("aws-dev", addons={"nvsentinel": {"enabled": False}})) == []


def test_gpu_operator_stacks_read_the_operators_standalone_dcgm():
    for stack in ("azure-dev", "oci-dev"):
        cfg = load(stack, addons={"gpuOperator": {"enabled": True, "namespace": "gpu-op"}})
        dcgm = nvsentinel(cfg).values["global"]["dcgm"]
        assert dcgm == {"mode": "operator-service", "service": {"endpoint": "nvidia-dcgm.gpu-op.svc", "port": 5555}}
        assert "gpu-health-monitor" not in nvsentinel(cfg).values
        gpu_op = next(s for s in addons.fabric_releases(cfg) if s.key == "gpuOperator")
        assert gpu_op.values["dcgm"] == {"enabled": True}
        assert validation.helm_values_unknown_keys("gpu-operator", gpu_op.values) == []
        # issue 40: the workloads' preflight reads the same engine (dcgmi diag --host): on without NVSentinel too
        off = load(stack, addons={"gpuOperator": {"enabled": True}, "nvsentinel": {"enabled": False}})
        assert next(s for s in addons.fabric_releases(off) if s.key == "gpuOperator").values["dcgm"] == {
            "enabled": True}
        raw, secrets, _ = stackfile.read_stack_file(stackfile.stack_path(stack))
        nobody = load(stack, addons={"gpuOperator": {"enabled": True}, "nvsentinel": {"enabled": False}},
                      workloads=[dict(w, preflight={"dcgm": "off"}) for w in raw["workloads"]])
        assert "dcgm" not in next(s for s in addons.fabric_releases(nobody) if s.key == "gpuOperator").values


@pytest.mark.parametrize("stack", ["aws-dev", "gcp-dev", "oci-dev", "azure-dev"])
def test_cloud_installed_driver_uses_embedded_dcgm_with_a_runtime_class(stack):
    cfg = load(stack)
    spec = nvsentinel(cfg)
    assert spec.values["global"]["dcgm"]["mode"] == "embedded-mode"
    assert spec.values["global"]["dcgm"]["embedded"]["endpoint"] == "localhost"
    ghm = spec.values["gpu-health-monitor"]
    # GKE's driver lives under /home/kubernetes/bin/nvidia: NVSentinel's documented mounts, on gcp only
    assert ("additionalHostVolumes" in ghm) == (stack == "gcp-dev")
    rc = addons.nvsentinel_runtime_class(cfg)
    notes = [p.message for p in addons.nvsentinel_advisories(cfg)]
    if stack == "oci-dev":       # OKE's runtime handlers were not read: the cluster must bring "nvidia"
        assert rc is None and ghm["runtimeClassName"] == "nvidia"
        assert any("RuntimeClass 'nvidia'" in m for m in notes)
    else:                        # issue 40: the class the chart requires exists because we create it
        assert rc is not None and ghm["runtimeClassName"] == rc["metadata"]["name"]
        assert not any("RuntimeClass" in m for m in notes)


@pytest.mark.parametrize("stack,monitored,note", [
    ("azure-dev", True, None), ("oci-dev", True, None), ("aws-dev", False, "efa"), ("gcp-dev", False, "tcpxo")])
def test_nic_health_monitor_follows_the_pools_fabric_and_unwatched_fabrics_get_a_note(stack, monitored, note):
    cfg = load(stack)
    assert nvsentinel(cfg).values["global"]["nicHealthMonitor"] == {"enabled": monitored}
    notes = [p.message for p in addons.nvsentinel_advisories(cfg)]
    nic_notes = [m for m in notes if "NIC health monitor" in m]
    if note is None:
        assert nic_notes == []
    else:
        assert len(nic_notes) == 1 and f"{note} ports" in nic_notes[0]


def test_advisories_reach_plan_checks():
    from multinode import checks
    assert any(p.path == "addons.nvsentinel" for p in checks.advisories(load("aws-dev")))


# ---------------------------------------------------------------------------------------------------- issue 40
# The stored chart (../shared/charts, tests only): its defaults and templates are what the release renders.
CHART = Path(__file__).resolve().parent.parent.parent / "shared" / "charts" / "nvsentinel-v1.19.0"
needs_chart = pytest.mark.skipif(not CHART.exists(), reason="../shared/charts not beside the clone")


def chart_defaults(sub: str | None = None) -> dict:
    folder = CHART if sub is None else CHART / "charts" / sub
    return yaml.safe_load((folder / "values.yaml").read_text()) or {}


def effective(values: dict) -> dict:
    """The parent chart's values as Helm merges ours over its values.yaml."""
    return addons.deep_merge(chart_defaults(), values)


@needs_chart
@pytest.mark.parametrize("stack", STACKS)
def test_no_prometheus_operator_kind_is_rendered_by_default(stack):
    """Item 1: the chart's podMonitor.enabled defaults to true (values.yaml:353-354) and no stack installs the
    Prometheus Operator's CRDs. On main the stack set nothing, so the PodMonitor was rendered."""
    values = nvsentinel(load(stack)).values
    merged = effective(values)
    for path in addons.PROMETHEUS_OPERATOR_SWITCHES:
        head, *rest = path
        # a sub-chart switch: its own values.yaml default under the parent's key
        base = merged if head == "podMonitor" else addons.deep_merge({head: chart_defaults_sub(path)}, merged)
        assert addons._get(base, path) is not True, ".".join(path)
    assert [p for p in addons.nvsentinel_advisories(load(stack)) if "monitoring.coreos.com" in p.message] == []


def chart_defaults_sub(path: tuple[str, ...]) -> dict:
    if path[0] == "postgresql":
        return chart_defaults("postgresql")
    return {"mongodb": yaml.safe_load((CHART / "charts" / "mongodb-store" / "charts" / "mongodb" /
                                       "values.yaml").read_text())}


@needs_chart
def test_the_switch_list_covers_every_template_that_renders_a_prometheus_operator_kind():
    """Every template of the chart and its sub-charts holding monitoring.coreos.com is guarded by one of
    PROMETHEUS_OPERATOR_SWITCHES (so a new one in a chart bump fails here)."""
    switches = set(addons.PROMETHEUS_OPERATOR_SWITCHES)
    found = 0
    for tpl in sorted(CHART.rglob("*.yaml")):
        if "templates" not in tpl.relative_to(CHART).parts:
            continue
        text = tpl.read_text()
        if "monitoring.coreos.com" not in text:
            continue
        found += 1
        rel = tpl.relative_to(CHART).parts
        prefix = tuple(rel[i + 1] for i, part in enumerate(rel[:-1]) if part == "charts")
        guard = next(line for line in text.splitlines() if line.lstrip().startswith("{{- if"))
        refs = {prefix + tuple(m.split(".")) for m in re.findall(r"\.Values\.([\w.]+)", guard)}
        assert refs & switches, f"{tpl}: {guard}"
    assert found == 6       # podMonitor.yaml, postgresql's 3, mongodb's 2


def test_opting_into_the_pod_monitor_keeps_it_and_names_the_crd():
    cfg = load("aws-dev", addons={"nvsentinel": {"values": {"podMonitor": {"enabled": True}}}})
    assert nvsentinel(cfg).values["podMonitor"]["enabled"] is True
    (note,) = [p for p in addons.nvsentinel_advisories(cfg) if "monitoring.coreos.com" in p.message]
    assert note.path == "addons.nvsentinel.values" and "podMonitor.enabled" in note.message


# Item 5: what selects each monitor the chart enables, read from the templates (asserted to still say so below),
# and what the labeler writes (NVSentinel labeler/pkg/labeler/labeler.go at e002c5dc, multinode/nvsentinel.py).
SELECTORS = {
    # monitor: (enabled-by key under global, template, fixed nodeSelector, runtimeClassName source)
    "gpu-health-monitor": ("gpuHealthMonitor", "charts/gpu-health-monitor/templates/daemonset-dcgm-4.x.yaml",
                           {"nvsentinel.dgxc.nvidia.com/dcgm.version": "4.x"}, "gpu-health-monitor"),
    "syslog-health-monitor": ("syslogHealthMonitor", "charts/syslog-health-monitor/templates/_helpers.tpl",
                              {"nvsentinel.dgxc.nvidia.com/driver.installed": "true",
                               "nvsentinel.dgxc.nvidia.com/kata.enabled": "false"}, None),
    "nic-health-monitor": ("nicHealthMonitor", "charts/nic-health-monitor/templates/daemonset.yaml",
                           {"nvsentinel.dgxc.nvidia.com/driver.installed": "true"}, None),
    "metadata-collector": ("metadataCollector", "charts/metadata-collector/templates/daemonset.yaml",
                           {"nvidia.com/gpu.present": "true", "nvsentinel.dgxc.nvidia.com/driver.installed": "true"},
                           "metadata-collector"),
}


@needs_chart
def test_the_selectors_above_are_the_charts():
    for _, tpl, selector, _ in SELECTORS.values():
        text = (CHART / tpl).read_text()
        block = text[text.index("nodeSelector:"):]
        for k, v in selector.items():
            if k.endswith("kata.enabled"):       # the template writes the regular DaemonSet's value through a variable
                assert f"{k}: {{{{ $kataLabel | quote }}}}" in block
            else:
                assert f'{k}: "{v}"' in block, (tpl, k)


def gpu_node_labels(cfg, values: dict) -> dict[str, str]:
    """The labels one GPU node of the stack's first pool carries once the labeler ran: the pool's own labels
    (pools.node_labels; an existing cluster's nodes: its nodeSelector only) plus what the labeler writes."""
    from multinode import pools
    pool = cfg.node_pools[0]
    labels = dict(pools.node_labels(cfg, pool, cfg.machine(pool)))
    labels["nvsentinel.dgxc.nvidia.com/kata.enabled"] = "false"        # no Kata runtime label on our nodes
    operator = values["global"]["dcgm"]["mode"] == "operator-service"
    if operator:
        # the GPU Operator's standalone DCGM pod (dcgm.enabled) is there: its image names the major version
        labels["nvsentinel.dgxc.nvidia.com/dcgm.version"] = "4.x"
    elif labels.get("nvsentinel.dgxc.nvidia.com/dcgm.version") not in ("3.x", "4.x"):
        labels.pop("nvsentinel.dgxc.nvidia.com/dcgm.version", None)   # only a valid node label is kept
    driver_pod = cfg.cloud == "azure" and operator                    # the operator's driver container
    assume = (values.get("labeler") or {}).get("assumeDriverInstalled") is True
    if driver_pod or (assume and labels.get("nvidia.com/gpu.present") == "true"):
        labels["nvsentinel.dgxc.nvidia.com/driver.installed"] = "true"
    return labels


def runtime_classes(cfg) -> set[str]:
    rc = addons.nvsentinel_runtime_class(cfg)
    out = {rc["metadata"]["name"]} if rc else set()
    if addons.nvsentinel_dcgm_mode(cfg) == "operator-service":
        out.add("nvidia")                  # the GPU Operator's toolkit creates it
    return out


@needs_chart
@pytest.mark.parametrize("stack,over", [
    ("aws-dev", {}), ("azure-dev", {}), ("gcp-dev", {}), ("oci-dev", {}),
    ("azure-dev", {"gpuOperator": {"enabled": True}}), ("oci-dev", {"gpuOperator": {"enabled": True}}),
])
def test_every_enabled_monitor_is_scheduled_on_our_gpu_nodes(stack, over):
    """Item 5. On main: the embedded-mode GPU monitor selected dcgm.version which no node carried, and
    driver.installed (syslog, NIC monitor, metadata collector) was never written where the node image has the
    driver; aws and gcp had no RuntimeClass for the chart's `runtimeClassName`."""
    cfg = load(stack, addons=over) if over else load(stack)
    values = nvsentinel(cfg).values
    merged = effective(values)
    labels = gpu_node_labels(cfg, values)
    classes = runtime_classes(cfg)
    scheduled = []
    for monitor, (switch, _, selector, rc_from) in SELECTORS.items():
        if not merged["global"][switch]["enabled"]:
            continue
        missing = {k: v for k, v in selector.items() if labels.get(k) != v}
        assert missing == {}, f"{monitor} never lands on a {stack} GPU node: {missing}"
        if rc_from is not None:
            sub = addons.deep_merge(chart_defaults(rc_from), values.get(rc_from, {}))
            name = sub.get("runtimeClassName")
            if name and cfg.cloud != "oci":       # oci: the cluster must provide it (plan note, test above)
                assert name in classes, f"{monitor}: RuntimeClass {name!r} does not exist on {stack}"
        scheduled.append(monitor)
    assert "gpu-health-monitor" in scheduled and "syslog-health-monitor" in scheduled


def test_embedded_mode_pools_carry_the_dcgm_version_and_operator_service_pools_do_not():
    from multinode import pools
    for stack, over, label in [("aws-dev", {}, "4.x"), ("gcp-dev", {}, "4.x"), ("azure-dev", {}, "4.x"),
                               ("azure-dev", {"gpuOperator": {"enabled": True}}, None),
                               ("aws-dev", {"nvsentinel": {"enabled": False}}, None)]:
        cfg = load(stack, addons=over) if over else load(stack)
        pool = cfg.node_pools[0]
        assert pools.node_labels(cfg, pool, cfg.machine(pool)).get("nvsentinel.dgxc.nvidia.com/dcgm.version") == label


def test_runtime_class_per_cloud_and_the_gke_metadata_collector():
    assert addons.nvsentinel_runtime_class(load("aws-dev"))["handler"] == "nvidia"
    assert addons.nvsentinel_runtime_class(load("azure-dev"))["handler"] == "nvidia-container-runtime"
    gcp = load("gcp-dev")
    assert addons.nvsentinel_runtime_class(gcp)["handler"] == "runc"
    assert nvsentinel(gcp).values["global"]["metadataCollector"] == {"enabled": False}
    assert any("metadata collector is off" in p.message for p in addons.nvsentinel_advisories(gcp))
    assert addons.nvsentinel_runtime_class(load("azure-dev", addons={"gpuOperator": {"enabled": True}})) is None
    assert addons.nvsentinel_runtime_class(load("existing-dev")) is None
    notes = [p.message for p in addons.nvsentinel_advisories(load("existing-dev"))]
    assert any("nvsentinel.dgxc.nvidia.com/dcgm.version=4.x" in m for m in notes)
    assert any("RuntimeClass 'nvidia'" in m for m in notes)


def test_driver_installed_comes_from_the_labeler_switch_where_the_image_has_the_driver():
    for stack in ("aws-dev", "gcp-dev", "oci-dev", "azure-dev", "existing-dev"):
        assert nvsentinel(load(stack)).values["labeler"] == {"assumeDriverInstalled": True}
    # AKS with the GPU Operator: driver mode None, the operator's driver pods are what the labeler reads
    assert "labeler" not in nvsentinel(load("azure-dev", addons={"gpuOperator": {"enabled": True}})).values
