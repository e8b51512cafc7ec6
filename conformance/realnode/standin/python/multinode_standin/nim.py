"""Stand-in for a NIM container's own entrypoint in multi-node mode (NIM_MULTI_NODE=1) on a LeaderWorkerSet.

What NIM's published material says a multi-node start reads (and all that is reproduced here): the role from
NIM_LEADER_ROLE (1 leader, 0 worker), the node's rank from NIM_NODE_RANK (leader 0, workers 1..N), the leader's
address (NIM_LEADER_IP_ADDRESS, or LWS_LEADER_ADDRESS that LWS injects), the node count NIM_NUM_COMPUTE_NODES, the
API port NIM_SERVER_PORT; the leader serves the API and /v1/health/ready once the workers are there.
(docs.nvidia.com/nim/large-language-models/latest/deployment/multi-node-deployment.html; NVIDIA/k8s-nim-operator
api/apps/v1alpha1/nimservice_types.go GetLWSLeaderEnv/GetLWSWorkerEnv.) How NIM forms its cluster (MPI over ssh
in 1.x, Ray in 2.x) is inside the image and not reproduced: the stand-in's workers open a TCP connection to the
leader's address on a port of the stand-in's own (RDZV_PORT), the leader counts them. It says so in its output."""
from __future__ import annotations

import json
import os
import socket
import sys
import threading
import time

from multinode_standin.gang import block, say, serve, verdict

RDZV_PORT = 29399   # the stand-in's own rendezvous port (not NIM's)


def leader(nodes: int, port: int, limit: float) -> int:
    joined: dict[int, str] = {}
    lock = threading.Lock()
    srv = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    srv.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    srv.bind(("0.0.0.0", RDZV_PORT))
    srv.listen(64)
    conns = []

    def accept() -> None:
        while True:
            c, addr = srv.accept()
            try:
                hello = json.loads(c.makefile().readline() or "{}")
            except ValueError:
                hello = {}
            with lock:
                joined[int(hello.get("rank", -1))] = f"{hello.get('host', '?')} ({addr[0]})"
            conns.append(c)   # kept open: a worker that goes away is seen by its own side
            say(f"NIM leader: worker rank {hello.get('rank')} from {hello.get('host')} at {addr[0]} joined")

    threading.Thread(target=accept, daemon=True).start()
    say(f"NIM leader (NIM_LEADER_ROLE=1, rank 0): waiting for {nodes - 1} workers on the stand-in's rendezvous "
        f"port {RDZV_PORT} (NIM's own cluster start is not reproduced)")
    t0 = time.monotonic()
    while time.monotonic() - t0 < limit:
        with lock:
            if len(joined) >= nodes - 1:
                break
        time.sleep(1)
    with lock:
        ranks = sorted(joined)
    want = list(range(1, nodes))
    missing = [r for r in want if r not in ranks]
    formed = not missing and len(ranks) == nodes - 1
    verdict("nim-lws", formed=formed, world_size=1 + len(ranks), expected=nodes, members=["0 (leader)"] +
            [f"{r} {joined[r]}" for r in ranks], missing=missing, secondsWaited=round(time.monotonic() - t0, 1))
    if not formed:
        return 1
    serve(port, "NIM leader")
    block()
    return 0


def worker(rank: int, limit: float) -> int:
    addr = os.environ.get("NIM_LEADER_IP_ADDRESS") or os.environ.get("LWS_LEADER_ADDRESS") or ""
    say(f"NIM worker (NIM_LEADER_ROLE=0, rank {rank}): joining the leader at {addr!r} on the stand-in's "
        f"rendezvous port {RDZV_PORT}")
    t0, last = time.monotonic(), ""
    while time.monotonic() - t0 < limit:
        try:
            c = socket.create_connection((addr, RDZV_PORT), timeout=5)
            c.sendall((json.dumps({"rank": rank, "host": socket.gethostname()}) + "\n").encode())
            say(f"NIM worker rank {rank}: joined the leader at {addr}")
            block()
        except OSError as e:
            if str(e) != last:
                say(f"NIM worker rank {rank}: leader {addr!r} not reached yet ({e})")
                last = str(e)
            time.sleep(2)
    say(f"NIM worker rank {rank}: the leader at {addr!r} was not reached within {limit:.0f}s")
    return 1


def main() -> int:
    env = os.environ
    nodes = int(env.get("NIM_NUM_COMPUTE_NODES") or env.get("LWS_GROUP_SIZE") or 1)
    limit = float(env.get("MULTINODE_STANDIN_GANG_WAIT") or 300)
    role = env.get("NIM_LEADER_ROLE", "")
    rank = int(env.get("NIM_NODE_RANK") or env.get("LWS_WORKER_INDEX") or (0 if role == "1" else -1))
    say(f"NIM stand-in for {env.get('MULTINODE_STANDIN_IMAGE', '?')}: NIM_MULTI_NODE={env.get('NIM_MULTI_NODE')} "
        f"NIM_LEADER_ROLE={role} rank {rank} of NIM_NUM_COMPUTE_NODES={nodes}, "
        f"TP {env.get('NIM_TENSOR_PARALLEL_SIZE')} x PP {env.get('NIM_PIPELINE_PARALLEL_SIZE')}; no GPU, no model")
    if role == "1":
        return leader(nodes, int(env.get("NIM_SERVER_PORT") or 8000), limit)
    return worker(rank, limit)


if __name__ == "__main__":
    sys.exit(main())
