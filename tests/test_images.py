"""The image facts table (multinode.images, issue 30): plan refuses an image known to lack the pinned fabric plugin,
advises on an image it has no facts for, every default image is fully qualified, and the commands the builders
render call the programs where the facts place them."""
from __future__ import annotations

import copy
import glob
import os
from pathlib import Path

import pytest
import yaml

from multinode import checks, images, stackfile
from multinode.errors import ConfigError
from multinode.manifests.workloads import build as build_workload
from multinode.manifests.workloads import nccl_test

ROOT = os.path.dirname(os.path.dirname(__file__))


def raw_of(stack, mutate=None):
    path = Path(stack) if os.path.exists(stack) else stackfile.stack_path(stack)
    raw, secrets, _ = stackfile.read_stack_file(path)
    raw = copy.deepcopy(dict(raw))
    if mutate:
        mutate(raw)
    return raw, secrets


def load(stack, mutate=None):
    return checks.load(*raw_of(stack, mutate))


def refusal(stack, mutate):
    with pytest.raises(ConfigError) as e:
        load(stack, mutate)
    return str(e.value)


def image_advisories(cfg):
    return [p for p in checks.advisories(cfg) if p.path.endswith(".image")]


def every_example_stack():
    return sorted(glob.glob(os.path.join(ROOT, "stacks", "Pulumi.*.yaml"))
                  + glob.glob(os.path.join(ROOT, "tests", "guides", "Pulumi.*.yaml")))


# ------------------------------------------------------------------ the table
def test_every_fact_has_a_source_and_a_fully_qualified_repository():
    for f in images.IMAGES:
        assert images.fully_qualified(f.repository) and ":" not in f.repository.split("/")[-1], f.repository
        assert f.source and all(k in images.SOURCES for k in f.source.split(",")), f.repository
        assert all(p.startswith("/") or p == "mpirun" for p in f.programs.values()), f.repository


def test_every_default_image_is_fully_qualified_and_in_the_table():
    defaults = list(images.DEFAULT_IMAGES.values()) + list(images.EFA_DEFAULT_IMAGES.values())
    for image in defaults:
        assert images.fully_qualified(image), image
        assert images.facts(image) is not None, image
    for image in images.EFA_DEFAULT_IMAGES.values():
        assert images.facts(image).efa == images.CARRIES, image
    for repo in images.DYNAMO_RUNTIME_REPOSITORIES.values():
        assert images.fully_qualified(repo)
        assert images.facts(f"{repo}:1.5.0-efa").efa == images.CARRIES
        assert images.facts(f"{repo}:1.5.0").efa == images.LACKS


@pytest.mark.parametrize("image,repo", [
    ("vllm/vllm-openai:v1", "docker.io/vllm/vllm-openai"), ("ubuntu:24.04", "docker.io/library/ubuntu"),
    ("docker.io/vllm/vllm-openai@sha256:ab", "docker.io/vllm/vllm-openai"),
    ("localhost:5000/team/img:1", "localhost:5000/team/img"),
    ("nvcr.io/nvidia/pytorch:25.08-py3", "nvcr.io/nvidia/pytorch")])
def test_names_resolve_as_a_container_runtime_does(image, repo):
    assert images.normalize(image)[0] == repo
    assert images.fully_qualified(image) == (image.split("/")[0] not in ("vllm", "ubuntu:24.04"))


def test_repository_match_is_exact_and_tags_count():
    assert images.lacks_plugin("efa", "vllm/vllm-openai:v0.11.0")[0]
    assert images.lacks_plugin("efa", "docker.io/vllm/vllm-openai@sha256:abc")[0]
    assert not images.lacks_plugin("efa", "public.ecr.aws/deep-learning-containers/vllm:0.11.1-gpu-py312-ec2")[0]
    assert not images.lacks_plugin("efa", "myorg/vllm/vllm-openai-efa:1")[0]
    assert images.facts("myorg/vllm/vllm-openai-efa:1") is None
    # the -efa Dynamo runtime carries the plugin, the plain one does not (ai-dynamo/dynamo aws.Dockerfile)
    assert not images.lacks_plugin("efa", "nvcr.io/nvidia/ai-dynamo/sglang-runtime:1.3.0-efa")[0]
    assert images.lacks_plugin("efa", "nvcr.io/nvidia/ai-dynamo/sglang-runtime:0.6.0")[0]
    # only EFA's plugin is the image's business
    for kind in ("infiniband", "roce", "tcpx", "tcpxo", "gcp-rdma"):
        assert not images.lacks_plugin(kind, "vllm/vllm-openai:v0.11.0")[0]


