"""`addons.<name>.provided` (issue 29): the cluster runs the add-on already, the stack installs nothing of it.

The checks treat the add-on as present (workloads that need it load), no Helm release and no CRD of it is
registered, the custom resources the workloads need (and the fabric policies) are still registered, and a
misuse (provided with the add-on off, or with Helm values) is refused naming the key.
"""
from __future__ import annotations

import copy

from multinode.manifests import addons, crds

from .cloudrun import of_type, problems, refused, run
from .conftest import example_raw

RELEASE = "kubernetes:helm.sh/v3:Release"
CRD = "kubernetes:apiextensions.k8s.io/v1:CustomResourceDefinition"


def _with_addons(stack: str, **addon_cfg: dict) -> tuple[dict, set[str]]:
    raw, secrets = example_raw(stack)
    raw = copy.deepcopy(raw)
    merged = dict(raw.get("addons") or {})
    for key, value in addon_cfg.items():
        merged[key] = {**(merged.get(key) or {}), **value}
    raw["addons"] = merged
    return raw, secrets


def _kinds(run_) -> set[tuple[str, str]]:
    out = set()
    for r in run_.registrations:
        if r.type.startswith("kubernetes:") and "/" in r.type:
            out.add((r.type.split(":")[1], r.type.split(":")[2]))
    return out


def test_provided_addons_install_nothing_but_everything_they_serve_is_registered():
    # existing-dev turns on grove, kai and trainer; lws, volcano and kyverno are on by default
    provided = {k: {"provided": True} for k in ("volcano", "lws", "grove", "kai", "kyverno", "trainer", "nvsentinel")}
    raw, secrets = _with_addons("existing-dev", **provided)
    assert problems(raw, secrets) == []
    plain_raw, _ = example_raw("existing-dev")
    plain = run(plain_raw, secrets, "existing-dev")
    with_provided = run(raw, secrets, "existing-dev")

    # the plain stack installs them (so the assertions below can fail) ...
    assert {r.inputs.get("chart") for r in of_type(plain, RELEASE)} >= {"volcano", "kyverno"}
    assert of_type(plain, CRD), "existing-dev registers the LWS/Grove CRDs itself"
    # ... the provided one registers no release and no CRD
    assert of_type(with_provided, RELEASE) == []
    assert of_type(with_provided, CRD) == []
    assert not [r for r in with_provided.registrations if r.type == "kubernetes:yaml/v2:ConfigGroup"]

    # every other object is still there, unchanged: the workloads' custom resources, the fabric policies,
    # the Volcano queues
    def objects(run_):
        return {r.name: r.inputs for r in run_.registrations
                if r.custom and r.type not in (RELEASE, CRD, "kubernetes:yaml/v2:ConfigGroup")
                and not r.type.startswith("pulumi:providers:")}
    assert objects(with_provided) == objects(plain)
    kinds = _kinds(with_provided)
    for kind in (("leaderworkerset.x-k8s.io/v1", "LeaderWorkerSet"), ("batch.volcano.sh/v1alpha1", "Job"),
                 ("policies.kyverno.io/v1", "MutatingPolicy"), ("policies.kyverno.io/v1", "ValidatingPolicy"),
                 ("grove.io/v1alpha1", "PodCliqueSet")):
        assert kind in kinds, (kind, sorted(kinds))


def test_provided_dynamo_platform_is_not_installed_but_its_graph_is():
    raw, secrets = _with_addons("dynamo-dev", grove={"provided": True}, kai={"provided": True},
                                dynamo={"provided": True}, kyverno={"provided": True})
    r = run(raw, secrets, "dynamo-dev")
    # volcano and nvsentinel (issue 34) are on by default and not provided here: only they are installed; LWS is not,
    # since no workload of the stack uses it (Dynamo runs on Grove here; config.lws_install, issue 46)
    assert sorted(x.inputs.get("name") for x in of_type(r, RELEASE)) == ["nvsentinel", "volcano"]
    assert ("nvidia.com/v1beta1", "DynamoGraphDeployment") in _kinds(r)


def test_one_provided_addon_leaves_the_others_installed():
    raw, secrets = _with_addons("existing-dev", kyverno={"provided": True})
    from multinode import checks
    cfg = checks.load(raw, secrets)
    keys = {s.key for s in addons.addon_releases(cfg)}
    assert "kyverno" not in keys and {"volcano", "lws", "grove", "kai", "trainer"} <= keys


def test_provided_skips_the_crd_version_advisory():
    # an unstored LWS version: the advisory says "apply the CRDs yourself" only when this stack installs LWS
    raw, secrets = _with_addons("existing-dev", lws={"version": "0.9.9"})
    from multinode import checks
    assert [p for p in crds.advisories(checks.load(raw, secrets)) if p.path == "addons.lws.version"]
    raw, secrets = _with_addons("existing-dev", lws={"version": "0.9.9", "provided": True})
    assert not [p for p in crds.advisories(checks.load(raw, secrets)) if p.path == "addons.lws.version"]


def test_provided_with_the_addon_off_is_refused_naming_the_key():
    raw, secrets = _with_addons("existing-dev", trainer={"enabled": False, "provided": True})
    refused(raw, secrets, "addons.trainer.provided", "addons.trainer.enabled is false")


def test_provided_with_helm_values_is_refused_naming_the_key():
    raw, secrets = _with_addons("existing-dev", volcano={"provided": True, "values": {"custom": {}}})
    refused(raw, secrets, "addons.volcano.values", "addons.volcano.provided is true")
    raw, secrets = _with_addons("existing-dev", networkOperator={"provided": True, "values": {"a": 1}})
    refused(raw, secrets, "addons.networkOperator.values", "remove addons.networkOperator.values")


def test_an_addon_turned_off_is_still_refused_by_the_workloads_that_need_it():
    # `provided` is the way to keep the workloads; `enabled: false` keeps refusing them, as before
    raw, secrets = _with_addons("existing-dev", lws={"enabled": False})
    refused(raw, secrets, "workloads[0].kind", "lws-inference needs addons.lws.enabled true")
