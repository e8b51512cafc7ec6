"""Issue 34 part A: NVSentinel as an add-on (DCGM per cloud, NIC health monitor per fabric, values checked
against the stored chart values) and the clouds' own node repair."""
from __future__ import annotations

import pytest

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
def test_cloud_installed_driver_uses_embedded_dcgm_with_the_nvidia_runtime_class(stack):
    spec = nvsentinel(load(stack))
    assert spec.values["global"]["dcgm"]["mode"] == "embedded-mode"
    assert spec.values["global"]["dcgm"]["embedded"]["endpoint"] == "localhost"
    ghm = spec.values["gpu-health-monitor"]
    assert ghm["runtimeClassName"] == "nvidia"
    # GKE's driver lives under /home/kubernetes/bin/nvidia: NVSentinel's documented mounts, on gcp only
    assert ("additionalHostVolumes" in ghm) == (stack == "gcp-dev")
    notes = [p.message for p in addons.nvsentinel_advisories(load(stack))]
    assert any("RuntimeClass 'nvidia'" in m for m in notes)


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
