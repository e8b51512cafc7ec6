"""Issue 35: policy/wire.py (MessageToDict once per resource, not once per policy) changes no answer of the pack's
servicer: the same AnalyzeResponse for every resource and for the stack, violations included."""
from __future__ import annotations

import sys
from pathlib import Path

from google.protobuf import json_format, struct_pb2
from pulumi.runtime.proto import analyzer_pb2 as pb
from pulumi_policy import EnforcementLevel
from pulumi_policy import policy as pp

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "bench"))


def _servicer():
    from policy.pack import policies
    return pp._PolicyAnalyzerServicer("multinode", "0.0.1", policies(), EnforcementLevel.MANDATORY, None, "d",
                                      None, None, None, None, None)


def _literal_token_job() -> pb.AnalyzeRequest:
    props = struct_pb2.Struct()
    props.update({"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": "leaky", "namespace": "multinode"},
                  "spec": {"template": {"metadata": {}, "spec": {"restartPolicy": "Never", "containers": [
                      {"name": "c", "image": "busybox:1.36",
                       "env": [{"name": "HF_TOKEN", "value": "hf_plaintext"}]}]}}}})
    return pb.AnalyzeRequest(type="kubernetes:batch/v1:Job", properties=props, urn="urn:job", name="leaky")


def test_the_caching_json_format_gives_the_same_responses(monkeypatch):
    import pack_bench

    from policy import wire
    per, whole = pack_bench.requests("existing-dev")
    per.append(_literal_token_job())
    whole.resources.append(pb.AnalyzerResource(type=per[-1].type, properties=per[-1].properties, urn="urn:job",
                                               name="leaky"))
    plain_sv = _servicer()
    want = [plain_sv.Analyze(r, None) for r in per]
    want_stack = plain_sv.AnalyzeStack(whole, None)
    assert any(len(w.diagnostics) for w in want), "a violation is among the compared answers"
    monkeypatch.setattr(pp, "json_format", json_format)
    assert wire.install() and pp.json_format is not json_format
    sv = _servicer()
    calls = []
    real = json_format.MessageToDict
    monkeypatch.setattr(json_format, "MessageToDict", lambda *a, **k: calls.append(1) or real(*a, **k))
    got = [sv.Analyze(r, None) for r in per]
    got_stack = sv.AnalyzeStack(whole, None)
    assert got == want and got_stack == want_stack
    # the point of it: the real conversion ran about once per distinct resource, not once per policy
    assert len(calls) <= 2 * len(per) + len(whole.resources)
    assert wire.install() is False                               # installing twice is a no-op
