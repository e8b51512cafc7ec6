"""Pieces every workload builder shares: labels, GPU resources, the pool placement, /dev/shm, the
RWX volume, secret references and probes.

Rules kept here so every workload kind agrees on them:
- a pod that spans nodes carries FABRIC_POD_LABEL=FABRIC_POD_LABEL_VALUE; the fabric itself (devices,
  NCCL env, volumes) is injected by the Kyverno policies generated from multinode/fabric.py, never here;
- GPU requests equal GPU limits (nvidia.com/gpu = GPUs per pod) on every GPU pod of a gang;
- credentials reach containers only through `valueFrom.secretKeyRef` / `imagePullSecrets`: the
  Workload component creates the Kubernetes Secrets named by `SecretRef` from Pulumi secrets.
"""
from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from ... import images, pools
from ...config import StackConfig, Workload
from ..storage import MANAGED_BY

GPU_RESOURCE = "nvidia.com/gpu"
WORKLOAD_LABEL = "multinode.dev/workload"
ROLE_LABEL = "multinode.dev/role"
SHM_VOLUME = "dshm"
DATA_VOLUME = "checkpoints"
RESULTS_VOLUME = "results"

# Images used when a workload sets none: the image facts table (multinode/images.py) holds the defaults per
# engine and fabric, fully qualified, with what each carries. NIM, MPI and nccl-tests images are site specific,
# so those kinds must name their image (config check).


@dataclass(frozen=True)
class SecretRef:
    """A Kubernetes Secret the Workload component creates from the Pulumi secret `config_key`."""
    config_key: str        # hfToken | ngcApiKey | imagePullSecret (top-level stack secrets)
    name: str              # Kubernetes Secret name
    key: str               # data key inside the Secret
    secret_type: str = "Opaque"
    # issue 18b: a Secret the user already has (workloads[].ngcApiSecret / imagePullSecrets): named, never created
    existing: bool = False


@dataclass
class WorkloadManifests:
    """Everything one workload needs, as plain dicts, plus the Secrets to create from Pulumi secrets."""
    name: str
    kind: str
    namespace: str
    objects: list[dict[str, Any]] = field(default_factory=list)
    secrets: list[SecretRef] = field(default_factory=list)
    # objects whose `data` the cluster writes (Pulumi must not reset it): names of ConfigMaps
    runtime_written: list[str] = field(default_factory=list)
    # objects whose spec.replicas an HPA owns (Pulumi must not reset it): names of LeaderWorkerSets
    hpa_scaled: list[str] = field(default_factory=list)


def labels(w: Workload, role: str | None = None) -> dict[str, str]:
    out = dict(MANAGED_BY)
    out[WORKLOAD_LABEL] = w.name
    if role:
        out[ROLE_LABEL] = role
    return out


def fabric_labels(w: Workload, role: str | None = None) -> dict[str, str]:
    """Labels of a pod that spans nodes: the Kyverno fabric policies select it by FABRIC_POD_LABEL."""
    out = labels(w, role)
    out[pools.FABRIC_POD_LABEL] = pools.FABRIC_POD_LABEL_VALUE
    return out


def single_node_labels(w: Workload, role: str | None = None) -> dict[str, str]:
    """Labels of a GPU pod that runs on one node: the explicit opt-out the fabric-pool rule accepts."""
    out = labels(w, role)
    out[pools.SINGLE_NODE_POD_LABEL] = pools.SINGLE_NODE_POD_LABEL_VALUE
    return out


def metadata(w: Workload, name: str | None = None, role: str | None = None) -> dict[str, Any]:
    return {"name": name or w.name, "namespace": w.namespace, "labels": labels(w, role)}


def image(cfg: StackConfig, w: Workload) -> str:
    """The stated image, else the default of the engine on the pool's fabric (images.workload_image)."""
    chosen = images.workload_image(cfg, w)
    if not chosen:
        raise ValueError(f"workload {w.name!r} has no image and its kind no default (config refuses this)")
    return chosen


def gpu_resources(gpus: int) -> dict[str, Any]:
    """Identical requests and limits: extended resources must match, and the gang must be uniform."""
    return {"requests": {GPU_RESOURCE: str(gpus)}, "limits": {GPU_RESOURCE: str(gpus)}}


def mount_path(cfg: StackConfig) -> str:
    return cfg.storage.mount_path if cfg.storage else "/checkpoints"


def claim_name(cfg: StackConfig) -> str | None:
    """The RWX claim every rank mounts (existing claim, else the stack's claim: storage.resourceName or name)."""
    if cfg.storage is None:
        return None
    return cfg.storage.existing_claim or cfg.storage.stable_name


def checkpoint_dir(cfg: StackConfig, w: Workload) -> str:
    """Per-workload checkpoint folder on the RWX volume (resume-from-latest reads it)."""
    return w.checkpoint_dir or f"{mount_path(cfg)}/checkpoints/{w.name}"


