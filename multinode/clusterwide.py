"""What a stack installs for the whole cluster, for the plan summary (issue 46: on a shared cluster the first review
question). Read from the registrations the program made, so it lists what `pulumi up` would create, not what the
config suggests: every Helm release (its chart, version and namespace), every CRD set (the CustomResourceDefinitions
and the ConfigGroups that apply them), every cloud add-on (an EKS add-on), the cluster-scoped objects (RuntimeClass,
PriorityClass, StorageClass, Kyverno policies, ClusterRoles...) and the DaemonSets that run on every node they
select. Add-ons the stack leaves to the cluster (`provided`) and add-ons it does not install, with the reason for
LeaderWorkerSet (config.lws_install), close the block.
"""
from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable
from typing import Any

from .config import Addons, StackConfig, lws_install

HELM_RELEASE = "kubernetes:helm.sh/v3:Release"
CONFIG_GROUP = "kubernetes:yaml/v2:ConfigGroup"
CRD = "CustomResourceDefinition"
# Kinds without a namespace that act on the whole cluster (the stack's own PersistentVolume and Namespace are its
# storage and its room, not a cluster-wide change: listed by the resources block already)
NOT_CLUSTER_WIDE = {"Namespace", "PersistentVolume"}
# Cloud resources that add software to the cluster itself: EKS add-ons (aws:eks/addon:Addon), AKS extensions.
CLOUD_ADDON_TYPES = (":Addon", ":Extension")


def _name(inputs: dict[str, Any]) -> str:
    meta = inputs.get("metadata")
    return str(meta.get("name", "?")) if isinstance(meta, dict) else "?"


def lines(cfg: StackConfig, registrations: Iterable[Any]) -> list[str]:
    releases: list[str] = []
    crd_groups: dict[str, int] = defaultdict(int)
    crd_sets: list[str] = []
    cloud: list[str] = []
    scoped: dict[str, list[str]] = defaultdict(list)
    daemons: list[str] = []
    for r in registrations:
        inputs = r.inputs if isinstance(r.inputs, dict) else {}
        if r.type == HELM_RELEASE:
            ns = inputs.get("namespace") or "default"
            releases.append(f"{r.name.removeprefix('addons-').removeprefix('fabric-')} ({inputs.get('chart')} "
                            f"{inputs.get('version')}, namespace {ns})")
        elif r.type == CONFIG_GROUP:
            crd_sets.append(r.name)
        elif r.type.startswith("kubernetes:") and "kind" in inputs:
            kind = str(inputs.get("kind"))
            raw_meta = inputs.get("metadata")
            meta: dict[str, Any] = raw_meta if isinstance(raw_meta, dict) else {}
            if kind == CRD:
                raw_spec = inputs.get("spec")
                spec: dict[str, Any] = raw_spec if isinstance(raw_spec, dict) else {}
                crd_groups[str(spec.get("group", _name(inputs)))] += 1
            elif kind == "DaemonSet":
                daemons.append(f"{meta.get('namespace', 'default')}/{_name(inputs)}")
            elif not meta.get("namespace") and kind not in NOT_CLUSTER_WIDE:
                scoped[kind].append(_name(inputs))
        elif r.custom and not r.type.startswith(("kubernetes:", "pulumi:")) and r.type.endswith(CLOUD_ADDON_TYPES):
            cloud.append(f"{inputs.get('addonName') or inputs.get('extensionType') or r.name} ({r.type})")
    out = ["cluster-wide (what this stack installs for every namespace of the cluster):"]
    out.append(f"  Helm releases: {'; '.join(sorted(releases)) or 'none'}")
    crds = [f"{g} ({n})" for g, n in sorted(crd_groups.items())]
    out.append(f"  CRDs applied by the stack: {', '.join(crds) or 'none'}"
               + (f"; CRD sets: {', '.join(sorted(crd_sets))}" if crd_sets else "")
               + "; the Helm releases above bring their charts' own CRDs")
    out.append(f"  cloud add-ons: {', '.join(sorted(cloud)) or 'none'}")
    if scoped:
        objs = "; ".join(f"{k} {', '.join(sorted(v))}" for k, v in sorted(scoped.items()))
        out.append(f"  cluster-scoped objects: {objs}")
    if daemons:
        out.append(f"  DaemonSets (a pod on every node they select): {', '.join(sorted(daemons))}")
    provided, off = [], []
    for field, info in Addons.model_fields.items():
        addon = getattr(cfg.addons, field)
        key = info.alias or field
        if addon.enabled and addon.provided:
            provided.append(key)
        elif not addon.enabled:
            off.append(key)
    if provided:
        out.append(f"  provided by the cluster (not installed, expected running): {', '.join(provided)}")
    installs_lws, why = lws_install(cfg)
    if cfg.addons.lws.enabled and not cfg.addons.lws.provided:
        out.append(f"  LeaderWorkerSet: {'installed' if installs_lws else 'not installed'}: {why}")
    if off:
        out.append(f"  not installed (off): {', '.join(off)}")
    return out
