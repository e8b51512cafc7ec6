"""Images and the fabric's NCCL plugin (multinode.images): plan warns about images known to lack it."""
from __future__ import annotations

import copy

from multinode import checks, images, stackfile


def load(stack, mutate=None):
    raw, secrets, _ = stackfile.read_stack_file(stackfile.stack_path(stack))
    raw = copy.deepcopy(dict(raw))
    if mutate:
        mutate(raw)
    return checks.load(raw, secrets)


def image_advisories(cfg):
    return [p for p in checks.advisories(cfg) if p.path.endswith(".image")]


def test_aws_example_images_carry_the_plugin():
    for stack in ("aws-dev", "existing-dev", "dynamo-dev"):
        assert image_advisories(load(stack)) == [], stack


def test_upstream_vllm_on_efa_is_flagged_with_a_fix():
    def upstream(raw):
        raw["workloads"][0]["image"] = "vllm/vllm-openai:v0.11.0"
    (p,) = image_advisories(load("aws-dev", upstream))
    assert p.path == "workloads[0].image"
    assert "AWS Libfabric" in p.message and "aborts" in p.message
    assert images.WITH_PLUGIN["efa"]["vllm"] in p.message


def test_default_image_is_checked_too():
    def no_image(raw):
        del raw["workloads"][1]["image"]          # torchrun default: nvcr.io/nvidia/pytorch
    (p,) = image_advisories(load("aws-dev", no_image))
    assert p.path == "workloads[1].image" and "nvcr.io/nvidia/pytorch" in p.message


def test_same_image_on_other_fabrics_is_not_flagged():
    def upstream(raw):
        raw["workloads"][0]["image"] = "vllm/vllm-openai:v0.11.0"
    assert image_advisories(load("azure-dev", upstream)) == []


def test_repository_match_is_exact():
    assert images.lacks_plugin("efa", "vllm/vllm-openai:v0.11.0")[0]
    assert images.lacks_plugin("efa", "docker.io/vllm/vllm-openai@sha256:abc")[0]
    assert not images.lacks_plugin("efa", "public.ecr.aws/deep-learning-containers/vllm:0.11.1-gpu-py312-ec2")[0]
    assert not images.lacks_plugin("efa", "myorg/vllm/vllm-openai-efa:1")[0]
