"""Image facts: the one table of the container images an example or a default renders (issue 30).

Like the machine catalog (multinode/catalog.py), one table, each fact with its source key (SOURCES below):
for each image repository (fully qualified, as a container runtime resolves it), the NCCL net plugin it
carries for the fabrics whose plugin is the image's business, and where the programs our rendered commands
call live in it. Every other layer reads it: the workload builders (default images, the paths the NCCL check
and the launchers call), `plan` (refuses an image known to lack the pinned plugin, advises on one it has no
facts for), the docs (docs/workloads.md "Image facts").

Which fabric needs what of the image (FABRIC_PLUGIN):
- efa: aws-ofi-nccl must be in the image. The fabric profile pins NCCL_NET to its name (fabric.NCCL_NET), so
  without it NCCL aborts at init instead of falling back to sockets. We do not mount it from the host.
- infiniband, roce: NCCL's built-in IB verbs transport (NVIDIA/nccl src/transport/net_ib.cc, net name "IB"):
  any image with NCCL has it; nothing per image to check.
- tcpx, tcpxo, gcp-rdma: the plugin comes from the host (the installer DaemonSet of manifests/addons.py writes
  it under /home/kubernetes/bin, the fabric policy mounts it): nothing per image to check.

A fact not listed is not claimed: an image with no entry is advised on, naming what could not be checked.
"""
from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import TYPE_CHECKING

from .errors import Problem

if TYPE_CHECKING:                   # annotations only: config imports this module
    from .config import StackConfig, Workload

CARRIES, LACKS = "carries", "lacks"

SOURCES: dict[str, str] = {
    "I1": "aws-samples/awsome-distributed-training@7217859f micro-benchmarks/nccl-tests/nccl-tests.Dockerfile:56-57 "
          "(LD_LIBRARY_PATH /opt/amazon/ofi-nccl/lib/<arch>-linux-gnu, PATH /opt/amazon/openmpi/bin), :79-84 (EFA "
          "installer: libfabric + aws-ofi-nccl), :44 + :50 (openssh-server, /var/run/sshd), :95-102 (nccl-tests built "
          "in /opt/nccl-tests, binaries in /opt/nccl-tests/build); buildspec.yaml:29 (pushed as "
          "public.ecr.aws/hpc-cloud/nccl-tests:<tag> and :latest)",
    "I2": "aws-samples/awsome-distributed-training@7217859f micro-benchmarks/nccl-tests/kubernetes/nccl-tests.yaml"
          ":26,60 (calls /opt/amazon/openmpi/bin/mpirun and /opt/nccl-tests/build/all_reduce_perf by full path)",
    "I3": "aws/deep-learning-containers@e0ecedea docker/vllm/Dockerfile:3 (FROM vllm/vllm-openai), :11 + :73-75 "
          "(EFA installer 1.47.0 added), :22 (LD_LIBRARY_PATH /opt/amazon/ofi-nccl/lib); scripts/docker/common/"
          "install_efa.sh:19-31 (EFA >= 1.44.0: /opt/amazon/ofi-nccl/lib/libnccl-net-ofi.so, no <arch> folder)",
    "I4": "aws/deep-learning-containers EC2 PyTorch training images: the EFA installer (libfabric + aws-ofi-nccl) in "
          "the image (the repository's release notes / available_images.md: '-ec2' images 'with EFA'); the "
          "pytorch/training/docker/... Dockerfiles cited before are gone from HEAD@e0ecedea (the repository now "
          "builds from docker/<framework>/)",
    "I5": "NVIDIA-NeMo/Megatron-Bridge PR #5033: 'The NVIDIA PyTorch base image no longer ships the aws-ofi-nccl "
          "plugin ... and now defaults NCCL_NET_PLUGIN=spcx'",
    "I6": "horovod/horovod@05d6f7a7 docker/horovod/Dockerfile (NCCL from apt libnccl2, Open MPI 3.0.0 in /usr/local, "
          "no EFA installer; the repository's examples are copied to /horovod/examples)",
    "I7": "docs.nvidia.com/dynamo v1.2.0 and v1.3.0 resources/release-artifacts: '<backend>-runtime:<version>-efa' "
          "'Runtime container ... with AWS EFA' for vllm, sglang and tensorrtllm (Experimental); v1.0.x / v1.1.x "
          "publish '-efa-amd64' for vllm and tensorrtllm only; releases before 1.0 none",
    "I8": "ai-dynamo/dynamo@9b1ba229 container/templates/aws.Dockerfile (the '-efa' stage: the runtime stage plus "
          "efa_installer.sh, 'which includes: libfabric and aws-ofi-nccl plugin': the plain runtime has neither)",
    "I9": "docs.nvidia.com/dynamo llms-full.txt 'Pull a Container' (`python3 -m dynamo.<backend>` / "
          "`python3 -m dynamo.frontend` in the <backend>-runtime containers)",
    "I10": "oracle-quickstart/oci-hpc-oke@61d210ac docker/nccl-tests/Dockerfile:11 (openssh-server), :46-49 "
           "(nccl-tests built in /workspace/nccl-tests, linked from nccl-tests-<version>); manifests/nccl-tests/"
           "kueue/BM.GPU.H100.8.yaml:79,98 (mpirun from PATH, /workspace/nccl-tests/build/all_reduce_perf)",
    "I12": "sgl-project/sglang@004740a9 docker/Dockerfile (the version building SGLang 0.5.5; the current one was "
           "not read): NCCL from pip (nvidia-nccl-cu12/13), Ubuntu's libfabric-dev, no EFA installer, no aws-ofi-nccl",
    "I11": "aws/deep-learning-containers docs 'Disaggregated LLM Serving using NVIDIA Dynamo DLCs' (aws.github.io/"
           "deep-learning-containers/dynamo/): dynamo:<v>-efa-<backend>-runtime-v1 'with EFA', x86_64",
}

