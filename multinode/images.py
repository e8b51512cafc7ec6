"""Images and the NCCL network plugin a fabric needs.

The fabric profile pins NCCL_NET to the fabric's plugin (fabric.NCCL_NET), so a pod whose image does not
carry that plugin does not fall back to TCP: NCCL aborts at init ("NET/Plugin ... not found"). The plugin
is the image's business (we do not mount it from the host: NVIDIA's NeMo platform does, from a host path
/opt/amazon-efa-ofi that something else must fill, k8s/helm/templates/networking/kyverno-policy.yaml), so
`plan` warns about images known to lack it and names one that carries it.

Only images with evidence are listed; an image not listed is not claimed to work.
"""
from __future__ import annotations

from typing import TYPE_CHECKING

from .errors import Problem

if TYPE_CHECKING:                   # annotations only: config imports this module
    from .config import StackConfig

# fabric kind -> what its pods' images must carry
PLUGIN_NEEDED = {
    "efa": "the aws-ofi-nccl plugin (libnccl-net-ofi / libnccl-net.so on the library path)",
}

# Image name prefixes (repository, without tag) known to lack the plugin, with the evidence.
KNOWN_WITHOUT_PLUGIN: dict[str, dict[str, str]] = {
    "efa": {
        # aws/deep-learning-containers vllm/x86_64/gpu/Dockerfile builds FROM docker.io/vllm/vllm-openai and adds
        # the EFA installer and /opt/amazon/ofi-nccl/lib/x86_64-linux-gnu to LD_LIBRARY_PATH: the base has none.
        "vllm/vllm-openai": "the upstream vLLM image has no EFA userspace or aws-ofi-nccl (AWS's vLLM DLC is "
                            "that image plus the EFA installer)",
        "docker.io/vllm/vllm-openai": "the upstream vLLM image has no EFA userspace or aws-ofi-nccl",
        # NVIDIA-NeMo/Megatron-Bridge PR #5033: "The NVIDIA PyTorch base image no longer ships the aws-ofi-nccl
        # plugin ... and now defaults NCCL_NET_PLUGIN=spcx".
        "nvcr.io/nvidia/pytorch": "NVIDIA's PyTorch image no longer ships aws-ofi-nccl (NVIDIA-NeMo/Megatron-Bridge "
                                  "PR #5033)",
    },
}

# Images that carry the plugin, per engine, for the advisory's suggestion (and the AWS example stack).
# AWS Deep Learning Containers: the EC2 variants install EFA (libfabric + aws-ofi-nccl) and put
# /opt/amazon/ofi-nccl/lib/x86_64-linux-gnu on LD_LIBRARY_PATH (aws/deep-learning-containers
# vllm/x86_64/gpu/Dockerfile; pytorch/training/docker/2.8/py3/cu129/Dockerfile.gpu, whose base "has EFA").
# Tags from the repository's release notes / available_images.md.
WITH_PLUGIN: dict[str, dict[str, str]] = {
    "efa": {
        "vllm": "public.ecr.aws/deep-learning-containers/vllm:0.11.1-gpu-py312-ec2",
        "torchrun": "public.ecr.aws/deep-learning-containers/pytorch-training:2.8.0-gpu-py312-cu129-ubuntu22.04-ec2",
        "deepspeed": "public.ecr.aws/deep-learning-containers/pytorch-training:2.8.0-gpu-py312-cu129-ubuntu22.04-ec2",
    },
}


# Workload kinds whose pods use manifests.workloads.common.image() (stated image, else DEFAULT_IMAGES[engine]).
DEFAULT_IMAGE_KINDS = ("lws-inference", "grove-inference", "volcano-training", "indexed-job", "trainjob", "mpijob",
                       "nccl-test")


def _repository(image: str) -> str:
    """`registry/repo:tag@digest` -> `registry/repo`."""
    name = image.split("@", 1)[0]
    head, _, tail = name.rpartition("/")
    return f"{head}/{tail.split(':', 1)[0]}" if head else tail.split(":", 1)[0]


def lacks_plugin(kind: str, image: str) -> tuple[bool, str]:
    """(True, evidence) when the image is known to lack the fabric's NCCL plugin."""
    repo = _repository(image)
    for prefix, why in KNOWN_WITHOUT_PLUGIN.get(kind, {}).items():
        if repo == prefix:
            return True, why
    return False, ""


def advisories(cfg: StackConfig) -> list[Problem]:
    """A workload on a fabric pool whose image (stated or default) is known to lack the fabric's plugin."""
    from . import fabric
    from .manifests.workloads.common import DEFAULT_IMAGES
    out: list[Problem] = []
    if not cfg.fabric.enabled:
        return out
    for i, w in enumerate(cfg.workloads):
        try:
            machine = cfg.machine(cfg.pool(w.node_pool))
        except KeyError:           # unknown pool / machine (catalog.UnknownMachine): config reports it
            continue
        kind = fabric.effective_kind(cfg, machine)
        # kinds that render their own runtime image (Dynamo, NIM) never fall back to DEFAULT_IMAGES
        image = w.image or (DEFAULT_IMAGES.get(w.engine or "") if w.kind in DEFAULT_IMAGE_KINDS else None)
        if kind not in PLUGIN_NEEDED or not image:
            continue
        bad, why = lacks_plugin(kind, image)
        if not bad:
            continue
        pinned = (f"the fabric pins NCCL_NET={fabric.NCCL_NET[kind]!r}, so NCCL aborts at init"
                  if cfg.fabric.pin_transport else "NCCL falls back to TCP sockets")
        better = WITH_PLUGIN.get(kind, {}).get(w.engine or "")
        fix = f"use an image that carries it, e.g. {better}" if better else "use an image that carries it"
        out.append(Problem(f"workloads[{i}].image",
                           f"{image} on a {kind!r} fabric pool: {why}; it lacks {PLUGIN_NEEDED[kind]} and {pinned}; "
                           f"{fix}"))
    return out
