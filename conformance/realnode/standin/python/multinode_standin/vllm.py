"""Stand-in for `vllm serve` (and `python3 -m vllm.entrypoints.openai.api_server`) in the box: no GPU, no model.
With `--distributed-executor-backend ray` (or tensor x pipeline parallel sizes wider than one node), it joins the
REAL Ray cluster the rendered command started (`ray.init(address="auto")`, Ray from PyPI in the image's Ray layer)
and checks that it holds the LeaderWorkerSet group's size in live nodes (LWS_GROUP_SIZE, set by LWS) before it
listens on the rendered --port and answers the probes. Prints the verdict line (gang.py)."""
from __future__ import annotations

import argparse
import os
import sys
import time

from multinode_standin.gang import block, say, serve, verdict


def parse(argv: list[str]) -> argparse.Namespace:
    ap = argparse.ArgumentParser(prog="vllm", add_help=False)
    ap.add_argument("cmd", nargs="?")
    ap.add_argument("model", nargs="?", default="")
    ap.add_argument("--model", dest="model_flag", default="")
    ap.add_argument("--host", default="0.0.0.0")
    ap.add_argument("--port", type=int, default=8000)
    ap.add_argument("--tensor-parallel-size", "-tp", type=int, default=1)
    ap.add_argument("--pipeline-parallel-size", "-pp", type=int, default=1)
    ap.add_argument("--distributed-executor-backend", default="")
    args, _ = ap.parse_known_args(argv)
    return args


def ray_nodes(limit: float, want: int) -> tuple[list[str], float]:
    import ray  # the Ray layer of the stand-in image (conformance/realnode/ray-layer.sh)
    ray.init(address="auto", logging_level="ERROR")
    t0 = time.monotonic()
    while True:
        alive = sorted(n["NodeManagerAddress"] for n in ray.nodes() if n.get("Alive"))
        if len(alive) >= want or time.monotonic() - t0 > limit:
            return alive, time.monotonic() - t0
        time.sleep(2)


def main(argv: list[str]) -> int:
    a = parse(argv)
    model = a.model or a.model_flag or "stand-in"
    say(f"vllm {' '.join(argv)}: no GPU, no model loaded")
    if a.distributed_executor_backend == "ray" or "LWS_GROUP_SIZE" in os.environ:
        want = int(os.environ.get("LWS_GROUP_SIZE") or 1)
        alive, waited = ray_nodes(float(os.environ.get("MULTINODE_STANDIN_GANG_WAIT") or 120), want)
        formed = len(alive) == want
        say(f"Ray cluster: {len(alive)} live nodes {alive}, the group's size (LWS_GROUP_SIZE) is {want}; "
            f"tensor x pipeline parallel {a.tensor_parallel_size} x {a.pipeline_parallel_size}")
        verdict("ray", formed=formed, world_size=len(alive), expected=want, members=alive,
                tensorParallel=a.tensor_parallel_size, pipelineParallel=a.pipeline_parallel_size,
                secondsWaited=round(waited, 1))
        if not formed:
            return 1
    serve(a.port, "vllm", model)
    block()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