# fabric kind -> (whose business the plugin is: "image" | "nccl" | "host", what it is)
FABRIC_PLUGIN: dict[str, tuple[str, str]] = {
    "efa": ("image", "the aws-ofi-nccl plugin (libnccl-net-ofi.so, NCCL net 'AWS Libfabric')"),
    "infiniband": ("nccl", "NCCL's built-in IB verbs net ('IB')"),
    "roce": ("nccl", "NCCL's built-in IB verbs net ('IB')"),
    "tcpx": ("host", "the GPUDirect-TCPX plugin the installer DaemonSet puts on the node, mounted by the policy"),
    "tcpxo": ("host", "the GPUDirect-TCPXO plugin the installer DaemonSet puts on the node, mounted by the policy"),
    "gcp-rdma": ("host", "the gIB plugin the installer DaemonSet puts on the node, mounted by the policy"),
}


@dataclass(frozen=True)
class ImageFacts:
    """What a repository's images (or those of its tags matching `tags`) are known to carry."""

    repository: str                                   # fully qualified, no tag: registry/namespace/name
    efa: str | None                                   # CARRIES | LACKS aws-ofi-nccl; None = no source says
    source: str                                       # source keys of the facts (SOURCES)
    programs: Mapping[str, str] = field(default_factory=dict)   # program -> absolute path in the image
    modules: tuple[str, ...] = ()                     # Python modules run with `python3 -m` (the Dynamo backends)
    tags: str = ""                                    # regex a tag must match for these facts ("" = any tag)
    note: str = ""

    def matches(self, repository: str, tag: str) -> bool:
        return repository == self.repository and (not self.tags or re.fullmatch(self.tags, tag) is not None)


_DYNAMO = "nvcr.io/nvidia/ai-dynamo"
_EFA_TAG = r".*-efa(-amd64)?"
_NOT_EFA_TAG = r"(?!.*-efa).*"
_AWS_NCCL_TESTS = MappingProxyType({"mpirun": "/opt/amazon/openmpi/bin/mpirun",
                                    "all_reduce_perf": "/opt/nccl-tests/build/all_reduce_perf",
                                    "sshd": "/usr/sbin/sshd"})

IMAGES: tuple[ImageFacts, ...] = (
    ImageFacts("public.ecr.aws/hpc-cloud/nccl-tests", CARRIES, "I1,I2", _AWS_NCCL_TESTS),
    ImageFacts("iad.ocir.io/idxzjcdglx2s/nccl-tests", None, "I10",
               {"mpirun": "mpirun", "all_reduce_perf": "/workspace/nccl-tests/build/all_reduce_perf",
                "sshd": "/usr/sbin/sshd"},
               note="oci-hpc-oke's image for RDMA shapes (no EFA installer read there); mpirun from PATH"),
    ImageFacts("public.ecr.aws/deep-learning-containers/vllm", CARRIES, "I3", tags=r".*-ec2"),
    ImageFacts("public.ecr.aws/deep-learning-containers/pytorch-training", CARRIES, "I4", tags=r".*-ec2"),
    ImageFacts("public.ecr.aws/deep-learning-containers/dynamo", CARRIES, "I11", tags=r".*-efa-.*",
               modules=("dynamo.frontend", "dynamo.vllm", "dynamo.sglang", "dynamo.trtllm")),
    ImageFacts("docker.io/vllm/vllm-openai", LACKS, "I3",
               note="AWS's vLLM DLC is this image plus the EFA installer"),
    ImageFacts("nvcr.io/nvidia/pytorch", LACKS, "I5"),
    ImageFacts("docker.io/lmsysorg/sglang", LACKS, "I12"),
    ImageFacts("docker.io/horovod/horovod", LACKS, "I6", {"mpirun": "/usr/local/bin/mpirun", "sshd": "/usr/sbin/sshd"},
               note="examples under /horovod/examples"),
    *(ImageFacts(f"{_DYNAMO}/{name}-runtime", efa, "I7,I8,I9", tags=tags,
                 modules=("dynamo.frontend", f"dynamo.{backend}"))
      for name, backend in (("vllm", "vllm"), ("sglang", "sglang"), ("tensorrtllm", "trtllm"))
      for efa, tags in ((CARRIES, _EFA_TAG), (LACKS, _NOT_EFA_TAG))),
)

