"""The fleet stack's config: `multinode:fleet` (a mapping) plus the secrets it names.

    config:
      multinode:fleet:
        host: {stack: aws-dev}                  # the cluster that runs the Karmada control plane
        members:
          - {name: aws-dev, stack: aws-dev}     # this project's stacks (StackReference under `pulumi up`)
          - {name: lab, kubeconfigSecret: labKubeconfig, nodePools: [...], fabric: {kind: infiniband}}
        queues: [{name: research, weight: 2, priority: 100}]
        workloads: [{name: finetune, kind: volcano-training, nodes: 2, ...}]
      multinode:labKubeconfig: {secure: ...}    # every kubeconfigSecret names a secret key of this file
      multinode:hfToken: {secure: ...}          # model credentials, as in a cluster stack

`shape(raw, secrets)` validates the shape and the cross-key contract; fleet/checks.load adds each member's
own stack file (fleet/members.py) and the check that every workload fits whole in at least one member
(fleet/fit.py); every problem lands in one ConfigError naming its key path and the fix, before any
resource exists. Pure: no Pulumi.
"""
from __future__ import annotations

import difflib
import re
from collections.abc import Iterable, Mapping
from typing import Any, Literal

from pydantic import BaseModel, Field, ValidationError, field_validator

from .. import config as mconfig
from .. import credentials, limits
from ..config import NAMESPACE, SECRET_KEYS, FabricConfig, NodePool, Storage, Workload, _Model
from ..errors import ConfigError, Problem

FLEET_KEY = "fleet"

# Upstream releases (../shared/schemas/SOURCES.md): the Karmada chart and CRDs at v1.18.2; Volcano Global
# v0.3.0, whose docs/deploy/README.md asks for "Karmada Version: v1.13.0-beta.0 or higher" and "Volcano
# Version: 1.10.0 or higher" (the members run Volcano 1.15.1, config.ADDON_VERSIONS).
KARMADA_VERSION = "v1.18.2"
VOLCANO_GLOBAL_VERSION = "v0.3.0"
KARMADA_MIN_FOR_VOLCANO_GLOBAL = (1, 13, 0)
VOLCANO_MIN_FOR_VOLCANO_GLOBAL = (1, 10, 0)

# Kinds a fleet submits to Karmada: one object that is the whole gang, so Karmada can place it whole.
FLEET_KINDS = ("volcano-training", "lws-inference")

_CONFIG_KEY = re.compile(r"^[A-Za-z][A-Za-z0-9_]*\Z")
# a stack name as the Pulumi CLI allows it (letters, digits, '-', '_', '.'): never a path
_STACK_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,99}\Z")


class FleetHost(_Model):
    """Where Karmada runs: one of this project's stacks, or an existing cluster by kubeconfig secret."""
    stack: str | None = None
    stack_reference: str | None = None       # <org>/<project>/<stack>; default <this org>/<this project>/<stack>
    kubeconfig_secret: str | None = None     # the name of a secret key of this fleet stack


class KarmadaSettings(_Model):
    version: str = KARMADA_VERSION           # chart version = Karmada release
    namespace: str = "karmada-system"
    # Where `pulumi up` reaches the Karmada API server. The chart's kubeconfig names the in-cluster Service
    # (https://karmada-apiserver.<ns>.svc.cluster.local:5443), which only pods on the host cluster resolve.
    api_endpoint: str | None = None
    values: dict[str, Any] = {}              # merged over ours; every key must exist in the chart's values.yaml


class VolcanoGlobalSettings(_Model):
    enabled: bool = True
    version: str = VOLCANO_GLOBAL_VERSION    # image tag of volcanosh/volcano-global-*


class FleetMember(_Model):
    name: str                                # the Karmada Cluster name
    stack: str | None = None                 # this project's stack (stacks/Pulumi.<stack>.yaml)
    stack_reference: str | None = None
    kubeconfig_secret: str | None = None     # an existing cluster: the secret key holding its kubeconfig
    sync_mode: Literal["Push", "Pull"] = "Push"
    region: str | None = None
    # an existing cluster (kubeconfigSecret): what it offers, read like a `cloud: existing` stack
    node_pools: list[NodePool] = Field(default=[], max_length=limits.NODE_POOLS)
    fabric: FabricConfig = FabricConfig()
    storage: Storage | None = None


