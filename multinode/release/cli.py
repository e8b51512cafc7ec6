"""`python -m multinode release <stack> [--promote-from SRC] [--dry-run] [--report PATH] [--timeout SECONDS]`."""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import traceback
from datetime import UTC
from pathlib import Path
from typing import Any

from . import pipeline as p

DEFAULT_TIMEOUT = 1800.0
USAGE_PROG = "python -m multinode release"


def _parser(prog: str = USAGE_PROG) -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(
        prog=prog,
        description="Release a stack with the Pulumi Automation API: refresh, preview with the policy pack, up, "
                    "NCCL bandwidth check, node health gate, JSON report. Needs the Pulumi CLI and cloud credentials.")
    ap.add_argument("stack", help="stack name (stacks/Pulumi.<stack>.yaml)")
    ap.add_argument("--promote-from", metavar="STACK",
                    help="refuse unless STACK's last release passed (its multinode:release tag)")
    ap.add_argument("--dry-run", action="store_true", help="preview with the policy pack only; no up, no check")
    ap.add_argument("--report", metavar="PATH", help="JSON report path (default build/release/<stack>.json)")
    ap.add_argument("--timeout", metavar="SECONDS", type=float, default=DEFAULT_TIMEOUT,
                    help=f"how long to wait for the NCCL verdicts after up (default {DEFAULT_TIMEOUT:g})")
    return ap


def _revision(root: Path) -> str | None:
    sha = os.environ.get("GITHUB_SHA") or os.environ.get("CI_COMMIT_SHA")
    if sha:
        return sha
    try:
        out = subprocess.run(["git", "rev-parse", "HEAD"], cwd=root, capture_output=True, text=True, timeout=10)
    except (OSError, subprocess.SubprocessError):
        return None
    return (out.stdout.strip() or None) if out.returncode == 0 else None


def _write(path: Path, doc: dict[str, Any]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(doc, indent=2, sort_keys=False) + "\n")


def _early_report(stack: str, dry_run: bool, code: int, message: str) -> dict[str, Any]:
    from datetime import datetime
    when = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    r = p.Report(stack=stack, dry_run=dry_run, exit_code=code, message=message, started_at=when, finished_at=when)
    return r.to_json()


def _say(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


def main(argv: list[str] | None = None, prog: str = USAGE_PROG) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    try:
        args = _parser(prog).parse_args(argv)
    except SystemExit as e:          # argparse printed the usage / help
        return int(e.code or 0)
    from . import adapters

    report_path = Path(args.report) if args.report else adapters.ROOT / "build" / "release" / f"{args.stack}.json"

    def stop(code: int, message: str) -> int:
        _say(message)
        try:
            _write(report_path, _early_report(args.stack, args.dry_run, code, message))
        except OSError:
            pass
        return code

    missing_cli = (f"release needs the Pulumi CLI on PATH and it was not found: {adapters.INSTALL_HINT}; "
                   f"without it use `python -m multinode plan {args.stack}` (offline)")
    if adapters.pulumi_cli() is None:
        return stop(p.EXIT_USAGE, missing_cli)
    if args.timeout <= 0:
        return stop(p.EXIT_USAGE, "--timeout must be a positive number of seconds")

    # ---- preflight: everything that can be known before touching the stack
    parse = None
    from ..errors import ConfigError
    from . import bandwidth, health

    try:
        checks = bandwidth.checks_for_stack(args.stack)
        pools = health.pools_for_stack(args.stack)
    except ConfigError as e:
        return stop(p.EXIT_USAGE, str(e))
    if not args.dry_run:
        if not checks:
            return stop(p.EXIT_USAGE, f"stack {args.stack} has no workload of kind nccl-test: a release is gated "
                        "on its measured bus bandwidth; add one under `multinode:workloads` "
                        "(kind: nccl-test, nodePool: <pool>)")
        try:
            parse = bandwidth.default_parse_verdict()
        except bandwidth.CheckUnavailable as e:
            return stop(p.EXIT_USAGE, str(e))
    pack = adapters.POLICY_PACK
    if pack is None or not (pack.is_file() or (pack / "PulumiPolicy.yaml").exists()):
        return stop(p.EXIT_USAGE, f"no policy pack at {pack or 'multinode-policy-pack (not installed)'} "
                                  f"(PulumiPolicy.yaml or the pack executable missing)")

    def out(line: str) -> None:
        print(line, flush=True)

    opts = p.ReleaseOptions(stack=args.stack, promote_from=args.promote_from, dry_run=args.dry_run,
                            timeout=args.timeout, policy_packs=[str(pack)],
                            revision=_revision(adapters.ROOT))
    # a dry run stops after the preview and never calls the waiter (nor loads the default parser)
    waiter = bandwidth.VerdictWaiter(parse=parse, progress=out)
    try:
        report = p.run_release(opts, open_stack=adapters.open_stack_factory(adapters.ROOT, out),
                               connect_cluster=adapters.KubernetesCluster, bandwidth_check=waiter,
                               checks=checks, pools=pools, log=out)
    except FileNotFoundError:        # PulumiCommand runs `pulumi version` first
        return stop(p.EXIT_USAGE, missing_cli)
    except Exception as e:            # noqa: BLE001 - one line for the pipeline log, details on request
        if _is_automation_error(e):
            return stop(p.EXIT_USAGE if type(e).__name__ == "InvalidVersionError" else p.EXIT_DEPLOY,
                        f"release {args.stack}: {type(e).__name__}: {adapters._short(e)}")
        if os.environ.get("MULTINODE_DEBUG"):
            traceback.print_exc()
        return stop(p.EXIT_DEPLOY, f"release {args.stack} stopped by an unexpected {type(e).__name__}: {e} "
                    "(set MULTINODE_DEBUG=1 for the traceback)")
    doc = report.to_json()
    _write(report_path, doc)
    verdict = "PASS" if report.passed else f"FAIL ({doc['outcome']}, exit {report.exit_code})"
    print(f"release {args.stack}: {verdict}: {report.message}\nreport: {report_path}", flush=True)
    return report.exit_code


def _is_automation_error(e: BaseException) -> bool:
    return type(e).__module__.startswith("pulumi.automation")


if __name__ == "__main__":
    sys.exit(main())