# Images used when a workload states none, per engine; EFA pools get an image that carries aws-ofi-nccl where
# the table names one (an engine without one there must state its image: problems() says so).
# Engine releases (issue 17): vLLM v0.31.0 in its CUDA 12.9 build (the plain v0.31.0 tag is built for CUDA 13.0
# and needs an R580+ driver); SGLang v0.5.21 (CUDA 13 builds only). Neither tag has been pulled or run here.
DEFAULT_IMAGES: dict[str, str] = {
    "vllm": "docker.io/vllm/vllm-openai:v0.31.0-cu129",
    "sglang": "docker.io/lmsysorg/sglang:v0.5.21-cu130",
    "torchrun": "nvcr.io/nvidia/pytorch:25.08-py3",
    "deepspeed": "nvcr.io/nvidia/pytorch:25.08-py3",
}
EFA_DEFAULT_IMAGES: dict[str, str] = {
    "vllm": "public.ecr.aws/deep-learning-containers/vllm:0.11.1-gpu-py312-ec2",
    "torchrun": "public.ecr.aws/deep-learning-containers/pytorch-training:2.8.0-gpu-py312-cu129-ubuntu22.04-ec2",
    "deepspeed": "public.ecr.aws/deep-learning-containers/pytorch-training:2.8.0-gpu-py312-cu129-ubuntu22.04-ec2",
}

# Dynamo runtime images (the operator's own defaults: "nvcr.io/nvidia/ai-dynamo/<backend>-runtime:" + version).
DYNAMO_RUNTIME_REPOSITORIES: dict[str, str] = {
    "vllm": f"{_DYNAMO}/vllm-runtime",
    "sglang": f"{_DYNAMO}/sglang-runtime",
    "trtllm": f"{_DYNAMO}/tensorrtllm-runtime",
}

# Workload kinds whose pods run the stated image, else default_image(); Dynamo kinds use dynamo_runtime_image().
DEFAULT_IMAGE_KINDS = ("lws-inference", "volcano-training", "indexed-job", "trainjob", "mpijob", "nccl-test")
DYNAMO_KINDS = ("dynamo", "grove-inference")

_DOCKER_HUB = "docker.io"


def normalize(image: str) -> tuple[str, str]:
    """(fully qualified repository, tag) as a container runtime resolves `image` (Docker's rules: a first part
    without '.' or ':' that is not 'localhost' is a Docker Hub namespace; a bare name is docker.io/library)."""
    name, _, digest = image.partition("@")
    head, _, last = name.rpartition("/")
    repo_last, _, tag = last.partition(":")
    repo = f"{head}/{repo_last}" if head else repo_last
    first = repo.split("/", 1)[0]
    if "/" not in repo:
        repo = f"{_DOCKER_HUB}/library/{repo}"
    elif not ("." in first or ":" in first or first == "localhost"):
        repo = f"{_DOCKER_HUB}/{repo}"
    return repo, tag or ("" if digest else "latest")


def fully_qualified(image: str) -> bool:
    """Does `image` name its registry? (CRI-O in enforcing short-name mode refuses names that do not.)"""
    first = image.split("/", 1)[0]
    return "/" in image and ("." in first or ":" in first or first == "localhost")


def facts(image: str) -> ImageFacts | None:
    repo, tag = normalize(image)
    return next((f for f in IMAGES if f.matches(repo, tag)), None)


