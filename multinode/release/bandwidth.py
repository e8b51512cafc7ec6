"""The NCCL bandwidth gate: which checks a stack runs, waiting for their verdicts, judging them.

A stack's check is a workload of kind `nccl-test` (built by the workloads module,
multinode/manifests/workloads/nccl_test.py). It writes its verdict two ways the release reads:
  - ConfigMap `<workload>-verdict` in the workload's namespace: data.status pending|pass|fail|error and
    data["verdict.json"];
  - one log line `MULTINODE_NCCL_VERDICT {...}` of the master pod (used when the ConfigMap stays
    pending, e.g. the image has neither curl nor python3 to patch it).
Both are parsed by that module's `parse_verdict`, imported only when a check really runs, so this file
and the pipeline work (and are tested) without it.

Numbers: nccl-tests reports bus bandwidth in GB/s (gigabytes); the verdict carries `busbw_GBps` and
`threshold_GBps` (`busbw_gbps`/`threshold_gbps` are accepted too). The release passes a check only when the
verdict says pass AND the measured value is at or above the threshold: a verdict that contradicts its own
numbers fails.
"""
from __future__ import annotations

import importlib
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any, Protocol

NCCL_MODULE = "multinode.manifests.workloads.nccl_test"
NCCL_KIND = "nccl-test"
WORKLOAD_LABEL = "multinode.dev/workload"   # set on every workload pod (workloads common.labels)
ROLE_LABEL = "multinode.dev/role"
MASTER_ROLE = "master"                      # the pod that runs mpirun and prints the verdict
UNIT = "GB/s"
# clocks of the CI runner and the API server differ; a verdict written this long before the up started
# is still taken as fresh (the check's objects are replaced on every release, so older ones are stale)
CLOCK_SKEW = timedelta(minutes=2)

# check statuses
PASS, FAIL, ERROR, TIMEOUT = "pass", "fail", "error", "timeout"


class CheckUnavailable(Exception):
    """The check cannot run at all (no nccl-test workload, workloads module missing). str() is the message."""


@dataclass(frozen=True)
class CheckSpec:
    """Where one nccl-test workload's verdict lives on the cluster."""
    name: str                 # workload name (= the Volcano Job's name)
    namespace: str
    configmap: str            # verdict ConfigMap name
    pod_selector: str         # label selector of the pod that prints the verdict line

    @classmethod
    def for_workload(cls, name: str, namespace: str, configmap: str | None = None) -> CheckSpec:
        return cls(name=name, namespace=namespace, configmap=configmap or f"{name}-verdict",
                   pod_selector=f"{WORKLOAD_LABEL}={name},{ROLE_LABEL}={MASTER_ROLE}")


@dataclass
class ConfigMapReading:
    data: dict[str, str]
    created_at: datetime | None = None


@dataclass
class PodLog:
    name: str
    phase: str                # Succeeded | Failed (only finished pods are read)
    text: str
    created_at: datetime | None = None


class ClusterReader(Protocol):
    """What the check needs from a Kubernetes client (adapters.KubernetesCluster is the real one)."""

    def read_configmap(self, namespace: str, name: str) -> ConfigMapReading | None: ...

    def finished_pod_logs(self, namespace: str, selector: str) -> list[PodLog]: ...


@dataclass
class CheckResult:
    name: str
    namespace: str
    status: str                       # pass | fail | error | timeout
    busbw: float | None = None     # measured bus bandwidth, GB/s
    threshold: float | None = None  # GB/s
    source: str = ""                  # configmap | log | ""
    message: str = ""
    verdict: dict[str, Any] = field(default_factory=dict)

    @property
    def passed(self) -> bool:
        return self.status == PASS

    def to_json(self) -> dict[str, Any]:
        margin = None
        if self.busbw is not None and self.threshold is not None:
            margin = round(self.busbw - self.threshold, 3)
        return {"name": self.name, "namespace": self.namespace, "status": self.status, "pass": self.passed,
                "busbw": self.busbw, "threshold": self.threshold, "margin": margin, "unit": UNIT,
                "source": self.source, "message": self.message, "verdict": self.verdict}


