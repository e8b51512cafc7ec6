"""The box's CPU answer to a CUDA/NCCL program, in the stand-in image that carries the real PyTorch (Debian
bookworm's python3-torch 1.13.1, CPU only). Loaded by every python3 of the image (multinode_standin_torch.pth) and
inert until a program imports torch: then, and only then, the modules below are patched as they load, and each
patch says so in the program's output (lines starting "multinode box:").

- the launcher (torch.distributed.launcher.api.launch_agent, what `torchrun` and `python3 -m
  torch.distributed.run` call with the rendered flags, unchanged): a training script that is not in the image
  (the real image's /workspace/train.py ...) is replaced by the box's trainer stand-in (torch_trainer.py) with the
  script's own arguments; everything else (rendezvous backend, endpoint, --nnodes, --node_rank, restarts) is the
  real launcher's. A box-only cap on --nproc_per_node (MULTINODE_BOX_NPROC_MAX, set in the stand-in image's
  config by the box) is applied here and printed. The NCCL preflight's bandwidth floor and message size
  (PREFLIGHT_FLOOR_GBPS, PREFLIGHT_MESSAGE_BYTES) are replaced for the workers: no floor is checked on CPU.
  The launcher prints one line `MULTINODE_GANG_LAUNCH {json}` per pod (its rendezvous endpoint, --nnodes, the
  node rank it was given, its host), which the box reads when a gang does not form.
- torch.distributed.init_process_group: the "nccl" backend is answered by "gloo"; once the group is up, every
  process checks what the launcher gave it (RANK, WORLD_SIZE, LOCAL_RANK, GROUP_RANK against --nnodes x
  --nproc_per_node as the launcher read them), all-reduces rank + 1 and gathers every rank's record; rank 0 prints
  the gang's verdict line `MULTINODE_GANG {json}` (gang.py: engine "torchrun", world size, ranks per host, the
  problems seen, seconds to form), which the box reads (conformance/cluster/gangs.go, gang_check.py).
- CUDA calls on a machine with no GPU: torch.cuda.set_device/synchronize/current_device do nothing, and once a
  program called one of them, tensors asked for on "cuda" are made on the CPU (the factory functions,
  Tensor.cuda, Tensor.to).
- The c10d rendezvous's "am I the host" test (torch.distributed.elastic.rendezvous.utils._matches_machine_hostname)
  gets the rule of later PyTorch: 1.13 compares the endpoint's host only with this machine's host names, 2.x also
  with the addresses the endpoint's host resolves to (pytorch/pytorch@0128317766202d2b0aaaf35f7b21b5baccd7dbc9
  torch/distributed/elastic/rendezvous/utils.py _matches_machine_hostname), which is what lets the pod named by
  `--rdzv_endpoint=<job>-0.<subdomain>:PORT` host the store when its hostname is its FQDN (setHostnameAsFQDN) in
  the real images (PyTorch 2.x).
"""
from __future__ import annotations

import importlib.abc
import importlib.machinery
import json
import os
import sys
import time
from collections.abc import Callable
from typing import Any

TRAINER = os.path.join(os.path.dirname(os.path.abspath(__file__)), "torch_trainer.py")
LAUNCH_MARKER = "MULTINODE_GANG_LAUNCH "
# the gang's problems as rank 0 gathered them at init_process_group (the trainer stand-in exits 1 on any)
PROBLEMS: list[str] = []
# the preflight's message on CPU: 1 MiB per rank instead of the rendered size (1 GiB per rank on 8 ranks is 8 GiB
# of memory per pod and minutes of gloo)
PREFLIGHT_BYTES_ON_CPU = 1 << 20


def say(msg: str) -> None:
    print(f"multinode box: {msg}", flush=True)


def _cpu(device: Any) -> Any:
    """A device that names CUDA, as the CPU."""
    s = str(device) if device is not None else ""
    return "cpu" if s == "cuda" or s.startswith("cuda:") else device


