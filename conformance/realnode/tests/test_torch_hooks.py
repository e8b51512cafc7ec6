"""The stand-in images' PyTorch hooks (standin/python/multinode_standin/torch_hooks.py) on a small fake torch
package written here (no PyTorch, no box, no root): the launcher hook puts the trainer stand-in where the missing
script was named, applies the box's cap on --nproc_per_node, restores --redirects/--tee that Debian's 1.13.1
parses as None under Python 3.11 and prints the launcher's line with the node rank it was given; the
init_process_group hook answers "nccl" with gloo and rank 0 prints the gang's verdict, formed or not against
--nnodes x --nproc_per_node. The real PyTorch runs in the box (tests/test_box_gangs.py)."""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

STANDIN = Path(__file__).resolve().parents[1] / "standin" / "python"

FAKE = {
    "torch/__init__.py": """
__version__ = "1.13.1-fake"
from . import cuda
class device(str):
    pass
class Tensor:
    def __init__(self, v):
        self.v = v
    def item(self):
        return self.v[0]
    def to(self, *a, **kw):
        return self
def tensor(v, device=None):
    return Tensor(list(v))
""",
    "torch/cuda.py": "def set_device(d):\n    raise RuntimeError('no GPU')\n",
    "torch/distributed/__init__.py": "",
    "torch/distributed/distributed_c10d.py": """
import os
asked = []
def init_process_group(backend=None, **kw):
    asked.append(backend)
def get_rank():
    return int(os.environ["RANK"])
def get_world_size():
    return int(os.environ["WORLD_SIZE"])
def get_backend():
    return asked[-1]
def all_reduce(x):
    pass          # a group of one
def all_gather_object(out, obj):
    out[0] = obj  # a group of one
""",
    "torch/distributed/launcher/__init__.py": "",
    "torch/distributed/launcher/api.py": "def launch_agent(config, entrypoint, args):\n"
                                         "    return config, entrypoint, args\n",
    "torch/distributed/elastic/__init__.py": "",
    "torch/distributed/elastic/multiprocessing/__init__.py": "",
    "torch/distributed/elastic/multiprocessing/api.py": "import enum\nclass Std(enum.IntFlag):\n    NONE = 0\n",
}


def _run(tmp_path: Path, code: str, env: dict[str, str]) -> tuple[str, dict]:
    for name, text in FAKE.items():
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text(text)
    prog = "import json, multinode_standin.torch_hooks as h\nh.install()\n" + code
    r = subprocess.run([sys.executable, "-c", prog], capture_output=True, text=True, check=True,
                       env={"PYTHONPATH": f"{tmp_path}:{STANDIN}", "PATH": "/usr/bin:/bin", **env})
    lines = r.stdout.splitlines()
    out = {}
    for ln in lines:
        for marker in ("MULTINODE_GANG_LAUNCH ", "MULTINODE_GANG ", "RESULT "):
            if ln.startswith(marker):
                out[marker.strip()] = json.loads(ln[len(marker):])
    return r.stdout, out


def test_launcher_hook(tmp_path: Path) -> None:
    code = """
import sys, types
sys.argv = ["torchrun", "--nnodes=2", "--nproc_per_node=8", "--node_rank", "1", "/workspace/train.py"]
from torch.distributed.launcher import api
cfg = types.SimpleNamespace(redirects=None, tee=None, min_nodes=2, max_nodes=2, nproc_per_node=8,
                            rdzv_backend="c10d", rdzv_endpoint="train-0.train:29400")
cfg, entry, args = api.launch_agent(cfg, "/usr/bin/python3", ["-u", "/workspace/train.py", "--epochs", "1"])
import os
print("RESULT " + json.dumps({"args": args, "nproc": cfg.nproc_per_node, "redirects": int(cfg.redirects),
      "nnodes_env": os.environ["MULTINODE_BOX_NNODES"], "nproc_env": os.environ["MULTINODE_BOX_NPROC"]}))
"""
    text, out = _run(tmp_path, code, {"MULTINODE_BOX_NPROC_MAX": "2"})
    res = out["RESULT"]
    assert res["args"][0] == "-u" and res["args"][1].endswith("multinode_standin/torch_trainer.py"), res
    assert res["args"][2:] == ["--epochs", "1"] and res["nproc"] == 2 and res["redirects"] == 0, res
    assert res["nnodes_env"] == "2" and res["nproc_env"] == "2"
    launch = out["MULTINODE_GANG_LAUNCH"]
    assert launch["nodeRank"] == 1 and launch["nprocRendered"] == 8 and launch["nprocPerNode"] == 2, launch
    assert launch["rdzvEndpoint"] == "train-0.train:29400" and launch["maxNodes"] == 2, launch
    assert "nproc_per_node 8 capped at 2 for the box" in text and "--redirects/--tee default restored" in text
    # a script that is in the image runs as given
    code2 = code.replace('["-u", "/workspace/train.py"', f'["-u", "{__file__}"')
    _, out = _run(tmp_path, code2, {})
    assert out["RESULT"]["args"][1] == __file__ and out["RESULT"]["nproc"] == 8


def test_init_process_group_hook_verdict(tmp_path: Path) -> None:
    env = {"RANK": "0", "WORLD_SIZE": "1", "LOCAL_RANK": "0", "LOCAL_WORLD_SIZE": "1", "GROUP_RANK": "0",
           "MULTINODE_BOX_NNODES": "1", "MULTINODE_BOX_NPROC": "1", "MULTINODE_BOX_RDZV_ENDPOINT": "h:1"}
    code = "import torch.distributed.distributed_c10d as c\nc.init_process_group('nccl')\nprint('RESULT ' + " \
           "json.dumps({'backend': c.get_backend(), 'problems': h.PROBLEMS}))\n"
    text, out = _run(tmp_path, code, env)
    assert out["RESULT"] == {"backend": "gloo", "problems": []}, text
    v = out["MULTINODE_GANG"]
    assert v["engine"] == "torchrun" and v["formed"] is True and v["worldSize"] == 1 and v["expected"] == 1, v
    assert list(v["ranksPerHost"].values()) == [1] and v["torch"] == "1.13.1-fake" and v["rdzvEndpoint"] == "h:1"
    assert "backend nccl asked, gloo used" in text
    # the launcher read --nnodes 2: a group of one is not the gang
    text, out = _run(tmp_path, code, {**env, "MULTINODE_BOX_NNODES": "2"})
    v = out["MULTINODE_GANG"]
    assert v["formed"] is False and v["expected"] == 2, v
    assert out["RESULT"]["problems"] == ["rank 0: world size 1 != --nnodes 2 x --nproc_per_node 1"], out
