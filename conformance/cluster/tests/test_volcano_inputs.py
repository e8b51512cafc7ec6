"""volcano_inputs.py: what the box gives Volcano's scheduler and controller-manager, from the stack's Helm values
and the chart of the Volcano module conformance/volcano builds (needs that module in the Go module cache; skips
otherwise)."""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
import yaml

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
import volcano_inputs  # noqa: E402

from multinode.manifests import volcano_topology  # noqa: E402

ROOT = Path(__file__).resolve().parents[3]


def _module_dir() -> Path | None:
    try:
        r = subprocess.run(["go", "list", "-m", "-f", "{{.Dir}}", "volcano.sh/volcano"], capture_output=True,
                           text=True, cwd=ROOT / "conformance" / "volcano", timeout=120)
    except (OSError, subprocess.TimeoutExpired):
        return None
    d = Path(r.stdout.strip()) if r.returncode == 0 and r.stdout.strip() else None
    return d if d is not None and d.is_dir() else None


MODULE = _module_dir()
pytestmark = pytest.mark.skipif(MODULE is None, reason="volcano.sh/volcano not in the Go module cache "
                                "(cd conformance/volcano && go mod download volcano.sh/volcano)")

DISCOVERY = {"networkTopologyDiscovery": [{"source": "label", "enabled": True, "config": {"networkTopologyTypes": {
    "aws-3-tier": [{"nodeLabel": "topology.k8s.aws/network-node-layer-1"}, {"nodeLabel": "kubernetes.io/hostname"}]}}}]}


def _stack(tmp_path: Path, values: dict | None) -> Path:
    if values is not None:
        (tmp_path / "helm").mkdir()
        (tmp_path / "helm" / "addons-volcano.yaml").write_text(yaml.safe_dump(
            {"version": "1.15.2", "chart": "volcano", "values": values, "namespace": "volcano-system",
             "name": "volcano"}))
    return tmp_path


def test_no_volcano_release_no_inputs(tmp_path: Path) -> None:
    assert volcano_inputs.volcano_inputs(_stack(tmp_path, None), MODULE) is None


def test_chart_default_config_is_the_charts_file_and_equals_plans_copy_of_it(tmp_path: Path) -> None:
    v = volcano_inputs.volcano_inputs(_stack(tmp_path, {}), MODULE)
    assert v is not None and v["schedulerConfSource"].startswith("chart ")
    conf = yaml.safe_load(v["schedulerConf"])
    # plan's copy (volcano_topology._CHART_*) is what it extends with preempt / network-topology-aware: it must be
    # the chart's own config of the Volcano version the box runs
    assert [a.strip() for a in conf["actions"].split(",")] == volcano_topology._CHART_ACTIONS
    assert [t["plugins"] for t in conf["tiers"]] == volcano_topology._CHART_TIERS
    assert v["controllerConfigMap"]["data"] == {"volcano-controller.conf": ""}


def test_values_override_the_scheduler_config_and_fill_the_controller_configmap(tmp_path: Path) -> None:
    override = "actions: enqueue, allocate, preempt, backfill\ntiers:\n- plugins:\n  - name: gang\n"
    v = volcano_inputs.volcano_inputs(_stack(tmp_path, {"custom": {"scheduler_config_override": override,
                                                                   "controller_config_override": DISCOVERY}}), MODULE)
    assert v is not None and v["schedulerConf"] == override
    assert v["schedulerConfSource"] == "values custom.scheduler_config_override"
    cm = v["controllerConfigMap"]
    assert (cm["metadata"]["name"], cm["metadata"]["namespace"]) == ("volcano-controller-configmap", "volcano-system")
    assert yaml.safe_load(cm["data"]["volcano-controller.conf"]) == DISCOVERY


def test_a_scheduler_config_that_is_not_yaml_is_refused(tmp_path: Path) -> None:
    with pytest.raises(yaml.YAMLError):
        volcano_inputs.volcano_inputs(_stack(tmp_path, {"custom": {"scheduler_config_override": "actions: [a\n"}}),
                                      MODULE)


def test_crds_are_the_modules_whole_set(tmp_path: Path) -> None:
    v = volcano_inputs.volcano_inputs(_stack(tmp_path, {}), MODULE)
    assert v is not None
    names = {c["metadata"]["name"] for c in v["crds"]}
    assert {"jobs.batch.volcano.sh", "podgroups.scheduling.volcano.sh", "queues.scheduling.volcano.sh",
            "hypernodes.topology.volcano.sh", "jobflows.flow.volcano.sh", "commands.bus.volcano.sh"} <= names
