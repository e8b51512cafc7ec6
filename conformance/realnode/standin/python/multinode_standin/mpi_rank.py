"""The rank program of the MPIJob gangs in the box: run by the REAL mpirun (Debian bookworm's Open MPI 4.1) on
every slot, through the operator's hostfile and ssh keys, in place of the image's own program (NIM's
/opt/nim/start-mpi-cluster.sh, nccl-tests' alltoall_perf). Real MPI through mpi4py (Debian's python3-mpi4py):
MPI_Init, an allreduce of 1 from every rank (so every rank reached every other through Open MPI's wire-up), a gather
of each rank's host name; rank 0 prints the verdict line with the world size and the ranks per host.

Usage: python3 -m multinode_standin.mpi_rank WHAT [--serve-port-env VAR]  (WHAT names the program stood in for;
with --serve-port-env, rank 0 then serves that env var's port and every rank stays up, as a server would)."""
from __future__ import annotations

import os
import socket
import sys
import time

from multinode_standin.gang import block, say, serve, verdict


def main(argv: list[str]) -> int:
    what = argv[0] if argv else "rank program"
    port_env = argv[argv.index("--serve-port-env") + 1] if "--serve-port-env" in argv else ""
    t0 = time.monotonic()
    from mpi4py import MPI  # MPI_Init happens on import
    comm = MPI.COMM_WORLD
    rank, size = comm.Get_rank(), comm.Get_size()
    total = comm.allreduce(1, op=MPI.SUM)
    hosts = comm.gather(socket.gethostname(), root=0)
    if rank == 0:
        per_host: dict[str, int] = {}
        for h in hosts or []:
            per_host[h] = per_host.get(h, 0) + 1
        say(f"{what}: real MPI ({MPI.Get_library_version().splitlines()[0].strip()}), {size} ranks, allreduce "
            f"sum {total}; the program itself is not run (no GPU)")
        verdict("mpi", formed=total == size, world_size=total, expected=size, ranksPerHost=per_host,
                program=what, secondsInRank=round(time.monotonic() - t0, 2))
    comm.Barrier()
    if not port_env:
        # A benchmark's run (alltoall_perf, tf_cnn_benchmarks) lasts minutes on the real machine; the rank program
        # takes seconds, and once the launcher ends the MPI operator removes the workers and the PodGroup
        # (cleanPodPolicy Running; kubeflow/mpi-operator@v0.8.0 pkg/controller/mpi_job_controller.go:737-748
        # cleanUpWorkerPods, deletePodGroups) before the box has read the running gang. The ranks stay up for a
        # bounded time, as the run would, and say so.
        hold = float(os.environ.get("MULTINODE_BOX_RANK_HOLD_S") or 120)
        if rank == 0 and hold > 0:
            say(f"{what}: the ranks stay up {hold:.0f}s, as the program's run would, then end (box only)")
        time.sleep(hold)
        return 0
    if rank == 0:
        serve(int(os.environ.get(port_env) or 8000), what)
    block()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