def model_cache_dir(cfg: StackConfig) -> str:
    """Shared model cache on the RWX volume: downloaded once, read by every pod and every restart."""
    return f"{mount_path(cfg)}/models"


def volumes(cfg: StackConfig, w: Workload, with_data: bool = True) -> list[dict[str, Any]]:
    # /dev/shm as a memory-backed emptyDir: NCCL and the engines' IPC need more than the 64 MiB default.
    out: list[dict[str, Any]] = [{"name": SHM_VOLUME, "emptyDir": {"medium": "Memory",
                                                                   "sizeLimit": f"{w.shm_size_gi}Gi"}}]
    claim = claim_name(cfg)
    if with_data and claim:
        out.append({"name": DATA_VOLUME, "persistentVolumeClaim": {"claimName": claim, "readOnly": False}})
    if with_data and w.dataset is not None:
        out.append({"name": DATASET_VOLUME, "persistentVolumeClaim": {"claimName": w.dataset.claim,
                                                                      "readOnly": w.dataset.read_only}})
    return out


DATASET_VOLUME = "dataset"


def dataset_mount(w: Workload) -> list[dict[str, Any]]:
    """issue 31: the training data beside the checkpoint volume (workloads[].dataset), in every rank."""
    if w.dataset is None:
        return []
    return [{"name": DATASET_VOLUME, "mountPath": w.dataset.mount_path, "readOnly": w.dataset.read_only}]


def with_requests(cont: dict[str, Any], w: Workload) -> dict[str, Any]:
    """issue 31: the container's cpu / memory requests from workloads[].cpu / memoryGi (the fabric policy then adds
    no per-GPU share: it sets each only where the container requests none, manifests/kyverno.py)."""
    req: dict[str, str] = {}
    if w.cpu is not None:
        req["cpu"] = f"{w.cpu:g}"
    if w.memory_gi is not None:
        req["memory"] = f"{w.memory_gi}Gi"
    if req:
        res = cont.setdefault("resources", {})
        res["requests"] = {**res.get("requests", {}), **req}
    return cont


def volume_mounts(cfg: StackConfig, with_data: bool = True) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = [{"name": SHM_VOLUME, "mountPath": "/dev/shm"}]
    if with_data and claim_name(cfg):
        out.append({"name": DATA_VOLUME, "mountPath": mount_path(cfg), "readOnly": False})
    return out


# ------------------------------------------------------------------ secrets
def hf_secret(w: Workload) -> SecretRef:
    return SecretRef("hfToken", f"{w.name}-hf-token", "token")


def ngc_secret(w: Workload) -> SecretRef:
    return SecretRef("ngcApiKey", f"{w.name}-ngc-api-key", "NGC_API_KEY")


def pull_secret(w: Workload) -> SecretRef:
    return SecretRef("imagePullSecret", f"{w.name}-image-pull", ".dockerconfigjson",
                     "kubernetes.io/dockerconfigjson")


def secret_env(name: str, ref: SecretRef) -> dict[str, Any]:
    return {"name": name, "valueFrom": {"secretKeyRef": {"name": ref.name, "key": ref.key}}}


def model_secrets(cfg: StackConfig, w: Workload, want_hf: bool = True,
                  want_ngc: bool = False) -> list[SecretRef]:
    """The Secrets this workload uses, given which stack secrets are set."""
    out: list[SecretRef] = []
    if want_hf and cfg.hf_token:
        out.append(hf_secret(w))
    if want_ngc and w.ngc_api_secret:
        # the NIM chart's model.ngcAPISecret: an existing Secret with the key NGC_API_KEY
        out.append(SecretRef("ngcApiKey", w.ngc_api_secret, "NGC_API_KEY", existing=True))
    elif want_ngc and cfg.ngc_api_key:
        out.append(ngc_secret(w))
    if w.image_pull_secrets:
        # the NIM chart's imagePullSecrets: existing dockerconfigjson Secrets, in the order given
        out += [SecretRef("imagePullSecret", n, ".dockerconfigjson", "kubernetes.io/dockerconfigjson", existing=True)
                for n in w.image_pull_secrets]
    elif cfg.image_pull_secret:
        out.append(pull_secret(w))
    return out


def secret_envs(secrets: list[SecretRef]) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    for s in secrets:
        if s.config_key == "hfToken":
            out.append(secret_env("HF_TOKEN", s))
        elif s.config_key == "ngcApiKey":
            out.append(secret_env("NGC_API_KEY", s))
    return out


def image_pull_secrets(secrets: list[SecretRef]) -> list[dict[str, str]]:
    return [{"name": s.name} for s in secrets if s.config_key == "imagePullSecret"]


def env_entry(name: str, value: Any) -> dict[str, Any]:
    """One `workloads[].env` entry as a container's EnvVar: a literal, or its valueFrom (config.EnvValue)."""
    if isinstance(value, str):
        return {"name": name, "value": value}
    return {"name": name, "valueFrom": value.value_from.model_dump(by_alias=True, exclude_none=True)}


