#!/bin/sh
# Stand-in for the NIM image's MPI start script (nim-mpijob's launcher runs it on every slot through the real
# mpirun): real MPI (multinode_standin.mpi_rank), then rank 0 answers the probes on NIM_SERVER_PORT. No model.
exec python3 -m multinode_standin.mpi_rank /opt/nim/start-mpi-cluster.sh --serve-port-env NIM_SERVER_PORT
