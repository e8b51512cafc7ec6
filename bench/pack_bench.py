"""Benchmark: the policy pack as the Pulumi engine runs it under `pulumi preview --policy-pack policy`.

The pack is started as the engine starts it when no `python` language plugin is found (conformance/pulumi/
README.md, "The pack"): a separate process, `python policy/__main__.py <engine address> .` in the pack's folder,
which prints its gRPC port; the analyzer is then driven over gRPC with the pulumirpc Analyzer service: one
`Analyze` per resource (type, properties, URN, name, options, provider), then one `AnalyzeStack` with every
resource (parent, dependencies). The resources are a stack's registrations as `plan` records them (inputs as
the engine would send them, secrets as the placeholder string "[secret]", unknowns as Pulumi's unknown
sentinel), read from an in-process plan.

What it reports per stack: the analyzer process's CPU (user + system, from /proc/<pid>/stat, so this script's
own cost of building and sending requests is not counted) spent in all the `Analyze` calls, and in the
`AnalyzeStack` call, each the median over --runs fresh plugin processes; the process's start (imports,
PolicyPack construction) is reported apart, as `start`. What is not measured: the engine's own side (the Go CLI
serialising the requests), and a real language host (the pack runs here with the project's interpreter).

Each row says whether its total (per-resource plus stack checks, CPU, start not counted: see docs/deploy-speed.md)
is within the issue's 0.5 s. After the synthetic stacks, the growth: a least-squares line total = a + b x resources
over the scaling stacks, the marginal CPU per added resource between successive sizes (constant when the growth is
linear), and the exponent k of total ~ resources^k between the two largest sizes (1 when linear).

`--profile STACK` (an example stack, or a number of workloads for a synthetic stack) instead runs the servicer in
this process under cProfile, with policy/wire.py and without, and prints where the CPU goes: pulumi_policy's
conversion of the properties (MessageToDict, deserialize_properties, unknown_checking_proxy), our adapter
(policy/pack.py: props to Resource) and the rules, for the Analyze calls and the AnalyzeStack call apart.

`--floor` runs the floor pack (bench/floor_pack: one resource policy that checks nothing, served by pulumi_policy
as ours is) after each run of ours on the same requests and reports the ratio of the totals (issue 47: <= 2).

Usage: python bench/pack_bench.py [--runs 5] [--stacks aws-dev,...] [--workloads 10,40,80,160,320] [--pools 1]
                                  [--json out.json] [--profile STACK] [--floor]
"""
from __future__ import annotations

import argparse
import contextlib
import datetime
import io
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

EXAMPLES = "aws-dev,azure-dev,gcp-dev,oci-dev,existing-dev,dynamo-dev,fleet-dev"
TARGET = 0.5      # issue 35: CPU seconds the pack may add per example stack (per-resource and stack checks)
_TICK = os.sysconf("SC_CLK_TCK")


