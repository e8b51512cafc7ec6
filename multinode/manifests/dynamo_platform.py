"""The Dynamo platform (its Kubernetes operator) as a Helm release, as plain data.

`dynamo_platform_release(cfg)` returns None when addons.dynamo is off, else a dict whose keys are
the field names of the add-on ReleaseSpec (key, chart_folder, chart, repository, version,
namespace, values, installs_crds), so the add-on component can wrap it in a `helm.v3.Release`
like every other add-on.

Where things come from (ai-dynamo/dynamo, read with the code search tool; not in schemas/):
- chart `dynamo-platform` from the NGC Helm repository https://helm.ngc.nvidia.com/nvidia/ai-dynamo:
  docs/kubernetes/installation-guide.md installs it with
  `helm fetch https://helm.ngc.nvidia.com/nvidia/ai-dynamo/charts/dynamo-platform-${RELEASE_VERSION}.tgz`
  into namespace `dynamo-system`; the chart installs the nvidia.com CRDs itself ("CRDs are
  automatically installed by the chart", a pre-install hook Job, values `dynamo-operator.upgradeCRD`).
- values keys `global.grove.{install,enabled}` and `global.kai-scheduler.{install,enabled}`: checked by
  tests/test_addons.py against schemas/dynamo/values.yaml, the chart's values at ai-dynamo/dynamo main
  2a6da14 (2026-08-21, Chart.yaml version 1.5.0; the v1.5.0 tag itself is not stored, see
  schemas/PROVENANCE.md). `install` deploys a bundled subchart; `enabled` turns on the operator's
  integration with an externally installed one. We install Grove, KAI, LWS and Volcano as our own
  add-ons, so every `install` stays false. That values file has no `global.lws` (the 1.3.0 chart read
  earlier had `global.lws.{install,enabled}`), so we no longer set it: Helm ignores unknown values, the
  key did nothing on 1.5.
- the orchestrator choice (docs/kubernetes/deployment/multinode-deployment.md, docs/kubernetes/lws.md):
  Grove (+ KAI for gang scheduling) is the default; LWS + Volcano when Grove is absent or the DGD
  carries `nvidia.com/enable-grove: "false"` (multinode/manifests/workloads/dgd.py sets that annotation
  when addons.grove is disabled). The LWS path has no Volcano switch in the chart values: the
  operator uses Volcano for LWS gangs when it is installed.
"""
from __future__ import annotations

import copy
from typing import Any

from ..config import ADDON_VERSIONS, StackConfig, installs

CHART = "dynamo-platform"
REPOSITORY = "https://helm.ngc.nvidia.com/nvidia/ai-dynamo"
DEFAULT_NAMESPACE = "dynamo-system"
CRD_GROUPS = ("nvidia.com",)   # DynamoGraphDeployment, DynamoComponentDeployment, ...


def _deep_merge(base: dict[str, Any], over: dict[str, Any]) -> dict[str, Any]:
    out = copy.deepcopy(base)
    for k, v in (over or {}).items():
        if isinstance(v, dict) and isinstance(out.get(k), dict):
            out[k] = _deep_merge(out[k], v)
        else:
            out[k] = copy.deepcopy(v)
    return out


def orchestrator(cfg: StackConfig) -> str:
    """'grove' (Grove + KAI, the upstream default) or 'lws' (LWS + Volcano)."""
    return "grove" if cfg.addons.grove.enabled else "lws"


def platform_values(cfg: StackConfig) -> dict[str, Any]:
    """Integration switches only; the stack's addons.dynamo.values is merged over them."""
    a = cfg.addons
    grove = orchestrator(cfg) == "grove"
    values = {
        "global": {
            "grove": {"install": False, "enabled": grove},
            "kai-scheduler": {"install": False, "enabled": grove and a.kai.enabled},
        },
    }
    return _deep_merge(values, a.dynamo.values)


def dynamo_platform_release(cfg: StackConfig) -> dict[str, Any] | None:
    addon = cfg.addons.dynamo
    if not installs(addon):     # off, or the cluster runs the platform already (addons.dynamo.provided)
        return None
    return {
        "key": "dynamo",
        "chart_folder": "dynamo",            # schemas/dynamo/values.yaml (see module docstring)
        "chart": CHART,
        "repository": REPOSITORY,
        "version": addon.version or ADDON_VERSIONS["dynamo"],
        "namespace": addon.namespace or DEFAULT_NAMESPACE,
        "values": platform_values(cfg),
        "installs_crds": CRD_GROUPS,
    }
