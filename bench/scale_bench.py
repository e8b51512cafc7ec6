"""Benchmark: how `multinode plan` scales with the stack's size: pools x nodes, workloads, gang size.

Every point is `python -m multinode plan <stack> --file <generated stack> --out <tmp>` in a fresh process, its CPU
time (user + system of the child, resource.getrusage RUSAGE_CHILDREN: the machine is shared, so CPU, not wall, is
the measure), the median of --repeat runs after one warm-up run (bytecode and parsed-schema caches).

The generated stacks are `existing` stacks (no cloud's node-group limits: those are checked by the cloud modules
and their tests) of EFA pools of p5.48xlarge, every workload a Volcano training job (torchrun, 8 GPUs per node):
  pools x nodes   P pools of N nodes, 16 two-node workloads
  workloads       W workloads (1..400) on 16 pools x 64 nodes, two nodes each
  gang            one gang of G nodes (2..256) on 4 pools x 256 nodes, beside 15 two-node workloads
  frontier        4,096 nodes (16 pools x 256), 400 workloads, one of them a 256-node gang (target: < 10 s CPU)
Each series gets a least-squares fit: the linear slope (CPU per added unit) and, for the workload and gang series,
a quadratic fit a + b x + c x^2 whose c says whether a superlinear term is left.

  --profile W   instead of the series: cProfile one in-process plan of the W-workload stack (16 pools x 64 nodes),
                the top functions by cumulative and by own time

  --baseline DIR another checkout (an older commit's `git archive`) planned alternately with this one at every
                point, each run a fresh process: the change's effect under the same load

Usage: python bench/scale_bench.py [--series pools,workloads,gang,frontier] [--repeat 3] [--json out.json]
                                   [--baseline DIR]
       python bench/scale_bench.py --profile 400
"""
from __future__ import annotations

import argparse
import datetime
import json
import os
import statistics
import sys
import tempfile
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "bench"))
import plan_bench  # noqa: E402  (the same fresh-process runner plan_bench.py measures with)

IMAGE = "public.ecr.aws/deep-learning-containers/pytorch-training:2.8.0-gpu-py312-cu129-ubuntu22.04-ec2"


def scale_stack(folder: Path, pools: int, nodes: int, workloads: int, gang: int = 2) -> Path:
    """An `existing` stack: `pools` EFA pools of `nodes` p5.48xlarge each and `workloads` Volcano training jobs
    spread over them round-robin, the first of `gang` nodes (on pool-0), the rest of two nodes."""
    import yaml
    pool_list = [{"name": f"pool-{i}", "machine": "p5.48xlarge", "nodeCount": nodes,
                  "nodeSelector": {"multinode.dev/node-pool": f"pool-{i}"}} for i in range(pools)]
    wl = [{"name": f"train-{j}", "kind": "volcano-training", "engine": "torchrun", "image": IMAGE,
           "nodePool": f"pool-{j % pools}", "nodes": gang if j == 0 else 2, "script": "/workspace/train.py"}
          for j in range(workloads)]
    doc = {"config": {
        "multinode:cloud": "existing", "multinode:cluster": {"name": "bench"},
        "multinode:kubeconfig": {"secure": "v1:YmVuY2g="}, "multinode:fabric": {"kind": "efa"},
        "multinode:nodePools": pool_list, "multinode:workloads": wl,
        "multinode:storage": {"kind": "existing", "existingClaim": "ckpt"},
    }}
    path = folder / f"Pulumi.scale-{pools}p{nodes}n-{workloads}w-{gang}g.yaml"
    path.write_text(yaml.safe_dump(doc))
    return path


def measure(path: Path, out: Path, repeat: int, baseline: Path | None = None) -> dict[str, Any]:
    """Median CPU and wall of `repeat` runs after a warm-up. `baseline`: another checkout (an older commit's
    `git archive`) whose plan of the same stack runs alternately with this one's (each its own warm-up and output
    folder, the order swapped every round), so load from other processes hits both alike; its runs and median
    are reported beside, with the CPU of every run."""
    name = path.stem.split(".", 1)[1]
    argv = plan_bench.plan_argv(name, out, path)
    plan_bench.run(argv)                                  # warm-up
    if baseline is None:
        alone = [plan_bench.run(argv) for _ in range(repeat)]
        return {"cpu": statistics.median(r["cpu"] for r in alone), "wall": statistics.median(r["wall"] for r in alone),
                "runs": [round(r["cpu"], 2) for r in alone]}
    old_argv = plan_bench.plan_argv(name, out.with_name(out.name + "-baseline"), path)
    plan_bench.run(old_argv, root=baseline)
    runs: list[dict[str, Any]] = []
    old: list[dict[str, Any]] = []
    for i in range(repeat):
        pair = [(runs, argv, plan_bench.ROOT), (old, old_argv, baseline)]
        for into, a, root in (pair if i % 2 == 0 else pair[::-1]):
            into.append(plan_bench.run(a, root=root))
    med = statistics.median
    return {"cpu": med(r["cpu"] for r in runs), "wall": med(r["wall"] for r in runs),
            "runs": [round(r["cpu"], 2) for r in runs], "baselineCpu": med(r["cpu"] for r in old),
            "baselineRuns": [round(r["cpu"], 2) for r in old]}


