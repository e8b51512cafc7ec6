"""Release pipeline: the orchestration against a fake stack and a fake cluster; the missing-CLI path.

Nothing here runs the Pulumi CLI or a cluster (neither exists on these machines); the adapters are
checked against the installed SDK classes (pulumi.automation events/errors, kubernetes client)."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from multinode.release import bandwidth as bw
from multinode.release import pipeline as p
from multinode.release.bandwidth import CheckResult, CheckSpec, ConfigMapReading, PodLog

ROOT = Path(__file__).resolve().parent.parent
NOW = datetime(2026, 3, 1, 12, 0, 0, tzinfo=UTC)
CHECK = CheckSpec.for_workload("nccl-check", "multinode-workloads")
JOB_URN = "urn:pulumi:prod::multinode::multinode:index:Platform$kubernetes:batch.volcano.sh/v1alpha1:Job::nccl-check"
CM_URN = "urn:pulumi:prod::multinode::multinode:index:Platform$kubernetes:core/v1:ConfigMap::nccl-check-verdict"
STATE = [
    {"urn": JOB_URN, "type": "kubernetes:batch.volcano.sh/v1alpha1:Job",
     "inputs": {"kind": "Job", "metadata": {"name": "nccl-check", "namespace": "multinode-workloads"}}},
    {"urn": CM_URN, "type": "kubernetes:core/v1:ConfigMap",
     "inputs": {"kind": "ConfigMap", "metadata": {"name": "nccl-check-verdict", "namespace": "multinode-workloads"}}},
    {"urn": "urn:other-cm", "type": "kubernetes:core/v1:ConfigMap",
     "inputs": {"kind": "ConfigMap", "metadata": {"name": "nccl-check-verdict", "namespace": "elsewhere"}}},
    {"urn": "urn:lws", "type": "kubernetes:leaderworkerset.x-k8s.io/v1:LeaderWorkerSet",
     "inputs": {"kind": "LeaderWorkerSet", "metadata": {"name": "llama", "namespace": "multinode-workloads"}}},
]


# ------------------------------------------------------------------ fakes
class FakeStack:
    """Records every call (in one shared list) and answers from canned values."""

    def __init__(self, name: str, calls: list[tuple], *, tags: dict[str, str] | None = None,
                 preview: p.Outcome | None = None, up: p.Outcome | None = None,
                 refresh: p.Outcome | None = None, outputs: dict[str, Any] | None = None,
                 resources: list[dict[str, Any]] | None = None, set_tag_error: Exception | None = None):
        self.name = name
        self.calls = calls
        self.tags = dict(tags or {})
        self._preview = preview or p.Outcome(changes={"create": 3, "same": 40})
        self._up = up or p.Outcome(changes={"create": 3, "update": 1, "replace": 2, "create-replacement": 2,
                                            "delete-replaced": 2, "same": 40})
        self._refresh = refresh or p.Outcome(changes={"same": 44})
        self._outputs = {"kubeconfig": "apiVersion: v1\nkind: Config\n"} if outputs is None else outputs
        self._resources = STATE if resources is None else resources
        self._set_tag_error = set_tag_error

    def refresh(self):
        self.calls.append((self.name, "refresh"))
        return self._refresh

    def preview(self, policy_packs, refresh=False):
        self.calls.append((self.name, "preview", tuple(policy_packs), refresh))
        return self._preview

    def up(self, policy_packs, replace):
        self.calls.append((self.name, "up", tuple(policy_packs), tuple(replace)))
        return self._up

    def outputs(self):
        self.calls.append((self.name, "outputs"))
        return self._outputs

    def state_resources(self):
        self.calls.append((self.name, "state_resources"))
        return self._resources

    def get_tag(self, key):
        self.calls.append((self.name, "get_tag", key))
        return self.tags.get(key)

    def set_tag(self, key, value):
        self.calls.append((self.name, "set_tag", key, value))
        if self._set_tag_error:
            raise self._set_tag_error
        self.tags[key] = value


class Workspace:
    """open_stack(name, create) over a dict of fake stacks; unknown names raise StackMissing on select."""

    def __init__(self, calls: list[tuple], **stacks: FakeStack):
        self.calls = calls
        self.stacks = {n.replace("_", "-"): s for n, s in stacks.items()}

    def __call__(self, name: str, create: bool):
        self.calls.append((name, "select", create))
        if name not in self.stacks:
            if create:
                self.stacks[name] = FakeStack(name, self.calls)
            else:
                raise p.StackMissing(f"stack {name} not found")
        return self.stacks[name]


class FakeCluster:
    def __init__(self, configmaps: dict[tuple, ConfigMapReading] | None = None,
                 pods: dict[tuple, list[PodLog]] | None = None):
        self.configmaps = configmaps or {}
        self.pods = pods or {}
        self.reads = 0

    def read_configmap(self, namespace, name):
        self.reads += 1
        return self.configmaps.get((namespace, name))

    def finished_pod_logs(self, namespace, selector):
        return self.pods.get((namespace, selector), [])


class FakeClock:
    """Monotonic clock that advances by `tick` on every read, and when slept on."""

    def __init__(self, tick: float = 0.5):
        self.t = 0.0
        self.tick = tick
        self.slept: list[float] = []

    def __call__(self) -> float:
        self.t += self.tick
        return self.t

    def sleep(self, s: float) -> None:
        self.slept.append(s)
        self.t += s


def verdict_json(busbw: float | None, threshold: float, passed: bool, status: str | None = None) -> str:
    """The shape the nccl-test workload prints (multinode/manifests/workloads/nccl_test.py)."""
    return json.dumps({"version": 1, "pass": passed, "status": status or ("pass" if passed else "fail"),
                       "busbw_GBps": busbw, "threshold_GBps": threshold, "exit_code": 0 if passed else 1,
                       "reason": "bus bandwidth below the threshold" if not passed else "ok"})


def fake_parse(text: str) -> dict[str, Any]:
    """Stands in for nccl_test.parse_verdict: bare JSON or the tagged log line, ValueError otherwise."""
    text = text.strip()
    if not text.startswith("{"):
        lines = [ln for ln in text.splitlines() if "MULTINODE_NCCL_VERDICT " in ln]
        if not lines:
            raise ValueError("no MULTINODE_NCCL_VERDICT line in the log")
        text = lines[-1].split("MULTINODE_NCCL_VERDICT ", 1)[1]
    return json.loads(text)


def cm(text: str, status: str, created: datetime = NOW) -> ConfigMapReading:
    return ConfigMapReading(data={"status": status, "verdict.json": text}, created_at=created)


def cluster_with(busbw: float | None, threshold: float, passed: bool) -> FakeCluster:
    return FakeCluster({(CHECK.namespace, CHECK.configmap):
                        cm(verdict_json(busbw, threshold, passed), "pass" if passed else "fail")})


def run(ws: Workspace, cluster: FakeCluster, *, opts: p.ReleaseOptions | None = None,
        check=None, checks=(CHECK,), clock: FakeClock | None = None):
    calls = ws.calls
    clock = clock or FakeClock()

    def connect(kubeconfig):
        calls.append(("cluster", "connect", kubeconfig))
        return cluster

    waiter = check or bw.VerdictWaiter(parse=fake_parse, interval=5, clock=clock, sleep=clock.sleep)

    def checked(c, specs, timeout, not_before):
        calls.append(("cluster", "check", tuple(s.name for s in specs), timeout))
        return waiter(c, specs, timeout, not_before)

    opts = opts or p.ReleaseOptions(stack="prod", policy_packs=["/repo/policy"], timeout=60,
                                    revision="abcdef1234567890")
    return p.run_release(opts, open_stack=ws, connect_cluster=connect, bandwidth_check=checked, checks=list(checks),
                         now=lambda: NOW, clock=clock, log=lambda _m: None)


def ops(calls: list[tuple], stack: str | None = None) -> list[str]:
    return [c[1] for c in calls if stack is None or c[0] == stack]


# ------------------------------------------------------------------ order and the happy path
def test_steps_run_in_order_and_a_pass_is_tagged():
    calls: list[tuple] = []
    ws = Workspace(calls, prod=FakeStack("prod", calls))
    report = run(ws, cluster_with(46.5, 40.0, True))
    assert report.exit_code == p.EXIT_OK, report.message
    assert ops(calls) == ["select", "refresh", "preview", "state_resources", "up", "outputs", "connect", "check",
                          "set_tag"]
    assert ("prod", "select", True) in calls                               # the target may be created
    assert ("prod", "preview", ("/repo/policy",), False) in calls          # policy pack, no refresh in preview
    up = next(c for c in calls if c[1] == "up")
    assert up[2] == ("/repo/policy",) and set(up[3]) == {JOB_URN, CM_URN}  # the check re-runs; nothing else
    connect = next(c for c in calls if c[1] == "connect")
    assert connect[2].startswith("apiVersion: v1")                         # built from the kubeconfig output
    tag = ws.stacks["prod"].tags[p.TAG_KEY]
    assert tag.startswith("pass 2026-03-01T12:00:00Z rev=abcdef123456 ")
    assert "nccl-check=46.5/40GB/s" in tag


def test_check_resource_urns_picks_only_the_checks_job_and_verdict_configmap():
    assert bw.check_resource_urns(STATE, [CHECK]) == [JOB_URN, CM_URN]
    assert bw.check_resource_urns(STATE, []) == []
    assert bw.check_resource_urns([{"urn": "u", "inputs": {"metadata": "[secret]"}}], [CHECK]) == []


# ------------------------------------------------------------------ stops
def test_mandatory_policy_violation_stops_before_up():
    calls: list[tuple] = []
    violation = p.PolicyFinding("tensor-parallel-fits-node", "multinode", "mandatory",
                                "tensorParallel 16 > 8 GPUs per node", "urn:lws")
    advisory = p.PolicyFinding("pin-versions", "multinode", "advisory", "pin chart versions")
    stack = FakeStack("prod", calls, preview=p.Outcome(policy=[violation, advisory], error="preview failed"))
    report = run(Workspace(calls, prod=stack), cluster_with(50, 40, True))
    assert report.exit_code == p.EXIT_POLICY
    assert "up" not in ops(calls) and "check" not in ops(calls)
    doc = report.to_json()
    assert doc["outcome"] == "policy-violation" and doc["pass"] is False
    assert doc["policy"]["mandatory"] == 1 and doc["policy"]["advisory"] == 1
    assert doc["policy"]["findings"][0]["policy"] == "tensor-parallel-fits-node"
    assert "tensor-parallel-fits-node" in doc["message"]
    assert [s["status"] for s in doc["steps"]] == ["ok", "ok", "failed"]
    assert stack.tags[p.TAG_KEY].startswith("fail ")


def test_advisory_findings_do_not_stop_the_release():
    calls: list[tuple] = []
    advisory = p.PolicyFinding("pin-versions", "multinode", "advisory", "pin chart versions")
    stack = FakeStack("prod", calls, preview=p.Outcome(changes={"create": 1}, policy=[advisory]))
    report = run(Workspace(calls, prod=stack), cluster_with(50, 40, True))
    assert report.exit_code == p.EXIT_OK
    assert report.to_json()["policy"]["advisory"] == 1


def test_preview_error_without_a_policy_finding_is_a_deploy_failure():
    calls: list[tuple] = []
    stack = FakeStack("prod", calls, preview=p.Outcome(error="error: missing required configuration"))
    report = run(Workspace(calls, prod=stack), cluster_with(50, 40, True))
    assert report.exit_code == p.EXIT_DEPLOY and "missing required configuration" in report.message
    assert "up" not in ops(calls)


def test_low_bandwidth_fails_the_release_and_tags_fail():
    calls: list[tuple] = []
    stack = FakeStack("prod", calls)
    report = run(Workspace(calls, prod=stack), cluster_with(31.2, 40.0, False))
    assert report.exit_code == p.EXIT_BANDWIDTH != 0
    doc = report.to_json()
    assert doc["pass"] is False and doc["outcome"] == "bandwidth-below-threshold"
    check = doc["bandwidth"]["checks"][0]
    assert (check["busbw"], check["threshold"], check["margin"], check["pass"]) == (31.2, 40.0, -8.8, False)
    assert check["source"] == "configmap" and doc["bandwidth"]["pass"] is False
    assert stack.tags[p.TAG_KEY].startswith("fail ") and "nccl-check=31.2/40GB/s" in stack.tags[p.TAG_KEY]
    assert doc["steps"][-1] == {**doc["steps"][-1], "name": "bandwidth-check", "status": "failed"}


def test_a_verdict_that_says_pass_below_its_threshold_fails():
    calls: list[tuple] = []
    report = run(Workspace(calls, prod=FakeStack("prod", calls)), cluster_with(39.9, 40.0, True))
    assert report.exit_code == p.EXIT_BANDWIDTH
    assert "verdict says pass" in report.checks[0].message


def test_a_check_that_measured_nothing_is_a_check_failure_not_a_pass():
    calls: list[tuple] = []
    cluster = FakeCluster({(CHECK.namespace, CHECK.configmap):
                           cm(verdict_json(None, 40.0, False, status="error"), "error")})
    report = run(Workspace(calls, prod=FakeStack("prod", calls)), cluster)
    assert report.exit_code == p.EXIT_CHECK
    assert report.checks[0].status == bw.ERROR


def test_no_verdict_before_the_timeout():
    calls: list[tuple] = []
    clock = FakeClock(tick=0.0)
    cluster = FakeCluster({(CHECK.namespace, CHECK.configmap): cm("", "pending")})
    report = run(Workspace(calls, prod=FakeStack("prod", calls)), cluster, clock=clock)
    assert report.exit_code == p.EXIT_CHECK
    assert report.checks[0].status == bw.TIMEOUT and "within 60 s" in report.checks[0].message
    assert sum(clock.slept) == pytest.approx(60) and max(clock.slept) <= 5     # polled every 5 s, not longer
    assert cluster.reads == len(clock.slept) + 1
    assert ws_tag(calls).startswith("fail ")


def ws_tag(calls: list[tuple]) -> str:
    return [c for c in calls if c[1] == "set_tag"][-1][3]


def test_verdict_from_the_pod_log_when_the_configmap_stays_pending():
    calls: list[tuple] = []
    log = "size count type\n...\nMULTINODE_NCCL_VERDICT " + verdict_json(47.0, 40.0, True) + "\n"
    cluster = FakeCluster({(CHECK.namespace, CHECK.configmap): cm("", "pending")},
                          {(CHECK.namespace, CHECK.pod_selector):
                           [PodLog("nccl-check-master-0", "Succeeded", log, NOW)]})
    report = run(Workspace(calls, prod=FakeStack("prod", calls)), cluster)
    assert report.exit_code == p.EXIT_OK
    assert report.checks[0].source == "log" and report.checks[0].busbw == 47.0
    assert CHECK.pod_selector == "multinode.dev/workload=nccl-check,multinode.dev/role=master"


def test_a_verdict_left_by_an_earlier_release_is_ignored():
    calls: list[tuple] = []
    old = NOW - timedelta(hours=3)
    cluster = FakeCluster({(CHECK.namespace, CHECK.configmap): cm(verdict_json(50, 40, True), "pass", created=old)})
    report = run(Workspace(calls, prod=FakeStack("prod", calls)), cluster, clock=FakeClock(tick=1.0))
    assert report.exit_code == p.EXIT_CHECK and report.checks[0].status == bw.TIMEOUT


def test_up_failure_stops_before_the_check():
    calls: list[tuple] = []
    stack = FakeStack("prod", calls, up=p.Outcome(changes={}, error="error: creating EKS node group: quota"))
    report = run(Workspace(calls, prod=stack), cluster_with(50, 40, True))
    assert report.exit_code == p.EXIT_DEPLOY and "quota" in report.message
    assert "connect" not in ops(calls) and "check" not in ops(calls)
    assert stack.tags[p.TAG_KEY].startswith("fail ")


def test_a_stack_without_a_kubeconfig_output_fails_before_connecting():
    calls: list[tuple] = []
    report = run(Workspace(calls, prod=FakeStack("prod", calls, outputs={"cloud": "aws"})), cluster_with(50, 40, True))
    assert report.exit_code == p.EXIT_DEPLOY and "kubeconfig" in report.message
    assert "connect" not in ops(calls)


def test_a_release_without_an_nccl_check_refuses_to_start():
    calls: list[tuple] = []
    report = run(Workspace(calls, prod=FakeStack("prod", calls)), cluster_with(50, 40, True), checks=())
    assert report.exit_code == p.EXIT_USAGE and "nccl-test" in report.message
    assert calls == []                                    # the stack was not even selected


def test_a_tag_that_cannot_be_written_is_a_warning():
    calls: list[tuple] = []
    stack = FakeStack("prod", calls, set_tag_error=RuntimeError("backend does not support tags"))
    report = run(Workspace(calls, prod=stack), cluster_with(50, 40, True))
    assert report.exit_code == p.EXIT_OK
    assert report.tag["recorded"] is False and "backend does not support tags" in report.warnings[0]


# ------------------------------------------------------------------ the report
def test_report_contents():
    calls: list[tuple] = []
    clock = FakeClock(tick=0.25)     # every clock read advances 0.25 s: each step lasts 0.25 s
    report = run(Workspace(calls, prod=FakeStack("prod", calls)), cluster_with(46.5, 40.0, True), clock=clock)
    doc = json.loads(json.dumps(report.to_json()))         # serialisable as is
    assert set(doc) >= {"version", "stack", "mode", "pass", "exit_code", "outcome", "message", "revision",
                        "started_at", "finished_at", "durations_seconds", "total_seconds", "steps", "resources",
                        "policy", "bandwidth", "promotion", "tag", "warnings"}
    assert (doc["stack"], doc["mode"], doc["pass"], doc["exit_code"], doc["outcome"]) == \
        ("prod", "release", True, 0, "released")
    assert list(doc["durations_seconds"]) == ["select", "refresh", "preview", "up", "outputs", "connect-cluster",
                                              "bandwidth-check"]
    assert all(v > 0 for v in doc["durations_seconds"].values())
    assert doc["durations_seconds"]["select"] == 0.25
    assert doc["total_seconds"] == pytest.approx(sum(doc["durations_seconds"].values()))
    # resources changed by up: create 3 + update 1 + replace 2 (the NCCL check); `same` and the replacement's
    # own create-replacement/delete-replaced steps are not counted again
    assert doc["resources"]["changed"] == 6
    assert doc["resources"]["by_step"]["up"] == {"create": 3, "update": 1, "replace": 2, "create-replacement": 2,
                                                 "delete-replaced": 2, "same": 40}
    assert doc["resources"]["by_step"]["preview"] == {"create": 3, "same": 40}
    b = doc["bandwidth"]
    assert b["unit"] == "GB/s" and b["pass"] is True
    assert b["checks"][0]["busbw"] == 46.5 and b["checks"][0]["threshold"] == 40.0 and b["checks"][0]["margin"] == 6.5
    assert doc["policy"] == {"packs": ["/repo/policy"], "mandatory": 0, "advisory": 0, "findings": []}
    assert doc["tag"]["recorded"] is True and doc["tag"]["key"] == "multinode:release"
    assert doc["started_at"] == doc["finished_at"] == "2026-03-01T12:00:00Z"
    assert "kubeconfig" not in json.dumps(doc["steps"]) and "apiVersion" not in json.dumps(doc)   # secret stays out


# ------------------------------------------------------------------ promotion
@pytest.mark.parametrize("source_tags, why", [
    ({p.TAG_KEY: "fail 2026-02-28T10:00:00Z rev=0123 nccl-check=12/40GB/s"}, "recorded as"),
    ({}, "never released"),
    ({p.TAG_KEY: "garbage"}, "recorded as"),
])
def test_promotion_refused_unless_the_source_passed(source_tags, why):
    calls: list[tuple] = []
    ws = Workspace(calls, staging=FakeStack("staging", calls, tags=source_tags), prod=FakeStack("prod", calls))
    opts = p.ReleaseOptions(stack="prod", promote_from="staging", policy_packs=["policy"])
    report = run(ws, cluster_with(50, 40, True), opts=opts)
    assert report.exit_code == p.EXIT_PROMOTION
    assert why in report.message and "staging" in report.message
    assert ops(calls) == ["select", "get_tag"]                   # only the source was read
    assert ("staging", "select", False) in calls                 # selected, never created
    assert p.TAG_KEY not in ws.stacks["prod"].tags               # the target's record is untouched
    assert report.to_json()["promotion"]["allowed"] is False


def test_promotion_refused_when_the_source_stack_does_not_exist():
    calls: list[tuple] = []
    ws = Workspace(calls, prod=FakeStack("prod", calls))
    report = run(ws, cluster_with(50, 40, True), opts=p.ReleaseOptions(stack="prod", promote_from="staging"))
    assert report.exit_code == p.EXIT_PROMOTION and "does not exist" in report.message
    assert "staging" not in ws.stacks


def test_promotion_allowed_after_a_passing_source_release():
    calls: list[tuple] = []
    staging = FakeStack("staging", calls)
    ws = Workspace(calls, staging=staging, prod=FakeStack("prod", calls))
    first = run(ws, cluster_with(48, 40, True), opts=p.ReleaseOptions(stack="staging", revision="feedbeef0000"))
    assert first.exit_code == 0 and staging.tags[p.TAG_KEY].startswith("pass ")
    calls.clear()
    report = run(ws, cluster_with(47, 40, True),
                 opts=p.ReleaseOptions(stack="prod", promote_from="staging", revision="feedbeef0000"))
    assert report.exit_code == p.EXIT_OK
    assert ops(calls, "staging") == ["select", "get_tag"] and "up" in ops(calls, "prod")
    promo = report.to_json()["promotion"]
    assert promo["allowed"] is True and promo["source_status"] == "pass" and promo["source_revision"] == "feedbeef0000"
    assert report.warnings == []


def test_promotion_from_a_different_revision_is_allowed_with_a_warning():
    calls: list[tuple] = []
    ws = Workspace(calls, staging=FakeStack("staging", calls, tags={p.TAG_KEY: "pass 2026-02-28T10:00:00Z rev=aaaa"}),
                   prod=FakeStack("prod", calls))
    report = run(ws, cluster_with(47, 40, True), opts=p.ReleaseOptions(stack="prod", promote_from="staging",
                                                                        revision="bbbb1111"))
    assert report.exit_code == 0 and "revision aaaa" in report.warnings[0]


def test_tag_round_trip():
    res = [CheckResult("a", "ns", bw.PASS, busbw=45.25, threshold=40.0)]
    value = p.format_tag("pass", NOW, "0123456789abcdef", res)
    assert value == "pass 2026-03-01T12:00:00Z rev=0123456789ab a=45.25/40GB/s"
    assert p.parse_tag(value) == {"status": "pass", "recorded_at": "2026-03-01T12:00:00Z",
                                  "revision": "0123456789ab", "raw": value}
    assert p.parse_tag(None)["status"] is None and p.parse_tag("passed")["status"] is None
    assert len(p.format_tag("fail", NOW, None, res * 40)) <= 256


# ------------------------------------------------------------------ dry run
def test_dry_run_previews_with_policies_only():
    calls: list[tuple] = []
    stack = FakeStack("prod", calls)
    report = run(Workspace(calls, prod=stack), cluster_with(50, 40, True),
                 opts=p.ReleaseOptions(stack="prod", dry_run=True, policy_packs=["policy"]))
    assert report.exit_code == 0
    assert ops(calls) == ["select", "preview"]                      # no refresh (writes state), up, check, tag
    assert ("prod", "preview", ("policy",), True) in calls           # refreshes inside the preview instead
    doc = report.to_json()
    assert doc["mode"] == "dry-run" and doc["outcome"] == "dry-run-clean" and doc["tag"] is None
    assert "3 change(s) pending" in doc["message"]


def test_dry_run_reports_a_mandatory_violation_without_tagging():
    calls: list[tuple] = []
    bad = p.PolicyFinding("fabric-pinned", "multinode", "mandatory", "NCCL not pinned")
    stack = FakeStack("prod", calls, preview=p.Outcome(policy=[bad], error="failed"))
    report = run(Workspace(calls, prod=stack), cluster_with(50, 40, True),
                 opts=p.ReleaseOptions(stack="prod", dry_run=True), checks=())
    assert report.exit_code == p.EXIT_POLICY and stack.tags == {}
    assert "set_tag" not in ops(calls)


# ------------------------------------------------------------------ judging verdicts
def test_judge_accepts_both_key_spellings():
    a = bw.judge(CHECK, {"pass": True, "busbw_gbps": 41, "threshold_gbps": 40}, "log")
    b = bw.judge(CHECK, {"pass": True, "busbw_GBps": 41.0, "threshold_GBps": 40.0}, "log")
    assert a.status == b.status == bw.PASS and a.busbw == b.busbw == 41.0
    assert bw.judge(CHECK, {"pass": "true", "busbw_GBps": 41.0, "threshold_GBps": 40.0}, "log").status == bw.FAIL


def test_verdicts_from_the_workloads_module_parse_and_judge():
    nccl = pytest.importorskip(bw.NCCL_MODULE, reason="the nccl-test workload module is on another branch")
    line = "MULTINODE_NCCL_VERDICT " + verdict_json(44.0, 40.0, True)
    result = bw.judge(CHECK, nccl.parse_verdict("noise\n" + line + "\n"), "log")
    assert result.status == bw.PASS and result.busbw == 44.0


# ------------------------------------------------------------------ adapters (real SDK classes, no CLI)
class _FakeAutoStack:
    name = "prod"

    def __init__(self, fail_with=None):
        self.kwargs: dict[str, dict[str, Any]] = {}
        self.fail_with = fail_with

    def _emit(self, on_event):
        from pulumi.automation import EngineEvent, PolicyEvent
        on_event(EngineEvent(sequence=1, timestamp=0, policy_event=PolicyEvent(
            message="tp 16 > 8\n", color="never", policy_name="tp-fits-node", policy_pack_name="multinode",
            policy_pack_version="1", policy_pack_version_tag="v1", enforcement_level="mandatory",
            resource_urn="urn:x")))
        on_event(EngineEvent(sequence=2, timestamp=0))

    def preview(self, **kw):
        self.kwargs["preview"] = kw
        self._emit(kw["on_event"])
        if self.fail_with:
            raise self.fail_with
        from pulumi.automation._stack import PreviewResult
        return PreviewResult("", "", {"create": 2})

    def up(self, **kw):
        self.kwargs["up"] = kw
        from types import SimpleNamespace
        return SimpleNamespace(summary=SimpleNamespace(resource_changes={"update": 1}))

    def list_tags(self):
        return {"pulumi:project": "multinode"}


def test_automation_adapter_passes_policy_packs_and_collects_policy_events():
    from multinode.release.adapters import AutomationStack
    fake = _FakeAutoStack()
    out = AutomationStack(fake, out=lambda _l: None).preview(["/repo/policy"], refresh=True)
    kw = fake.kwargs["preview"]
    assert kw["policy_packs"] == ["/repo/policy"] and kw["refresh"] is True and kw["color"] == "never"
    assert out.changes == {"create": 2} and out.error is None
    assert [(f.policy, f.level, f.message, f.urn) for f in out.policy] == [("tp-fits-node", "mandatory", "tp 16 > 8",
                                                                          "urn:x")]
    up = AutomationStack(fake, out=lambda _l: None).up([], ["urn:job"])
    assert fake.kwargs["up"]["replace"] == ["urn:job"] and fake.kwargs["up"]["policy_packs"] is None
    assert fake.kwargs["up"]["show_secrets"] is False and up.changes == {"update": 1}
    assert AutomationStack(fake).get_tag(p.TAG_KEY) is None


def test_automation_adapter_turns_a_command_error_into_an_outcome():
    from pulumi.automation import CommandError, CommandResult

    from multinode.release.adapters import AutomationStack
    err = CommandError(CommandResult(stdout="lots of output", stderr="error: preview failed: policy violations",
                                     code=255))
    out = AutomationStack(_FakeAutoStack(fail_with=err), out=lambda _l: None).preview(["policy"])
    assert out.error == "error: preview failed: policy violations"
    assert len(out.policy) == 1 and out.policy[0].level == "mandatory"


def test_kubernetes_adapter_builds_a_client_from_kubeconfig_text():
    from multinode.release.adapters import KubernetesCluster
    kubeconfig = """