@pytest.mark.parametrize("version,backend,tag", [("1.5.0", "vllm", "1.5.0-efa"), ("1.2.0", "sglang", "1.2.0-efa"),
                                                 ("1.1.0", "vllm", "1.1.0-efa-amd64"), ("1.1.0", "sglang", None),
                                                 ("0.6.0", "vllm", None)])
def test_dynamo_efa_tags_follow_the_release_artifacts(version, backend, tag):
    assert images.dynamo_efa_tag(version, backend) == tag


# ------------------------------------------------------------------ plan: refuse / advise
def test_example_stacks_run_no_image_that_lacks_its_fabric_plugin():
    """Every example stack and guide loads (a lacking image would be refused) and has no plugin advisory."""
    for path in every_example_stack():
        raw, secrets = raw_of(path)
        if "fleet" in raw:
            continue                               # fleets check their members' stacks
        cfg = checks.load(raw, secrets)
        for p in image_advisories(cfg):
            assert "lacks it" not in p.message and "falls back" not in p.message, (path, p)


def test_upstream_vllm_on_a_pinned_efa_pool_is_refused_with_a_fix():
    def upstream(raw):
        raw["workloads"][0]["image"] = "vllm/vllm-openai:v0.11.0"
    text = refusal("aws-dev", upstream)
    assert "workloads[0].image" in text and "AWS Libfabric" in text and "aborts" in text
    assert images.EFA_DEFAULT_IMAGES["vllm"] in text


def test_unpinned_transport_makes_it_an_advisory():
    def upstream(raw):
        raw["workloads"][0]["image"] = "vllm/vllm-openai:v0.11.0"
        raw.setdefault("fabric", {})["pinTransport"] = False
    (p,) = [a for a in image_advisories(load("aws-dev", upstream)) if a.path == "workloads[0].image"]
    assert "falls back to TCP sockets" in p.message


def test_horovod_on_efa_is_refused():
    def horovod(raw):
        w = next(x for x in raw["workloads"] if x["kind"] == "mpijob")
        w["image"] = "horovod/horovod:0.28.1"
    assert "horovod/horovod" in refusal("existing-dev", horovod)


def test_plain_dynamo_runtime_on_efa_is_refused():
    def plain(raw):
        next(x for x in raw["workloads"] if x["name"] == "r1-disagg")["image"] = \
            "nvcr.io/nvidia/ai-dynamo/sglang-runtime:0.6.0"
    text = refusal("existing-dev", plain)
    assert "sglang-runtime:0.6.0" in text and "aws-ofi-nccl" in text


def test_default_images_on_efa_carry_the_plugin():
    """A workload without an image on an EFA pool gets an image that carries aws-ofi-nccl (the DLC; the Dynamo
    runtime's -efa variant), and the same workload on InfiniBand keeps the engine's upstream image."""
    def no_image(raw):
        for w in raw["workloads"]:
            if w["kind"] != "nccl-test":              # nccl-test has no default: it must name its image
                w.pop("image", None)
    cfg = load("aws-dev", no_image)
    trainer = next(w for w in cfg.workloads if w.kind == "volcano-training")
    assert images.workload_image(cfg, trainer) == images.EFA_DEFAULT_IMAGES["torchrun"]
    dyn = load("dynamo-dev")
    assert images.workload_image(dyn, dyn.workloads[0]) == "nvcr.io/nvidia/ai-dynamo/vllm-runtime:1.5.0-efa"
    az = load("azure-dev", no_image)
    assert images.workload_image(az, az.workloads[0]) == images.DEFAULT_IMAGES["vllm"]


def test_sglang_without_image_on_efa_is_refused_not_guessed():
    def sglang(raw):
        w = raw["workloads"][0]
        w.pop("image", None)
        w["engine"] = "sglang"
    assert "lmsysorg/sglang" in refusal("aws-dev", sglang)


def test_single_node_workload_is_not_refused():
    """A pod on one node gets no fabric (no NCCL_NET pin): its image needs no plugin."""
    def one_node(raw):
        w = raw["workloads"][1]                        # llama-finetune (volcano-training)
        w.update(image="nvcr.io/nvidia/pytorch:25.08-py3", nodes=1)
        w.pop("networkTopology", None)
    cfg = load("aws-dev", one_node)
    assert not [p for p in image_advisories(cfg) if p.path == "workloads[1].image"]

    def two_nodes(raw):
        raw["workloads"][1]["image"] = "nvcr.io/nvidia/pytorch:25.08-py3"
    assert "workloads[1].image" in refusal("aws-dev", two_nodes)


