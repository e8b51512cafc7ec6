"""Benchmark: the `plan` command users run against its import floor, and how plan scales with the stack.

  plan      `python -m multinode plan <stack> --out <tmp>` in a fresh process: the command users run,
            writing build/<stack>/ and printing its summary (captured here)
  floor     a fresh process that imports exactly the Pulumi modules that command imports, read from
            `python -X importtime -m multinode plan <stack> ...` (modules actually executed, so lazy
            placeholders the plan never ran are not counted) and nothing else: the cost no plan can avoid
  scaling   the same command on generated `existing` stacks with 1, 10, 40, 160, 640 workloads x 1, 8, 32
            pools, with the CPU cost per added workload (at each pool count) and per added pool (at each
            workload count): a per-pool slope that grows with the workload count is a workload x pool term

Every measurement is a pair of fresh processes run back to back (plan then floor, or the next size then the
smallest), alternating which goes first, so load from other processes on the machine hits both halves of a
pair alike; a pair's ratio is taken per pair and the median over pairs is reported. CPU time is user + system
of the child (resource.getrusage RUSAGE_CHILDREN), wall time includes interpreter start. One warm-up run first
so bytecode caches exist.

Usage: python bench/plan_bench.py [--pairs 7] [--stacks aws-dev,...] [--workloads 1,10,40,160,640]
                                  [--pools 1,8,32] [--scaling-pairs 3] [--json out.json]
"""
from __future__ import annotations

import argparse
import datetime
import json
import os
import re
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
EXAMPLES = "aws-dev,azure-dev,gcp-dev,oci-dev,existing-dev,dynamo-dev"


def _env() -> dict[str, str]:
    env = dict(os.environ)
    env.pop("PYTHONDONTWRITEBYTECODE", None)   # measure with bytecode caches, as users run it
    env["PYTHONPATH"] = str(ROOT) + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    return env