def _patch_torch(torch: Any) -> None:
    """torch.cuda's device calls answer on the CPU; the first of them (a program that asks for a GPU, as the NCCL
    preflight does with set_device) also makes tensors asked for on "cuda" land on the CPU from then on. Only then:
    the factory functions become Python wrappers, which TorchScript could not compile."""
    cuda = torch.cuda
    done: list[bool] = []

    def on_cpu() -> None:
        if done:
            return
        done.append(True)
        say("CUDA asked for: no GPU here, tensors on \"cuda\" are made on the CPU")
        for name in ("ones", "zeros", "empty", "full", "rand", "randn", "randint", "arange", "tensor", "ones_like",
                     "zeros_like", "empty_like", "full_like", "rand_like", "randn_like", "as_tensor"):
            orig = getattr(torch, name, None)
            if orig is None:
                continue

            def factory(*a: Any, _orig: Callable[..., Any] = orig, **kw: Any) -> Any:
                if "device" in kw:
                    kw["device"] = _cpu(kw["device"])
                return _orig(*a, **kw)
            setattr(torch, name, factory)
        tensor = torch.Tensor
        tensor.cuda = lambda self, *a, **kw: self
        to = tensor.to

        def to_cpu(self: Any, *a: Any, **kw: Any) -> Any:
            a = tuple(_cpu(x) if isinstance(x, (str, torch.device)) else x for x in a)
            if "device" in kw:
                kw["device"] = _cpu(kw["device"])
            return to(self, *a, **kw)
        tensor.to = to_cpu

    def set_device(device: Any) -> None:
        on_cpu()

    def synchronize(device: Any = None) -> None:
        on_cpu()

    def current_device() -> int:
        on_cpu()
        return 0
    cuda.set_device, cuda.synchronize, cuda.current_device = set_device, synchronize, current_device


def _gang_check(c10d: Any) -> None:
    """Every process of a group that just formed: its own checks, one all_reduce of rank + 1, every rank's record
    gathered; rank 0 prints the verdict (gang.py). Each process of the group runs this from its
    init_process_group, so the collectives match across ranks."""
    import socket

    import torch

    from multinode_standin import gang
    env = os.environ
    rank, world = c10d.get_rank(), c10d.get_world_size()
    nnodes, nproc = int(env.get("MULTINODE_BOX_NNODES") or 0), int(env.get("MULTINODE_BOX_NPROC") or 0)
    local, group = int(env.get("LOCAL_RANK", -1)), int(env.get("GROUP_RANK", -1))
    problems = []
    if env.get("RANK") is not None and (int(env["RANK"]) != rank or int(env.get("WORLD_SIZE", -1)) != world):
        problems.append(f"process group says rank {rank} of {world}, env RANK {env['RANK']} of "
                        f"WORLD_SIZE {env.get('WORLD_SIZE')}")
    if nnodes and nproc:
        if world != nnodes * nproc:
            problems.append(f"world size {world} != --nnodes {nnodes} x --nproc_per_node {nproc}")
        if int(env.get("LOCAL_WORLD_SIZE", -1)) != nproc or not 0 <= local < nproc:
            problems.append(f"LOCAL_RANK {local} / LOCAL_WORLD_SIZE {env.get('LOCAL_WORLD_SIZE')} for "
                            f"--nproc_per_node {nproc}")
        if rank != group * nproc + local:
            problems.append(f"RANK {rank} != GROUP_RANK {group} x {nproc} + LOCAL_RANK {local}")
    x = torch.tensor([float(rank + 1)])
    c10d.all_reduce(x)
    if x.item() != world * (world + 1) / 2:
        problems.append(f"all_reduce of rank+1 gave {x.item()}, not {world * (world + 1) / 2}")
    t0 = float(env.get("MULTINODE_BOX_LAUNCH_T0") or time.time())
    mine = {"rank": rank, "host": socket.gethostname(), "groupRank": group, "localRank": local,
            "seconds": round(time.time() - t0, 1), "problems": [f"rank {rank}: {m}" for m in problems]}
    every: list[Any] = [None] * world
    c10d.all_gather_object(every, mine)
    PROBLEMS[:] = [m for r in every for m in r["problems"]]
    if rank != 0:
        return
    per_host: dict[str, int] = {}
    for r in every:
        per_host[r["host"]] = per_host.get(r["host"], 0) + 1
    expected = nnodes * nproc if nnodes and nproc else world
    gang.verdict("torchrun", sorted(r["rank"] for r in every) == list(range(expected)), world, expected,
                 ranksPerHost=per_host, groupRanks={r["host"]: r["groupRank"] for r in every},
                 nnodes=nnodes or None, nprocPerNode=nproc or None,
                 nprocRendered=int(env.get("MULTINODE_BOX_NPROC_RENDERED") or 0) or None,
                 rdzvEndpoint=env.get("MULTINODE_BOX_RDZV_ENDPOINT"), backend=str(c10d.get_backend()),
                 torch=torch.__version__, allReduce=x.item(), problems=PROBLEMS,
                 secondsToForm=max(r["seconds"] for r in every))


