#!/bin/sh
# Stand-in for the GPUDirect-TCPXO NCCL plugin installer's entrypoint (image nccl-plugin-gpudirecttcpx-dev; gcp-dev's
# nccl-tcpxo-installer runs `/scripts/container_entry.sh install --install-nccl`, then copies /var/lib/tcpxo/lib64 to
# the node). The box has no GPU: no NCCL or plugin library is installed. It makes the folder the next command copies,
# with a note in it, and says so.
echo "multinode box stand-in TCPXO installer $*: no NCCL or TCPXO plugin installed (no GPU here)"
mkdir -p /var/lib/tcpxo/lib64
echo "multinode box stand-in: no library installed" >/var/lib/tcpxo/lib64/MULTINODE_BOX_STANDIN
