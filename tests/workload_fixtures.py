"""Stack configs with one workload of every kind, shared by the workload tests."""
from __future__ import annotations

import copy
from typing import Any

from multinode import checks, config

HF = "hf_SECRET_token_value_1234567890"
NGC = "nvapi-SECRET-ngc-key-0987654321"
PULL = '{"auths": {"nvcr.io": {"auth": "U0VDUkVULXB1bGwtc2VjcmV0"}}}'
SECRET_VALUES = (HF, NGC, PULL, "U0VDUkVULXB1bGwtc2VjcmV0")

WORKLOADS: list[dict[str, Any]] = [
    {"name": "llama-vllm", "kind": "lws-inference", "engine": "vllm", "model": "meta-llama/Llama-3.1-405B-Instruct",
     "nodePool": "gpu", "nodes": 2, "tensorParallel": 8, "pipelineParallel": 2, "replicas": 2,
     "startupTimeoutMinutes": 90, "shmSizeGi": 32},
    {"name": "llama-sglang", "kind": "lws-inference", "engine": "sglang", "model": "meta-llama/Llama-3.1-405B-Instruct",
     # the pool is EFA: the upstream SGLang image lacks aws-ofi-nccl (multinode/images.py), so a site image
     "image": "example.com/sglang-efa:0.5.21", "nodePool": "gpu", "nodes": 2, "tensorParallel": 16,
     "pipelineParallel": 1},
    {"name": "llama-nim", "kind": "lws-inference", "engine": "nim", "model": "meta/llama-3.1-405b-instruct",
     "image": "nvcr.io/nim/meta/llama-3.1-405b-instruct:1.8.0", "nodePool": "gpu", "nodes": 2,
     "tensorParallel": 8, "pipelineParallel": 2},
    {"name": "ds-grove", "kind": "grove-inference", "engine": "vllm", "model": "deepseek-ai/DeepSeek-R1",
     "image": "nvcr.io/nvidia/ai-dynamo/vllm-runtime:1.3.0-efa", "nodePool": "gpu", "nodes": 2, "modelParamsB": 671,
     "precision": "fp8",
     "disaggregated": {"prefill": {"nodes": 2, "tensorParallel": 16, "replicas": 1},
                       "decode": {"nodes": 2, "tensorParallel": 8, "pipelineParallel": 2, "replicas": 2}}},
    {"name": "train-volcano", "kind": "volcano-training", "engine": "torchrun", "nodePool": "gpu", "nodes": 2,
     "script": "/workspace/train.py", "scriptArgs": ["--epochs", "3"], "maxRetry": 4,
     "networkTopology": {"mode": "soft", "highestTierAllowed": 1},   # hard: refused on `existing` (issue 18)
     "deepspeedConfig": {"zero_optimization": {"stage": 3}, "bf16": {"enabled": True}}},
    {"name": "train-indexed", "kind": "indexed-job", "engine": "torchrun", "nodePool": "gpu", "nodes": 2,
     "script": "/workspace/train.py"},
    {"name": "train-v2", "kind": "trainjob", "engine": "torchrun", "nodePool": "gpu", "nodes": 2,
     "script": "/workspace/train.py"},
    {"name": "train-mpi", "kind": "mpijob", "engine": "mpirun", "nodePool": "gpu", "nodes": 2,
     "image": "example.com/horovod:1.0", "script": "python3 /workspace/train_hvd.py"},
    {"name": "llama-dynamo", "kind": "dynamo", "engine": "vllm", "model": "meta-llama/Llama-3.1-405B-Instruct-FP8",
     "precision": "fp8", "nodePool": "gpu",
     "disaggregated": {"prefill": {"nodes": 1, "tensorParallel": 8},
                       "decode": {"nodes": 2, "tensorParallel": 8, "pipelineParallel": 2}}},
    {"name": "nccl-check", "kind": "nccl-test", "nodePool": "gpu", "image": "example.com/nccl-tests:2.13"},
]


def raw_config(workloads: list[dict[str, Any]] = None, **over: Any) -> dict[str, Any]:
    raw: dict[str, Any] = {
        "cloud": "existing",
        "cluster": {"name": "lab"},
        "kubeconfig": "apiVersion: v1",
        "hfToken": HF, "ngcApiKey": NGC, "imagePullSecret": PULL,
        "fabric": {"kind": "efa"},
        "nodePools": [{"name": "gpu", "machine": "p5.48xlarge", "nodeCount": 2,
                       "nodeSelector": {"node.kubernetes.io/instance-type": "p5.48xlarge"}}],
        "storage": {"kind": "existing", "existingStorageClass": "efs-sc", "sizeGib": 1024},
        "addons": {"grove": {"enabled": True}, "kai": {"enabled": True}, "dynamo": {"enabled": True},
                   "trainer": {"enabled": True}},
        "queues": [{"name": "research", "weight": 1}],
        "workloads": copy.deepcopy(WORKLOADS if workloads is None else workloads),
    }
    raw.update(over)
    return raw


SECRET_KEYS = ("kubeconfig", "hfToken", "ngcApiKey", "imagePullSecret")


def load(workloads: list[dict[str, Any]] = None, **over: Any) -> config.StackConfig:
    return checks.load(raw_config(workloads, **over), SECRET_KEYS)