def lacks_plugin(kind: str, image: str) -> tuple[bool, str]:
    """(True, evidence) when the image is known to lack the fabric's NCCL plugin."""
    if FABRIC_PLUGIN.get(kind, ("", ""))[0] != "image":
        return False, ""
    f = facts(image)
    if f is None or f.efa != LACKS:
        return False, ""
    why = "; ".join(SOURCES[k] for k in f.source.split(","))
    return True, f"{f.repository} lacks it ({why})" + (f"; {f.note}" if f.note else "")


def program(image: str, name: str) -> str | None:
    """Where `name` lives in the image, per the table; None when no fact says."""
    f = facts(image)
    return f.programs.get(name) if f else None


# ------------------------------------------------------------------ which image a workload runs
def _fabric_kind(cfg: StackConfig, w: Workload) -> str:
    from . import fabric
    try:
        return fabric.effective_kind(cfg, cfg.machine(cfg.pool(w.node_pool)))
    except KeyError:               # unknown pool / machine (catalog.UnknownMachine): config reports it
        return "none"


def default_image(cfg: StackConfig, w: Workload) -> str | None:
    """The image a DEFAULT_IMAGE_KINDS workload runs when it states none (None: the kind has no default)."""
    engine = w.engine or ""
    if _fabric_kind(cfg, w) == "efa" and engine in EFA_DEFAULT_IMAGES:
        return EFA_DEFAULT_IMAGES[engine]
    return DEFAULT_IMAGES.get(engine)


def dynamo_efa_tag(version: str, backend: str) -> str | None:
    """The tag of the Dynamo runtime image with EFA for this release (I7), or None when the release has none."""
    m = re.match(r"^v?(\d+)\.(\d+)", version)
    if not m:
        return None
    major_minor = (int(m.group(1)), int(m.group(2)))
    if major_minor >= (1, 2):
        return f"{version}-efa"
    if major_minor >= (1, 0) and backend in ("vllm", "trtllm"):
        return f"{version}-efa-amd64"
    return None


def dynamo_runtime_image(cfg: StackConfig, w: Workload, version: str) -> str:
    """The stated image, else the Dynamo runtime image of the backend at `version`; on an EFA pool its '-efa'
    variant (I7). A release without one keeps the plain image (problems() refuses it while NCCL_NET is pinned)."""
    if w.image:
        return w.image
    backend = w.engine or "vllm"
    repo = DYNAMO_RUNTIME_REPOSITORIES.get(backend, DYNAMO_RUNTIME_REPOSITORIES["vllm"])
    if _fabric_kind(cfg, w) == "efa":
        tag = dynamo_efa_tag(version, backend)
        if tag:
            return f"{repo}:{tag}"
    return f"{repo}:{version}"


def workload_image(cfg: StackConfig, w: Workload) -> str | None:
    """The image the workload's GPU pods run (stated or default); None when it has none (config reports it)."""
    if w.kind in DYNAMO_KINDS:
        from .config import ADDON_VERSIONS
        return dynamo_runtime_image(cfg, w, cfg.addons.dynamo.version or ADDON_VERSIONS["dynamo"])
    if w.image:
        return w.image
    if w.kind in DEFAULT_IMAGE_KINDS:
        return default_image(cfg, w)
    return None


# Programs (by name in the table) and Python modules the rendered commands of a kind call.
def needed_programs(w: Workload) -> tuple[str, ...]:
    if w.kind == "nccl-test":
        return ("mpirun", "all_reduce_perf", "sshd")
    if w.kind == "mpijob" and w.engine != "nim":
        return ("mpirun", "sshd")
    return ()


def needed_modules(w: Workload) -> tuple[str, ...]:
    if w.kind in DYNAMO_KINDS:
        backend = w.engine or "vllm"
        return ("dynamo.frontend", f"dynamo.{backend}")
    return ()


# ------------------------------------------------------------------ plan's checks
def _multi_node(w: Workload) -> bool:
    roles = [w.disaggregated.prefill, w.disaggregated.decode] if w.disaggregated else []
    return w.nodes > 1 or any(r.nodes > 1 for r in roles) or w.kind == "nccl-test"


def problems(cfg: StackConfig) -> list[Problem]:
    """Refused: a workload on a fabric pool whose image (stated or default) is known to lack the fabric's
    plugin while the fabric pins NCCL_NET to it (NCCL would abort at init)."""
    from . import fabric
    out: list[Problem] = []
    if not cfg.fabric.enabled or not cfg.fabric.pin_transport:
        return out
    for i, w in enumerate(cfg.workloads):
        kind = _fabric_kind(cfg, w)
        image = workload_image(cfg, w)
        if not image or not _multi_node(w):      # a single-node pod gets no fabric (no NCCL_NET pin)
            continue
        bad, why = lacks_plugin(kind, image)
        if bad:
            out.append(Problem(f"workloads[{i}].image",
                               f"{image} on a {kind!r} fabric pool: the fabric pins NCCL_NET="
                               f"{fabric.NCCL_NET[kind]!r}, so NCCL aborts at init without "
                               f"{FABRIC_PLUGIN[kind][1]}: {why}; {_fix(cfg, w, kind)}"))
    return out