def plain_env(values: Mapping[str, Any]) -> list[dict[str, Any]]:
    """`workloads[].env` as EnvVars (literals and valueFrom references)."""
    return [env_entry(k, v) for k, v in values.items()]


def env_from(w: Workload) -> list[dict[str, Any]]:
    """`workloads[].envFrom` as a container's EnvFromSource list (Secrets / ConfigMaps named, never copied)."""
    return [e.model_dump(by_alias=True, exclude_none=True) for e in w.env_from]


def label_env(name: str, label: str) -> dict[str, Any]:
    """An env var read from one of the pod's own labels through the downward API."""
    return {"name": name, "valueFrom": {"fieldRef": {"fieldPath": f"metadata.labels['{label}']"}}}


# ------------------------------------------------------------------ probes
PROBE_PERIOD_SECONDS = 30


def startup_failure_threshold(w: Workload) -> int:
    """Enough periods to cover startupTimeoutMinutes (the first model download can take an hour)."""
    return max(1, math.ceil(w.startup_timeout_minutes * 60 / PROBE_PERIOD_SECONDS))


def http_probes(path: str, port: int, w: Workload) -> dict[str, Any]:
    get = {"httpGet": {"path": path, "port": port}}
    return {
        "startupProbe": {**get, "periodSeconds": PROBE_PERIOD_SECONDS,
                         "failureThreshold": startup_failure_threshold(w), "timeoutSeconds": 5},
        "readinessProbe": {**get, "periodSeconds": 10, "failureThreshold": 3, "timeoutSeconds": 5},
    }


# ------------------------------------------------------------------ pod spec
def pod_spec(cfg: StackConfig, w: Workload, containers: list[dict[str, Any]], *,
             secrets: list[SecretRef], restart_policy: str | None = None,
             with_data: bool = True, extra_volumes: list[dict[str, Any]] | None = None,
             scheduler_name: str | None = None, service_account: str | None = None,
             gpu_pool: bool = True) -> dict[str, Any]:
    """A pod spec placed on the workload's pool (nodeSelector + GPU toleration)."""
    pool = cfg.pool(w.node_pool)
    spec: dict[str, Any] = {}
    if scheduler_name:
        spec["schedulerName"] = scheduler_name
    if restart_policy:
        spec["restartPolicy"] = restart_policy
    if service_account:
        spec["serviceAccountName"] = service_account
    if gpu_pool:
        spec["nodeSelector"] = pools.node_selector(cfg, pool)
        spec["tolerations"] = pools.tolerations()
    pulls = image_pull_secrets(secrets)
    if pulls:
        spec["imagePullSecrets"] = pulls
    spec["containers"] = containers
    spec["volumes"] = volumes(cfg, w, with_data) + list(extra_volumes or [])
    return spec


def container(name: str, img: str, *, command: list[str] | None = None, args: list[str] | None = None,
              env: list[dict[str, Any]] | None = None, gpus: int = 0,
              mounts: list[dict[str, Any]] | None = None, ports: list[dict[str, Any]] | None = None,
              probes: dict[str, Any] | None = None) -> dict[str, Any]:
    c: dict[str, Any] = {"name": name, "image": img}
    if command:
        c["command"] = command
    if args:
        c["args"] = args
    if env:
        # an exact repeat (same name, same plain value) is dropped: a user's env var equal to the one we render
        # is accepted (multinode/overrides.py), and a pod should carry each name once (env-defined-once)
        seen: set[tuple[Any, Any]] = set()
        kept = []
        for e in env:
            key = (e.get("name"), e.get("value")) if "value" in e and "valueFrom" not in e else None
            if key is not None and key in seen:
                continue
            if key is not None:
                seen.add(key)
            kept.append(e)
        c["env"] = kept
    if ports:
        c["ports"] = ports
    if gpus:
        c["resources"] = gpu_resources(gpus)
    if mounts:
        c["volumeMounts"] = mounts
    if probes:
        c.update(probes)
    return c


def shell(script: str) -> list[str]:
    return ["/bin/bash", "-c", script]


def service(w: Workload, name: str, selector: dict[str, str], ports: list[dict[str, Any]],
            headless: bool = False) -> dict[str, Any]:
    spec: dict[str, Any] = {"selector": selector, "ports": ports}
    if headless:
        spec["clusterIP"] = "None"
        spec["publishNotReadyAddresses"] = True   # ranks must resolve each other before they are Ready
    return {"apiVersion": "v1", "kind": "Service", "metadata": metadata(w, name), "spec": spec}


def configmap(w: Workload, name: str, data: dict[str, str]) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": metadata(w, name), "data": data}


def volcano_queue(cfg: StackConfig, w: Workload) -> str:
    return w.queue or (cfg.queues[0].name if cfg.queues else "default")