def cpu_of(pid: int) -> float:
    """User + system CPU seconds of a live process (its threads included)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / _TICK


def requests(stack: str, file: Path | None = None) -> tuple[list[Any], Any]:
    """(AnalyzeRequest per registration, AnalyzeStackRequest) from the stack's plan: every registration the plan
    recorded (components and providers too: the engine analyzes each resource it registers)."""
    from google.protobuf import struct_pb2
    from pulumi.runtime import rpc
    from pulumi.runtime.proto import analyzer_pb2 as pb

    from multinode import plan as mplan
    from multinode.recording import UNKNOWN_PLACEHOLDER

    with contextlib.redirect_stderr(io.StringIO()):
        result = mplan.plan(stack, None, file)
    if not result.registrations:
        raise RuntimeError(f"plan {stack}: exit {result.exit_code}: {result.error}")

    def unknowns(v: Any) -> Any:
        if v == UNKNOWN_PLACEHOLDER:
            return rpc.UNKNOWN
        if isinstance(v, dict):
            return {k: unknowns(x) for k, x in v.items()}
        if isinstance(v, list):
            return [unknowns(x) for x in v]
        return v

    per: list[Any] = []
    stack_resources: list[Any] = []
    for r in result.registrations:
        props = struct_pb2.Struct()
        props.update(unknowns(r.inputs))
        opts = pb.AnalyzerResourceOptions(protect=r.protect, ignoreChanges=list(r.ignore_changes),
                                          deleteBeforeReplace=r.delete_before_replace)
        provider = pb.AnalyzerProviderResource(type="pulumi:providers:kubernetes", urn=r.provider.rsplit("::", 1)[0],
                                               name=r.provider.rsplit("::", 2)[-2] if r.provider else "")
        per.append(pb.AnalyzeRequest(type=r.type, properties=props, urn=r.urn, name=r.name, options=opts,
                                     provider=provider))
        stack_resources.append(pb.AnalyzerResource(type=r.type, properties=props, urn=r.urn, name=r.name,
                                                   options=opts, provider=provider, parent=r.parent,
                                                   dependencies=list(r.dependencies)))
    return per, pb.AnalyzeStackRequest(resources=stack_resources)


FLOOR = ROOT / "bench" / "floor_pack"


def one_run(per: list[Any], whole: Any, pack: Path = ROOT / "policy") -> dict[str, float]:
    """A fresh analyzer process of `pack` (ours, or the floor pack): its start, all Analyze calls, the AnalyzeStack
    call (CPU seconds of the process), and the wall time of the calls as this client saw them."""
    import grpc
    from google.protobuf import empty_pb2
    from pulumi.runtime.proto import analyzer_pb2_grpc

    t0 = time.perf_counter()
    proc = subprocess.Popen([sys.executable, str(pack / "__main__.py"), "127.0.0.1:1", "."],
                            cwd=pack, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        assert proc.stdout is not None
        port = int(proc.stdout.readline().decode().strip())
        start_wall = time.perf_counter() - t0
        channel = grpc.insecure_channel(f"127.0.0.1:{port}", options=[("grpc.max_receive_message_length", -1),
                                                                      ("grpc.max_send_message_length", -1)])
        stub = analyzer_pb2_grpc.AnalyzerStub(channel)
        stub.GetAnalyzerInfo(empty_pb2.Empty())
        c0 = cpu_of(proc.pid)
        t1 = time.perf_counter()
        diags = 0
        for req in per:
            diags += len(stub.Analyze(req).diagnostics)
        c1, t2 = cpu_of(proc.pid), time.perf_counter()
        diags_stack = len(stub.AnalyzeStack(whole).diagnostics)
        c2, t3 = cpu_of(proc.pid), time.perf_counter()
        channel.close()
        return {"start": c0, "startWall": start_wall, "analyze": c1 - c0, "analyzeWall": t2 - t1,
                "stack": c2 - c1, "stackWall": t3 - t2, "diagnostics": diags, "stackDiagnostics": diags_stack}
    finally:
        proc.kill()
        proc.wait()


def measure(name: str, per: list[Any], whole: Any, runs: int, floor: bool = False) -> dict[str, Any]:
    """Median over `runs` fresh processes of our pack; with `floor`, each run followed by one of the floor pack
    (interleaved, so load on the machine hits both alike) and the ratio of the two totals (issue 47: <= 2)."""
    rs, fs = [], []
    for _ in range(runs):
        rs.append(one_run(per, whole))
        if floor:
            fs.append(one_run(per, whole, FLOOR))
    med = statistics.median
    row = {k: med(r[k] for r in rs) for k in ("start", "analyze", "stack", "analyzeWall", "stackWall")}
    row.update(resources=len(per), total=row["analyze"] + row["stack"], diagnostics=rs[0]["diagnostics"],
               stackDiagnostics=rs[0]["stackDiagnostics"])
    if floor:
        row["floor"] = med(f["analyze"] + f["stack"] for f in fs)
        row["floorRatio"] = med((r["analyze"] + r["stack"]) / max(f["analyze"] + f["stack"], 1e-9)
                                for r, f in zip(rs, fs, strict=True))
        print(f"{'':<16}floor pack {row['floor']:.2f} s; ours / floor {row['floorRatio']:.2f} (target <= 2)",
              flush=True)
    verdict = "ok" if row["total"] <= TARGET else "OVER"
    print(f"{name:<16}{len(per):>10}{row['start']:>9.2f}{row['analyze']:>10.2f}{row['stack']:>8.2f}"
          f"{row['total']:>8.2f}{verdict:>6}{row['analyze'] / max(len(per), 1) * 1000:>12.1f}"
          f"{row['stack'] / max(len(per), 1) * 1000:>10.1f}{row['diagnostics']:>7}{row['stackDiagnostics']:>7}",
          flush=True)
    return row


def growth(rows: list[dict[str, Any]]) -> dict[str, Any]:
    """How the pack's CPU grows over the scaling stacks (rows sorted by resources); printed and returned."""
    import math

    from plan_bench import slope
    rows = sorted(rows, key=lambda r: r["resources"])
    if len(rows) < 2:
        return {}
    xs = [float(r["resources"]) for r in rows]
    out: dict[str, Any] = {}
    for key in ("analyze", "stack", "total"):
        ys = [r[key] for r in rows]
        b = slope(xs, ys)
        a = statistics.fmean(ys) - b * statistics.fmean(xs)
        marginal = [(ys[i + 1] - ys[i]) / (xs[i + 1] - xs[i]) * 1000 for i in range(len(rows) - 1)]
        k = (math.log(ys[-1] / ys[-2]) / math.log(xs[-1] / xs[-2])) if ys[-2] > 0 and ys[-1] > 0 else float("nan")
        worst = max(abs(y - (a + b * x)) / y for x, y in zip(xs, ys, strict=True) if y > 0)
        out[key] = {"intercept": a, "msPerResource": b * 1000, "marginalMs": marginal, "exponentTop": k,
                    "worstResidual": worst}
        print(f"growth {key:<8} {a:.3f} s + {b * 1000:.2f} ms x resources (worst point off the line by "
              f"{worst:.0%}); ms per added resource between sizes: {', '.join(f'{m:.2f}' for m in marginal)}; "
              f"exponent between the two largest: {k:.2f}")
    return out