class FleetQueue(_Model):
    """A Volcano Queue on the Karmada control plane, propagated to every member (Volcano Global's
    all-queue ClusterPropagationPolicy); weight = fair share between tenants, priority = queue order."""
    name: str
    weight: int = Field(default=1, ge=1, le=65535)
    priority: int | None = Field(default=None, ge=0, le=mconfig.INT32_MAX)      # Volcano Queue spec.priority: int32
    gpus: int | None = Field(default=None, ge=0, le=mconfig.MAX_QUEUE_GPUS)


class PriorityClassSpec(_Model):
    name: str
    value: int = Field(ge=-2147483648, le=1000000000)    # user classes: at most 1e9 (system classes above)


class Failover(_Model):
    """fleet.workloads[].failover (issue 31): Karmada's application failover on the gang's PropagationPolicy
    (policy.karmada.io/v1alpha1 PropagationPolicy spec.failover.application, karmada-io/karmada v1.18.2 CRD in
    schemas/karmada): when the gang stays unhealthy for tolerationSeconds in its member, Karmada moves it whole to
    another member that holds it. purgeMode: what happens to the failed copy; for a training gang Directly
    (its GPUs are freed at once; the new copy resumes from the newest checkpoint only where that member's storage
    has it, docs/multicluster.md).

    issue 40: the values are the CRD's current ones. The v1.18.2 CRD's purgeMode enum is Directly, Gracefully, Never,
    Immediately (deprecated), Graciously (deprecated), default Gracefully (its description says so); we offered only
    Immediately, Graciously and Never, refusing the CRD's own default. The deprecated names are refused here with
    their replacement (PURGE_MODE_RENAMED); tests/test_crd_enums.py walks every config enum against its CRD."""
    toleration_seconds: int = Field(default=300, ge=0, le=86400)
    purge_mode: Literal["Directly", "Gracefully", "Never"] = "Directly"
    grace_period_seconds: int | None = Field(default=None, ge=1, le=86400)   # Gracefully: keep the old copy so long

    @field_validator("purge_mode", mode="before")
    @classmethod
    def _renamed(cls, v: Any) -> Any:
        if isinstance(v, str) and v in PURGE_MODE_RENAMED:
            raise ValueError(f"{v} is deprecated in Karmada's PropagationPolicy (v1.18.2 CRD description); use "
                             f"{PURGE_MODE_RENAMED[v]}")
        return v


# Karmada renamed the purge modes (policy.karmada.io_propagationpolicies.yaml v1.18.2, purgeMode description:
# "Immediately"(deprecated), "Graciously"(deprecated); pkg/apis/policy/v1alpha1 PurgeModeDirectly /
# PurgeModeGracefully).
PURGE_MODE_RENAMED = {"Immediately": "Directly", "Graciously": "Gracefully"}


class FleetWorkload(Workload):
    """A workload submitted once to Karmada and placed whole in one member. `nodePool` is optional: by
    default every member pool whose machine holds the workload is a candidate."""
    node_pool: str | None = None  # type: ignore[assignment]  # optional here, required in a cluster stack
    # the candidate members (default: all)
    members: list[str] = Field(default=[], max_length=limits.FLEET_MEMBERS)
    # member -> image (a fabric's NCCL plugin lives in the image)
    images: dict[str, str] = Field(default={}, max_length=limits.FLEET_MEMBERS)
    failover: Failover | None = None         # issue 31: Karmada moves the gang to another member when it fails
    priority_class_name: str | None = None


class Fleet(_Model):
    host: FleetHost
    members: list[FleetMember] = Field(min_length=1, max_length=limits.FLEET_MEMBERS)
    karmada: KarmadaSettings = KarmadaSettings()
    volcano_global: VolcanoGlobalSettings = VolcanoGlobalSettings()
    # issue 48: the same bounds as a cluster stack's (multinode/limits.py)
    queues: list[FleetQueue] = Field(default=[], max_length=limits.QUEUES)
    priority_classes: list[PriorityClassSpec] = Field(default=[], max_length=limits.PRIORITY_CLASSES)
    workloads: list[FleetWorkload] = Field(default=[], max_length=limits.WORKLOADS)


