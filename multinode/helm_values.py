"""Helm values keys against the chart's own values.yaml (stored under schemas/, provenance there). Pure and light:
it reads the parsed files through schemafiles (no jsonschema), so `plan` runs it on every stack
(checks.addon_values_problems).

Helm renders a chart with whatever values it is given; a key no template reads is silently ignored. So a misspelt
key under `addons.<name>.values` would reach the cluster as a no-op. This walk is the offline stand-in for the real
Helm rendering (conformance/ reports unread keys with Helm itself, for users with Go): a key path of the stack's
values must exist in the chart's values.yaml, except below a node the chart leaves open.

Which nodes are open (any key below them is accepted), decided from the values.yaml structure, not from key names
alone:
- an empty mapping `{}`, a list or null upstream: the chart documents a free-form map or a Kubernetes list there
  (nodeSelector: {}, podAnnotations: {}, tolerations: [], extraArgs: {}, resources: {} ...), which its templates
  pass through `toYaml` whole;
- a key in FREE_FORM_KEYS or ending in FREE_FORM_SUFFIXES: Kubernetes objects a chart may show with example
  content (resources: {limits: ...}, securityContext: {...}, affinity: {...}) whose other fields are just as valid;
- a sub-chart that is not stored (HELM_SUBCHARTS: its values live in the sub-chart);
Sub-charts whose values.yaml is stored (HELM_STORED_SUBCHARTS) are walked against their own file. Other
dependencies of a chart (CHART_DEPENDENCIES, from each chart's Chart.yaml) are valid top-level keys whose keys
cannot be checked here: a key below one that the parent's defaults do not list is a Finding with `subchart` set
(an advisory, not a refusal: the sub-chart may read it).
"""
from __future__ import annotations

import difflib
import threading
from dataclasses import dataclass
from typing import Any

from .schemafiles import SCHEMA_DIR, load_documents

HELM_CHARTS = ("volcano", "lws", "grove", "kai-scheduler", "kyverno", "network-operator", "dynamo",
               "gpu-operator", "aws-efa-k8s-device-plugin", "karmada", "nvsentinel")

#: Keys whose value is a Kubernetes object or a free-form map: anything below them is accepted.
FREE_FORM_KEYS = frozenset({
    "nodeSelector", "tolerations", "affinity", "nodeAffinity", "podAffinity", "podAntiAffinity",
    "topologySpreadConstraints", "labels", "annotations", "podAnnotations", "podLabels",
    "resources", "env", "extraEnv", "extraArgs", "securityContext", "podSecurityContext",
    "containerSecurityContext", "startupProbe", "livenessProbe", "readinessProbe",
    "matchLabels", "namespaceSelector", "objectSelector",
})
#: Key suffixes treated as free-form too (e.g. ``webhookAnnotations``, ``additionalPodLabels``).
FREE_FORM_SUFFIXES = ("Annotations", "Labels", "NodeSelector", "SecurityContext", "Tolerations")

#: Sub-chart aliases: their values live in the sub-chart's own values.yaml, not copied here.
HELM_SUBCHARTS = {
    "gpu-operator": frozenset({"node-feature-discovery"}),
    "network-operator": frozenset({"node-feature-discovery", "sriov-network-operator",
                                   "maintenance-operator-chart"}),
}

#: Sub-charts whose own values.yaml is stored as schemas/<chart>/charts/<sub-chart>/values.yaml: keys under
#: that top-level name are checked against it (the parent's values.yaml does not list them).
HELM_STORED_SUBCHARTS = {
    # labeler, metadata-collector: issue 40 (we set labeler.assumeDriverInstalled; the plan note names
    # metadata-collector.runtimeClassName)
    "nvsentinel": frozenset({"gpu-health-monitor", "nic-health-monitor", "fault-quarantine", "labeler",
                             "metadata-collector"}),
}

#: Every dependency (name, or alias) of the pinned charts, from their Chart.yaml `dependencies`:
#: volcano-sh/volcano@v1.15.1 installer/helm/chart/volcano/Chart.yaml; kyverno/kyverno@ee97ce09 charts/kyverno/
#: Chart.yaml; Mellanox/network-operator@v26.4.1 deployment/network-operator/Chart.yaml; ai-dynamo/dynamo (fork
#: wxsms/dynamo@2a6da14c) deploy/helm/charts/platform/Chart.yaml; karmada-io/karmada@v1.18.2 charts/karmada/
#: Chart.yaml; NVIDIA/NVSentinel@e002c5dc distros/kubernetes/nvsentinel/Chart.yaml; NVIDIA/gpu-operator@v26.7.0
#: deployments/gpu-operator/Chart.yaml. A top-level key naming one is valid even where the parent's values.yaml
#: has no entry for it (Helm hands it to the sub-chart).
CHART_DEPENDENCIES = {
    "volcano": frozenset({"jobflow"}),
    "kyverno": frozenset({"crds", "grafana", "kyverno-api", "openreports", "reports-server"}),
    "network-operator": frozenset({"node-feature-discovery", "sriov-network-operator", "maintenance-operator-chart"}),
    "dynamo": frozenset({"dynamo-operator", "nats", "etcd", "kai-scheduler", "grove", "snapshot"}),
    "karmada": frozenset({"common"}),
    "gpu-operator": frozenset({"node-feature-discovery"}),
    "nvsentinel": frozenset({
        "gpu-health-monitor", "mongodb-store", "postgresql", "fault-quarantine", "node-drainer", "fault-remediation",
        "health-events-analyzer", "csp-health-monitor", "syslog-health-monitor", "incluster-file-server",
        "labeler", "janitor", "janitor-provider", "metadata-collector", "kubernetes-object-monitor",
        "event-exporter", "preflight", "k8sdatastore-crds", "slurm-drain-monitor", "nic-health-monitor"}),
}

