#!/bin/sh
# Stand-in for GPUDirect-TCPXO's receive-datapath manager (RxDM) entrypoint, the tcpxo-daemon sidecar gcp-dev's
# fabric policy adds (image tcpgpudmarxd-dev; GKE's docs run `/fts/entrypoint_rxdm_container.sh --num_hops=2 ...`
# and probe it with `cat /run/health-check`: cloud.google.com/kubernetes-engine/docs/how-to/gpu-bandwidth-gpudirect-tcpx).
# The box has no GPU and no TCPXO NIC: no datapath is set up. It writes the health-check file the startup probe
# reads, says so, and stays up as the sidecar would.
echo "multinode box stand-in RxDM $*: no GPU, no TCPXO NIC here: no receive datapath set up"
f=${HEALTH_CHECK_LOG_FILE:-/run/health-check}
mkdir -p "$(dirname "$f")"
echo "multinode box stand-in: RxDM not run (no hardware)" >"$f"
trap 'exit 0' TERM INT
while :; do sleep 3600 & wait $!; done
