"""Benchmark: wall time and peak RSS of `plan` per example stack, against two references.

  floor     a process that imports only the Pulumi SDK modules that stack's plan imports
            (pulumi, pulumi_kubernetes.*, and that one cloud's SDK submodules), and nothing else
  all-SDKs  a process that imports all four cloud SDK packages
  synthetic a generated stack with 8 pools and 40 workloads, to show the cost per added workload
  placement the share of `plan` the placement simulation takes on that stack (in process, after one plan:
            multinode.placement.for_stack; `plan` runs it twice, once for placement.json and once in the
            policy rule stack-fits-node-pools)

Each number is the median of --runs fresh processes (cold start, as a user or CI runs `plan`),
after one warm-up run so bytecode caches exist. Prints plan/floor ratios (target <= 1.5x).
Usage: python bench/plan_bench.py [--runs 5] [--stacks aws-dev,...] [--json out.json]
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

CLOUD_SDKS = {"aws": "pulumi_aws", "azure": "pulumi_azure_native", "gcp": "pulumi_gcp", "oci": "pulumi_oci"}

# Runs a snippet, then prints wall seconds (measured inside, from interpreter start) and peak RSS.
WRAPPER = """
import time, resource, sys
t0 = time.perf_counter()
sys.path.insert(0, {root!r})
{body}
rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
print("BENCH", time.perf_counter() - t0, rss)
"""

PLAN_BODY = """
from multinode import plan
r = plan.plan({stack!r}, None, {path!r})
assert r.exit_code in (0, 1), r.error
"""

MODULES_BODY = PLAN_BODY + """
import json
print("MODULES", json.dumps(sorted(m for m in sys.modules if m.startswith(("pulumi", "google.protobuf", "grpc")))))
"""


PLACEMENT_BODY = PLAN_BODY + """
from multinode import placement
t1 = time.perf_counter()
res = placement.for_stack(r.config, r.k8s_objects)
print("PLACEMENT", time.perf_counter() - t1, len(res.services) + len(res.batch), res.fits)
"""


def placement_share(path: Path, stack: str, runs: int):
    """(median seconds of one placement simulation, gangs placed, fits) on a planned stack."""
    samples = []
    for _ in range(runs):
        out = run_once(PLACEMENT_BODY.format(stack=stack, path=str(path)))[3]
        line = [ln for ln in out.splitlines() if ln.startswith("PLACEMENT ")][-1].split()
        samples.append((float(line[1]), int(line[2]), line[3] == "True"))
    return statistics.median(s[0] for s in samples), samples[0][1], samples[0][2]


def _env():
    env = dict(os.environ)
    env.pop("PYTHONDONTWRITEBYTECODE", None)   # measure with bytecode caches, as users run it
    return env


def run_once(body: str):
    """(wall seconds including interpreter start, in-process seconds, peak RSS MiB, stdout)."""
    import time
    code = WRAPPER.format(root=str(ROOT), body=body)
    t0 = time.perf_counter()
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=_env(), cwd=ROOT)
    wall = time.perf_counter() - t0
    if proc.returncode != 0:
        raise RuntimeError(proc.stderr[-3000:])
    line = [ln for ln in proc.stdout.splitlines() if ln.startswith("BENCH ")][-1].split()
    return wall, float(line[1]), int(line[2]) / 1024.0, proc.stdout


def measure(body: str, runs: int):
    run_once(body)  # warm-up: bytecode caches
    samples = [run_once(body) for _ in range(runs)]
    return statistics.median(s[0] for s in samples), max(s[2] for s in samples)


def modules_of_plan(stack: str, path=None):
    out = run_once(MODULES_BODY.format(stack=stack, path=str(path) if path else None))[3]
    line = [ln for ln in out.splitlines() if ln.startswith("MODULES ")][-1]
    return json.loads(line[len("MODULES "):])


def floor_body(modules):
    """Import exactly the Pulumi SDK modules (leaf-most) the plan imported."""
    keep = [m for m in modules if m.startswith("pulumi") and not m.startswith("pulumi_policy")]
    return "\n".join(f"import {m}" for m in keep) or "pass"


def synthetic_stack(workloads: int, pools: int = 8) -> Path:
    """An `existing` stack with `pools` pools and `workloads` LWS inference workloads (2 nodes each), with
    pools just large enough that every workload fits at once (the placement check accepts it)."""
    import yaml
    per_pool = -(-workloads // pools)
    pool_list = [{"name": f"pool-{i}", "machine": "p5.48xlarge", "nodeCount": max(4, 2 * per_pool),
                  "nodeSelector": {"multinode.dev/node-pool": f"pool-{i}"}} for i in range(pools)]
    wl = [{"name": f"llm-{j}", "kind": "lws-inference", "engine": "vllm",
           "model": "meta-llama/Llama-3.1-70B-Instruct", "image": "vllm/vllm-openai:v0.11.0",
           "nodePool": f"pool-{j % pools}", "nodes": 2, "tensorParallel": 8, "pipelineParallel": 2}
          for j in range(workloads)]
    doc = {"config": {
        "multinode:cloud": "existing", "multinode:cluster": {"name": "bench"},
        "multinode:kubeconfig": {"secure": "v1:YmVuY2g="}, "multinode:fabric": {"kind": "efa"},
        "multinode:nodePools": pool_list, "multinode:workloads": wl,
        "multinode:storage": {"kind": "existing", "existingStorageClass": "rwx", "sizeGib": 1024},
    }}
    path = Path(tempfile.mkdtemp()) / f"Pulumi.synthetic-{workloads}.yaml"
    path.write_text(yaml.safe_dump(doc))
    return path


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--stacks", default="aws-dev,azure-dev,gcp-dev,oci-dev,existing-dev")
    ap.add_argument("--json", type=Path)
    args = ap.parse_args(argv)

    report = {"runs": args.runs, "stacks": {}, "synthetic": {}}
    # "All four SDKs" = what an eager registry would import: the union of every example stack's
    # Pulumi modules (the SDK packages' roots are lazy, so importing only them would measure nothing).
    every = sorted({m for s in ("aws-dev", "azure-dev", "gcp-dev", "oci-dev", "existing-dev")
                    for m in modules_of_plan(s)})
    all_body = floor_body(every) + "\n" + "\n".join(f"import {m}" for m in CLOUD_SDKS.values())
    all_t, all_rss = measure(all_body, args.runs)
    report["allSdks"] = {"seconds": all_t, "peakRssMiB": all_rss}
    print(f"{'stack':<14}{'plan s':>8}{'floor s':>9}{'plan/floor':>11}{'all-SDKs/plan':>14}"
          f"{'plan MiB':>10}{'floor MiB':>10}")
    for stack in args.stacks.split(","):
        body = PLAN_BODY.format(stack=stack, path=None)
        plan_t, plan_rss = measure(body, args.runs)
        floor_t, floor_rss = measure(floor_body(modules_of_plan(stack)), args.runs)
        report["stacks"][stack] = {"plan": plan_t, "floor": floor_t, "ratio": plan_t / floor_t,
                                   "planRssMiB": plan_rss, "floorRssMiB": floor_rss}
        print(f"{stack:<14}{plan_t:>8.2f}{floor_t:>9.2f}{plan_t / floor_t:>10.2f}x{all_t / plan_t:>13.2f}x"
              f"{plan_rss:>10.0f}{floor_rss:>10.0f}")
    print(f"all four cloud SDKs imported: {all_t:.2f} s, {all_rss:.0f} MiB")

    small, big = synthetic_stack(1), synthetic_stack(40)
    t1, r1 = measure(PLAN_BODY.format(stack="synthetic-1", path=str(small)), args.runs)
    t40, r40 = measure(PLAN_BODY.format(stack="synthetic-40", path=str(big)), args.runs)
    per = (t40 - t1) / 39
    share, gangs, fits = placement_share(big, "synthetic-40", args.runs)
    report["synthetic"] = {"pools": 8, "oneWorkload": t1, "fortyWorkloads": t40, "perWorkload": per,
                           "rss40MiB": r40, "placementSeconds": share, "placementShareOfPlan": 2 * share / t40}
    print(f"synthetic 8 pools: 1 workload {t1:.2f} s, 40 workloads {t40:.2f} s "
          f"-> {per * 1000:.1f} ms per added workload (peak {r40:.0f} MiB)")
    print(f"placement on synthetic-40: {share * 1000:.0f} ms per simulation ({gangs} gangs, fits {fits}); plan runs "
          f"it twice = {2 * share / t40:.1%} of plan")
    if args.json:
        args.json.write_text(json.dumps(report, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
