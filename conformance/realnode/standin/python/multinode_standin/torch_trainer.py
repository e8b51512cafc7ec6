"""The box's stand-in for a training script (the launcher is the real torch.distributed.run; torch_hooks puts this
file where the script the image lacks was named). Joins the process group (gloo): torch_hooks' init_process_group
checks the ranks against the rendered flags, all-reduces, and rank 0 prints the gang's verdict line. Then one line
per process, and exit 0 (1 when a rank of the gang found a problem). The script's own arguments are printed, not
used."""
import os
import sys

import torch.distributed as dist

from multinode_standin import torch_hooks

dist.init_process_group("gloo")
rank, world = dist.get_rank(), dist.get_world_size()
dist.barrier()
dist.destroy_process_group()
problems = torch_hooks.PROBLEMS
torch_hooks.say(f"trainer stand-in: rank {rank} of {world} (GROUP_RANK {os.environ.get('GROUP_RANK')}, LOCAL_RANK "
                f"{os.environ.get('LOCAL_RANK')}) joined and all-reduced; "
                + (f"{len(problems)} problem(s) in the gang" if problems else "no problem in the gang")
                + f"; the script's arguments, not used: {sys.argv[1:]}")
sys.exit(1 if problems else 0)
