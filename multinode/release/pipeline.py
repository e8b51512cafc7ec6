"""The release, step by step, against injected objects (no Pulumi or Kubernetes import here).

    [promotion gate] -> select -> refresh -> preview + policy pack -> up -> kubeconfig -> NCCL check
    -> health gate (no pool with more health-tainted nodes than spares, release/health.py) -> tag

Every step's duration, result and the reason a release stopped land in one JSON report. The verdict is
recorded on the stack as the tag `multinode:release` (`pass|fail <UTC time> ...`); `--promote-from`
reads the source stack's tag and refuses unless it says pass.
"""
from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, Protocol

from .bandwidth import FAIL, PASS, UNIT, BandwidthCheck, CheckResult, CheckSpec, ClusterReader, check_resource_urns
from .health import NodeReader, PoolHealth, PoolHealthSpec, judge

REPORT_VERSION = 1
TAG_KEY = "multinode:release"
KUBECONFIG_OUTPUT = "kubeconfig"

# exit codes (documented in docs/release-pipeline.md)
EXIT_OK = 0                 # released (or dry run clean)
EXIT_POLICY = 1             # a mandatory policy violation stopped the preview (or the up)
EXIT_USAGE = 2              # cannot start: arguments, stack config, no Pulumi CLI, stack or policy pack missing
EXIT_PROMOTION = 3          # --promote-from: the source stack's last release did not pass
EXIT_DEPLOY = 4             # refresh, preview or up failed; or the stack exports no kubeconfig
EXIT_BANDWIDTH = 5          # the NCCL check measured less than its threshold
EXIT_CHECK = 6              # the NCCL check gave no verdict in time, or an unusable one
EXIT_HEALTH = 7             # a pool has more health-tainted (or cordoned) nodes than spare nodes (issue 34)

# ops that change a resource in Pulumi's resource_changes (OpType); `same`/`read`/`refresh` do not, and a
# replacement's own create-replacement/delete-replaced steps would count it twice
CHANGE_OPS = ("create", "update", "delete", "replace", "import")

OUTCOMES = {
    EXIT_OK: "released", EXIT_POLICY: "policy-violation", EXIT_USAGE: "cannot-start",
    EXIT_PROMOTION: "promotion-refused", EXIT_DEPLOY: "deploy-failed", EXIT_BANDWIDTH: "bandwidth-below-threshold",
    EXIT_CHECK: "bandwidth-check-failed", EXIT_HEALTH: "nodes-unhealthy",
}


# ------------------------------------------------------------------ what the pipeline needs from Pulumi
@dataclass
class PolicyFinding:
    policy: str
    pack: str
    level: str              # mandatory | advisory | remediate | disabled
    message: str
    urn: str | None = None

    def to_json(self) -> dict[str, Any]:
        return {"policy": self.policy, "pack": self.pack, "level": self.level, "message": self.message,
                "urn": self.urn}


@dataclass
class Outcome:
    """Result of one Pulumi operation. `error` set = the command failed (policy findings still count)."""
    changes: dict[str, int] = field(default_factory=dict)     # op -> count (create, update, same, ...)
    policy: list[PolicyFinding] = field(default_factory=list)
    error: str | None = None


class StackOps(Protocol):
    """One Pulumi stack. adapters.AutomationStack wraps pulumi.automation.Stack; tests use fakes."""
    name: str

    def refresh(self) -> Outcome: ...

    def preview(self, policy_packs: list[str], refresh: bool = False) -> Outcome: ...

    def up(self, policy_packs: list[str], replace: list[str]) -> Outcome: ...

    def outputs(self) -> dict[str, Any]: ...             # plain values, secrets included (never reported)

    def state_resources(self) -> list[dict[str, Any]]: ...  # exported state: [{urn, type, inputs, ...}]

    def get_tag(self, key: str) -> str | None: ...

    def set_tag(self, key: str, value: str) -> None: ...


class StackMissing(Exception):
    """The stack does not exist (only raised when selecting without creating)."""


class StepFailed(Exception):
    """A Pulumi / cluster call failed outside an operation; str() is a short message."""


# open_stack(name, create) -> StackOps; create=False raises StackMissing for an unknown stack
StackOpener = Callable[[str, bool], StackOps]