def _patch_c10d(c10d: Any) -> None:
    orig = c10d.init_process_group

    def init_process_group(backend: Any = None, *a: Any, **kw: Any) -> Any:
        asked = str(backend) if backend is not None else str(kw.get("backend") or "")
        if asked.lower() == "nccl":
            say("init_process_group: backend nccl asked, gloo used (no GPU, no NCCL in the box)")
            backend = "gloo"
        kw.pop("backend", None)
        out = orig(backend or "gloo", *a, **kw)
        _gang_check(c10d)
        return out
    c10d.init_process_group = init_process_group


def _patch_rdzv_utils(utils: Any) -> None:
    import socket
    orig = utils._matches_machine_hostname

    def matches(host: str) -> bool:
        if orig(host):
            return True
        try:   # PyTorch 2.x's rule (see the module's docstring): host resolves to an address of this machine
            theirs = {a[4][0] for a in socket.getaddrinfo(host, None, proto=socket.IPPROTO_TCP)}
            ours = {a[4][0] for a in socket.getaddrinfo(socket.gethostname(), None, proto=socket.IPPROTO_TCP)}
        except (ValueError, OSError):
            return False
        return bool(theirs & ours)
    utils._matches_machine_hostname = matches


def _node_rank(argv: list[str]) -> int | None:
    """--node_rank / --node-rank as given to the launcher (c10d's rendezvous does not use it: the ranks come in
    the order the agents joined; it says which pod this is when the gang does not form)."""
    for i, a in enumerate(argv):
        for flag in ("--node_rank", "--node-rank"):
            val = a[len(flag) + 1:] if a.startswith(flag + "=") else argv[i + 1] if a == flag and i + 1 < len(argv) \
                else None
            if val is not None:
                try:
                    return int(val)
                except ValueError:
                    return None
    return None


