"""DynamoGraphDeployment (NVIDIA Dynamo operator, group nvidia.com) for a `dynamo` workload.

Emits the `nvidia.com/v1beta1` shape, the version the upstream CRD stores
(schemas/dynamo/nvidia.com_dynamographdeployments.yaml: v1alpha1 and v1beta1 are both served,
v1beta1 has `storage: true`). docs/dynamo.md explains how the older v1alpha1 `spec.services` map
maps onto the v1beta1 `spec.components` list.

Shape emitted (every field checked against the v1beta1 schema in the CRD):

    spec:
      backendFramework: vllm | sglang | trtllm
      labels: {...}                              # propagated to every child resource
      components:
      - name: frontend, type: frontend, replicas, podTemplate{spec{containers[main]}}
      - name: worker | prefill | decode, type: worker | prefill | decode, replicas,
        multinode: {nodeCount: N}                # only when N > 1 (the CRD's minimum is 2)
        sharedMemorySize: 64Gi                   # the operator mounts /dev/shm itself
        podTemplate:
          metadata: {labels: {multinode.dev/fabric: enabled, ...}}   # multi-node or disaggregated workers
          spec: {nodeSelector, tolerations, imagePullSecrets, volumes[RWX claim],
                 containers: [{name: main, image, command, args, env, resources{nvidia.com/gpu}}],
                 initContainers: [preflight-dcgm]}   # multi-node components only (preflight.py, issue 34)

Rules kept here:
- the tensor x pipeline parallel flags multiply to multinode.nodeCount x GPUs per node (the
  topology contract; the config checks in multinode/config.py already refused anything else);
- the fabric itself (devices, NCCL env) is injected by the Kyverno policies into pods with
  FABRIC_POD_LABEL, never written here;
- credentials reach containers only as `valueFrom.secretKeyRef` to Kubernetes Secrets that the
  caller creates from Pulumi secrets; no literal value ever lands in the DGD.
Nothing here imports Pulumi.
"""
from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from ... import images, pools
from ...config import ADDON_VERSIONS, StackConfig, Workload
from . import common as wc
from . import preflight

API_VERSION = "nvidia.com/v1beta1"
KIND = "DynamoGraphDeployment"
# v1beta1 CRD, components[].podTemplate: "New components must include a container named "main"
# with a non-empty image. ... The operator merges defaults into the main container."
MAIN_CONTAINER = "main"
GPU_RESOURCE = "nvidia.com/gpu"
DATA_VOLUME = "checkpoints"

# DGD annotations read by the Dynamo operator (docs/kubernetes/deployment/multinode-deployment.md
# and docs/kubernetes/lws.md in ai-dynamo/dynamo): Grove is chosen whenever it is installed unless
# the DGD says enable-grove "false"; the KAI queue defaults to "dynamo" and must exist.
ANNOTATION_ENABLE_GROVE = "nvidia.com/enable-grove"
ANNOTATION_KAI_QUEUE = "nvidia.com/kai-scheduler-queue"

# Runtime images when the workload names none. Same repositories the Dynamo operator uses for its
# own defaults (ai-dynamo/dynamo deploy/operator: defaultVLLMRuntimeImage =
# "nvcr.io/nvidia/ai-dynamo/vllm-runtime:" + DynamoVersion, likewise sglang-runtime and
# tensorrtllm-runtime), tagged with the pinned Dynamo release so runtime and operator agree; on an EFA pool the
# release's '-efa' variant (the image facts table, multinode/images.py).
RUNTIME_IMAGE_REPOSITORIES = images.DYNAMO_RUNTIME_REPOSITORIES