# A BandwidthCheck waits for every check's verdict on the cluster, at most `timeout` seconds in total,
# and judges it. `not_before`: verdicts written (well) before this moment are stale and ignored.
BandwidthCheck = Callable[[ClusterReader, Sequence[CheckSpec], float, datetime], list[CheckResult]]
ParseVerdict = Callable[[str], dict[str, Any]]


def _first_number(verdict: dict[str, Any], *keys: str) -> float | None:
    for k in keys:
        v = verdict.get(k)
        if isinstance(v, (int, float)) and not isinstance(v, bool):
            return float(v)
    return None


def judge(spec: CheckSpec, verdict: dict[str, Any], source: str) -> CheckResult:
    """Turn a parsed verdict into a result; pass needs the verdict's pass AND busbw >= threshold."""
    busbw = _first_number(verdict, "busbw_GBps", "busbw_gbps", "busbw")
    threshold = _first_number(verdict, "threshold_GBps", "threshold_gbps", "threshold")
    said_pass = verdict.get("pass") is True
    reason = str(verdict.get("reason") or "")

    def result(status: str, message: str) -> CheckResult:
        return CheckResult(name=spec.name, namespace=spec.namespace, status=status, busbw=busbw,
                           threshold=threshold, source=source, message=message, verdict=verdict)

    if busbw is None or threshold is None:
        status = str(verdict.get("status") or "")
        return result(ERROR, f"the check produced no measurement (status {status or '?'}"
                             f"{': ' + reason if reason else ''})")
    if said_pass and busbw >= threshold:
        return result(PASS, f"bus bandwidth {busbw:g} {UNIT} >= threshold {threshold:g} {UNIT}")
    if said_pass:
        return result(FAIL, f"verdict says pass but bus bandwidth {busbw:g} {UNIT} is below "
                            f"its threshold {threshold:g} {UNIT}")
    return result(FAIL, f"bus bandwidth {busbw:g} {UNIT} below threshold {threshold:g} {UNIT}"
                        + (f" ({reason})" if reason else ""))


def _fresh(created_at: datetime | None, not_before: datetime) -> bool:
    if created_at is None:
        return True
    if created_at.tzinfo is None:
        created_at = created_at.replace(tzinfo=UTC)
    return created_at >= not_before - CLOCK_SKEW


def default_parse_verdict() -> ParseVerdict:
    """The workloads module's parser, imported only now (it is built on another branch)."""
    try:
        module = importlib.import_module(NCCL_MODULE)
    except ImportError as e:
        raise CheckUnavailable(f"the NCCL check module {NCCL_MODULE} is not importable ({e}); "
                               "it comes with the nccl-test workload kind") from None
    parse = getattr(module, "parse_verdict", None)
    if not callable(parse):
        raise CheckUnavailable(f"{NCCL_MODULE} has no parse_verdict(log_text) -> dict")
    typed: ParseVerdict = parse        # a callable found by name: its signature is the module's contract
    return typed