def _patch_launcher(api: Any) -> None:
    orig = api.launch_agent

    def launch_agent(config: Any, entrypoint: Any, args: list[Any]) -> Any:
        env = os.environ
        env["MULTINODE_BOX_LAUNCH_T0"] = str(time.time())
        import torch
        from torch.distributed.elastic.multiprocessing.api import Std
        # Debian's 1.13.1 under Python 3.11: Std.from_str("0") returns None (it tests `Std(0) in Std`, which a
        # zero flag no longer is in 3.11's enum), and the agent then fails in to_map with "'NoneType' object has
        # no attribute 'get'" before any worker starts; None means the default, Std.NONE.
        if config.redirects is None or config.tee is None:
            say("--redirects/--tee default restored (PyTorch 1.13 on Python 3.11 parsed them as None)")
            config.redirects = Std.NONE if config.redirects is None else config.redirects
            config.tee = Std.NONE if config.tee is None else config.tee
        say(f"torch.distributed.run of PyTorch {torch.__version__} (Debian python3-torch, CPU), nodes "
            f"{config.min_nodes}:{config.max_nodes}, nproc_per_node {config.nproc_per_node}, rendezvous "
            f"{config.rdzv_backend} {config.rdzv_endpoint}")
        cap = int(env.get("MULTINODE_BOX_NPROC_MAX") or 0)
        env["MULTINODE_BOX_NPROC_RENDERED"] = str(config.nproc_per_node)
        if cap and config.nproc_per_node > cap:
            say(f"nproc_per_node {config.nproc_per_node} capped at {cap} for the box (MULTINODE_BOX_NPROC_MAX)")
            config.nproc_per_node = cap
        env["MULTINODE_BOX_NNODES"] = str(config.max_nodes)
        env["MULTINODE_BOX_NPROC"] = str(config.nproc_per_node)
        env["MULTINODE_BOX_RDZV_ENDPOINT"] = str(config.rdzv_endpoint)
        args = list(args)
        script_at = 1 if args[:1] == ["-u"] else 0
        if isinstance(entrypoint, str) and os.path.basename(entrypoint).startswith("python") and \
                len(args) > script_at and args[script_at] != "-m" and not os.path.exists(str(args[script_at])):
            say(f"training script {args[script_at]} is not in the stand-in image: the box's trainer stand-in "
                f"runs in its place with the same arguments ({TRAINER})")
            args[script_at] = TRAINER
        if "PREFLIGHT_FLOOR_GBPS" in env:
            say(f"preflight: bandwidth floor {env['PREFLIGHT_FLOOR_GBPS']} GB/s not checked on CPU (gloo over the "
                f"box's bridges), message {env.get('PREFLIGHT_MESSAGE_BYTES')} bytes sent as {PREFLIGHT_BYTES_ON_CPU}")
            env["MULTINODE_BOX_FLOOR_RENDERED"] = env["PREFLIGHT_FLOOR_GBPS"]
            env["PREFLIGHT_FLOOR_GBPS"] = "0"
            env["PREFLIGHT_MESSAGE_BYTES"] = str(PREFLIGHT_BYTES_ON_CPU)
        import socket
        rank = _node_rank(sys.argv[1:])
        print(LAUNCH_MARKER + json.dumps({
            "engine": "torchrun", "host": socket.gethostname(), "rdzvBackend": config.rdzv_backend,
            "rdzvEndpoint": config.rdzv_endpoint, "minNodes": config.min_nodes, "maxNodes": config.max_nodes,
            "nodeRank": rank if isinstance(rank, int) and rank >= 0 else None,
            "nprocPerNode": config.nproc_per_node, "nprocRendered": int(env["MULTINODE_BOX_NPROC_RENDERED"]),
            "script": str(args[script_at]) if len(args) > script_at else ""}, sort_keys=True), flush=True)
        return orig(config, entrypoint, args)
    api.launch_agent = launch_agent


PATCHES: dict[str, Callable[[Any], None]] = {
    "torch": _patch_torch,
    "torch.distributed.distributed_c10d": _patch_c10d,
    "torch.distributed.elastic.rendezvous.utils": _patch_rdzv_utils,
    "torch.distributed.launcher.api": _patch_launcher,
}


class _Loader(importlib.abc.Loader):
    """Runs the real loader, then the patch of the module."""

    def __init__(self, real: Any, patch: Callable[[Any], None]) -> None:
        self.real, self.patch = real, patch

    def create_module(self, spec: Any) -> Any:
        return self.real.create_module(spec)

    def exec_module(self, module: Any) -> None:
        self.real.exec_module(module)
        self.patch(module)


class _Finder(importlib.abc.MetaPathFinder):
    def find_spec(self, name: str, path: Any, target: Any = None) -> Any:
        patch = PATCHES.get(name)
        if patch is None:
            return None
        spec = importlib.machinery.PathFinder.find_spec(name, path)
        if spec is None or spec.loader is None:
            return None
        spec.loader = _Loader(spec.loader, patch)
        return spec


def install() -> None:
    if not any(isinstance(f, _Finder) for f in sys.meta_path):
        sys.meta_path.insert(0, _Finder())