class FleetConfig(BaseModel):
    """A validated fleet stack: the model, its secrets (names only) and each member's loaded config."""
    fleet: Fleet
    hf_token: str | None = None
    ngc_api_key: str | None = None
    image_pull_secret: str | None = None
    kubeconfig_keys: dict[str, str] = {}              # secret key name -> value (placeholder offline)
    members: dict[str, Any] = {}                       # member name -> StackConfig (members.py)
    fits: dict[str, Any] = {}                          # workload name -> fit.WorkloadFit

    def member(self, name: str) -> FleetMember:
        return next(m for m in self.fleet.members if m.name == name)


def is_fleet(raw: Mapping[str, Any]) -> bool:
    """A fleet stack file is one with `multinode:fleet`."""
    return FLEET_KEY in raw


def top_level_keys(raw: Mapping[str, Any]) -> list[str]:
    """The keys a fleet stack may hold: fleet, the model credentials and the kubeconfig secrets it names."""
    names = [FLEET_KEY, "hfToken", "ngcApiKey", "imagePullSecret"]
    fleet = mconfig.parse_raw_value(raw.get(FLEET_KEY))
    if isinstance(fleet, dict):
        entries = [fleet.get("host")] + list(fleet.get("members") or [])
        names += [str(e["kubeconfigSecret"]) for e in entries if isinstance(e, dict) and e.get("kubeconfigSecret")]
    return names


def _version(text: str) -> tuple[int, ...] | None:
    m = re.match(r"^v?(\d+)\.(\d+)\.(\d+)", text)
    return tuple(int(x) for x in m.groups()) if m else None


def shape(raw: Mapping[str, Any], secret_keys: Iterable[str] = ()) -> tuple[Fleet, list[Problem]]:
    """The Fleet model and the problems of its shape and cross-key contract (members' files not read).
    Raises ConfigError when the shape itself is wrong (nothing further can be checked)."""
    secrets = set(secret_keys)
    problems: list[Problem] = []
    allowed = top_level_keys(raw)
    for key in raw:
        if key not in allowed:
            close = difflib.get_close_matches(key, allowed, n=1)
            hint = f"did you mean {close[0]!r}? " if close else ""
            problems.append(Problem(key, f"not a fleet stack key; {hint}a fleet stack holds {NAMESPACE}:fleet, "
                                         f"hfToken / ngcApiKey / imagePullSecret, and the kubeconfig secrets its "
                                         f"members name (kubeconfigSecret); cluster keys go in the member stacks"))
    for key in allowed[1:]:
        if key in raw and key not in secrets:
            problems.append(Problem(key, f"is a secret but is stored in plain text; store it with "
                                         f"`pulumi config set --secret {NAMESPACE}:{key} ...`"))
    data = mconfig.parse_raw_value(raw.get(FLEET_KEY))
    if isinstance(data, dict):
        # issue 46: a literal credential in a fleet workload (env, args, script...) is refused as in a stack
        problems += [Problem(f"{FLEET_KEY}.{path}", msg) for path, msg in credentials.stack_literal_findings(data)]
    try:
        fleet = Fleet.model_validate(data)
    except ValidationError as e:
        raise ConfigError(problems + [mconfig._problem_from_pydantic(err, secrets, Fleet, (FLEET_KEY,))
                                      for err in e.errors()], "fleet stack") from None
    return fleet, problems + contract_problems(fleet, raw, secrets)


