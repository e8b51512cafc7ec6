"""Inputs of Volcano's scheduler and controller-manager in the cluster box, from what `plan` rendered for the
stack's Volcano Helm release (build/<stack>/helm/addons-volcano.yaml) and from the Volcano module the box's
binaries are built from (conformance/volcano: its chart and CRDs, at the version of those binaries).

What the chart would install, and what the box does in its place (volcano v1.15.1
installer/helm/chart/volcano/templates/scheduler.yaml:8-23, controllers.yaml:255-268):
  - the scheduler's ConfigMap `<release>-scheduler-configmap`, key volcano-scheduler.conf: the values'
    custom.scheduler_config_override when set, else the chart's config/volcano-scheduler.conf. The box writes
    that text to a file and passes it as --scheduler-conf (the chart mounts the ConfigMap there).
  - the controller's ConfigMap `<release>-controller-configmap`, key volcano-controller.conf: toYaml of
    custom.controller_config_override (HyperNode discovery from node labels). The controller-manager reads
    that ConfigMap from the API (pkg/controllers/hypernode/configmap_handler.go:34-45: namespace from
    KUBE_POD_NAMESPACE, name from HELM_RELEASE_NAME + "-controller-configmap"), so the box creates it as is.
  - the CRDs: every CRD of the module's config/crd/volcano/bases and config/crd/jobflow/bases (the
    controller-manager's default controllers watch all of them, jobflows and bus commands included).
The default and root Queues are not written here: the scheduler creates them at start
(pkg/scheduler/cache/cache.go:464-520); the stack's own Queues and HyperNodes are objects of build/<stack>/k8s.

Writes build/<stack>/engines/cluster/volcano.json: {"release", "namespace", "chartVersion", "schedulerConf",
"schedulerConfSource", "controllerConfigMap", "crds"}.
"""
from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path
from typing import Any

import yaml

from multinode.schemafiles import crd_document

CRD_DIRS = ("config/crd/volcano/bases", "config/crd/jobflow/bases")
CHART = "installer/helm/chart/volcano"


def scheduler_conf(values: dict[str, Any], module_dir: Path) -> tuple[str, str]:
    """(text of volcano-scheduler.conf, where it came from), as the chart renders it."""
    custom = values.get("custom") or {}
    override = custom.get("scheduler_config_override")
    if override:
        return str(override), "values custom.scheduler_config_override"
    chart_values = yaml.safe_load((module_dir / CHART / "values.yaml").read_text())
    rel = chart_values["basic"]["scheduler_config_file"]          # "config/volcano-scheduler.conf"
    path = module_dir / CHART / rel
    return path.read_text(), f"chart {CHART}/{rel} of {module_dir.name}"


def controller_config_map(values: dict[str, Any], release: str, namespace: str) -> dict[str, Any]:
    custom = values.get("custom") or {}
    override = custom.get("controller_config_override")
    text = yaml.safe_dump(override, sort_keys=False) if override else ""
    return {"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": f"{release}-controller-configmap", "namespace": namespace},
            "data": {"volcano-controller.conf": text}}


def crds_from(paths: Iterable[Path]) -> list[dict[str, Any]]:
    """The CustomResourceDefinitions among these files, each annotated with the file it came from (the box's
    provenance annotation; prepare.py reads its CRD folders through this too)."""
    out = []
    for path in paths:
        doc = crd_document(path)
        if doc:
            meta = {**doc["metadata"], "annotations": {**(doc["metadata"].get("annotations") or {}),
                                                       "multinode.dev/box-crd-from": str(path)}}
            out.append({**doc, "metadata": meta})
    return out


def module_crds(module_dir: Path) -> list[dict[str, Any]]:
    out = crds_from(path for sub in CRD_DIRS for path in sorted((module_dir / sub).glob("*.yaml")))
    if not out:
        raise SystemExit(f"{module_dir}: no CustomResourceDefinition under {', '.join(CRD_DIRS)}")
    return out


def volcano_inputs(stack_dir: Path, module_dir: Path) -> dict[str, Any] | None:
    """None when the stack installs no Volcano (no helm/addons-volcano.yaml)."""
    release_file = stack_dir / "helm" / "addons-volcano.yaml"
    if not release_file.exists():
        return None
    release = yaml.safe_load(release_file.read_text())
    values = release.get("values") or {}
    name, namespace = release.get("name", "volcano"), release.get("namespace", "volcano-system")
    conf, source = scheduler_conf(values, module_dir)
    yaml.safe_load(conf)        # a conf that is not YAML is the stack's defect, not the box's: fail here
    return {"release": name, "namespace": namespace, "chartVersion": release.get("version"),
            "schedulerConf": conf, "schedulerConfSource": source,
            "controllerConfigMap": controller_config_map(values, name, namespace),
            "crds": module_crds(module_dir)}