def _fix(cfg: StackConfig, w: Workload, kind: str) -> str:
    if kind != "efa":
        return "use an image that carries it"
    if w.kind in DYNAMO_KINDS:
        from .config import ADDON_VERSIONS
        backend = w.engine or "vllm"
        version = cfg.addons.dynamo.version or ADDON_VERSIONS["dynamo"]
        tag = dynamo_efa_tag(version, backend) or dynamo_efa_tag("1.3.0", backend)
        repo = DYNAMO_RUNTIME_REPOSITORIES.get(backend, DYNAMO_RUNTIME_REPOSITORIES["vllm"])
        return f"use the Dynamo runtime with AWS EFA, e.g. {repo}:{tag}"
    suggestion = EFA_DEFAULT_IMAGES.get(w.engine or "") if w.kind in DEFAULT_IMAGE_KINDS else None
    if suggestion:
        return f"use an image that carries it, e.g. {suggestion} (or remove image to get it by default)"
    return "use an image that carries it (multinode/images.py IMAGES lists the ones known to)"


def _unchecked_program(name: str) -> str:
    if name == "sshd":          # the MPI workers run it by its Debian / Ubuntu path (openssh-server)
        return "that it has /usr/sbin/sshd (the workers run it by that path)"
    return f"where {name} is (the command calls it by name, from PATH)"


def advisories(cfg: StackConfig) -> list[Problem]:
    """- an image known to lack the fabric's plugin while NCCL_NET is not pinned (NCCL falls back to sockets);
    - an image the table has no facts for, on a fabric whose plugin is the image's business or for a kind whose
      commands call programs by path: what could not be checked;
    - a known image whose facts do not confirm a program / module the rendered command calls."""
    out: list[Problem] = []
    for i, w in enumerate(cfg.workloads):
        image = workload_image(cfg, w)
        if not image:
            continue
        kind = _fabric_kind(cfg, w)
        image_plugin = cfg.fabric.enabled and FABRIC_PLUGIN.get(kind, ("", ""))[0] == "image" and _multi_node(w)
        at = f"workloads[{i}].image"
        if image_plugin and not cfg.fabric.pin_transport:
            bad, why = lacks_plugin(kind, image)
            if bad:
                out.append(Problem(at, f"{image} on a {kind!r} fabric pool: {why}; NCCL falls back to TCP sockets; "
                                       f"{_fix(cfg, w, kind)}"))
        f = facts(image)
        programs, modules = needed_programs(w), needed_modules(w)
        if f is None:
            unchecked = ([f"whether it carries {FABRIC_PLUGIN[kind][1]}"] if image_plugin else []) + \
                        [_unchecked_program(p) for p in programs] + \
                        [f"that it has the Python module {m}" for m in modules]
            if unchecked:
                out.append(Problem(at, f"no image facts for {image} (multinode/images.py IMAGES): not checked "
                                       f"{'; '.join(unchecked)}"))
            continue
        missing = [p for p in programs if p not in f.programs] + [m for m in modules if m not in f.modules]
        if missing:
            out.append(Problem(at, f"the image facts of {f.repository} do not confirm {', '.join(missing)}, which "
                                   f"the rendered command calls"))
    return out


# ------------------------------------------------------------------ the docs' copy of the table
def markdown_table() -> str:
    """IMAGES as the Markdown table docs/workloads.md "Image facts" carries (a test keeps the two equal)."""
    rows = ["| Repository (tags) | EFA: aws-ofi-nccl | InfiniBand / RoCE | TCPX / TCPXO / gIB | Programs, modules "
            "| Sources |", "|---|---|---|---|---|---|"]
    for f in IMAGES:
        repo = f"`{f.repository}`" + (f" (`{f.tags}`)" if f.tags else "")
        efa = {CARRIES: "carries", LACKS: "lacks", None: "no source read"}[f.efa]
        progs = ", ".join([f"`{k}` {v}" for k, v in f.programs.items()] + [f"`{m}`" for m in f.modules]) or "-"
        rows.append(f"| {repo} | {efa} | NCCL built-in | from the host | {progs} | {f.source} |")
    return "\n".join(rows)
