"""The checks step: above config, below manifests. Pure (no Pulumi).

`config.load` checks the shape and the cloud-independent contract and knows no cloud. This module
asks the stack's cloud module (multinode/clouds/<cloud>.py) for what that cloud refuses, adds the
fabric counts the fabric profile needs (multinode/fabric.py), and reports everything in one
ConfigError: `load(raw)` is the entry point of the program (__main__.py), `plan` and the release CLI.

Every cloud module has the same config-rule attributes, read here the same way for every cloud:
CLUSTER_KEYS, STORAGE_KINDS, REQUIRED_FABRIC, CAPACITY_BLOCKS, CREATES_POOLS, config_problems(),
advisories().
"""
from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from . import clouds, config, fabric, images, local_nvme, numbers, overrides, quantity, upgrades
from .config import StackConfig, to_snake
from .errors import Problem
from .manifests import volcano_topology


def load(raw: Mapping[str, Any], secret_keys: Iterable[str] = (), source: str = "stack config") -> StackConfig:
    """config.load with the stack's cloud rules added: one ConfigError listing every problem."""
    return config.load(raw, secret_keys, source, more_checks=problems, final_checks=overrides.env_problems)


def problems(cfg: StackConfig) -> list[Problem]:
    """What the stack's cloud refuses, and the fabric counts the fabric profile needs."""
    cloud = clouds.module(cfg.cloud)
    machines = config.pool_machines(cfg)
    p = _common_cloud_problems(cfg, cloud, machines)
    p.extend(cloud.config_problems(cfg, machines))
    p.extend(fabric.config_problems(cfg))
    # numbers several keys must agree on: DeepSpeed batch, reservation location (/dev/shm: advisories)
    p.extend(numbers.problems(cfg, machines))
    p.extend(overrides.devices_per_gpu_problems(cfg))
    p.extend(local_nvme.config_problems(cfg))
    p.extend(_hard_topology_problems(cfg))
    p.extend(images.problems(cfg))
    p.extend(upgrades.config_problems(cfg))      # issue 40: upgrade settings the clouds refuse
    p.extend(addon_values_findings(cfg)[0])      # issue 40: addons.<name>.values keys the chart does not have
    p.extend(gated_model_problems(cfg))          # issue 46: what plans clean and fails at download or at up
    p.extend(provided_kyverno_problems(cfg))
    return p


# engines that download `model` from the Hugging Face Hub in the pod (NIM takes its model from NGC)
_HF_ENGINES = ("vllm", "sglang", "trtllm")
_HF_TOKEN_ENVS = ("HF_TOKEN", "HUGGING_FACE_HUB_TOKEN")


def gated_model_problems(cfg: StackConfig) -> list[Problem]:
    """A workload serving a gated Hugging Face model (models.GATED_FAMILIES) with no token to download it: the
    pods start and fail at the download with 401/403. A token is hfToken (the stack's Secret) or an HF_TOKEN /
    HUGGING_FACE_HUB_TOKEN env entry of the workload (a Secret of the user's)."""
    from . import models
    out: list[Problem] = []
    if cfg.hf_token:
        return out
    for i, w in enumerate(cfg.workloads):
        family = models.gated_family(w.model)
        if family is None or (w.engine is not None and w.engine not in _HF_ENGINES):
            continue
        if any(k in w.env for k in _HF_TOKEN_ENVS):
            continue
        out.append(Problem(f"workloads[{i}].model", f"{w.model} is a gated Hugging Face model ({family}: "
                                                    f"{models.GATED_FAMILIES[family]}); without a token of an "
                                                    f"account that accepted its licence the download fails with "
                                                    f"401/403 in every pod. Set the stack secret: `pulumi config set "
                                                    f"--secret multinode:hfToken <token>`"))
    return out


# Kyverno serves the CEL policy types the fabric policies are (policies.kyverno.io/v1 MutatingPolicy,
# ValidatingPolicy) as v1 from 1.17 on: https://kyverno.io/docs/policy-types/overview ("Stable (v1.17)";
# multinode/manifests/kyverno.py). A cluster's own older Kyverno has no such kind: `pulumi up` fails on them.
KYVERNO_CEL_MIN = (1, 17, 0)


def _version_tuple(v: str) -> tuple[int, ...] | None:
    import re
    m = re.match(r"v?(\d+)\.(\d+)(?:\.(\d+))?", v.strip())
    return tuple(int(x or 0) for x in m.groups()) if m else None