# Worker entry points and flag names per backend:
# - vLLM: `python3 -m dynamo.vllm --model --tensor-parallel-size --pipeline-parallel-size`
#   (upstream examples/backends/vllm/deploy/disagg-multinode.yaml);
# - SGLang: `python3 -m dynamo.sglang --model-path --tp-size --pp-size`
#   (upstream examples/backends/sglang/deploy/disagg-multinode.yaml; --pp-size is SGLang's
#   server-args name for pipeline parallel);
# - TensorRT-LLM: `python3 -m dynamo.trtllm --model --tensor-parallel-size --pipeline-parallel-size`
#   (ai-dynamo/dynamo components/src/dynamo/trtllm/backend_args.py; the upstream YAML examples set
#   tensor_parallel_size in an --extra-engine-args file instead, which a policy cannot read).
BACKENDS: dict[str, dict[str, str]] = {
    "vllm": {"module": "dynamo.vllm", "model": "--model", "tp": "--tensor-parallel-size",
             "pp": "--pipeline-parallel-size"},
    "sglang": {"module": "dynamo.sglang", "model": "--model-path", "tp": "--tp-size", "pp": "--pp-size"},
    "trtllm": {"module": "dynamo.trtllm", "model": "--model", "tp": "--tensor-parallel-size",
               "pp": "--pipeline-parallel-size"},
}

# Prefill/decode flags, as the upstream disaggregated examples use them.
_VLLM_KV_TRANSFER = '{"kv_connector":"NixlConnector","kv_role":"kv_both"}'
SGLANG_BOOTSTRAP_PORT = 30001

# Stack secrets -> (env var in the container, data key inside the Kubernetes Secret). The data keys
# follow the Workload component's convention (hfToken -> "<workload>-hf-token" key "token").
SECRET_ENV = {
    "hfToken": ("HF_TOKEN", "token"),
    "ngcApiKey": ("NGC_API_KEY", "NGC_API_KEY"),
}

# Dynamo worker health endpoint: the upstream DeepSeek-R1 recipe probes workers on /health:9090.
WORKER_HEALTH_PORT = 9090
PROBE_PERIOD_SECONDS = 10

_SEMVER_TAG = re.compile(r"^v?(0|[1-9][0-9]{0,3})\.(0|[1-9][0-9]{0,3})\.(0|[1-9][0-9]{0,3})")


# ------------------------------------------------------------------ small pieces
def dynamo_version(cfg: StackConfig) -> str:
    return cfg.addons.dynamo.version or ADDON_VERSIONS["dynamo"]


def runtime_image(cfg: StackConfig, workload: Workload) -> str:
    """workload.image, else the Dynamo runtime image of the backend at the pinned Dynamo release."""
    _engine(workload)
    return images.dynamo_runtime_image(cfg, workload, dynamo_version(cfg))


def _engine(workload: Workload) -> str:
    engine = workload.engine or ""
    if engine not in BACKENDS:
        raise ValueError(f"workload {workload.name!r}: engine {engine!r} is not a Dynamo backend; "
                         f"use one of {', '.join(BACKENDS)}")
    return engine


def _image_tag(image: str) -> str:
    last = image.rsplit("/", 1)[-1]
    if "@" in last:
        return ""
    return last.split(":", 1)[1] if ":" in last else ""


def runtime_version_override(cfg: StackConfig, image: str) -> str | None:
    """The v1beta1 CRD: DGD admission requires runtimeVersionOverride when the main image tag is not a
    semantic version. Then the pinned Dynamo release is the best statement of the runtime version."""
    if _SEMVER_TAG.match(_image_tag(image)):
        return None
    version = dynamo_version(cfg).lstrip("v")
    m = _SEMVER_TAG.match(version)
    return ".".join(m.groups()) if m else None


def claim(cfg: StackConfig, claim_name: str | None) -> str | None:
    if claim_name:
        return claim_name
    if cfg.storage is None:
        return None
    return cfg.storage.existing_claim or cfg.storage.stable_name


def mount_path(cfg: StackConfig) -> str:
    return cfg.storage.mount_path if cfg.storage else "/checkpoints"


def model_cache_dir(cfg: StackConfig) -> str:
    """Hugging Face cache on the RWX volume: the model is downloaded once, read by every pod."""
    return f"{mount_path(cfg)}/models"


