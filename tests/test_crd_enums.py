"""Issue 40 item 9: every enum the config offers for an upstream API field matches the pinned schema of that field.

Walks every `Literal` field of the stack and fleet config models. Each must be classified below: a custom resource
field (checked against its CRD in schemas/: the config offers every current value and nothing else, its default is
one of them, and the CRD's own default is accepted), a core API field (checked against the enum the kubernetes-
validate schema's description states), an upstream field with no enum in any stored schema (its source named), or a
choice of this project alone. A new Literal that is none of these fails the test, so a future mismatch cannot pass
unseen."""
from __future__ import annotations

import glob
import json
import os
import re
import typing
from typing import Any, Literal

import pytest
import yaml
from pydantic import BaseModel

from multinode import config as mconfig
from multinode.fleet import config as fleet_config
from multinode.schemafiles import SCHEMA_DIR

# (model, field) -> (CRD file under schemas/, path of property names under spec.versions[served].openAPIV3Schema,
#                    values the CRD marks deprecated in its description)
CRD_FIELDS: dict[tuple[type, str], tuple[str, tuple[str, ...], frozenset[str]]] = {
    (fleet_config.Failover, "purge_mode"): (
        "karmada/policy.karmada.io_propagationpolicies.yaml", ("spec", "failover", "application", "purgeMode"),
        frozenset({"Immediately", "Graciously"})),
    (mconfig.NetworkTopology, "mode"): (
        "volcano/batch.volcano.sh_jobs.yaml", ("spec", "networkTopology", "mode"), frozenset()),
}
# (model, field) -> (kubernetes-validate schema file, property): core kinds state their enum in the description
# ("One of Never, PreemptLowerPriority."), from k8s.io/api's types.go comments.
CORE_FIELDS: dict[tuple[type, str], tuple[str, str]] = {
    (mconfig.PriorityClassSpec, "preemption_policy"): ("priorityclass-scheduling-v1.json", "preemptionPolicy"),
}
# Upstream fields with no enum in a stored schema: where the values come from.
NO_SCHEMA_ENUM: dict[tuple[type, str], str] = {
    (fleet_config.FleetMember, "sync_mode"): "karmada-io/karmada pkg/apis/cluster/v1alpha1 ClusterSyncMode (Push, "
                                             "Pull); the aggregated Cluster kind has no CRD and swagger.json no enum",
    (mconfig.CapacityReservation, "type"): "our name for the clouds' reservation kinds (aws capacity-block market "
                                           "type, rendered by components/clouds/aws.py)",
}
# Choices of this project that name no upstream field.
OURS: set[tuple[type, str]] = {
    (mconfig.StackConfig, "cloud"), (mconfig.Workload, "kind"), (mconfig.Workload, "engine"),
    (mconfig.Workload, "precision"), (mconfig.Storage, "kind"), (mconfig.MachineSpec, "fabric"),
    (mconfig.PoolUpgrade, "strategy"), (mconfig.NodePool, "bootstrap"), (mconfig.NodePool, "local_nvme"),
    (mconfig.FabricConfig, "kind"), (mconfig.FabricConfig, "rdma_mode"), (mconfig.Preflight, "dcgm"),
}


def _literal_values(annotation: Any) -> tuple[Any, ...] | None:
    if typing.get_origin(annotation) is Literal:
        return typing.get_args(annotation)
    for arg in typing.get_args(annotation):           # Optional[Literal[...]], Literal | None
        got = _literal_values(arg)
        if got is not None:
            return got
    return None


def _models(root: type[BaseModel], seen: set[type]) -> None:
    if root in seen:
        return
    seen.add(root)
    for f in root.model_fields.values():
        stack = [f.annotation]
        while stack:
            a = stack.pop()
            if isinstance(a, type) and issubclass(a, BaseModel):
                _models(a, seen)
            stack.extend(typing.get_args(a))


def _literal_fields() -> dict[tuple[type, str], tuple[Any, ...]]:
    seen: set[type] = set()
    _models(mconfig.StackConfig, seen)
    _models(fleet_config.FleetConfig, seen)
    out = {}
    for model in seen:
        for name, f in model.model_fields.items():
            vals = _literal_values(f.annotation)
            if vals is not None:
                # a field inherited unchanged is classified once, on the class that declares it
                owner = next(c for c in model.__mro__ if name in getattr(c, "__annotations__", {}))
                out[(owner, name)] = vals
    return out