class ReleaseCluster(ClusterReader, NodeReader, Protocol):
    """The cluster as the release reads it: verdicts (bandwidth gate) and nodes (health gate)."""


ClusterConnector = Callable[[Any], ReleaseCluster]       # kubeconfig (str or dict) -> cluster reader


@dataclass
class ReleaseOptions:
    stack: str
    promote_from: str | None = None
    dry_run: bool = False
    timeout: float = 1800.0                  # seconds to wait for the bandwidth verdicts
    policy_packs: list[str] = field(default_factory=list)
    revision: str | None = None           # git commit, recorded in the tag and the report


# ------------------------------------------------------------------ the stack tag
def format_tag(status: str, when: datetime, revision: str | None, results: Sequence[CheckResult]) -> str:
    parts = [status, when.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")]
    if revision:
        parts.append(f"rev={revision[:12]}")
    for r in results:
        if r.busbw is not None and r.threshold is not None:
            parts.append(f"{r.name}={r.busbw:g}/{r.threshold:g}{UNIT}")
    return " ".join(parts)[:256]          # the service limits tag values to 256 characters


def parse_tag(value: str | None) -> dict[str, Any]:
    """{'status': pass|fail|None, 'recorded_at': str|None, 'revision': str|None, 'raw': value}."""
    out: dict[str, Any] = {"status": None, "recorded_at": None, "revision": None, "raw": value}
    if not value:
        return out
    fields = value.split()
    if fields[0] in (PASS, FAIL):
        out["status"] = fields[0]
    if len(fields) > 1:
        out["recorded_at"] = fields[1]
    for f in fields[2:]:
        if f.startswith("rev="):
            out["revision"] = f[4:]
    return out


# ------------------------------------------------------------------ the report
@dataclass
class Report:
    stack: str
    dry_run: bool = False
    started_at: str = ""
    finished_at: str = ""
    exit_code: int = EXIT_OK
    message: str = ""
    revision: str | None = None
    promotion: dict[str, Any] | None = None
    steps: list[dict[str, Any]] = field(default_factory=list)
    resources: dict[str, dict[str, int]] = field(default_factory=dict)
    policy: list[PolicyFinding] = field(default_factory=list)
    policy_packs: list[str] = field(default_factory=list)
    checks: list[CheckResult] = field(default_factory=list)
    health: list[PoolHealth] = field(default_factory=list)
    tag: dict[str, Any] | None = None
    warnings: list[str] = field(default_factory=list)

    @property
    def passed(self) -> bool:
        return self.exit_code == EXIT_OK

    def to_json(self) -> dict[str, Any]:
        up = self.resources.get("up", {})
        mandatory = [p for p in self.policy if p.level == "mandatory"]
        return {
            "version": REPORT_VERSION,
            "stack": self.stack,
            "mode": "dry-run" if self.dry_run else "release",
            "pass": self.passed,
            "exit_code": self.exit_code,
            "outcome": ("dry-run-clean" if self.dry_run and self.passed else OUTCOMES.get(self.exit_code, "error")),
            "message": self.message,
            "revision": self.revision,
            "started_at": self.started_at,
            "finished_at": self.finished_at,
            "durations_seconds": {s["name"]: s["seconds"] for s in self.steps},
            "total_seconds": round(sum(s["seconds"] for s in self.steps), 3),
            "steps": self.steps,
            "resources": {
                "changed": changed(up),
                "by_step": self.resources,
            },
            "policy": {
                "packs": self.policy_packs,
                "mandatory": len(mandatory),
                "advisory": len(self.policy) - len(mandatory),
                "findings": [p.to_json() for p in self.policy],
            },
            "bandwidth": {
                "unit": UNIT,
                "pass": bool(self.checks) and all(c.passed for c in self.checks),
                "checks": [c.to_json() for c in self.checks],
            },
            "health": {
                "pass": all(h.passed for h in self.health),
                "pools": [h.to_json() for h in self.health],
            },
            "promotion": self.promotion,
            "tag": self.tag,
            "warnings": self.warnings,
        }


def _utc(now: Callable[[], datetime]) -> str:
    return now().astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def changed(changes: dict[str, int]) -> int:
    return sum(n for op, n in (changes or {}).items() if op in CHANGE_OPS)


def _changes(d: dict[str, int] | None) -> dict[str, int]:
    return {str(k): int(v) for k, v in (d or {}).items()}


class _Stop(Exception):
    def __init__(self, code: int, message: str):
        super().__init__(message)
        self.code = code
        self.message = message


# ------------------------------------------------------------------ the pipeline
def run_release(opts: ReleaseOptions, *, open_stack: StackOpener, connect_cluster: ClusterConnector,
                bandwidth_check: BandwidthCheck, checks: Sequence[CheckSpec],
                pools: Sequence[PoolHealthSpec] = (),
                now: Callable[[], datetime] = lambda: datetime.now(UTC),
                clock: Callable[[], float] = time.monotonic,
                log: Callable[[str], None] = print) -> Report:
    """Run the release; never raises for an expected failure: the report says what stopped it."""
    report = Report(stack=opts.stack, dry_run=opts.dry_run, started_at=_utc(now), revision=opts.revision,
                    policy_packs=list(opts.policy_packs))
    target: StackOps | None = None
    tag_allowed = False        # record a verdict only once this release has touched the target stack

    def step(name: str, fn: Callable[[], Any], detail: Callable[[Any], Any] = lambda _r: None) -> Any:
        log(f"==> {name}")
        t0 = clock()
        entry: dict[str, Any] = {"name": name, "status": "ok", "seconds": 0.0}
        report.steps.append(entry)
        try:
            result = fn()
        except _Stop as e:
            entry["status"] = "failed"
            entry["message"] = e.message
            raise
        except (StepFailed, StackMissing) as e:
            entry["status"] = "failed"
            entry["message"] = str(e)
            raise _Stop(EXIT_DEPLOY, f"{name}: {e}") from None
        finally:
            entry["seconds"] = round(clock() - t0, 3)
        d = detail(result)
        if d is not None:
            entry["detail"] = d
        return result

    def promotion_gate(src_name: str) -> None:
        info: dict[str, Any] = {"from": src_name, "allowed": False}
        report.promotion = info
        try:
            src = open_stack(src_name, False)
            tag = parse_tag(src.get_tag(TAG_KEY))
        except StackMissing:
            tag = parse_tag(None)
            info["reason"] = f"source stack {src_name} does not exist"
        info.update({"source_tag": tag["raw"], "source_status": tag["status"],
                     "source_recorded_at": tag["recorded_at"], "source_revision": tag["revision"]})
        if tag["status"] != PASS:
            why = info.get("reason") or (f"its last release was recorded as {tag['raw']!r}" if tag["raw"]
                                         else f"it has no {TAG_KEY} tag (never released by this pipeline)")
            info["reason"] = why
            raise _Stop(EXIT_PROMOTION, f"promotion from {src_name} refused: {why}")
        if opts.revision and tag["revision"] and not opts.revision.startswith(tag["revision"]):
            report.warnings.append(f"{src_name} passed at revision {tag['revision']}, this release is "
                                   f"{opts.revision[:12]}")
        info["allowed"] = True

    def policy_stop(outcome: Outcome, what: str) -> None:
        report.policy.extend(outcome.policy)
        mandatory = [p for p in outcome.policy if p.level == "mandatory"]
        if mandatory:
            names = ", ".join(sorted({p.policy for p in mandatory}))
            raise _Stop(EXIT_POLICY, f"{what}: {len(mandatory)} mandatory policy violation(s): {names}")
        if outcome.error:
            raise _Stop(EXIT_DEPLOY, f"{what} failed: {outcome.error}")

    try:
        if not opts.dry_run and not checks:
            raise _Stop(EXIT_USAGE, f"stack {opts.stack} has no workload of kind nccl-test: a release is gated "
                        "on its measured bus bandwidth (add one under `multinode:workloads`)")
        if opts.promote_from:
            src_name = opts.promote_from
            step("promotion-gate", lambda: promotion_gate(src_name), lambda _r: report.promotion)

        target = step("select", lambda: open_stack(opts.stack, True))
        if not opts.dry_run:
            tag_allowed = True
            refreshed = step("refresh", target.refresh)
            report.resources["refresh"] = _changes(refreshed.changes)
            if refreshed.error:
                report.steps[-1]["status"] = "failed"
                raise _Stop(EXIT_DEPLOY, f"refresh failed: {refreshed.error}")

        # a dry run refreshes inside the preview (`preview --refresh`), which writes no state
        preview = step("preview", lambda: target.preview(list(opts.policy_packs), refresh=opts.dry_run),
                       lambda o: {"changes": _changes(o.changes), "policy_findings": len(o.policy)})
        report.resources["preview"] = _changes(preview.changes)
        try:
            policy_stop(preview, "preview")
        except _Stop:
            report.steps[-1]["status"] = "failed"
            raise
        if opts.dry_run:
            if not checks:
                report.warnings.append(f"stack {opts.stack} has no nccl-test workload: a release would refuse "
                                       "to start (it is gated on measured bus bandwidth)")
            report.message = (f"dry run of {opts.stack}: preview clean, "
                              f"{changed(preview.changes)} change(s) pending")
            return report

        check_urns: list[str] = []
        try:
            check_urns = check_resource_urns(target.state_resources(), checks)
        except StepFailed as e:
            report.warnings.append(f"could not read the stack state to re-run the NCCL check: {e}")
        up_started = now()   # verdicts written before the up are stale (see bandwidth.CLOCK_SKEW)
        up = step("up", lambda: target.up(list(opts.policy_packs), list(check_urns)),
                  lambda o: {"changes": _changes(o.changes), "replaced_check_resources": check_urns})
        report.resources["up"] = _changes(up.changes)
        try:
            policy_stop(up, "up")
        except _Stop:
            report.steps[-1]["status"] = "failed"
            raise

        def kubeconfig() -> Any:
            value = target.outputs().get(KUBECONFIG_OUTPUT)
            if not value:
                raise _Stop(EXIT_DEPLOY, f"stack {opts.stack} exports no `{KUBECONFIG_OUTPUT}` output; "
                            "the NCCL check needs it to reach the cluster")
            return value

        kc = step("outputs", kubeconfig)
        cluster = step("connect-cluster", lambda: connect_cluster(kc))
        results = step("bandwidth-check", lambda: bandwidth_check(cluster, list(checks), opts.timeout, up_started),
                       lambda rs: [{"name": r.name, "status": r.status} for r in rs])
        report.checks = list(results)
        bad = [r for r in results if not r.passed]
        if bad:
            report.steps[-1]["status"] = "failed"
            code = EXIT_BANDWIDTH if all(r.status == FAIL for r in bad) else EXIT_CHECK
            raise _Stop(code, "; ".join(f"{r.name}: {r.status}: {r.message}" for r in bad))
        if pools:
            # issue 34: beside the bandwidth gate, after it (a check that found a bad node has had it quarantined)
            health = step("health-gate", lambda: judge(cluster.list_nodes(), list(pools)),
                          lambda hs: [h.to_json() for h in hs])
            report.health = list(health)
            sick = [h for h in health if not h.passed]
            if sick:
                report.steps[-1]["status"] = "failed"
                raise _Stop(EXIT_HEALTH, "; ".join(h.message for h in sick) + ": repair or replace the nodes (or "
                            "raise the pool's nodeCount) before promoting")
        report.message = "; ".join(f"{r.name}: {r.message}" for r in results)
    except _Stop as e:
        report.exit_code = e.code
        report.message = e.message
    finally:
        if target is not None and tag_allowed:
            _record(report, target, opts, now, log)
        report.finished_at = _utc(now)
    return report


def _record(report: Report, target: StackOps, opts: ReleaseOptions, now: Callable[[], datetime],
            log: Callable[[str], None]) -> None:
    value = format_tag(PASS if report.passed else FAIL, now(), opts.revision, report.checks)
    report.tag = {"key": TAG_KEY, "value": value, "recorded": False}
    try:
        target.set_tag(TAG_KEY, value)
        report.tag["recorded"] = True
        log(f"==> tagged {opts.stack} {TAG_KEY}={value}")
    except Exception as e:   # the release verdict stands; promotion from this stack will be refused
        report.warnings.append(f"could not record {TAG_KEY} on {opts.stack}: {e}")