def _secret_ref(value: Any, default_key: str) -> tuple[str, str]:
    """A Secret name (str), a (name, key) pair, or an object with .name and .key (e.g. SecretRef)."""
    if isinstance(value, str):
        return value, default_key
    if isinstance(value, (tuple, list)) and len(value) == 2:
        return str(value[0]), str(value[1])
    name, key = getattr(value, "name", None), getattr(value, "key", None)
    if not name:
        raise ValueError(f"secret reference {value!r}: give a Secret name, a (name, key) pair or an "
                         f"object with .name and .key")
    return str(name), str(key or default_key)


def secret_refs(cfg: StackConfig, workload: Workload,
                secret_names: Mapping[str, Any] | None = None) -> dict[str, tuple[str, str]]:
    """stack secret key -> (Kubernetes Secret name, data key). With no mapping given, the stack's set
    secrets map to "<workload>-<suffix>" Secrets (the Workload component's naming)."""
    out: dict[str, tuple[str, str]] = {}
    if secret_names is not None:
        for config_key, value in secret_names.items():
            default_key = SECRET_ENV.get(config_key, ("", ".dockerconfigjson"))[1]
            out[config_key] = _secret_ref(value, default_key)
        return out
    # the Workload component's naming (one scheme: multinode.manifests.workloads.common)
    present = {"hfToken": (cfg.hf_token, wc.hf_secret), "ngcApiKey": (cfg.ngc_api_key, wc.ngc_secret),
               "imagePullSecret": (cfg.image_pull_secret, wc.pull_secret)}
    for config_key, (value, ref) in present.items():
        if value:
            r = ref(workload)
            out[config_key] = (r.name, r.key)
    return out


def _secret_env(refs: Mapping[str, tuple[str, str]]) -> list[dict[str, Any]]:
    env = []
    for config_key, (env_name, _) in SECRET_ENV.items():
        if config_key in refs:
            name, key = refs[config_key]
            env.append({"name": env_name, "valueFrom": {"secretKeyRef": {"name": name, "key": key}}})
    return env


# ------------------------------------------------------------------ roles
class WorkerRole:
    """One worker component: its name/type, nodes, GPUs per node and parallel sizes."""

    def __init__(self, name: str, type_: str, nodes: int, gpus_per_node: int, tensor_parallel: int,
                 pipeline_parallel: int, replicas: int, mode: str | None):
        self.name, self.type, self.nodes, self.gpus_per_node = name, type_, nodes, gpus_per_node
        self.tensor_parallel, self.pipeline_parallel = tensor_parallel, pipeline_parallel
        self.replicas, self.mode = replicas, mode

    @property
    def multinode(self) -> bool:
        return self.nodes > 1


def worker_roles(cfg: StackConfig, workload: Workload) -> list[WorkerRole]:
    """Aggregated: one worker over workload.nodes; disaggregated: prefill + decode from the roles.
    Defaults come from the resolved model (multinode/resolved.py), the one the config checks read."""
    rw = cfg.resolved(workload)
    if not rw.roles:
        g = rw.main
        return [WorkerRole("worker", "worker", g.nodes, g.gpus_per_node, g.tensor_parallel,
                           g.pipeline_parallel, g.replicas, None)]
    return [WorkerRole(name, name, g.nodes, g.gpus_per_node, g.tensor_parallel, g.pipeline_parallel,
                       g.replicas, name) for name, g in rw.roles.items()]


def worker_args(workload: Workload, role: WorkerRole) -> list[str]:
    engine = _engine(workload)
    flags = BACKENDS[engine]
    args = [flags["model"], workload.model or "", "--served-model-name", workload.model or "",
            flags["tp"], str(role.tensor_parallel), flags["pp"], str(role.pipeline_parallel)]
    if role.mode:
        args += ["--disaggregation-mode", role.mode]
        if engine == "vllm":
            args += ["--kv-transfer-config", _VLLM_KV_TRANSFER]
        elif engine == "sglang":
            args += ["--disaggregation-transfer-backend", "nixl",
                     "--disaggregation-bootstrap-port", str(SGLANG_BOOTSTRAP_PORT)]
    if engine == "sglang":
        args += ["--host", "0.0.0.0", "--trust-remote-code"]
    args += list(workload.extra_args)
    return args