def run(argv: list[str], ok: tuple[int, ...] = (0,)) -> dict[str, Any]:
    """One fresh process: {"cpu": user+sys seconds, "wall": seconds, "stderr": text}."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    proc = subprocess.run([sys.executable, *argv], capture_output=True, text=True, env=_env(), cwd=ROOT)
    wall = time.perf_counter() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if proc.returncode not in ok:
        raise RuntimeError(f"{' '.join(argv)} exited {proc.returncode}:\n{proc.stderr[-3000:]}")
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return {"cpu": cpu, "wall": wall, "stderr": proc.stderr, "exit": proc.returncode}


def plan_argv(stack: str, out: Path, file: Path | None = None) -> list[str]:
    argv = ["-m", "multinode", "plan", stack, "--out", str(out)]
    return argv + ["--file", str(file)] if file else argv


def imported_pulumi_modules(argv: list[str]) -> list[str]:
    """The pulumi* modules the command really executes, in import order (`-X importtime` lists each module
    once, when its code runs; a name merely placed in sys.modules by a lazy loader is not listed)."""
    res = run(["-X", "importtime", *argv], ok=(0, 1))
    mods = []
    for line in res["stderr"].splitlines():
        m = re.match(r"import time:\s+\d+ \|\s+\d+ \|\s*(\S+)$", line)
        if m and m.group(1).split(".")[0].startswith("pulumi"):
            mods.append(m.group(1))
    return list(dict.fromkeys(mods))


def floor_argv(modules: list[str]) -> list[str]:
    # the command's garbage-collector thresholds first (multinode/gcpolicy.py), as `multinode plan` sets them
    return ["-c", "from multinode import gcpolicy\ngcpolicy.for_batch()\nimport importlib\n"
                  f"for m in {modules!r}:\n    importlib.import_module(m)"]


def pairs(a: list[str], b: list[str], n: int, ok_a: tuple[int, ...] = (0,)) -> list[tuple[dict, dict]]:
    """n interleaved (a, b) measurements; even pairs run a first, odd pairs b first."""
    run(a, ok_a), run(b)                    # warm-up: bytecode caches, page cache
    out = []
    for i in range(n):
        if i % 2 == 0:
            ra = run(a, ok_a)
            rb = run(b)
        else:
            rb = run(b)
            ra = run(a, ok_a)
        out.append((ra, rb))
    return out


def summarize(ps: list[tuple[dict, dict]]) -> dict[str, float]:
    med = statistics.median
    return {"aCpu": med(a["cpu"] for a, _ in ps), "bCpu": med(b["cpu"] for _, b in ps),
            "aWall": med(a["wall"] for a, _ in ps), "bWall": med(b["wall"] for _, b in ps),
            "cpuRatio": med(a["cpu"] / b["cpu"] for a, b in ps),
            "wallRatio": med(a["wall"] / b["wall"] for a, b in ps),
            "cpuDiff": med(a["cpu"] - b["cpu"] for a, b in ps)}


# ---------------------------------------------------------------- synthetic stacks
def synthetic_stack(workloads: int, pools: int, folder: Path) -> Path:
    """An `existing` stack with `pools` EFA pools of 4 p5.48xlarge and `workloads` two-node Volcano training
    jobs (torchrun, 8 GPUs per node) spread over them round-robin. Batch jobs are placed one at a time beside
    the services (multinode.placement), so every size fits, plans with exit 0 and writes everything; the
    image is AWS's training image with the EFA plugin, as the efa fabric requires."""
    import yaml
    pool_list = [{"name": f"pool-{i}", "machine": "p5.48xlarge", "nodeCount": 4,
                  "nodeSelector": {"multinode.dev/node-pool": f"pool-{i}"}} for i in range(pools)]
    wl = [{"name": f"train-{j}", "kind": "volcano-training", "engine": "torchrun",
           "image": "public.ecr.aws/deep-learning-containers/pytorch-training:2.8.0-gpu-py312-cu129-ubuntu22.04-ec2",
           "nodePool": f"pool-{j % pools}", "nodes": 2, "script": "/workspace/train.py"} for j in range(workloads)]
    doc = {"config": {
        "multinode:cloud": "existing", "multinode:cluster": {"name": "bench"},
        "multinode:kubeconfig": {"secure": "v1:YmVuY2g="}, "multinode:fabric": {"kind": "efa"},
        "multinode:nodePools": pool_list, "multinode:workloads": wl,
        "multinode:storage": {"kind": "existing", "existingClaim": "ckpt"},
    }}
    path = folder / f"Pulumi.syn-{workloads}w-{pools}p.yaml"
    path.write_text(yaml.safe_dump(doc))
    return path


def slope(xs: list[float], ys: list[float]) -> float:
    """Least-squares slope of ys over xs."""
    mx, my = statistics.fmean(xs), statistics.fmean(ys)
    den = sum((x - mx) ** 2 for x in xs)
    return sum((x - mx) * (y - my) for x, y in zip(xs, ys, strict=True)) / den if den else float("nan")


