"""Stand-in for `python3 -m torch.distributed.run` (torchrun) in the box: no GPU, no NCCL, so the script it is
given is not run. Prints its command line and whether the rendezvous host resolves, and exits 0."""
import socket
import sys

args = sys.argv[1:]
print("multinode box stand-in torch.distributed.run " + " ".join(args) + ": the script is not run (no GPU, no NCCL)",
      flush=True)
for a in args:
    for flag in ("--rdzv_endpoint=", "--rdzv-endpoint=", "--master_addr=", "--master-addr="):
        if a.startswith(flag):
            host = a[len(flag):].rsplit(":", 1)[0]
            try:
                print(f"stand-in: rendezvous host {host} resolves to {socket.gethostbyname(host)}", flush=True)
            except OSError as e:
                print(f"stand-in: rendezvous host {host} does not resolve ({e})", flush=True)