def provided_kyverno_problems(cfg: StackConfig) -> list[Problem]:
    """addons.kyverno.provided with addons.kyverno.version (the cluster's Kyverno) below KYVERNO_CEL_MIN while the
    stack renders the fabric policies (fabric.enabled)."""
    k = cfg.addons.kyverno
    if not (k.provided and k.enabled and k.version and cfg.fabric.enabled):
        return []
    have = _version_tuple(k.version)
    want = ".".join(map(str, KYVERNO_CEL_MIN))
    if have is None:
        return [Problem("addons.kyverno.version", f"{k.version!r} is not a version (e.g. 1.17.0): with provided "
                                                  f"true it states the cluster's Kyverno, which must be >= {want}")]
    if have >= KYVERNO_CEL_MIN:
        return []
    return [Problem("addons.kyverno.version", f"the cluster's Kyverno {k.version} (provided) does not serve "
                                              f"policies.kyverno.io/v1 MutatingPolicy / ValidatingPolicy, the "
                                              f"fabric policies' types (v1 since Kyverno {want}: "
                                              f"https://kyverno.io/docs/policy-types/overview); `pulumi up` would "
                                              f"fail on them. Upgrade the cluster's Kyverno to {want} or later, or "
                                              f"set fabric.enabled false")]


# addons.<key> -> the folder under schemas/ holding its chart's values.yaml (the ReleaseSpec's chart_folder;
# tests/test_addon_values.py keeps the two in agreement). None: no values.yaml of that chart is stored.
ADDON_VALUES_FILES: dict[str, str | None] = {
    "volcano": "volcano", "lws": "lws", "grove": "grove", "kai": "kai-scheduler", "kyverno": "kyverno",
    "networkOperator": "network-operator", "gpuOperator": "gpu-operator",
    "efaDevicePlugin": "aws-efa-k8s-device-plugin", "dynamo": "dynamo", "nvsentinel": "nvsentinel",
    "nvidiaDevicePlugin": None, "trainer": None,
}


def addon_values_findings(cfg: StackConfig) -> tuple[list[Problem], list[Problem]]:
    """(refusals, advisories) for the keys of every installed add-on's `values` (issue 40; multinode/helm_values.py).
    A key path the chart's values.yaml does not have is refused with the nearest valid keys: Helm would ignore it in
    silence. Advisories instead where the check cannot be sure: below a sub-chart whose values are not stored, a
    `version` other than the pinned one (its values.yaml may differ), a chart with no stored values.yaml."""
    from . import helm_values
    refused: list[Problem] = []
    advised: list[Problem] = []
    for field, info in config.Addons.model_fields.items():
        addon = getattr(cfg.addons, field)
        key = info.alias or field
        if not addon.values or not config.installs(addon):
            continue                     # provided + values: refused by config.provided_addon_problems
        at = f"addons.{key}.values"
        # a fractional byte count under any `resources` of the values (quantity.py, the API server's warning)
        refused.extend(Problem(f"{at}.{where}", msg)
                       for where, msg in quantity.resources_fractional_bytes(addon.values))
        chart = ADDON_VALUES_FILES.get(key)
        if chart is None:
            advised.append(Problem(at, f"not checked: no values.yaml of the {key} chart is stored in schemas/; a "
                                       f"misspelt key is ignored by Helm in silence"))
            continue
        pinned = config.ADDON_VERSIONS.get(key, "")
        other = addon.version is not None and addon.version.lstrip("v") != pinned.lstrip("v")
        for f in helm_values.findings(chart, addon.values):
            near = (f"did you mean {' or '.join(f.nearest)}?" if f.nearest else
                    (f"valid keys there: {', '.join(f.valid_here[:12])}{' ...' if len(f.valid_here) > 12 else ''}"
                     if f.valid_here else "the chart has a value, not a map, at its parent"))
            if f.subchart is not None:
                advised.append(Problem(f"{at}.{f.path}", f"not in the {chart} chart's defaults for its sub-chart "
                                                         f"{f.subchart}, whose own values.yaml is not stored: not "
                                                         f"checked ({near})"))
            elif other:
                advised.append(Problem(f"{at}.{f.path}", f"not a key of the {chart} chart's values.yaml at the "
                                                         f"pinned {pinned} (schemas/{chart}/values.yaml); "
                                                         f"addons.{key}.version {addon.version} may have it "
                                                         f"({near})"))
            else:
                refused.append(Problem(f"{at}.{f.path}", f"not a key of the {chart} chart's values.yaml ({pinned}, "
                                                         f"schemas/{chart}/values.yaml): Helm would ignore it; "
                                                         f"{near} Fix its spelling or remove it"))
    return refused, advised