def fits(xs: list[float], ys: list[float]) -> dict[str, float]:
    """Linear slope, and the quadratic least-squares fit a + b x + c x^2 (c: the superlinear term), solved from
    the normal equations (Cramer's rule on the 3 x 3 system; no numpy in the environment)."""
    out = {"slope": plan_bench.slope(xs, ys)}
    if len(set(xs)) >= 3:
        s = [sum(x ** k for x in xs) for k in range(5)]
        t = [sum(y * x ** k for x, y in zip(xs, ys, strict=True)) for k in range(3)]
        m = [[s[0], s[1], s[2]], [s[1], s[2], s[3]], [s[2], s[3], s[4]]]

        def det(a: list[list[float]]) -> float:
            return (a[0][0] * (a[1][1] * a[2][2] - a[1][2] * a[2][1])
                    - a[0][1] * (a[1][0] * a[2][2] - a[1][2] * a[2][0])
                    + a[0][2] * (a[1][0] * a[2][1] - a[1][1] * a[2][0]))
        d = det(m)
        coef = [det([[t[r] if c == i else m[r][c] for c in range(3)] for r in range(3)]) / d for i in range(3)]
        out.update({"a": coef[0], "b": coef[1], "c": coef[2]})
    return out


SERIES: dict[str, list[tuple[str, dict[str, int]]]] = {
    "pools": [(f"{p}x{n}", {"pools": p, "nodes": n, "workloads": 16, "gang": 2})
              for p, n in ((1, 64), (4, 64), (16, 64), (16, 256), (64, 64))],
    "workloads": [(str(w), {"pools": 16, "nodes": 64, "workloads": w, "gang": 2}) for w in (1, 50, 100, 200, 400)],
    "gang": [(str(g), {"pools": 4, "nodes": 256, "workloads": 16, "gang": g}) for g in (2, 16, 64, 128, 256)],
    "frontier": [("4096 nodes, 400 workloads, 256-node gang",
                  {"pools": 16, "nodes": 256, "workloads": 400, "gang": 256})],
}
X: dict[str, Any] = {"pools": lambda s: s["pools"] * s["nodes"], "workloads": lambda s: s["workloads"],
                     "gang": lambda s: s["gang"]}


def profile(workloads: int, tmp: Path, top: int) -> None:
    import contextlib
    import cProfile
    import io
    import pstats
    sys.path.insert(0, str(ROOT))
    from multinode import plan as mplan
    path = scale_stack(tmp, 16, 64, workloads)
    name = path.stem.split(".", 1)[1]
    with contextlib.redirect_stderr(io.StringIO()):
        mplan.plan(name, tmp / "warm", path)
    prof = cProfile.Profile()
    with contextlib.redirect_stderr(io.StringIO()):
        prof.enable()
        mplan.plan(name, tmp / "out", path)
        prof.disable()
    for key in ("cumulative", "tottime"):
        pstats.Stats(prof).sort_stats(key).print_stats(top)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    ap.add_argument("--series", default="pools,workloads,gang,frontier")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--profile", type=int, help="cProfile one plan of this many workloads instead")
    ap.add_argument("--top", type=int, default=40)
    ap.add_argument("--json", type=Path)
    ap.add_argument("--baseline", type=Path, help="another checkout (e.g. `git archive` of an older commit) whose "
                                                  "plans run alternately with this one's at every point")
    args = ap.parse_args(argv)
    tmp = Path(tempfile.mkdtemp(prefix="scale-bench-"))
    if args.profile:
        profile(args.profile, tmp, args.top)
        return 0
    load = os.getloadavg()
    report: dict[str, Any] = {"date": datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%d %H:%M UTC"),
                              "cpus": os.cpu_count(), "loadavg": load, "repeat": args.repeat, "series": {},
                              "baseline": str(args.baseline) if args.baseline else None}
    print(f"{report['date']}, {os.cpu_count()} CPUs, load average {load[0]:.2f} {load[1]:.2f} {load[2]:.2f}")
    for series in [s for s in args.series.split(",") if s]:
        rows: list[dict[str, Any]] = []
        for label, size in SERIES[series]:
            m = measure(scale_stack(tmp, **size), tmp / "out", args.repeat, args.baseline)
            rows.append({"label": label, **size, **m})
            old = (f"; baseline {m['baselineCpu']:6.2f} s CPU (runs {m['baselineRuns']})"
                   if "baselineCpu" in m else "")
            print(f"  {series:<10}{label:<42} plan {m['cpu']:6.2f} s CPU ({m['wall']:6.2f} s wall, runs {m['runs']})"
                  f"{old}", flush=True)
        entry: dict[str, Any] = {"rows": rows}
        if series in X and len(rows) > 1:
            xs = [float(X[series](r)) for r in rows]
            entry["fit"] = f = fits(xs, [r["cpu"] for r in rows])
            unit = {"pools": "node", "workloads": "workload", "gang": "gang node"}[series]
            quad = f" quadratic c = {f['c'] * 1000:+.5f} ms/{unit}^2" if "c" in f else ""
            print(f"  {series}: {f['slope'] * 1000:.2f} ms CPU per added {unit};{quad}", flush=True)
        report["series"][series] = entry
    end = os.getloadavg()
    report["loadavgEnd"] = end
    print(f"load average at the end {end[0]:.2f} {end[1]:.2f} {end[2]:.2f}")
    if args.json:
        args.json.write_text(json.dumps(report, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