def _crd_property(file: str, path: tuple[str, ...]) -> dict[str, Any]:
    doc = yaml.safe_load((SCHEMA_DIR / file).read_text())
    version = next(v for v in doc["spec"]["versions"] if v.get("served") and v.get("storage"))
    node = version["schema"]["openAPIV3Schema"]
    for key in path:
        while node.get("type") == "array":
            node = node["items"]
        node = node["properties"][key]
    return node


def test_every_config_enum_is_classified():
    fields = _literal_fields()
    known = set(CRD_FIELDS) | set(CORE_FIELDS) | set(NO_SCHEMA_ENUM) | OURS
    missing = sorted(f"{m.__name__}.{n}" for m, n in fields if (m, n) not in known)
    assert not missing, f"classify these Literal fields in tests/test_crd_enums.py: {missing}"
    stale = sorted(f"{m.__name__}.{n}" for m, n in known if (m, n) not in fields)
    assert not stale, f"no longer Literal fields: {stale}"


@pytest.mark.parametrize("key", list(CRD_FIELDS), ids=lambda k: f"{k[0].__name__}.{k[1]}")
def test_config_enum_matches_its_crd(key):
    model, name = key
    file, path, deprecated = CRD_FIELDS[key]
    offered = set(_literal_values(model.model_fields[name].annotation) or ())
    prop = _crd_property(file, path)
    crd = set(prop["enum"])
    for d in deprecated:
        assert d in crd and "deprecated" in prop.get("description", ""), d
    assert offered <= crd, f"offered but refused by the CRD: {offered - crd}"
    assert crd - deprecated <= offered, f"the CRD's values the config refuses: {crd - deprecated - offered}"
    assert not offered & deprecated, f"deprecated values offered: {offered & deprecated}"
    default = model.model_fields[name].default
    assert default in crd - deprecated, default
    if "default" in prop:
        assert prop["default"] in offered, f"the CRD's own default {prop['default']!r} is refused"


@pytest.mark.parametrize("key", list(CORE_FIELDS), ids=lambda k: f"{k[0].__name__}.{k[1]}")
def test_config_enum_matches_the_core_api(key):
    import kubernetes_validate
    model, name = key
    file, prop_name = CORE_FIELDS[key]
    base = os.path.join(os.path.dirname(kubernetes_validate.__file__), "kubernetes-json-schema")
    path = sorted(glob.glob(os.path.join(base, "v1.33*-strict", file)))[0]
    desc = json.load(open(path))["properties"][prop_name]["description"]
    m = re.search(r"One of ([A-Za-z, ]+)\.", desc)
    assert m, desc
    api = {v.strip() for v in m.group(1).split(",")}
    offered = set(_literal_values(model.model_fields[name].annotation) or ())
    assert offered == api and model.model_fields[name].default in api


def test_karmada_purge_mode_defaults_and_renames():
    """The one that refused the CRD's own default (Gracefully): now the current names, the deprecated ones refused
    with their replacement, and gracePeriodSeconds only with Gracefully (Karmada's validation)."""
    from multinode.errors import ConfigError
    from tests.test_fleet import TRAIN, fleet_raw, load

    def raw_with(failover):
        return fleet_raw(workloads=[dict(TRAIN, failover=failover)])

    cfg = load(raw_with({"purgeMode": "Gracefully", "gracePeriodSeconds": 600}), {"hfToken"})
    assert cfg.fleet.workloads[0].failover.purge_mode == "Gracefully"
    for old, new in fleet_config.PURGE_MODE_RENAMED.items():
        with pytest.raises(ConfigError) as e:
            load(raw_with({"purgeMode": old}), {"hfToken"})
        assert "purgeMode" in str(e.value) and f"use {new}" in str(e.value)
    for failover, text in (({"purgeMode": "Directly", "gracePeriodSeconds": 60}, "only takes effect"),
                           ({"purgeMode": "Gracefully"}, "required with purgeMode Gracefully")):
        with pytest.raises(ConfigError) as e:
            load(raw_with(failover), {"hfToken"})
        assert "failover.gracePeriodSeconds" in str(e.value) and text in str(e.value)