def profile(stack: str) -> None:
    """cProfile of the servicer in this process, with and without policy/wire.py: where the CPU goes."""
    import cProfile
    import pstats

    import pack_equivalence as eq
    if stack.isdigit():
        from plan_bench import synthetic_stack
        f = synthetic_stack(int(stack), 1, Path(tempfile.mkdtemp(prefix="pack-prof-")))
        per, whole = requests(f.stem.split(".", 1)[1], f)
    else:
        per, whole = requests(stack)
    parts = {"pulumi_policy: protobuf -> dict (MessageToDict)": ("json_format.py", "MessageToDict"),
             "pulumi_policy: deserialize_properties": ("deserialize.py", "deserialize_properties"),
             "pulumi_policy: unknown_checking_proxy": ("proxy.py", "unknown_checking_proxy"),
             "ours: props -> Resource (policy/pack.py)": ("pack.py", "_convert"),
             "ours: the rules (policy/pack.py findings)": ("pack.py", "findings")}
    print(f"{stack}: {len(per)} resources; CPU seconds under cProfile (inflated by the profiler; compare shares)")
    for installed in (False, True):
        with eq.wire_installed(installed):
            sv = eq.servicer()
            for call, run in (("Analyze (all)", lambda: [sv.Analyze(r, None) for r in per]),
                              ("AnalyzeStack", lambda: sv.AnalyzeStack(whole, None))):
                prof = cProfile.Profile()
                prof.enable()
                run()
                prof.disable()
                st = pstats.Stats(prof)
                total = st.total_tt                                     # type: ignore[attr-defined]
                print(f"  {'with' if installed else 'without'} policy/wire.py, {call}: {total:.3f} s")
                for label, (file, fn) in parts.items():
                    cum = sum(v[3] for (f_, _, name), v in st.stats.items()      # type: ignore[attr-defined]
                              if f_.endswith("/" + file) and name.endswith(fn))
                    print(f"    {label:<48}{cum:>8.3f} s {cum / total if total else 0:>5.0%}")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    ap.add_argument("--runs", type=int, default=5, help="fresh analyzer processes per stack")
    ap.add_argument("--stacks", default=EXAMPLES)
    ap.add_argument("--workloads", default="10,40,80,160,320", help="synthetic existing stacks ('' for none)")
    ap.add_argument("--pools", default="1")
    ap.add_argument("--json", type=Path)
    ap.add_argument("--profile", metavar="STACK", help="where the CPU goes (cProfile, in process), then exit")
    ap.add_argument("--floor", action="store_true", help="also run the floor pack (bench/floor_pack) per run")
    args = ap.parse_args(argv)
    if args.profile:
        profile(args.profile)
        return 0
    load = os.getloadavg()
    report: dict[str, Any] = {"date": datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%d %H:%M UTC"),
                              "cpus": os.cpu_count(), "loadavg": load, "runs": args.runs, "stacks": {}}
    print(f"{report['date']}, {os.cpu_count()} CPUs, load average {load[0]:.2f} {load[1]:.2f} {load[2]:.2f}; "
          f"analyzer CPU seconds, median of {args.runs} fresh plugin processes")
    print(f"{'stack':<16}{'resources':>10}{'start':>9}{'analyze':>10}{'stack':>8}{'total':>8}{'<=' + str(TARGET):>6}"
          f"{'ms/res an.':>12}{'ms/res st.':>10}{'diags':>7}{'stackd':>7}")
    for stack in [s for s in args.stacks.split(",") if s]:
        report["stacks"][stack] = measure(stack, *requests(stack), args.runs, args.floor)
    workloads = [int(x) for x in args.workloads.split(",") if x]
    if workloads:
        from plan_bench import synthetic_stack
        tmp = Path(tempfile.mkdtemp(prefix="pack-bench-"))
        report["scaling"] = {}
        for p in [int(x) for x in args.pools.split(",") if x]:
            for w in workloads:
                f = synthetic_stack(w, p, tmp)
                name = f.stem.split(".", 1)[1]
                report["scaling"][f"{w}x{p}"] = measure(f"{w}w x {p}p", *requests(name, f), args.runs, args.floor)
        report["growth"] = growth(list(report["scaling"].values()))
    end = os.getloadavg()
    report["loadavgEnd"] = end
    print(f"load average at the end {end[0]:.2f} {end[1]:.2f} {end[2]:.2f}")
    if args.json:
        args.json.write_text(json.dumps(report, indent=1, default=str))
    return 0


if __name__ == "__main__":
    sys.exit(main())