def _entry_problems(at: str, stack: str | None, kubeconfig_secret: str | None, raw: Mapping[str, Any],
                    secrets: set[str]) -> list[Problem]:
    from .. import stackfile
    p: list[Problem] = []
    if (stack is None) == (kubeconfig_secret is None):
        p.append(Problem(at, "set exactly one of stack (this project's stack running that cluster) or "
                             "kubeconfigSecret (the secret key of this fleet stack holding an existing cluster's "
                             "kubeconfig)"))
    if stack is not None and (not _STACK_NAME.match(stack) or ".." in stack):
        p.append(Problem(f"{at}.stack", f"{stack!r} is not a stack name (letters, digits, '-', '_', '.'); name one "
                                        f"of this project's stacks, e.g. aws-dev"))
    elif stack is not None and not stackfile.stack_path(stack).exists():
        known = ", ".join(s for s in stackfile.list_stacks()) or "none"
        p.append(Problem(f"{at}.stack", f"no stack file stacks/Pulumi.{stack}.yaml; use one of this project's "
                                        f"stacks ({known}) or kubeconfigSecret for a cluster it does not run"))
    if kubeconfig_secret is not None:
        if not _CONFIG_KEY.match(kubeconfig_secret) or kubeconfig_secret in (FLEET_KEY,) + SECRET_KEYS:
            p.append(Problem(f"{at}.kubeconfigSecret", f"{kubeconfig_secret!r} must name a config key of its own "
                                                       f"(letters and digits, e.g. labKubeconfig)"))
        elif kubeconfig_secret not in raw:
            p.append(Problem(f"{at}.kubeconfigSecret", f"no key {NAMESPACE}:{kubeconfig_secret} in this stack; set "
                                                       f"it with `pulumi config set --secret {NAMESPACE}:"
                                                       f"{kubeconfig_secret} < kubeconfig.yaml`"))
    return p