class VerdictWaiter:
    """The default BandwidthCheck: poll the verdict ConfigMap (and the master pod's log) until every check
    has a fresh verdict or the time is up."""

    def __init__(self, parse: ParseVerdict | None = None, interval: float = 10.0,
                 clock: Callable[[], float] = time.monotonic, sleep: Callable[[float], None] = time.sleep,
                 progress: Callable[[str], None] = lambda _msg: None):
        self._parse = parse
        self.interval = interval
        self.clock = clock
        self.sleep = sleep
        self.progress = progress

    def _read_once(self, cluster: ClusterReader, spec: CheckSpec, not_before: datetime,
                   parse: ParseVerdict) -> CheckResult | None:
        """A result when a fresh verdict is there; None while the check is still running."""
        cm = cluster.read_configmap(spec.namespace, spec.configmap)
        if cm is not None and _fresh(cm.created_at, not_before):
            status = (cm.data.get("status") or "").strip()
            text = cm.data.get("verdict.json") or ""
            if status and status != "pending" and text.strip():
                try:
                    return judge(spec, parse(text), "configmap")
                except ValueError as e:
                    return CheckResult(spec.name, spec.namespace, ERROR, source="configmap",
                                       message=f"verdict ConfigMap {spec.configmap} unreadable: {e}")
        # the ConfigMap may stay pending when the image cannot patch it: the log line still stands
        for pod in cluster.finished_pod_logs(spec.namespace, spec.pod_selector):
            if not _fresh(pod.created_at, not_before):
                continue
            try:
                return judge(spec, parse(pod.text), "log")
            except ValueError as e:
                return CheckResult(spec.name, spec.namespace, ERROR, source="log",
                                   message=f"pod {pod.name} finished ({pod.phase}) without a verdict: {e}")
        return None

    def __call__(self, cluster: ClusterReader, checks: Sequence[CheckSpec], timeout: float,
                 not_before: datetime) -> list[CheckResult]:
        parse = self._parse or default_parse_verdict()
        deadline = self.clock() + timeout
        done: dict[str, CheckResult] = {}
        while True:
            for spec in checks:
                if spec.name in done:
                    continue
                try:
                    result = self._read_once(cluster, spec, not_before, parse)
                except Exception as e:  # API server unreachable, RBAC: keep trying until the deadline
                    self.progress(f"nccl check {spec.name}: cluster read failed: {e}")
                    result = None
                if result is not None:
                    done[spec.name] = result
                    self.progress(f"nccl check {spec.name}: {result.status} ({result.message})")
            if len(done) == len(checks):
                break
            remaining = deadline - self.clock()
            if remaining <= 0:
                break
            self.sleep(min(self.interval, remaining))
        return [done.get(s.name) or CheckResult(
                    s.name, s.namespace, TIMEOUT,
                    message=f"no verdict in ConfigMap {s.namespace}/{s.configmap} or the log of pods "
                            f"{s.pod_selector} within {timeout:g} s")
                for s in checks]


def checks_for_stack(stack: str) -> list[CheckSpec]:
    """The nccl-test workloads of stacks/Pulumi.<stack>.yaml (validated like `plan` does).

    Raises ConfigError for a bad stack file."""
    from .. import checks, stackfile

    raw, secrets, _ = stackfile.read_stack_file(stackfile.stack_path(stack))
    cfg = checks.load(raw, secrets, source=f"stack {stack}")
    specs = []
    for w in cfg.workloads:
        if w.kind != NCCL_KIND:
            continue
        configmap = None
        try:
            configmap = importlib.import_module(NCCL_MODULE).verdict_name(w)
        except (ImportError, AttributeError):
            pass  # same default name the module uses; the module is only needed to parse verdicts
        specs.append(CheckSpec.for_workload(w.name, w.namespace, configmap))
    return specs


def check_resource_urns(resources: Sequence[dict[str, Any]], checks: Sequence[CheckSpec]) -> list[str]:
    """URNs (from the stack's exported state) of each check's Job and verdict ConfigMap.

    `up` replaces them so every release measures afresh: a Job that already ran does not run again, and
    a verdict left by an earlier release must not pass this one."""
    wanted = set()
    for c in checks:
        wanted.add(("Job", c.namespace, c.name))
        wanted.add(("ConfigMap", c.namespace, c.configmap))
    urns = []
    for r in resources:
        inputs = r.get("inputs") or {}
        meta = inputs.get("metadata") or {}
        if not isinstance(meta, dict):
            continue
        key = (inputs.get("kind"), meta.get("namespace") or "default", meta.get("name"))
        if key in wanted and r.get("urn"):
            urns.append(r["urn"])
    return urns