def scaling(workloads: list[int], pools: list[int], n: int, tmp: Path) -> dict[str, Any]:
    """CPU of plan at each (workloads, pools), each the median of n pairs with the 1-workload stack of the same
    pool count (interleaved, so each size's cost above the base is measured against a neighbour in time)."""
    cells: dict[tuple[int, int], dict[str, float]] = {}
    for p in pools:
        base_w = min(workloads)
        base = synthetic_stack(base_w, p, tmp)
        base_argv = plan_argv(base.stem.split(".", 1)[1], tmp / "out", base)
        for w in workloads:
            stack = synthetic_stack(w, p, tmp)
            argv = plan_argv(stack.stem.split(".", 1)[1], tmp / "out", stack)
            if w == base_w:
                rs = [run(argv) for _ in range(n + 1)][1:]
                cells[(w, p)] = {"cpu": statistics.median(r["cpu"] for r in rs),
                                 "wall": statistics.median(r["wall"] for r in rs), "aboveBase": 0.0}
            else:
                s = summarize(pairs(argv, base_argv, n))
                cells[(w, p)] = {"cpu": s["aCpu"], "wall": s["aWall"], "aboveBase": s["cpuDiff"]}
            print(f"  {w:>4} workloads x {p:>2} pools: plan {cells[(w, p)]['cpu']:.2f} s CPU, "
                  f"{cells[(w, p)]['wall']:.2f} s wall", flush=True)
    per_workload = {p: slope(workloads, [cells[(w, p)]["aboveBase"] for w in workloads]) for p in pools}
    per_pool = {w: slope(pools, [cells[(w, p)]["cpu"] for p in pools]) for w in workloads} if len(pools) > 1 else {}
    return {"cells": {f"{w}x{p}": c for (w, p), c in cells.items()},
            "perWorkloadSeconds": per_workload, "perPoolSeconds": per_pool}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    ap.add_argument("--pairs", type=int, default=7, help="interleaved plan/floor pairs per stack")
    ap.add_argument("--stacks", default=EXAMPLES, help="example stacks (comma-separated; '' for none)")
    ap.add_argument("--workloads", default="1,10,40,160,640", help="synthetic workload counts ('' for none)")
    ap.add_argument("--pools", default="1,8,32", help="synthetic pool counts")
    ap.add_argument("--scaling-pairs", type=int, default=3, help="pairs per synthetic size")
    ap.add_argument("--json", type=Path)
    args = ap.parse_args(argv)

    load = os.getloadavg()
    report: dict[str, Any] = {
        "date": datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%d %H:%M UTC"), "cpus": os.cpu_count(),
        "loadavg": load, "pairs": args.pairs, "stacks": {}}
    print(f"{report['date']}, {os.cpu_count()} CPUs, load average {load[0]:.2f} {load[1]:.2f} {load[2]:.2f}")
    tmp = Path(tempfile.mkdtemp(prefix="plan-bench-"))
    stacks = [s for s in args.stacks.split(",") if s]
    if stacks:
        print(f"{'stack':<14}{'plan CPU s':>11}{'floor CPU s':>12}{'plan/floor CPU':>15}{'plan wall s':>12}"
              f"{'floor wall s':>13}{'plan/floor wall':>16}{'modules':>8}")
    for stack in stacks:
        cmd = plan_argv(stack, tmp / "out")
        modules = imported_pulumi_modules(cmd)
        s = summarize(pairs(cmd, floor_argv(modules), args.pairs))
        report["stacks"][stack] = {**s, "floorModules": len(modules)}
        print(f"{stack:<14}{s['aCpu']:>11.2f}{s['bCpu']:>12.2f}{s['cpuRatio']:>14.2f}x{s['aWall']:>12.2f}"
              f"{s['bWall']:>13.2f}{s['wallRatio']:>15.2f}x{len(modules):>8}", flush=True)
    workloads = [int(x) for x in args.workloads.split(",") if x]
    pools = [int(x) for x in args.pools.split(",") if x]
    if workloads and pools:
        print(f"synthetic existing stacks ({args.scaling_pairs} pairs per size):")
        sc = scaling(workloads, pools, args.scaling_pairs, tmp)
        report["scaling"] = sc
        print(f"{'workloads':>9} | " + " | ".join(f"{p:>2} pools CPU s" for p in pools))
        for w in workloads:
            print(f"{w:>9} | " + " | ".join(f"{sc['cells'][f'{w}x{p}']['cpu']:>13.2f}" for p in pools))
        print("per added workload (CPU, slope over the workload counts): " + ", ".join(
            f"{p} pools {sc['perWorkloadSeconds'][p] * 1000:.1f} ms" for p in pools))
        if sc["perPoolSeconds"]:
            print("per added pool (CPU, slope over the pool counts): " + ", ".join(
                f"{w} workloads {sc['perPoolSeconds'][w] * 1000:.1f} ms" for w in workloads))
    end = os.getloadavg()
    report["loadavgEnd"] = end
    print(f"load average at the end {end[0]:.2f} {end[1]:.2f} {end[2]:.2f}")
    if args.json:
        args.json.write_text(json.dumps(report, indent=1, default=str))
    return 0


if __name__ == "__main__":
    sys.exit(main())
