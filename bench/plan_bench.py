"""Benchmark: the `plan` command users run against its import floor and the SDK's own cost, and how plan scales.

  plan      `python -m multinode plan <stack> --out <tmp>` in a fresh process: the command users run,
            writing build/<stack>/ and printing its summary (captured here)
  floor     a fresh process that imports exactly the Pulumi modules that command imports, read from
            `python -X importtime -m multinode plan <stack> ...` (modules actually executed, so lazy
            placeholders the plan never ran are not counted) and nothing else: the cost no plan can avoid
  sdk       bench/sdk_replay.py: the floor's imports, then the very registrations the plan made (full inputs,
            from an in-process plan) registered as generic Pulumi resources under Pulumi's own mocks, with no
            project code: what the SDK and its mock engine cost for this stack (a lower bound: the typed
            pulumi_kubernetes / cloud classes the program uses do more per input). plan - sdk is the
            project's own cost.
  scaling   the same command on generated `existing` stacks with 1, 10, 40, 160, 640 workloads x 1, 8, 32
            pools, with the CPU cost per added workload (at each pool count) and per added pool (at each
            workload count): a per-pool slope that grows with the workload count is a workload x pool term.
            The sdk replay of each size gives the SDK's own cost per added workload beside it, and the
            ratio of the two slopes (issue 47: <= 2 at 1, 16 and 64 pools: --pools 1,16,64).

Every measurement is a group of fresh processes run back to back (plan, floor, sdk; or the next size then the
smallest), rotating which goes first, so load from other processes on the machine hits every member of a group
alike; ratios are taken per group and the median over groups is reported. CPU time is user + system of the
child (resource.getrusage RUSAGE_CHILDREN), wall time includes interpreter start. The floor and the replay set
the plan command's garbage-collector thresholds (multinode/gcpolicy.py) first, so all three run alike, and
freeze what they imported before each next import (the plan freezes before and after its program run,
gcpolicy.settle: freezing more often makes the floor's collections cheaper, never dearer). One
warm-up run of each first so bytecode caches (and the parsed-schema cache, multinode/schemafiles.py) exist.

  critical  each stack's deploy critical path (multinode/deploy_path.py): the recorded and the needed chain,
            weighted by assumed creation times (computed, not timed)

Usage: python bench/plan_bench.py [--pairs 7] [--stacks aws-dev,...] [--workloads 1,10,40,160,640]
                                  [--pools 1,8,32] [--scaling-pairs 3] [--critical-paths aws-dev,...,fleet-dev]
                                  [--json out.json]
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
RATIO_TARGET = 2.0      # issue 47: +1 workload <= 2x the SDK's own registrations of it


def _env(root: Path = ROOT) -> dict[str, str]:
    env = dict(os.environ)
    env.pop("PYTHONDONTWRITEBYTECODE", None)   # measure with bytecode caches, as users run it
    env["PYTHONPATH"] = str(root) + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    return env


def run(argv: list[str], ok: tuple[int, ...] = (0,), root: Path = ROOT) -> dict[str, Any]:
    """One fresh process: {"cpu": user+sys seconds, "wall": seconds, "stderr": text}. `root`: the checkout whose
    code runs (default this one; another, e.g. an older commit's `git archive`, to compare)."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    proc = subprocess.run([sys.executable, *argv], capture_output=True, text=True, env=_env(root), cwd=root)
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
    # the command's garbage-collector thresholds first (multinode/gcpolicy.py), as `multinode plan` sets them,
    # and what is imported frozen before each next import: plan freezes twice (gcpolicy.settle), so its imports
    # during the run do not walk the earlier ones; frozen before every import, the floor's collections walk
    # even less, so this floor is at or below the least any process importing these modules can cost
    return ["-c", "import gc\nfrom multinode import gcpolicy\ngcpolicy.for_batch()\nimport importlib\n"
                  f"for m in {modules!r}:\n    gc.freeze()\n    importlib.import_module(m)"]


def groups(cmds: list[list[str]], n: int, oks: list[tuple[int, ...]] | None = None) -> list[list[dict]]:
    """n interleaved measurements of every command; group i starts at command i mod len(cmds) (so each goes
    first, second, ... equally often). One warm-up run of each first: bytecode caches, page cache."""
    oks = oks or [(0,)] * len(cmds)
    for c, ok in zip(cmds, oks, strict=True):
        run(c, ok)
    out = []
    for i in range(n):
        got: dict[int, dict] = {}
        for j in range(len(cmds)):
            k = (i + j) % len(cmds)
            got[k] = run(cmds[k], oks[k])
        out.append([got[k] for k in range(len(cmds))])
    return out


def program_registrations(registrations: list[Any]) -> list[dict[str, Any]]:
    """What the program itself registers, as sdk_replay.py reads it: every recorded registration but the
    resources a provider constructs (a yaml/v2 ConfigGroup's objects, recorded by the plan but registered by the
    kubernetes provider at deploy time), each with the mock state plan's mock answers with (identityOutputs:
    identity only for custom resources)."""
    from multinode.recording import CONFIG_GROUP, identity_only_outputs
    groups = {r.urn for r in registrations if r.type == CONFIG_GROUP}
    return [{**r.as_dict(), "identityOutputs": identity_only_outputs(r.type)}
            for r in registrations if r.parent not in groups]


def replay_argv(stack: str, modules: list[str], tmp: Path, file: Path | None = None) -> list[str]:
    """bench/sdk_replay.py for this stack: its registrations (from an in-process plan, full inputs) and the
    floor's module list written to files under tmp."""
    if str(ROOT) not in sys.path:
        sys.path.insert(0, str(ROOT))
    import contextlib
    import io

    from multinode import plan as mplan
    with contextlib.redirect_stderr(io.StringIO()):      # the stack's warnings: the plan runs print them
        result = mplan.plan(stack, None, file)
    if result.exit_code not in (0, 1):
        raise RuntimeError(f"plan {stack}: exit {result.exit_code}: {result.error}")
    regs, mods = tmp / f"{stack}.registrations.json", tmp / f"{stack}.modules.json"
    regs.write_text(json.dumps(program_registrations(result.registrations)))
    mods.write_text(json.dumps(modules))
    return [str(ROOT / "bench" / "sdk_replay.py"), str(mods), str(regs)]


def stack_row(gs: list[list[dict]]) -> dict[str, float]:
    """Medians over (plan, floor, sdk) groups: CPU and wall of each, and the per-group CPU ratios."""
    med = statistics.median
    return {"planCpu": med(g[0]["cpu"] for g in gs), "floorCpu": med(g[1]["cpu"] for g in gs),
            "sdkCpu": med(g[2]["cpu"] for g in gs), "planWall": med(g[0]["wall"] for g in gs),
            "floorWall": med(g[1]["wall"] for g in gs), "sdkWall": med(g[2]["wall"] for g in gs),
            "planFloorCpu": med(g[0]["cpu"] / g[1]["cpu"] for g in gs),
            "sdkFloorCpu": med(g[2]["cpu"] / g[1]["cpu"] for g in gs),
            "planSdkCpu": med(g[0]["cpu"] / g[2]["cpu"] for g in gs),
            "projectCpu": med(g[0]["cpu"] - g[2]["cpu"] for g in gs),
            "planFloorWall": med(g[0]["wall"] / g[1]["wall"] for g in gs)}


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
    """CPU of plan and of its SDK replay at each (workloads, pools), each the median of n groups with the
    smallest stack of the same pool count (interleaved, so each size's cost above the base is measured against
    a neighbour in time)."""
    cells: dict[tuple[int, int], dict[str, float]] = {}
    med = statistics.median
    for p in pools:
        base_w = min(workloads)
        base = synthetic_stack(base_w, p, tmp)
        base_name = base.stem.split(".", 1)[1]
        base_argv = plan_argv(base_name, tmp / "out", base)
        modules = imported_pulumi_modules(base_argv)
        base_sdk = replay_argv(base_name, modules, tmp, base)
        for w in workloads:
            stack = synthetic_stack(w, p, tmp)
            name = stack.stem.split(".", 1)[1]
            argv = plan_argv(name, tmp / "out", stack)
            if w == base_w:
                gs = groups([argv, base_sdk], n)
                cells[(w, p)] = {"cpu": med(g[0]["cpu"] for g in gs), "wall": med(g[0]["wall"] for g in gs),
                                 "sdkCpu": med(g[1]["cpu"] for g in gs), "aboveBase": 0.0, "sdkAboveBase": 0.0}
            else:
                gs = groups([argv, base_argv, replay_argv(name, modules, tmp, stack), base_sdk], n)
                cells[(w, p)] = {"cpu": med(g[0]["cpu"] for g in gs), "wall": med(g[0]["wall"] for g in gs),
                                 "sdkCpu": med(g[2]["cpu"] for g in gs),
                                 "aboveBase": med(g[0]["cpu"] - g[1]["cpu"] for g in gs),
                                 "sdkAboveBase": med(g[2]["cpu"] - g[3]["cpu"] for g in gs)}
            c = cells[(w, p)]
            print(f"  {w:>4} workloads x {p:>2} pools: plan {c['cpu']:.2f} s CPU ({c['wall']:.2f} s wall), "
                  f"sdk replay {c['sdkCpu']:.2f} s CPU", flush=True)
    per_workload = {p: slope(workloads, [cells[(w, p)]["aboveBase"] for w in workloads]) for p in pools}
    sdk_per_workload = {p: slope(workloads, [cells[(w, p)]["sdkAboveBase"] for w in workloads]) for p in pools}
    per_pool = {w: slope(pools, [cells[(w, p)]["cpu"] for p in pools]) for w in workloads} if len(pools) > 1 else {}
    # issue 47's target: an added workload costs the plan at most RATIO_TARGET x what the SDK alone spends on
    # the same added registrations (plan's slope over the SDK replay's slope, at each pool count)
    ratio = {p: per_workload[p] / sdk_per_workload[p] if sdk_per_workload[p] > 0 else float("nan") for p in pools}
    return {"cells": {f"{w}x{p}": c for (w, p), c in cells.items()}, "perWorkloadSeconds": per_workload,
            "sdkPerWorkloadSeconds": sdk_per_workload, "perWorkloadRatio": ratio, "perPoolSeconds": per_pool}


def critical_paths(stacks: list[str]) -> dict[str, dict[str, Any]]:
    """Each stack's deploy critical path as `plan` reports it (multinode/deploy_path.py, build/<stack>/
    critical-path.json): the longest chain the recorded dependencies force and the one the really needed
    dependencies force, weighted by the assumed creation times. Computed, not timed: the same on any machine."""
    if str(ROOT) not in sys.path:
        sys.path.insert(0, str(ROOT))
    import contextlib
    import io

    from multinode import plan as mplan
    out: dict[str, dict[str, Any]] = {}
    for stack in stacks:
        with contextlib.redirect_stderr(io.StringIO()):
            result = mplan.plan(stack, None)
        rep = result.deploy_path
        if rep is None:
            raise RuntimeError(f"plan {stack}: exit {result.exit_code}: {result.error}")
        out[stack] = {"recordedSeconds": rep.recorded.seconds, "recordedLength": len(rep.recorded.urns),
                      "neededSeconds": rep.needed.seconds, "neededLength": len(rep.needed.urns),
                      "ratio": round(rep.ratio, 4)}
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    ap.add_argument("--pairs", type=int, default=7, help="interleaved plan/floor/sdk groups per stack")
    ap.add_argument("--stacks", default=EXAMPLES, help="example stacks (comma-separated; '' for none)")
    ap.add_argument("--workloads", default="1,10,40,160,640", help="synthetic workload counts ('' for none)")
    ap.add_argument("--pools", default="1,8,32", help="synthetic pool counts")
    ap.add_argument("--scaling-pairs", type=int, default=3, help="groups per synthetic size")
    ap.add_argument("--critical-paths", default=EXAMPLES + ",fleet-dev",
                    help="stacks whose deploy critical paths to report ('' for none)")
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
        print(f"{'stack':<14}{'plan CPU s':>11}{'floor CPU s':>12}{'sdk CPU s':>10}{'plan/floor':>11}"
              f"{'sdk/floor':>10}{'plan/sdk':>9}{'plan-sdk s':>11}{'plan wall s':>12}{'floor wall s':>13}"
              f"{'modules':>8}")
    for stack in stacks:
        cmd = plan_argv(stack, tmp / "out")
        modules = imported_pulumi_modules(cmd)
        s = stack_row(groups([cmd, floor_argv(modules), replay_argv(stack, modules, tmp)], args.pairs))
        report["stacks"][stack] = {**s, "floorModules": len(modules)}
        print(f"{stack:<14}{s['planCpu']:>11.2f}{s['floorCpu']:>12.2f}{s['sdkCpu']:>10.2f}"
              f"{s['planFloorCpu']:>10.2f}x{s['sdkFloorCpu']:>9.2f}x{s['planSdkCpu']:>8.2f}x{s['projectCpu']:>11.2f}"
              f"{s['planWall']:>12.2f}{s['floorWall']:>13.2f}{len(modules):>8}", flush=True)
    cp_stacks = [s for s in args.critical_paths.split(",") if s]
    if cp_stacks:
        report["criticalPaths"] = cps = critical_paths(cp_stacks)
        print("deploy critical path (weighted by assumed creation times, multinode/deploy_path.py):")
        print(f"{'stack':<14}{'recorded s':>11}{'length':>7}{'needed s':>10}{'length':>7}{'ratio':>7}")
        for stack, c in cps.items():
            print(f"{stack:<14}{c['recordedSeconds']:>11.0f}{c['recordedLength']:>7}{c['neededSeconds']:>10.0f}"
                  f"{c['neededLength']:>7}{c['ratio']:>7.2f}", flush=True)
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
            f"{p} pools {sc['perWorkloadSeconds'][p] * 1000:.1f} ms (sdk replay "
            f"{sc['sdkPerWorkloadSeconds'][p] * 1000:.1f} ms)" for p in pools))
        print(f"per added workload, plan / SDK replay (target <= {RATIO_TARGET:g}): " + ", ".join(
            f"{p} pools {sc['perWorkloadRatio'][p]:.2f}x" for p in pools))
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
