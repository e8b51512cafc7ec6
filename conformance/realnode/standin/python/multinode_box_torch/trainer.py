"""The box's stand-in for a training script (the launcher is the real torch.distributed.run; multinode_box_torch
puts this file where the script the image lacks was named). Joins the process group (gloo), checks what the
launcher gave this process against the rendered flags (--nnodes x --nproc_per_node, as the launcher read them:
MULTINODE_BOX_NNODES, MULTINODE_BOX_NPROC), all-reduces its rank + 1 and checks the sum, prints one line
MULTINODE_BOX_TRAIN {...} and exits 0 (1 when a check failed). The script's own arguments are printed, not used."""
import json
import os
import sys

import torch
import torch.distributed as dist

env = os.environ
rank, world = int(env["RANK"]), int(env["WORLD_SIZE"])
local, local_world, group = int(env["LOCAL_RANK"]), int(env["LOCAL_WORLD_SIZE"]), int(env["GROUP_RANK"])
nnodes, nproc = int(env.get("MULTINODE_BOX_NNODES", 0)), int(env.get("MULTINODE_BOX_NPROC", 0))
dist.init_process_group("gloo")
problems = []
if dist.get_rank() != rank or dist.get_world_size() != world:
    problems.append(f"process group says rank {dist.get_rank()} of {dist.get_world_size()}, env {rank} of {world}")
if world != nnodes * nproc:
    problems.append(f"WORLD_SIZE {world} != --nnodes {nnodes} x --nproc_per_node {nproc}")
if local_world != nproc or not 0 <= local < nproc:
    problems.append(f"LOCAL_RANK {local} / LOCAL_WORLD_SIZE {local_world} for --nproc_per_node {nproc}")
if rank != group * nproc + local:
    problems.append(f"RANK {rank} != GROUP_RANK {group} x {nproc} + LOCAL_RANK {local}")
x = torch.tensor([float(rank + 1)])
dist.all_reduce(x)
want = world * (world + 1) / 2
if x.item() != want:
    problems.append(f"all_reduce of rank+1 gave {x.item()}, not {want}")
print("MULTINODE_BOX_TRAIN " + json.dumps({
    "rank": rank, "worldSize": world, "localRank": local, "groupRank": group, "nnodes": nnodes, "nproc": nproc,
    "allReduce": x.item(), "ok": not problems, "problems": problems, "scriptArgs": sys.argv[1:]}), flush=True)
dist.destroy_process_group()
sys.exit(1 if problems else 0)