def advisories(cfg: StackConfig) -> list[Problem]:
    """Non-fatal findings (printed by `plan`, logged as warnings by the program)."""
    cloud = clouds.module(cfg.cloud)
    from_cloud: list[Problem] = cloud.advisories(cfg)     # every cloud module's advisories(cfg) -> List[Problem]
    from .manifests import addons, crds  # here: manifests import config, which checks imports first
    from .manifests.workloads import preflight
    return (from_cloud + config.advisories(cfg) + images.advisories(cfg) + addons.version_advisories(cfg)
            + crds.advisories(cfg) + numbers.shm_advisories(cfg, config.pool_machines(cfg))
            + upgrades.advisories(cfg) + upgrades.health_advisories(cfg) + preflight.advisories(cfg)
            + addon_values_findings(cfg)[1])


def _common_cloud_problems(cfg: StackConfig, cloud: Any, machines: dict[str, Any]) -> list[Problem]:
    """The rules every cloud states as data (its module's attributes), checked the same way."""
    p: list[Problem] = []
    name = cfg.cloud
    for key in cloud.CLUSTER_KEYS:
        if getattr(cfg.cluster, to_snake(key)) in (None, ""):
            p.append(Problem(f"cluster.{key}", f"required on cloud {name!r}; set multinode:cluster.{key}"))
    for i, pool in enumerate(cfg.node_pools):
        at = f"nodePools[{i}]"
        cr = pool.capacity_reservation
        if cr and cr.type == "capacityBlock" and not cloud.CAPACITY_BLOCKS:
            p.append(Problem(f"{at}.capacityReservation.type", f"capacity blocks exist only on aws, not {name}; "
                                                               f"use type 'reservation'"))
        if cloud.CREATES_POOLS and pool.node_selector:
            p.append(Problem(f"{at}.nodeSelector", "only for cloud 'existing'; created pools are selected by "
                                                   "their own labels (use labels to add more)"))
    if cloud.CREATES_POOLS and cfg.fabric.kind is not None:
        p.append(Problem("fabric.kind", f"only for cloud 'existing'; on {name} the fabric comes from the machine"))
    if cfg.storage is not None and cfg.storage.kind not in cloud.STORAGE_KINDS:
        p.append(Problem("storage.kind", f"{cfg.storage.kind!r} is not available on {name}; use one of "
                                         f"{', '.join(cloud.STORAGE_KINDS)}"))
    want = cloud.REQUIRED_FABRIC
    if want is not None and cfg.fabric.enabled:
        # a pool whose machine lacks the cloud's fabric while the stack asks for it
        for i, pool in enumerate(cfg.node_pools):
            m = machines.get(pool.name)
            if m is None or m.fabric == want:
                continue
            key = "machineSpec.fabric" if pool.machine_spec is not None else "machine"
            p.append(Problem(f"nodePools[{i}].{key}", f"{m.name} has no {want} (its fabric is {m.fabric}), but "
                                                      f"{name} multi-node pools use {want}; choose a machine with "
                                                      f"{want}, or set fabric.enabled false to run without a fabric"))
    return p


# issue 18
def _hard_topology_problems(cfg: StackConfig) -> list[Problem]:
    """A hard networkTopology needs HyperNodes up to its tier; with none, Volcano can never place the job."""
    p: list[Problem] = []
    for i, w in enumerate(cfg.workloads):
        nt = w.network_topology
        if nt is None or nt.mode != "hard" or w.kind != "volcano-training":
            continue
        if w.node_pool not in config.pool_machines(cfg):
            continue     # an unknown pool or machine is reported on its own key
        tiers = volcano_topology.tiers_for_pool(cfg, w.node_pool)
        if not tiers:
            p.append(Problem(f"workloads[{i}].networkTopology.mode",
                             f"hard, but this stack gives pool {w.node_pool!r} no HyperNode "
                             f"({volcano_topology.why_no_tiers(cfg)}), so nothing can satisfy it and the job would "
                             f"stay Pending; use mode soft, or remove networkTopology"))
    return p
