# Stand-in for PyTorch in the box's stand-in image (no PyTorch, no CUDA here): only `python3 -m
# torch.distributed.run` exists (torch/distributed/run.py), and it says it stands in. Importing anything else fails.