# ------------------------------------------------------------------ components
def _volumes(claim_name: str | None) -> list[dict[str, Any]]:
    if not claim_name:
        return []
    return [{"name": DATA_VOLUME, "persistentVolumeClaim": {"claimName": claim_name, "readOnly": False}}]


def _volume_mounts(cfg: StackConfig, claim_name: str | None) -> list[dict[str, Any]]:
    if not claim_name:
        return []
    return [{"name": DATA_VOLUME, "mountPath": mount_path(cfg), "readOnly": False}]


def _env(cfg: StackConfig, workload: Workload, refs: Mapping[str, tuple[str, str]],
         claim_name: str | None) -> list[dict[str, Any]]:
    env: list[dict[str, Any]] = []
    if claim_name:
        env.append({"name": "HF_HOME", "value": model_cache_dir(cfg)})
    env += _secret_env(refs)
    taken = {e["name"] for e in env}
    env += [wc.env_entry(k, v) for k, v in workload.env.items() if k not in taken]
    return env


def _pod_spec(cfg: StackConfig, container: dict[str, Any], claim_name: str | None,
              refs: Mapping[str, tuple[str, str]], node_selector: dict[str, str] | None) -> dict[str, Any]:
    spec: dict[str, Any] = {"containers": [container]}
    if node_selector:
        spec["nodeSelector"] = dict(node_selector)
    spec["tolerations"] = pools.tolerations()
    if "imagePullSecret" in refs:
        spec["imagePullSecrets"] = [{"name": refs["imagePullSecret"][0]}]
    volumes = _volumes(claim_name)
    if volumes:
        spec["volumes"] = volumes
    return spec


def frontend_component(cfg: StackConfig, workload: Workload, image: str, claim_name: str | None,
                       refs: Mapping[str, tuple[str, str]]) -> dict[str, Any]:
    """The OpenAI-compatible HTTP frontend (python3 -m dynamo.frontend); no GPUs, no node pinning."""
    container: dict[str, Any] = {
        "name": MAIN_CONTAINER,
        "image": image,
        "command": ["python3", "-m", "dynamo.frontend"],
        "args": ["--http-port", str(workload.port)],
        "env": _env(cfg, workload, refs, claim_name),
    }
    mounts = _volume_mounts(cfg, claim_name)
    if mounts:
        container["volumeMounts"] = mounts
    comp: dict[str, Any] = {
        "name": "frontend",
        "type": "frontend",
        "replicas": 1,
        "podTemplate": {"metadata": {"labels": wc.labels(workload, "frontend")},
                        "spec": _pod_spec(cfg, container, claim_name, refs, None)},
    }
    return comp