def contract_problems(fleet: Fleet, raw: Mapping[str, Any], secrets: set[str]) -> list[Problem]:  # noqa: C901
    p: list[Problem] = []
    p += _entry_problems("fleet.host", fleet.host.stack, fleet.host.kubeconfig_secret, raw, secrets)
    kv, vv = _version(fleet.karmada.version), _version(fleet.volcano_global.version)
    if kv is None:
        p.append(Problem("fleet.karmada.version", f"{fleet.karmada.version!r} is not a release (e.g. v1.18.2)"))
    elif fleet.volcano_global.enabled and kv < KARMADA_MIN_FOR_VOLCANO_GLOBAL:
        p.append(Problem("fleet.karmada.version", f"{fleet.karmada.version}: Volcano Global needs Karmada "
                                                  f"v1.13.0-beta.0 or newer (its docs/deploy/README.md); use "
                                                  f"{KARMADA_VERSION}"))
    if vv is None:
        p.append(Problem("fleet.volcanoGlobal.version", f"{fleet.volcano_global.version!r} is not a release "
                                                        f"(e.g. {VOLCANO_GLOBAL_VERSION})"))
    if not mconfig._is_dns_label(fleet.karmada.namespace):
        p.append(Problem("fleet.karmada.namespace", f"{fleet.karmada.namespace!r} is not a valid namespace name"))
    if fleet.karmada.api_endpoint is None:
        p.append(Problem("fleet.karmada.apiEndpoint", "required: the https:// URL where `pulumi up` reaches the "
                                                      "Karmada API (the chart's karmada-apiserver Service is made a "
                                                      "LoadBalancer; give its DNS name, e.g. "
                                                      "https://karmada.example.com:5443)"))
    elif not fleet.karmada.api_endpoint.startswith("https://"):
        p.append(Problem("fleet.karmada.apiEndpoint", "must be an https:// URL the machine running `pulumi up` "
                                                      "reaches (e.g. the karmada-apiserver LoadBalancer)"))
    if fleet.karmada.values:
        from ..schema_check import helm_values_unknown_keys
        for key in helm_values_unknown_keys("karmada", fleet.karmada.values)[:10]:
            p.append(Problem(f"fleet.karmada.values.{key}", f"not a key of the karmada chart's values.yaml "
                                                            f"({KARMADA_VERSION}, schemas/karmada/values.yaml); "
                                                            f"fix its spelling or remove it"))
    names: dict[str, int] = {}
    for i, m in enumerate(fleet.members):
        at = f"fleet.members[{i}]"
        if not mconfig._is_dns_label(m.name) or len(m.name) > 48:
            p.append(Problem(f"{at}.name", f"{m.name!r} must be lowercase letters, digits and '-' (at most 48), "
                                           f"e.g. 'aws-dev'"))
        if m.name in names:
            p.append(Problem(f"{at}.name", f"{m.name!r} is already fleet.members[{names[m.name]}]; give each "
                                           f"member its own name"))
        names.setdefault(m.name, i)
        p += _entry_problems(at, m.stack, m.kubeconfig_secret, raw, secrets)
        if m.sync_mode == "Pull":
            p.append(Problem(f"{at}.syncMode", "Pull mode runs karmada-agent in the member with client certificates "
                                               "of the Karmada API, which this project does not issue; use Push "
                                               "(the default), or register the cluster yourself with `karmadactl "
                                               "register` and leave it out of the fleet"))
        if m.stack is not None and (m.node_pools or m.storage is not None or "fabric" in m.model_fields_set):
            p.append(Problem(f"{at}.nodePools", f"stack {m.stack!r} describes its own pools, fabric and storage; "
                                                f"remove them here (they are for kubeconfigSecret members)"))
    qnames = {q.name for q in fleet.queues} | {"default"}
    pcs = {c.name for c in fleet.priority_classes}
    wnames: dict[str, int] = {}
    for i, w in enumerate(fleet.workloads):
        at = f"fleet.workloads[{i}]"
        if w.kind not in FLEET_KINDS:
            p.append(Problem(f"{at}.kind", f"{w.kind!r} is not submitted across clusters; use one of "
                                           f"{', '.join(FLEET_KINDS)} (one object that is the whole gang), or run "
                                           f"it in a member stack"))
        if w.name in wnames:
            p.append(Problem(f"{at}.name", f"{w.name!r} is already fleet.workloads[{wnames[w.name]}]"))
        wnames.setdefault(w.name, i)
        for j, name in enumerate(w.members):
            if name not in names:
                p.append(Problem(f"{at}.members[{j}]", f"no member named {name!r}; use one of "
                                                       f"{', '.join(names)}"))
        for name in w.images:
            if name not in names:
                p.append(Problem(f"{at}.images.{name}", f"no member named {name!r}; use one of {', '.join(names)}"))
        if w.queue and w.queue not in qnames:
            p.append(Problem(f"{at}.queue", f"no queue named {w.queue!r}; define it under fleet.queues"))
        if w.queue and w.kind != "volcano-training":
            p.append(Problem(f"{at}.queue", "Volcano Global queues order Volcano Jobs only; remove queue"))
        if w.priority_class_name and w.priority_class_name not in pcs:
            p.append(Problem(f"{at}.priorityClassName", f"no priority class {w.priority_class_name!r}; define it "
                                                        f"under fleet.priorityClasses"))
        f = w.failover
        # Karmada's webhook validation of spec.failover.application (karmada-io/karmada@58fdc4fb, main, not read at
        # the v1.18.2 tag: pkg/util/validation/validation.go, cases in validation_test.go "the gracePeriodSeconds is
        # declared when purgeMode is not gracefully" / "... is empty when purgeMode is gracefully"): the grace
        # period goes with Gracefully and only with it.
        if f is not None and f.grace_period_seconds is not None and f.purge_mode != "Gracefully":
            p.append(Problem(f"{at}.failover.gracePeriodSeconds", f"only takes effect with purgeMode Gracefully "
                                                                  f"(Karmada refuses it with {f.purge_mode}); remove "
                                                                  f"it or set purgeMode Gracefully"))
        if f is not None and f.purge_mode == "Gracefully" and f.grace_period_seconds is None:
            p.append(Problem(f"{at}.failover.gracePeriodSeconds", "required with purgeMode Gracefully (Karmada "
                                                                  "refuses Gracefully without it); e.g. 600"))
    seen_q: set[str] = set()
    for i, q in enumerate(fleet.queues):
        if not mconfig._is_dns_label(q.name) or q.name in seen_q or q.name == "default":
            p.append(Problem(f"fleet.queues[{i}].name", f"{q.name!r} must be a unique DNS label other than "
                                                        f"'default' (Volcano's own queue)"))
        seen_q.add(q.name)
    for i, c in enumerate(fleet.priority_classes):
        if not mconfig._is_dns_label(c.name) or c.name.startswith("system-"):
            p.append(Problem(f"fleet.priorityClasses[{i}].name", f"{c.name!r} must be a DNS label not starting "
                                                                 f"with 'system-'"))
    return p