_LOCK = threading.RLock()
_VALUES_CACHE: dict[str, Any] = {}


def upstream_values(chart: str) -> Any:
    """The chart's values.yaml (with its stored sub-charts' values under their names), parsed once."""
    if chart not in HELM_CHARTS:
        raise ValueError(f"unknown chart {chart!r}; expected one of {', '.join(HELM_CHARTS)}")
    with _LOCK:
        if chart not in _VALUES_CACHE:
            docs = load_documents(SCHEMA_DIR / chart / "values.yaml")
            values = dict((docs[0] if docs else None) or {})
            for sub in sorted(HELM_STORED_SUBCHARTS.get(chart, ())):
                sub_docs = load_documents(SCHEMA_DIR / chart / "charts" / sub / "values.yaml")
                values[sub] = (sub_docs[0] if sub_docs else None) or {}
            _VALUES_CACHE[chart] = values
        return _VALUES_CACHE[chart]


def is_free_form(key: Any, upstream_value: Any) -> bool:
    if upstream_value is None or isinstance(upstream_value, list):
        return True
    if isinstance(upstream_value, dict) and not upstream_value:
        return True
    k = str(key)
    return k in FREE_FORM_KEYS or k.endswith(FREE_FORM_SUFFIXES)


def _seg(k: Any) -> str:
    return f"[{k}]" if "." in str(k) else str(k)


def unknown_keys(chart: str, values: dict) -> list[str]:
    """Dotted key paths in ``values`` that the chart's upstream ``values.yaml`` does not have (schema_check's
    helm_values_unknown_keys: the check of the values this project sets, run by the tests).

    Rule: a key path exists when every segment is a mapping key at that place in the upstream values.yaml
    (comments do not count). The walk stops, accepting anything below, at the open nodes of the module docstring
    and at a sub-chart alias in ``HELM_SUBCHARTS``. Where upstream has a scalar and ``values`` has a mapping,
    every key in that mapping is reported. A key that itself contains a '.' is written ``[key]``."""
    return [f.path for f in findings(chart, values, dependencies=False)]


@dataclass(frozen=True)
class Finding:
    path: str                       # dotted key path in the given values
    nearest: tuple[str, ...]        # the closest valid keys at that place (difflib), most similar first
    valid_here: tuple[str, ...]     # every valid key at that place (sorted), () where upstream is not a map
    subchart: str | None = None     # below a dependency whose own values are not stored: not checkable here


def findings(chart: str, values: dict, dependencies: bool = True) -> list[Finding]:
    """Every key path of ``values`` the chart does not have, with the nearest valid keys. ``dependencies``: treat
    CHART_DEPENDENCIES as valid top-level keys and mark what is below them (``Finding.subchart``)."""
    upstream = upstream_values(chart)
    subcharts = HELM_SUBCHARTS.get(chart, frozenset())
    deps = CHART_DEPENDENCIES.get(chart, frozenset()) - HELM_STORED_SUBCHARTS.get(chart, frozenset())
    out: list[Finding] = []

    def walk(mine: Any, theirs: Any, path: str, top: bool, sub: str | None) -> None:
        if not isinstance(mine, dict):
            return
        for k, v in mine.items():
            p = f"{path}.{_seg(k)}" if path else _seg(k)
            if dependencies and top and k in deps:
                if k not in (theirs or {}):
                    continue            # the sub-chart's own values: not stored, nothing to walk
                if not is_free_form(k, theirs[k]):
                    walk(v, theirs[k], p, False, str(k))
                continue
            if not isinstance(theirs, dict) or k not in theirs:
                keys = tuple(sorted(str(x) for x in theirs)) if isinstance(theirs, dict) else ()
                near = tuple(difflib.get_close_matches(str(k), keys, n=3, cutoff=0.6))
                out.append(Finding(p, near, keys, sub))
                continue
            u = theirs[k]
            if (top and k in subcharts) or is_free_form(k, u):
                continue
            if isinstance(v, dict):
                walk(v, u, p, False, sub)

    walk(values or {}, upstream, "", True, None)
    return out