def worker_component(cfg: StackConfig, workload: Workload, role: WorkerRole, image: str,
                     claim_name: str | None, refs: Mapping[str, tuple[str, str]]) -> dict[str, Any]:
    engine = _engine(workload)
    gpus = str(role.gpus_per_node)
    container: dict[str, Any] = {
        "name": MAIN_CONTAINER,
        "image": image,
        "command": ["python3", "-m", BACKENDS[engine]["module"]],
        "args": worker_args(workload, role),
        "env": _env(cfg, workload, refs, claim_name),
        "resources": {"limits": {GPU_RESOURCE: gpus}, "requests": {GPU_RESOURCE: gpus}},
        # the first start downloads the model: allow startupTimeoutMinutes before restarting
        "startupProbe": {"httpGet": {"path": "/health", "port": WORKER_HEALTH_PORT},
                         "periodSeconds": PROBE_PERIOD_SECONDS, "timeoutSeconds": 5,
                         "failureThreshold": max(1, workload.startup_timeout_minutes * 60 // PROBE_PERIOD_SECONDS)},
    }
    mounts = _volume_mounts(cfg, claim_name)
    if mounts:
        container["volumeMounts"] = mounts
    labels = wc.labels(workload, role.name)
    # multi-node roles talk NCCL across nodes; disaggregated roles move the KV cache between prefill and
    # decode pods on different nodes (NIXL), so every disaggregated worker needs the fabric too
    if role.multinode or workload.disaggregated is not None:
        labels[pools.FABRIC_POD_LABEL] = pools.FABRIC_POD_LABEL_VALUE
    elif role.gpus_per_node:
        # a one-node GPU role on a fabric pool opts out explicitly (kyverno require-fabric-label-on-fabric-pool)
        labels[pools.SINGLE_NODE_POD_LABEL] = pools.SINGLE_NODE_POD_LABEL_VALUE
    pool = cfg.pool(workload.node_pool)
    comp: dict[str, Any] = {"name": role.name, "type": role.type, "replicas": role.replicas}
    if role.multinode:
        comp["multinode"] = {"nodeCount": role.nodes}
    comp["sharedMemorySize"] = f"{workload.shm_size_gi}Gi"
    spec = _pod_spec(cfg, container, claim_name, refs, pools.node_selector(cfg, pool))
    if role.multinode:
        # issue 34: DCGM diagnostics before a multi-node component starts. The operator merges podTemplate.spec
        # (initContainers included) into the pod spec of the leader and of the workers, Grove or LWS
        # (docs/preflight.md cites its source); the rendezvous is the operator's own, so no NCCL part.
        inits = preflight.for_component(cfg, workload, role.nodes, role.gpus_per_node)
        if inits:
            spec["initContainers"] = inits
    comp["podTemplate"] = {"metadata": {"labels": labels}, "spec": spec}
    return comp


def dynamo_graph_deployment(cfg: StackConfig, workload: Workload, *, claim_name: str | None = None,
                            secret_names: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """The DynamoGraphDeployment (nvidia.com/v1beta1) for a `dynamo` workload.

    claim_name: the RWX PersistentVolumeClaim (default: storage.existingClaim, else storage.name).
    secret_names: stack secret key (hfToken, ngcApiKey, imagePullSecret) -> Kubernetes Secret name,
    (name, data key) pair, or an object with .name/.key; default "<workload>-hf-token" etc. for the
    stack secrets that are set. Only references are emitted, never values."""
    if workload.kind != "dynamo":
        raise ValueError(f"workload {workload.name!r} is kind {workload.kind!r}, not dynamo")
    engine = _engine(workload)
    image = runtime_image(cfg, workload)
    pvc = claim(cfg, claim_name)
    refs = secret_refs(cfg, workload, secret_names)
    components = [frontend_component(cfg, workload, image, pvc, refs)]
    components += [worker_component(cfg, workload, r, image, pvc, refs) for r in worker_roles(cfg, workload)]
    override = runtime_version_override(cfg, image)
    if override:
        for comp in components:
            comp["runtimeVersionOverride"] = override
    annotations: dict[str, str] = {}
    if not cfg.addons.grove.enabled:
        # LWS + Volcano path: keep the operator off Grove even if Grove is present in the cluster.
        annotations[ANNOTATION_ENABLE_GROVE] = "false"
    elif workload.queue and cfg.addons.kai.enabled:     # issue 18: no KAI, no KAI queue to name
        annotations[ANNOTATION_KAI_QUEUE] = workload.queue
    metadata: dict[str, Any] = {"name": workload.name, "namespace": workload.namespace,
                                "labels": wc.labels(workload)}
    if annotations:
        metadata["annotations"] = annotations
    return {
        "apiVersion": API_VERSION,
        "kind": KIND,
        "metadata": metadata,
        "spec": {
            "backendFramework": engine,
            "labels": wc.labels(workload),
            "components": components,
        },
    }