def test_unknown_image_plans_with_an_advisory_naming_what_was_not_checked():
    def unknown(raw):
        raw["workloads"][0]["image"] = "registry.example.com/team/vllm:1"
        nccl = next(w for w in raw["workloads"] if w["kind"] == "nccl-test")
        nccl["image"] = "registry.example.com/team/nccl-tests:1"
    cfg = load("aws-dev", unknown)
    by_path = {p.path: p.message for p in image_advisories(cfg)}
    assert "no image facts for registry.example.com/team/vllm:1" in by_path["workloads[0].image"]
    assert "aws-ofi-nccl" in by_path["workloads[0].image"]
    nccl_at = next(k for k, v in by_path.items() if "nccl-tests:1" in v)
    assert "where all_reduce_perf is" in by_path[nccl_at] and "where mpirun is" in by_path[nccl_at]


def test_unknown_image_on_infiniband_is_not_asked_about_a_plugin():
    def unknown(raw):
        raw["workloads"][0]["image"] = "registry.example.com/team/vllm:1"
    assert image_advisories(load("azure-dev", unknown)) == []


# ------------------------------------------------------------------ rendered commands
def _nccl_script(stack, image):
    def set_image(raw):
        next(w for w in raw["workloads"] if w["kind"] == "nccl-test")["image"] = image
    cfg = load(stack, set_image)
    w = next(x for x in cfg.workloads if x.kind == "nccl-test")
    return nccl_test.master_script(cfg, w)


def test_nccl_check_calls_the_binaries_where_the_image_has_them():
    """issue 30: all_reduce_perf is not on PATH in the nccl-tests images; the upstream manifests call it by its
    full path (awsome-distributed-training nccl-tests.yaml; oci-hpc-oke BM.GPU.H100.8.yaml)."""
    aws = _nccl_script("aws-dev", "public.ecr.aws/hpc-cloud/nccl-tests:latest")
    assert "/opt/amazon/openmpi/bin/mpirun --allow-run-as-root" in aws
    assert "  /opt/nccl-tests/build/all_reduce_perf -b 8" in aws
    oci = _nccl_script("existing-dev", "iad.ocir.io/idxzjcdglx2s/nccl-tests:cuda-13.1.1-ubuntu-24.04-nccl-2.29.3")
    assert "  /workspace/nccl-tests/build/all_reduce_perf -b 8" in oci
    bare = _nccl_script("aws-dev", "registry.example.com/team/nccl-tests:1")
    assert "\n  all_reduce_perf -b 8" in bare and "\nmpirun --allow-run-as-root" in bare


def test_rendered_example_commands_use_the_fact_paths():
    cfg = load("existing-dev")
    w = next(x for x in cfg.workloads if x.kind == "mpijob")
    objs = build_workload(cfg, w).objects
    launcher = yaml.safe_dump(objs)
    assert "/opt/amazon/openmpi/bin/mpirun --allow-run-as-root" in launcher


def test_docs_carry_the_table_as_the_code_has_it():
    text = open(os.path.join(ROOT, "docs", "workloads.md")).read()
    assert images.markdown_table() in text
    assert all(f"- {k}: {v}" in text for k, v in images.SOURCES.items())


def test_every_image_the_add_ons_render_is_fully_qualified():
    """issue 30: images we choose (not a user's) name their registry, as CRI-O's enforcing short-name mode needs."""
    from multinode.fleet import checks as fleet_checks
    from multinode.fleet import manifests as fleet_manifests
    from multinode.manifests import addons

    def images_in(obj):
        if isinstance(obj, dict):
            for k, v in obj.items():
                if k == "image" and isinstance(v, str) and "repository" not in obj:
                    yield v
                else:
                    yield from images_in(v)
        elif isinstance(obj, list):
            for v in obj:
                yield from images_in(v)

    rendered = list(images_in(addons.gcp_daemonsets(load("gcp-dev"))))
    rendered += list(images_in(addons.rdma_vf_network(load("oci-dev"))))
    fleet = fleet_checks.load(*raw_of("fleet-dev"))
    rendered += list(images_in(fleet_manifests.volcano_global_host_objects(fleet, "kubeconfig")))
    assert len(rendered) >= 5
    for image in rendered:
        assert images.fully_qualified(image), image
