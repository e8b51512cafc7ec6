"""Disaggregated prefill/decode workers move the KV cache between nodes: every one carries the fabric
label, single-node roles included, so the Kyverno policy gives them their fabric."""
from __future__ import annotations

from multinode import checks, pools
from multinode.manifests.workloads import dgd as dynamo
from multinode.manifests.workloads import grove

from .conftest import example_raw

FABRIC = {pools.FABRIC_POD_LABEL: pools.FABRIC_POD_LABEL_VALUE}


def _has_fabric(labels):
    return FABRIC.items() <= labels.items()


def test_dynamo_single_node_prefill_gets_the_fabric_label():
    cfg = checks.load(*example_raw("dynamo-dev"))
    (w,) = [w for w in cfg.workloads if w.kind == "dynamo"]
    assert w.disaggregated.prefill.nodes == 1            # the case under test
    dgd = dynamo.dynamo_graph_deployment(cfg, w)
    workers = [c for c in dgd["spec"]["components"] if c["type"] in ("prefill", "decode")]
    assert {c["type"] for c in workers} == {"prefill", "decode"}
    for comp in workers:
        assert _has_fabric(comp["podTemplate"]["metadata"]["labels"]), comp["name"]
    frontend = [c for c in dgd["spec"]["components"] if c["type"] == "frontend"]
    assert frontend and not _has_fabric(frontend[0]["podTemplate"]["metadata"]["labels"])


def test_grove_single_node_prefill_gets_the_fabric_label():
    raw, secrets = example_raw("gcp-dev")
    raw["workloads"][1]["disaggregated"]["prefill"] = {"nodes": 1, "tensorParallel": 8}
    raw["workloads"][1]["model"] = "meta-llama/Llama-3.1-70B-Instruct"
    cfg = checks.load(raw, secrets)
    out = grove.build(cfg, cfg.workloads[1])
    (pcs,) = [o for o in out.objects if o["kind"] == "PodCliqueSet"]
    cliques = pcs["spec"]["template"]["cliques"]
    prefill = [c for c in cliques if c["name"].startswith("prefill")]
    assert prefill and all(_has_fabric(c["labels"]) for c in prefill)
