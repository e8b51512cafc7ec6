"""Issue 18: NeMo's trigger. The Kyverno fabric policies inject the fabric into a pod labelled
multinode.dev/fabric=enabled *or* annotated nmp.nvidia.com/enable-multi-node-networking: "true" (NeMo
microservices' multi-node networking switch); the policy pack must accept the same two triggers, so a
pod that gets its fabric from Kyverno is never refused by the pack for lacking our label."""
from __future__ import annotations

import copy

import pytest

from multinode import pools
from policy.rules import dynamo as rd
from tests import policy_fixtures as F
from tests.test_dynamo import EXAMPLES, example
from tests.test_policy_rules import only, run

NEMO = {pools.NEMO_ANNOTATION: "true"}
RULE = "multinode-pod-fabric-label"


@pytest.mark.parametrize("labels, annotations, asks", [
    ({pools.FABRIC_POD_LABEL: pools.FABRIC_POD_LABEL_VALUE}, {}, True),
    ({}, NEMO, True),
    ({pools.FABRIC_POD_LABEL: pools.FABRIC_POD_LABEL_VALUE}, NEMO, True),
    ({}, {pools.NEMO_ANNOTATION: "false"}, False),      # Kyverno matches the value "true" only
    ({}, {pools.NEMO_ANNOTATION: True}, False),         # not the string "true"
    ({pools.FABRIC_POD_LABEL: "disabled"}, {}, False),
    ("not a map", None, False),
])
def test_asks_for_fabric(labels, annotations, asks):
    assert pools.asks_for_fabric(labels, annotations) is asks


def _lws_worker_meta(obj):
    return obj["spec"]["leaderWorkerTemplate"]["workerTemplate"]["metadata"]


def test_pack_accepts_a_multi_node_pod_carrying_only_nemos_annotation():
    obj = F.lws()
    for part in ("leaderTemplate", "workerTemplate"):
        meta = obj["spec"]["leaderWorkerTemplate"][part]["metadata"]
        meta["labels"] = {}
        meta["annotations"] = dict(NEMO)
    assert only([obj], RULE) == []


def test_pack_still_refuses_a_pod_with_neither_and_names_both_fixes():
    obj = F.lws()
    _lws_worker_meta(obj)["labels"] = {}
    _lws_worker_meta(obj)["annotations"] = {pools.NEMO_ANNOTATION: "false"}
    (bad,) = run([obj], RULE)
    assert bad["enforcementLevel"] == "mandatory"
    assert pools.FABRIC_POD_LABEL in bad["message"] and pools.NEMO_ANNOTATION in bad["message"]


@pytest.mark.parametrize("name", sorted(EXAMPLES))
def test_dgd_components_accept_nemos_annotation(name):
    obj = example(name)
    assert len(rd.check_dgd_fabric_label(obj)) == 2
    annotated = copy.deepcopy(obj)
    annotated["spec"]["annotations"] = dict(NEMO)          # both DGD versions carry spec.annotations
    assert rd.check_dgd_fabric_label(annotated) == []


def test_dgd_component_level_annotation_is_read_in_both_versions():
    for name in sorted(EXAMPLES):
        obj = example(name)
        spec = obj["spec"]
        if "services" in spec:
            for svc in spec["services"].values():
                svc.setdefault("extraPodMetadata", {})["annotations"] = dict(NEMO)
        else:
            for comp in spec["components"]:
                comp.setdefault("podTemplate", {}).setdefault("metadata", {})["annotations"] = dict(NEMO)
        assert rd.check_dgd_fabric_label(obj) == [], name