apiVersion: v1
kind: Config
clusters: [{name: c, cluster: {server: "https://127.0.0.1:6443", insecure-skip-tls-verify: true}}]
users: [{name: u, user: {token: not-a-real-token}}]
contexts: [{name: x, context: {cluster: c, user: u}}]
current-context: x
"""
    cluster = KubernetesCluster(kubeconfig)
    assert cluster._core.api_client.configuration.host == "https://127.0.0.1:6443"
    with pytest.raises(p.StepFailed):
        KubernetesCluster("just a string")


def test_kubernetes_adapter_reads_objects_whose_metadata_is_missing():
    # the client types metadata (and its name) as optional: a ConfigMap without it has an unknown age, a
    # finished pod without a name has no log to read and is skipped (it used to raise AttributeError)
    from kubernetes.client import V1ConfigMap, V1ObjectMeta, V1Pod, V1PodList, V1PodStatus

    from multinode.release.adapters import KubernetesCluster

    created = datetime(2026, 11, 22, tzinfo=UTC)
    pods = [V1Pod(metadata=None, status=V1PodStatus(phase="Succeeded")),
            V1Pod(metadata=V1ObjectMeta(name=None), status=V1PodStatus(phase="Failed")),
            V1Pod(metadata=V1ObjectMeta(name="check-0", creation_timestamp=created),
                  status=V1PodStatus(phase="Succeeded"))]
    logs_read: list[str] = []

    class Core:
        def read_namespaced_config_map(self, name, namespace):
            return V1ConfigMap(metadata=None, data={"status": "pass"})

        def list_namespaced_pod(self, namespace, label_selector):
            return V1PodList(items=pods)

        def read_namespaced_pod_log(self, name, namespace, tail_lines):
            logs_read.append(name)
            return f"log of {name}"

    cluster = KubernetesCluster.__new__(KubernetesCluster)
    cluster._core = Core()
    cm = cluster.read_configmap("ns", "verdict")
    assert cm is not None and cm.data == {"status": "pass"} and cm.created_at is None
    logs = cluster.finished_pod_logs("ns", "job=check")
    assert [(pl.name, pl.phase, pl.text, pl.created_at) for pl in logs] == [
        ("check-0", "Succeeded", "log of check-0", created)]
    assert logs_read == ["check-0"]


# ------------------------------------------------------------------ the CLI without Pulumi
def _env_without_pulumi(tmp_path: Path) -> dict[str, str]:
    empty = tmp_path / "empty-bin"
    empty.mkdir(exist_ok=True)
    env = dict(os.environ, PATH=str(empty), PYTHONPATH=str(ROOT))
    env.pop("GITHUB_SHA", None)
    return env


@pytest.mark.parametrize("extra", [[], ["--dry-run"], ["--promote-from", "staging"]])
def test_missing_pulumi_cli_is_one_line_and_exit_2(tmp_path, extra):
    report = tmp_path / "r.json"
    proc = subprocess.run([sys.executable, "-m", "multinode.release", "aws-dev", "--report", str(report), *extra],
                          cwd=ROOT, env=_env_without_pulumi(tmp_path), capture_output=True, text=True, timeout=60)
    text = (proc.stdout + proc.stderr).strip()
    assert proc.returncode == 2
    assert len(text.splitlines()) == 1, text
    assert "Pulumi CLI" in text and "curl -fsSL https://get.pulumi.com | sh" in text
    assert "Traceback" not in text
    doc = json.loads(report.read_text())
    assert (doc["exit_code"], doc["outcome"], doc["pass"]) == (2, "cannot-start", False)


def test_main_without_pulumi_on_path(tmp_path, monkeypatch, capsys):
    from multinode.release import main
    monkeypatch.setenv("PATH", str(tmp_path))
    assert main(["aws-dev", "--report", str(tmp_path / "r.json")]) == 2
    captured = capsys.readouterr()
    assert captured.out == "" and len(captured.err.strip().splitlines()) == 1
    assert "get.pulumi.com" in captured.err


def test_preflight_refuses_a_stack_without_an_nccl_check(tmp_path, monkeypatch, capsys):
    """With a `pulumi` on PATH (a stub that is never run), the offline preflight still stops first."""
    from multinode import stackfile
    from multinode.config import load
    raw, secrets, _ = stackfile.read_stack_file(stackfile.stack_path("azure-dev"))
    assert not any(w.kind == "nccl-test" for w in load(raw, secrets).workloads)  # the case under test
    stub = tmp_path / "pulumi"
    stub.write_text("#!/bin/sh\nexit 99\n")
    stub.chmod(0o755)
    monkeypatch.setenv("PATH", str(tmp_path))
    from multinode.release import main
    assert main(["azure-dev", "--report", str(tmp_path / "r.json")]) == 2
    err = capsys.readouterr().err
    assert "no workload of kind nccl-test" in err and "Traceback" not in err


def test_bad_arguments_exit_2(capsys):
    from multinode.release import main
    assert main([]) == 2
    assert main(["aws-dev", "--timeout", "soon"]) == 2


def test_example_workflow_uses_only_real_flags_and_exit_codes_documented():
    import re

    import yaml

    from multinode.release.cli import _parser
    text = (ROOT / ".ci" / "examples" / "release.yml").read_text()
    yaml.safe_load(text)                                           # valid YAML
    known = {a for action in _parser()._actions for a in action.option_strings}
    runs = [ln for ln in text.splitlines() if "multinode release" in ln and not ln.lstrip().startswith("#")]
    assert len(runs) == 3
    block = text[text.index("Dry run (pull request)"):text.index("- name: Summary")]
    used = set(re.findall(r"(?<![\w-])(--[a-z][a-z-]+)", block))
    assert used and used <= known, used - known
    doc = (ROOT / "docs" / "release-pipeline.md").read_text()
    for code in (p.EXIT_OK, p.EXIT_POLICY, p.EXIT_USAGE, p.EXIT_PROMOTION, p.EXIT_DEPLOY, p.EXIT_BANDWIDTH,
                 p.EXIT_CHECK):
        assert f"| {code} | `{p.OUTCOMES[code]}`" in doc


def test_adapter_keyword_arguments_exist_on_the_installed_automation_stack():
    """Every keyword the adapter passes binds to pulumi.automation.Stack's real signature (3.272)."""
    import inspect
    from types import SimpleNamespace

    from pulumi.automation import Stack

    from multinode.release.adapters import AutomationStack

    class Binding:
        name = "prod"
        bound: list[str] = []

        def __getattr__(self, method):
            def call(**kw):
                inspect.signature(getattr(Stack, method)).bind(None, **kw)     # raises TypeError on a bad name
                self.bound.append(method)
                summary = SimpleNamespace(resource_changes={})
                return SimpleNamespace(summary=summary, change_summary={})
            return call

    b = Binding()
    a = AutomationStack(b, out=lambda _l: None)
    a.refresh()
    a.preview(["policy"], refresh=True)
    a.up(["policy"], ["urn:a"])
    assert b.bound == ["refresh", "preview", "up"]
    for name in ("outputs", "export_stack", "list_tags", "set_tag"):
        assert callable(getattr(Stack, name))
