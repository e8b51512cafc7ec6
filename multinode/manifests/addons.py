"""Helm releases for the cluster add-ons and the per-cloud fabric operators, as plain data.

`addon_releases(cfg)` / `fabric_releases(cfg)` return ReleaseSpec objects (chart, repository,
version, namespace, values); components/kubernetes wraps each in a `helm.v3.Release`. Values only
use keys that exist in the chart's upstream values.yaml (tests check them with
multinode/schema_check.py helm_values_unknown_keys); the stack's `addons.<name>.values` is merged over
ours (deep merge, the stack wins), its keys checked against the same file when the stack loads (issue 40:
checks.addon_values_findings, multinode/helm_values.py).

Chart locations (checked with the code search tool; see docs/addons-fabric.md):
  volcano           https://volcano-sh.github.io/helm-charts           chart volcano
  lws               oci://registry.k8s.io/lws/charts/lws               (kubernetes-sigs/lws docs)
  grove             oci://ghcr.io/ai-dynamo/grove/grove-charts         (tags carry a leading "v")
  kai-scheduler     oci://ghcr.io/kai-scheduler/kai-scheduler/kai-scheduler  (tags carry a leading "v"; the
                    repository moved from NVIDIA/KAI-Scheduler to kai-scheduler/KAI-Scheduler: Grove's e2e
                    dependencies.yaml and Dynamo's install docs use this chart reference)
  kyverno           https://kyverno.github.io/kyverno/                 chart kyverno
  network-operator  https://helm.ngc.nvidia.com/nvidia                 chart network-operator
  gpu-operator      https://helm.ngc.nvidia.com/nvidia                 chart gpu-operator
  aws-efa-k8s-device-plugin  https://aws.github.io/eks-charts
  nvidia-device-plugin       https://nvidia.github.io/k8s-device-plugin  chart nvidia-device-plugin
  dynamo-platform   https://helm.ngc.nvidia.com/nvidia/ai-dynamo      (manifests/dynamo_platform.py)
  kubeflow-trainer  oci://ghcr.io/kubeflow/charts/kubeflow-trainer     (Kubeflow Trainer's install docs; no "v")
  nvsentinel        oci://ghcr.io/nvidia/nvsentinel                    (NVIDIA/NVSentinel README; tags carry a "v")
"""
from __future__ import annotations

import copy
from dataclasses import dataclass, field
from typing import Any

from .. import nvsentinel, pools
from ..clouds import azure, oci
from ..config import ADDON_VERSIONS, Addon, StackConfig, installs, lws_install
from ..errors import Problem
from ..fabric import OCI_VF_NETWORK, OCI_VF_NETWORK_NAMESPACE, OCI_VF_RESOURCE, profile_for
from . import volcano_topology
from .crds import OWNED as CRDS_OWNED
from .crds import crd_set
from .dynamo_platform import dynamo_platform_release


@dataclass(frozen=True)
class ReleaseSpec:
    key: str                     # config key under addons (volcano, lws, ...)
    chart_folder: str            # folder under schemas/ holding the upstream values.yaml
    chart: str                   # chart name, or a full oci:// reference
    repository: str | None    # https chart repository (None for oci:// charts)
    version: str
    namespace: str
    values: dict[str, Any] = field(default_factory=dict)
    installs_crds: tuple = ()    # API groups whose CRDs this release installs

    skip_crds: bool = False      # Helm installs none of the chart's crds/ (we apply all of them: manifests/crds.py)

    @property
    def release_name(self) -> str:
        # Helm release names stay what they were when the folder names changed: renaming one would
        # uninstall and reinstall the add-on.
        return {"kai": "kai-scheduler", "dynamo": "dynamo-platform"}.get(self.key, self.chart_folder)


_DEFAULT_NS = {
    "volcano": "volcano-system", "lws": "lws-system", "grove": "grove-system", "kai": "kai-scheduler",
    "kyverno": "kyverno", "networkOperator": "nvidia-network-operator", "gpuOperator": "gpu-operator",
    "efaDevicePlugin": "kube-system",
    "nvidiaDevicePlugin": "nvidia-device-plugin",   # the namespace NVIDIA's README installs it into
    "trainer": "kubeflow-system",                   # Kubeflow Trainer's install docs
    "nvsentinel": "nvsentinel",                     # NVSentinel's README install command
}

# Grove and KAI publish OCI tags with a leading "v" (e.g. grove-charts:v0.1.0-alpha.12-rc2,
# kai-scheduler --version v0.12.10 in their install docs); config.ADDON_VERSIONS stores bare versions.
_V_PREFIX = {"grove", "kai", "nvsentinel"}


def deep_merge(base: dict[str, Any], over: dict[str, Any]) -> dict[str, Any]:
    out = copy.deepcopy(base)
    for k, v in (over or {}).items():
        if isinstance(v, dict) and isinstance(out.get(k), dict):
            out[k] = deep_merge(out[k], v)
        else:
            out[k] = copy.deepcopy(v)
    return out


def _version(key: str, addon: Addon) -> str:
    v = addon.version or ADDON_VERSIONS[key]
    if key in _V_PREFIX and not v.startswith("v"):
        v = "v" + v
    return v


def _spec(cfg: StackConfig, key: str, folder: str, chart: str, repo: str | None,
          values: dict[str, Any], crds: tuple = ()) -> ReleaseSpec:
    addon: Addon = getattr(cfg.addons, _attr(key))
    owned = crd_set(cfg, key) if key in CRDS_OWNED else None
    return ReleaseSpec(key=key, chart_folder=folder, chart=chart, repository=repo, version=_version(key, addon),
                       namespace=addon.namespace or _DEFAULT_NS[key], values=deep_merge(values, addon.values),
                       installs_crds=crds, skip_crds=owned is not None and owned.chart_crds_complete)


def _attr(key: str) -> str:
    return {"networkOperator": "network_operator", "gpuOperator": "gpu_operator",
            "efaDevicePlugin": "efa_device_plugin", "nvidiaDevicePlugin": "nvidia_device_plugin"}.get(key, key)


def _gpu_tolerations() -> list[dict[str, str]]:
    return pools.tolerations()


# Label every GPU node of a pool we create carries (pools.node_labels); the device plugin runs only there.
GPU_PRESENT_LABEL = "nvidia.com/gpu.present"

# Clouds whose GPU nodes get a driver but nothing that advertises `nvidia.com/gpu` to the kubelet:
#  aws:   the EKS AL2023_x86_64_NVIDIA AMI ships the driver + container toolkit; EKS docs say to install
#         NVIDIA's device plugin yourself.
#  azure: gpuProfile.driver Install installs only the driver (AKS docs: deploy the device plugin).
# Not on:
#  gcp:   GKE's gpu_driver_installation_config also runs GKE's own device plugin.
#  oci:   OKE provides it as the "NVIDIA GPU Plugin" cluster add-on (NvidiaGpuPlugin, a managed
#         deployment of NVIDIA/k8s-device-plugin: docs.oracle.com .../configuration-arguments-nvidia-gpu-plugin.htm;
#         NVIDIA's AICR "OKE GPU Setup" guide: OKE installs the device plugin via that add-on by default).
#  existing: the cluster is assumed to run one already.
DEVICE_PLUGIN_CLOUDS = ("aws", "azure")


def needs_nvidia_device_plugin(cfg: StackConfig) -> bool:
    """True when this stack must install NVIDIA's device plugin itself."""
    a = cfg.addons
    # The GPU Operator deploys its own device plugin; two would both register nvidia.com/gpu.
    return (cfg.cloud in DEVICE_PLUGIN_CLOUDS and installs(a.nvidia_device_plugin) and not a.gpu_operator.enabled
            and bool(cfg.node_pools))


def nvidia_device_plugin_release(cfg: StackConfig) -> ReleaseSpec | None:
    if not needs_nvidia_device_plugin(cfg):
        return None
    return _spec(cfg, "nvidiaDevicePlugin", "nvidia-device-plugin", "nvidia-device-plugin",
                 "https://nvidia.github.io/k8s-device-plugin", {
                     # Only on our GPU nodes (the chart's default affinity also accepts this label, so
                     # both hold), tolerating the GPU taint those nodes carry (pools.node_taints).
                     "nodeSelector": {GPU_PRESENT_LABEL: "true"},
                     "tolerations": _gpu_tolerations(),
                     # RDMA devices reach pods only through the fabric's own device plugin (rdma/shared_ib,
                     # rdma/ib, EFA), never to every GPU container: NVIDIA's AICR OKE guide reports that
                     # k8s-device-plugin >= 0.19.0 with MOFED on injects every host RDMA uverb into every
                     # GPU pod and breaks NCCL. Renders MOFED_ENABLED=false (templates/daemonset-device-plugin.yml).
                     "mofedEnabled": False,
                 })


TRAINER_CHART = "oci://ghcr.io/kubeflow/charts/kubeflow-trainer"
# KAI-Scheduler's chart after the project moved from NVIDIA/KAI-Scheduler to kai-scheduler/KAI-Scheduler
# (Grove's e2e/dependencies.yaml pins v0.16.9 from here; Dynamo's install guide uses the same reference).
KAI_CHART = "oci://ghcr.io/kai-scheduler/kai-scheduler/kai-scheduler"
# Grove's README ("Supported Schedulers"): topology-aware scheduling of PodGangs needs KAI >= v0.15.2.
KAI_MIN_FOR_GROVE_TAS = (0, 15, 2)


def kai_values(cfg: StackConfig) -> dict[str, Any]:
    """KAI's default SchedulingShard args (values.yaml `scheduler.args`, a map[string]string of scheduler
    flags, v0.17.0). With Grove, KAI's stale-gang eviction is turned off as Grove's README asks
    (`--set-string scheduler.args.default-staleness-grace-period=-1`): KAI would otherwise evict a
    partially scheduled gang before Grove's own termination delay. We write "-1s", as Grove's e2e README,
    its KAI install test and Dynamo's install guide do: the scheduler reads the flag with Go's
    DurationVar (cmd/scheduler options: "Negative values means infinite"), and time.ParseDuration refuses
    a number without a unit other than 0."""
    if not cfg.addons.grove.enabled:
        return {}
    return {"scheduler": {"args": {"default-staleness-grace-period": "-1s"}}}


def grove_values(cfg: StackConfig) -> dict[str, Any]:
    """Grove's CRD installer (values `crdInstaller.enabled`, off by default: "upgrades are managed manually by the
    user", ai-dynamo/grove@v0.1.0-alpha.11 operator/charts/values.yaml:222-228) is on when the CRDs we store are an
    older release's than the pin (manifests/crds.py, grove 0.1.0-alpha.13): the operator then applies its own
    release's CRDs before it starts, new kinds included."""
    owned = crd_set(cfg, "grove")
    return {"crdInstaller": {"enabled": True}} if owned is not None and owned.behind else {}


def _numeric_version(v: str) -> tuple[int, ...] | None:
    """(0, 17, 0) from "v0.17.0" / "0.17.0-rc1"; None when it is not dotted numbers."""
    core = v.lstrip("v").split("-", 1)[0].split("+", 1)[0]
    parts = core.split(".")
    return tuple(int(p) for p in parts) if parts and all(p.isdigit() for p in parts) else None


def version_advisories(cfg: StackConfig) -> list[Problem]:
    """Version pins a stack states that break an integration we set up (non-fatal: plan prints them)."""
    out: list[Problem] = []
    a = cfg.addons
    if a.grove.enabled and a.kai.enabled and a.kai.version:
        v = _numeric_version(a.kai.version)
        if v is not None and v < KAI_MIN_FOR_GROVE_TAS:
            out.append(Problem("addons.kai.version", f"{a.kai.version} is older than 0.15.2, which Grove needs for "
                                                     f"topology-aware scheduling of its PodGangs; remove the "
                                                     f"override (default {ADDON_VERSIONS['kai']}) or set >= 0.15.2"))
    out += dynamo_floor_advisories(cfg)
    return out + nvsentinel_advisories(cfg)


# The Grove and KAI releases each Dynamo platform line documents as its floor (ai-dynamo/dynamo
# docs/kubernetes/installation-guide.md "Compatibility matrix"; 1.5.x set by ai-dynamo/dynamo PR #14553).
DYNAMO_FLOORS: dict[tuple[int, ...], dict[str, str]] = {(1, 5): {"grove": "0.1.0-alpha.13", "kai": "0.17.0"}}


def _grove_order(v: str) -> tuple[int, ...] | None:
    """(0, 1, 0, 13) from "v0.1.0-alpha.13" (a release candidate counts as below its release); None otherwise."""
    core, _, pre = v.lstrip("v").partition("-alpha.")
    nums = _numeric_version(core)
    num, _, rc = pre.partition("-")
    if nums is None or not num.isdigit():
        return None
    return nums + (int(num), 0 if rc else 1)


def dynamo_floor_advisories(cfg: StackConfig) -> list[Problem]:
    """A Grove or KAI version below the floor of the Dynamo platform this stack installs (a stack override)."""
    a = cfg.addons
    if not installs(a.dynamo):
        return []
    dyn = _numeric_version(a.dynamo.version or ADDON_VERSIONS["dynamo"])
    if dyn is None or dyn[:2] not in DYNAMO_FLOORS:
        return []
    line = ".".join(map(str, dyn[:2]))
    out: list[Problem] = []
    for key, floor in DYNAMO_FLOORS[dyn[:2]].items():
        addon = getattr(a, key)
        if not installs(addon):
            continue
        have = addon.version or ADDON_VERSIONS[key]
        order = _grove_order if key == "grove" else _numeric_version
        h, f = order(have), order(floor)
        if h is not None and f is not None and h < f:
            out.append(Problem(f"addons.{key}.version", f"{have} is below {floor}, the floor Dynamo {line} "
                                                        f"documents for {key} (docs/dynamo.md); remove the "
                                                        f"override (default "
                                                        f"{ADDON_VERSIONS[key]}) or set >= {floor}"))
    return out


def addon_releases(cfg: StackConfig) -> list[ReleaseSpec]:
    """Device plugin, schedulers and policy engine, each optional per stack (addons.<name>.enabled); none for
    an add-on the cluster provides (addons.<name>.provided, config.installs)."""
    a = cfg.addons
    out: list[ReleaseSpec] = []
    # First: without it no node advertises nvidia.com/gpu and every GPU pod stays Pending.
    device_plugin = nvidia_device_plugin_release(cfg)
    if device_plugin is not None:
        out.append(device_plugin)
    if installs(a.volcano):
        # issue 18: scheduler plugins/actions and HyperNode discovery when the stack needs them
        # (manifests/volcano_topology.volcano_values; {} leaves the chart's own config)
        out.append(_spec(cfg, "volcano", "volcano", "volcano", "https://volcano-sh.github.io/helm-charts",
                         volcano_topology.volcano_values(cfg),
                         ("batch.volcano.sh", "scheduling.volcano.sh", "topology.volcano.sh", "bus.volcano.sh")))
    if lws_install(cfg)[0]:
        values: dict[str, Any] = {}
        if a.volcano.enabled:
            # LWS creates one Volcano PodGroup per group (leader + workers) so the gang is
            # scheduled all-or-nothing; pods must use schedulerName volcano (workload templates).
            values["gangSchedulingManagement"] = {"schedulerProvider": "volcano"}
        out.append(_spec(cfg, "lws", "lws", "oci://registry.k8s.io/lws/charts/lws", None, values,
                         ("leaderworkerset.x-k8s.io",)))
    if installs(a.kai):
        out.append(_spec(cfg, "kai", "kai-scheduler", KAI_CHART, None, kai_values(cfg),
                         ("scheduling.run.ai", "kai.scheduler")))
    if installs(a.grove):
        # Grove's default scheduler profiles already include kai-scheduler (values.yaml
        # config.scheduler.profiles); Grove emits PodGangs that KAI gang-schedules.
        out.append(_spec(cfg, "grove", "grove", "oci://ghcr.io/ai-dynamo/grove/grove-charts", None, grove_values(cfg),
                         ("grove.io", "scheduler.grove.io")))
    if installs(a.kyverno):
        # The fabric policies use failurePolicy Fail: with Kyverno down, labelled pods are refused.
        # Three admission replicas keep pod creation available through a node loss.
        out.append(_spec(cfg, "kyverno", "kyverno", "kyverno", "https://kyverno.github.io/kyverno/",
                         {"admissionController": {"replicas": 3}}, ("kyverno.io",)))
    if installs(a.trainer):
        # Kubeflow Trainer v2: the controller (and its JobSet dependency) that runs TrainJobs. Values: none;
        # `runtimes.defaultEnabled` stays off, each trainjob workload brings its own ClusterTrainingRuntime
        # (manifests/workloads/trainjob.py). No values.yaml of this chart is stored (not checked here). Its
        # CRDs are chart templates at v2.3.0 (`crds.enabled`), so Helm upgrades them (manifests/crds.py).
        out.append(_spec(cfg, "trainer", "kubeflow-trainer", TRAINER_CHART, None, {},
                         ("trainer.kubeflow.org", "jobset.x-k8s.io")))
    health = nvsentinel_release(cfg)
    if health is not None:
        out.append(health)
    # Dynamo platform (operator + nvidia.com CRDs); last: it integrates with the schedulers above.
    # Values keys checked against schemas/dynamo/values.yaml (upstream main, chart 1.5.0; see dynamo_platform.py).
    dynamo = dynamo_platform_release(cfg)
    if dynamo is not None:
        out.append(ReleaseSpec(**dynamo))
    return out


# --------------------------------------------------------------------------------------------------------------
# NVSentinel (issue 34): GPU, NIC and syslog health monitors. Facts from NVIDIA/NVSentinel at e002c5dc
# (2026-08-17, the v1.19.0 docs registration; schemas/PROVENANCE.md), files named below; docs/node-health.md.
# --------------------------------------------------------------------------------------------------------------
NVSENTINEL_CHART = "oci://ghcr.io/nvidia/nvsentinel"
# The GPU Operator's standalone DCGM hostengine Service (GPU Operator values.yaml `dcgm.enabled`, off by default:
# "disabled by default to use embedded nv-hostengine by exporter"); NVSentinel's default operator-service endpoint
# is nvidia-dcgm.gpu-operator.svc:5555 (distros/kubernetes/nvsentinel/values.yaml global.dcgm.service).
GPU_OPERATOR_DCGM_SERVICE = "nvidia-dcgm"
DCGM_PORT = 5555
# GKE installs the driver under /home/kubernetes/bin/nvidia: NVSentinel's documented mounts for DCGM on GKE
# (docs/configuration/gpu-health-monitor.md "Example 1: GCP GKE Configuration").
_GKE_DRIVER_MOUNTS = {
    "additionalVolumeMounts": [
        {"mountPath": "/usr/local/nvidia", "name": "nvidia-install-dir-host", "readOnly": True},
        {"mountPath": "/etc/vulkan/icd.d", "name": "vulkan-icd-mount", "readOnly": True},
    ],
    "additionalHostVolumes": [
        {"name": "nvidia-install-dir-host", "hostPath": {"path": "/home/kubernetes/bin/nvidia", "type": "Directory"}},
        {"name": "vulkan-icd-mount",
         "hostPath": {"path": "/home/kubernetes/bin/nvidia/vulkan/icd.d", "type": "Directory"}},
    ],
}
# NVSentinel's NIC health monitor discovers Mellanox/NVIDIA NICs only (health-monitors/nic-health-monitor/pkg/
# discovery/discovery.go:36 "Only Mellanox/NVIDIA is supported today"): InfiniBand and RoCE ports
# (docs/configuration/nic-health-monitor.md). Fabrics of ours on such NICs:
NIC_MONITORED_FABRICS = {
    "infiniband": "InfiniBand ports (InfiniBandStateCheck, InfiniBandDegradationCheck, InfiniBandCharDeviceCheck)",
    "roce": "RoCE ports of the host's ConnectX PFs (EthernetStateCheck, EthernetDegradationCheck); the SR-IOV VFs "
            "in pods are filtered out by the monitor, a VF's health follows its PF",
    "gcp-rdma": "RoCE ports of the ConnectX NICs (EthernetStateCheck, EthernetDegradationCheck)",
}
# Fabrics whose NICs it does not discover (no vendor support): said in a plan note, never silently.
NIC_UNMONITORED_FABRICS = {
    "efa": "EFA devices (Amazon's vendor ID) are not discovered by NVSentinel's NIC health monitor",
    "tcpx": "GPUDirect-TCPX's gVNIC GPU NICs are not discovered by NVSentinel's NIC health monitor",
    "tcpxo": "GPUDirect-TCPXO's gVNIC GPU NICs are not discovered by NVSentinel's NIC health monitor",
}


def _pool_fabric_kinds(cfg: StackConfig) -> set[str]:
    return {profile_for(cfg, p).kind for p in cfg.node_pools}


def nvsentinel_dcgm_mode(cfg: StackConfig) -> str:
    """operator-service where this stack runs the GPU Operator (its standalone DCGM), else embedded-mode
    (multinode/nvsentinel.py)."""
    return nvsentinel.dcgm_mode(cfg)


# Chart switches that render a Prometheus Operator kind (monitoring.coreos.com). Only the
# parent's PodMonitor is on by default (values.yaml:351-354 `podMonitor.enabled: true`; templates/podMonitor.yaml:14
# renders it with no .Capabilities.APIVersions guard), so a cluster without the Prometheus Operator's CRDs fails the
# atomic release ("no matches for kind PodMonitor"); NVSentinel's values.yaml comment: "Disable this if using standard
# Prometheus with annotations instead". The sub-charts' monitors are off by default and their sub-charts too
# (charts/postgresql/values.yaml:1723, :1761; charts/mongodb-store/charts/mongodb/values.yaml:2465, :2503).
PROMETHEUS_OPERATOR_SWITCHES = (
    ("podMonitor", "enabled"),
    ("postgresql", "metrics", "serviceMonitor", "enabled"),
    ("postgresql", "metrics", "prometheusRule", "enabled"),
    ("mongodb-store", "mongodb", "metrics", "serviceMonitor", "enabled"),
    ("mongodb-store", "mongodb", "metrics", "prometheusRule", "enabled"),
)


def _get(values: dict[str, Any], path: tuple[str, ...]) -> Any:
    cur: Any = values
    for k in path:
        if not isinstance(cur, dict):
            return None
        cur = cur.get(k)
    return cur


def default_namespace(key: str) -> str:
    return _DEFAULT_NS[key]


def gpu_operator_dcgm_here(cfg: StackConfig) -> bool:
    """This stack installs the GPU Operator, whose standalone DCGM host engine (the `nvidia-dcgm` DaemonSet and
    Service) fabric_releases then turns on: the node-local engine NVSentinel and the workloads' preflight use."""
    return nvsentinel.gpu_operator_here(cfg) and bool(cfg.node_pools)


def _preflight_uses_operator_dcgm(cfg: StackConfig) -> bool:
    # workloads[].preflight.dcgm auto/hostEngine without an address of its own (manifests/workloads/preflight.py
    # dcgm_setting): the GPU Operator's Service
    return any(w.preflight.enabled and w.preflight.dcgm in ("auto", "hostEngine") and not w.preflight.dcgm_host_engine
               for w in cfg.workloads)


def nvsentinel_values(cfg: StackConfig) -> dict[str, Any]:
    """Our NVSentinel values; every key exists in schemas/nvsentinel/ (tests/test_node_health.py). Each choice is
    what makes a monitor the chart enables land on our GPU nodes (multinode/nvsentinel.py has the selectors and
    who sets each label)."""
    mode = nvsentinel_dcgm_mode(cfg)
    dcgm: dict[str, Any] = {"mode": mode}
    ghm: dict[str, Any] = {}
    glob: dict[str, Any] = {"dcgm": dcgm}
    if mode == "operator-service":
        ns = cfg.addons.gpu_operator.namespace or _DEFAULT_NS["gpuOperator"]
        dcgm["service"] = {"endpoint": f"{GPU_OPERATOR_DCGM_SERVICE}.{ns}.svc", "port": DCGM_PORT}
    else:
        dcgm["embedded"] = {"endpoint": "localhost", "port": DCGM_PORT}
        rc = nvsentinel.runtime_class(cfg)
        ghm["runtimeClassName"] = rc[0] if rc else nvsentinel.NVIDIA_RUNTIME_CLASS
        if cfg.cloud == "gcp":
            ghm.update(copy.deepcopy(_GKE_DRIVER_MOUNTS))
            # The metadata collector loads NVML from the driver (NVSentinel metadata-collector/main.go: "failed to
            # initialize NVML" ends it) and its chart has no volume values to mount GKE's driver directory
            # (charts/metadata-collector/values.yaml: image, resources, runtimeClassName, kubeletHost only); GKE has
            # no NVIDIA runtime to inject it. Off on GKE instead of a DaemonSet that can only crash (plan note).
            glob["metadataCollector"] = {"enabled": False}
    glob["nicHealthMonitor"] = {"enabled": bool(_pool_fabric_kinds(cfg) & set(NIC_MONITORED_FABRICS))}
    values: dict[str, Any] = {
        "global": glob,
        # issue 40: no PodMonitor unless the stack opts in (addons.nvsentinel.values.podMonitor.enabled: true, for a
        # cluster that runs the Prometheus Operator): see PROMETHEUS_OPERATOR_SWITCHES.
        "podMonitor": {"enabled": False},
    }
    if nvsentinel.driver_from_node_image(cfg):
        # driver.installed=true (the syslog and NIC monitors' and the metadata collector's selector) is written only
        # from a driver pod, which a node image's driver does not have, or by this switch (multinode/nvsentinel.py).
        values["labeler"] = {"assumeDriverInstalled": True}
    if ghm:
        values["gpu-health-monitor"] = ghm
    return values


def nvsentinel_runtime_class(cfg: StackConfig) -> dict[str, Any] | None:
    """The RuntimeClass embedded-mode names, on the clouds where we know the node's runtime handler (None
    elsewhere: the plan note asks the cluster for one)."""
    rc = nvsentinel.runtime_class(cfg)
    if rc is None:
        return None
    name, handler = rc
    return {"apiVersion": "node.k8s.io/v1", "kind": "RuntimeClass",
            "metadata": {"name": name, "labels": {"app.kubernetes.io/part-of": "nvsentinel"}}, "handler": handler}


def nvsentinel_release(cfg: StackConfig) -> ReleaseSpec | None:
    """On by default wherever the stack has GPU pools (addons.nvsentinel.enabled false opts out; provided: the
    cluster runs it). The chart's own defaults stay for the rest: GPU (DCGM), syslog health monitors, metadata
    collector, labeler, platform connector (node conditions); fault quarantine, node drainer and remediation are off
    in the chart (they need its MongoDB/PostgreSQL datastore) and stay off here: docs/node-health.md."""
    if not nvsentinel.installed(cfg):
        return None
    return _spec(cfg, "nvsentinel", "nvsentinel", NVSENTINEL_CHART, None, nvsentinel_values(cfg))


def nvsentinel_advisories(cfg: StackConfig) -> list[Problem]:
    """Plan notes: fabric ports NVSentinel does not watch, what embedded DCGM needs from a cluster we do not shape,
    a monitor this stack leaves off, and Prometheus Operator kinds the stack opted into."""
    if not nvsentinel.installed(cfg):
        return []
    out: list[Problem] = []
    for kind in sorted(_pool_fabric_kinds(cfg) & set(NIC_UNMONITORED_FABRICS)):
        out.append(Problem("addons.nvsentinel", f"{NIC_UNMONITORED_FABRICS[kind]}: no NIC health monitor on "
                                                f"this stack's {kind} ports (docs/node-health.md)"))
    spec = nvsentinel_release(cfg)
    values = spec.values if spec is not None else {}
    if nvsentinel_dcgm_mode(cfg) == "embedded-mode" and nvsentinel.runtime_class(cfg) is None:
        # issue 46: the fix this asks for (the cluster's own RuntimeClass named in both values) makes it go away;
        # the metadata collector needs one only when it runs
        user = cfg.addons.nvsentinel.values or {}
        needs = ["gpu-health-monitor"] + (
            [] if _get(values, ("global", "metadataCollector", "enabled")) is False else ["metadata-collector"])
        unset = [k for k in needs if not _get(user, (k, "runtimeClassName"))]
        if unset:
            rc = nvsentinel.NVIDIA_RUNTIME_CLASS
            keys = " and ".join(f"addons.nvsentinel.values.{k}.runtimeClassName" for k in unset)
            out.append(Problem("addons.nvsentinel", f"the GPU health monitor runs DCGM embedded and needs a "
                                                    f"RuntimeClass {rc!r} on the cluster, as the metadata collector "
                                                    f"does (this stack creates none on {cfg.cloud}); set {keys} to "
                                                    f"the RuntimeClass your GPU nodes' NVIDIA runtime has "
                                                    f"(docs/node-health.md)"))
    if nvsentinel_dcgm_mode(cfg) == "embedded-mode" and cfg.cloud == "existing" and not all(
            pool.node_selector.get(nvsentinel.DCGM_VERSION_LABEL) == nvsentinel.DCGM_MAJOR
            and pool.node_selector.get("nvidia.com/gpu.present") == "true" for pool in cfg.node_pools):
        # the stack cannot see the nodes' labels; a pool that selects its nodes by them says they carry them
        out.append(Problem("addons.nvsentinel", f"label every GPU node {nvsentinel.DCGM_VERSION_LABEL}="
                                                f"{nvsentinel.DCGM_MAJOR} and nvidia.com/gpu.present=true: the GPU "
                                                f"health monitor is scheduled only there and this stack does not "
                                                f"create the nodes; then add both labels to each pool's "
                                                f"nodeSelector, so the stack knows (docs/node-health.md)"))
    if _get(values, ("global", "metadataCollector", "enabled")) is False and cfg.cloud == "gcp":
        out.append(Problem("addons.nvsentinel", "the metadata collector is off on GKE (it needs NVML and its chart "
                                                "cannot mount GKE's driver directory): health events carry no GPU "
                                                "PCI/NVLink metadata (docs/node-health.md)"))
    on = [".".join(p) for p in PROMETHEUS_OPERATOR_SWITCHES if _get(values, p) is True]
    if on:
        out.append(Problem("addons.nvsentinel.values", f"{', '.join(on)} renders Prometheus Operator objects "
                                                       f"(monitoring.coreos.com); this stack installs no Prometheus "
                                                       f"Operator CRDs, so the release fails unless the cluster has "
                                                       f"them (docs/node-health.md)"))
    return out


def fabric_releases(cfg: StackConfig) -> list[ReleaseSpec]:
    """The fabric operator of this stack's cloud only (exactly one cloud's fabric per stack).

    aws: EFA device plugin.  azure: NVIDIA Network Operator (+ GPU Operator when enabled).
    oci: Network Operator (SR-IOV VFs).  gcp: no Helm chart (DaemonSets, see gcp_daemonsets).
    existing: nothing (the cluster already runs its fabric's device plugin).
    """
    a = cfg.addons
    out: list[ReleaseSpec] = []
    kinds = {profile_for(cfg, p).kind for p in cfg.node_pools}
    if cfg.cloud == "aws" and installs(a.efa_device_plugin) and "efa" in kinds:
        out.append(_spec(cfg, "efaDevicePlugin", "aws-efa-k8s-device-plugin", "aws-efa-k8s-device-plugin",
                         "https://aws.github.io/eks-charts", {
                             # hardware.md section 2: nodeSelector efa.present, toleration nvidia.com/gpu.
                             "nodeSelector": {pools.EFA_PRESENT_LABEL: "true"},
                             "tolerations": _gpu_tolerations(),
                         }))
    if cfg.cloud in ("azure", "oci") and installs(a.network_operator) and kinds & {"infiniband", "roce"}:
        out.append(_spec(cfg, "networkOperator", "network-operator", "network-operator",
                         "https://helm.ngc.nvidia.com/nvidia", {
                             "nfd": {"enabled": True},     # labels feature.node.kubernetes.io/pci-15b3.present
                             "sriovNetworkOperator": {"enabled": False},  # VFs come from the device plugin
                         }, ("mellanox.com",)))
    if cfg.cloud in ("azure", "oci") and installs(a.gpu_operator):
        # GPUDirect RDMA: the GPU Operator's driver loads nvidia-peermem (driver.rdma.enabled, as
        # Azure/aks-rdma-infiniband configs/values/gpu-operator/values.yaml). useHostMofed only when no
        # DOCA driver container is installed (the node image has MLNX_OFED/DOCA, e.g. OCI's GPU images);
        # with the Network Operator's ofedDriver (Azure's default) it stays false like that file.
        values: dict[str, Any] = {
            "driver": {"rdma": {"enabled": True, "useHostMofed": _ofed_driver_version(cfg) is None}},
            "daemonsets": {"tolerations": _gpu_tolerations()},
        }
        if (installs(a.nvsentinel) or _preflight_uses_operator_dcgm(cfg)) and cfg.node_pools:
            # NVSentinel's GPU health monitor and the workloads' preflight (dcgmi diag --host) read DCGM from the
            # operator's standalone hostengine Service (nvsentinel_values, operator-service mode; docs/preflight.md);
            # the chart keeps it off by default.
            values["dcgm"] = {"enabled": True}
        if cfg.cloud == "azure" and "networkOperator" in {s.key for s in out}:
            # The Network Operator already runs NFD (nfd.enabled above); the same gpu-operator values file
            # turns the GPU Operator's own NFD off so the two do not both label the nodes.
            values["nfd"] = {"enabled": False}
        out.append(_spec(cfg, "gpuOperator", "gpu-operator", "gpu-operator", "https://helm.ngc.nvidia.com/nvidia",
                         values, ("nvidia.com",)))
    return out


# ------------------------------------------------------------------------------------------
# Network Operator NicClusterPolicy (azure InfiniBand, oci RoCE SR-IOV)
# ------------------------------------------------------------------------------------------
def _ofed_driver_version(cfg: StackConfig) -> str | None:
    """DOCA driver container version of the NicClusterPolicy, None = the node image brings the drivers.
    azure: installed by default (GPUDirect RDMA needs it, multinode/clouds/azure.py); other clouds: only
    when fabric.docaDriverVersion is set. `host` means none on every cloud."""
    if cfg.cloud == "azure":
        return azure.ofed_driver_version(cfg)
    v = cfg.fabric.doca_driver_version
    return None if v == azure.HOST_DRIVERS else v


# Component images: nvcr.io/nvidia/mellanox/<image>:network-operator-v<chart version>, the tag scheme
# the chart itself uses (values.yaml: rdma-cni:network-operator-v26.4.1, init container
# version network-operator-v26.4.1).
_MELLANOX_REPO = "nvcr.io/nvidia/mellanox"
# rdma/shared_ib a node advertises: the shared device plugin's rdmaHcaMax (pods sharing the HCAs; placement reads it)
SHARED_IB_HCA_MAX = azure.SHARED_IB_HCA_MAX


def _component(image: str, version: str) -> dict[str, Any]:
    return {"image": image, "repository": _MELLANOX_REPO, "version": f"network-operator-v{version.lstrip('v')}"}


# issue 30: how a DOCA driver version change reaches the nodes. Without upgradePolicy (CRD default autoUpgrade false)
# the driver DaemonSet keeps the old container on every node until someone deletes its pods by hand. As
# Azure/aks-rdma-infiniband@700dabb4 configs/nicclusterpolicy/base/nic.yaml:32-39: automatic, one node at a time,
# drained first (evictions honour PodDisruptionBudgets; emptyDir pods such as our /dev/shm ones may go, and force
# lets pods without a controller go, as upstream), 300 s to drain.
DOCA_UPGRADE_POLICY: dict[str, Any] = {
    "autoUpgrade": True, "maxParallelUpgrades": 1,
    "drain": {"enable": True, "force": True, "deleteEmptyDir": True, "timeoutSeconds": 300},
}


def nic_cluster_policy(cfg: StackConfig) -> dict[str, Any] | None:
    """The NicClusterPolicy exposing RDMA devices to pods, or None when not needed."""
    if cfg.cloud not in ("azure", "oci") or not cfg.addons.network_operator.enabled:
        return None
    profiles = [profile_for(cfg, p) for p in cfg.node_pools]
    kinds = {p.kind for p in profiles}
    version = _version("networkOperator", cfg.addons.network_operator)
    spec: dict[str, Any] = {"tolerations": _gpu_tolerations()}
    if "infiniband" in kinds and cfg.fabric.rdma_mode == "shared":
        # Mellanox/k8s-rdma-shared-dev-plugin: resourceName shared_ib -> rdma/shared_ib, every IB HCA
        # (vendor 15b3, link type infiniband) shared by up to 63 pods (hardware.md section 2, Z3/Z5).
        # fabric.rdmaResourceName renames it (azure.rdma_resource); `resourcePrefix` is written only when it is
        # not the plugin's default "rdma", so the default stacks render as before.
        import json
        prefix, name = azure.rdma_resource(cfg).split("/")
        entry: dict[str, Any] = {"resourceName": name}
        if prefix != azure.RDMA_DEFAULT_PREFIX:
            entry["resourcePrefix"] = prefix
        entry.update({"rdmaHcaMax": SHARED_IB_HCA_MAX, "selectors": {"vendors": ["15b3"], "linkTypes": ["infiniband"]}})
        spec["rdmaSharedDevicePlugin"] = {**_component("k8s-rdma-shared-dev-plugin", version), "config": json.dumps({
            "configList": [entry]})}
    elif kinds & {"infiniband", "roce"}:
        import json
        if "roce" in kinds:
            prefix, name = OCI_VF_RESOURCE.split("/")          # nvidia.com/rdma-vf (hardware.md, O1)
            selectors = {"vendors": ["15b3"], "isRdma": True}
            # Only the shapes' fabric ports (their PCI addresses, clouds/oci.FABRIC_ROOT_DEVICES from
            # oci-hpc-oke's SriovNetworkNodePolicy nicSelector.rootDevices); the device plugin's
            # `rootDevices` selector matches a VF by its PF's address. An unknown shape keeps the broad
            # selector (checks.advisories reports it).
            roots = oci.fabric_root_devices(sorted({p.machine for p in profiles if p.kind == "roce"}))
            if roots:
                selectors["rootDevices"] = roots
        else:
            prefix, name = azure.rdma_resource(cfg).split("/")   # rdma/ib (hardware.md, SR-IOV plugin) or the stack's
            selectors = {"vendors": ["15b3"], "linkTypes": ["infiniband"], "isRdma": True}
        spec["sriovDevicePlugin"] = {**_component("sriov-network-device-plugin", version), "config": json.dumps({
            "resourceList": [{"resourcePrefix": prefix, "resourceName": name, "selectors": selectors}]})}
        if "roce" in kinds:
            # Multus lets pods attach the VFs named in k8s.v1.cni.cncf.io/networks (it also brings the
            # NetworkAttachmentDefinition CRD); cniPlugins installs host-device, tuning and sbr of our rdma-vf
            # network (the `rdma` CNI comes from rdma_cni_installer); nvIpam gives each VF an address
            # (IPPool below). See rdma_vf_network.
            spec["secondaryNetwork"] = {"multus": _component("multus-cni", version),
                                        "cniPlugins": _component("plugins", version)}
            # No webhook: it needs cert-manager (CRD description of nvIpam), which this stack does not install.
            spec["nvIpam"] = {**_component("nvidia-k8s-ipam", version), "enableWebhook": False}
    else:
        return None
    # issue 30: the policy's components (DOCA driver, device plugins, Multus) run only on the fabric pools' nodes.
    # Azure/aks-rdma-infiniband@700dabb4 configs/nicclusterpolicy/base/nic.yaml:8-16 requires NFD's
    # feature.node.kubernetes.io/pci-15b3.present=true, and turns the chart's default NFD rule off
    # (configs/values/network-operator/values.yaml:2 deployNodeFeatureRules: false) for its own rule matching the
    # InfiniBand VF device IDs 101c / 101e only (tests/setup-infra/network-operator-nfd.yaml): with the default
    # rule any node with a Mellanox NIC gets that label, AKS Accelerated Networking NICs included, and the DOCA
    # driver container would reload mlx5 on a CPU node. We select the label our created fabric pools carry
    # (pools.node_labels: multinode.dev/fabric=<kind>), which no other node has, and leave NFD's rules alone.
    fabric_kinds = sorted(kinds & {"infiniband", "roce"})
    spec["nodeAffinity"] = {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
        {"matchExpressions": [{"key": pools.FABRIC_NODE_LABEL, "operator": "In", "values": fabric_kinds}]}]}}
    doca = _ofed_driver_version(cfg)
    if doca:
        # DOCA-OFED driver container; only when the node image lacks MLNX_OFED / DOCA.
        spec["ofedDriver"] = {"image": "doca-driver", "repository": _MELLANOX_REPO, "version": doca,
                              "upgradePolicy": copy.deepcopy(DOCA_UPGRADE_POLICY)}
        if cfg.cloud == "azure":
            # Azure/aks-rdma-infiniband configs/nicclusterpolicy/base/nic.yaml: the module-load race
            # workaround and forcePrecompiled false (see multinode/clouds/azure.py DOCA_DRIVER_ENV).
            spec["ofedDriver"].update({"env": copy.deepcopy(azure.DOCA_DRIVER_ENV), "forcePrecompiled": False})
    return {"apiVersion": "mellanox.com/v1alpha1", "kind": "NicClusterPolicy",
            "metadata": {"name": "nic-cluster-policy"}, "spec": spec}


# ------------------------------------------------------------------------------------------
# OCI: the Multus network that attaches RDMA VFs (k8s.v1.cni.cncf.io/networks: default/rdma-vf,...)
# ------------------------------------------------------------------------------------------
# Shape of the attachment, from two documented setups (our own config, not a copy of either):
#  - oracle-quickstart/oci-hpc-oke@61d210ac terraform/files/nvidia-network-operator/sriov-network.yaml: a
#    SriovNetwork `rdma-vf` with networkNamespace `default` (the operator renders the NAD there), IPAM
#    `nv-ipam` with a pool; terraform/via-provider-nvidia-network-operator.tf:34 and variables.tf:598-612: the
#    pool (nvidia_network_operator_ipam_subnet 192.168.0.0/16, per-node block size variable) in the operator's
#    namespace (issue 30: the manifests/network-attachment-definition.yaml and manifests/ip-pool.yaml cited
#    before were deleted upstream in 0a4485a); docs/using-rdma-network-interfaces-in-manifests.md: the NAD
#    lives in `default`, pods elsewhere name it `default/rdma-vf`. Their chain starts with the sriov CNI, which
#    only the SR-IOV Network Operator installs; we keep that operator off (VFs come from the device plugin).
#  - Mellanox/network-operator example/crs/mellanox.com_v1alpha1_hostdevicenetwork_cr.yaml and
#    example/networking/rdma-net-hostdev-cr-whereabouts-ipam.yml: with the SR-IOV device plugin of a
#    NicClusterPolicy, the CNI is `host-device` (from secondaryNetwork.cniPlugins); Multus passes the
#    allocated VF's PCI address to it through the resourceName annotation. Whereabouts IPAM is no
#    longer a NicClusterPolicy field at v26.4.1, so we use nv-ipam (spec.nvIpam).
VF_IP_POOL = "rdma-vf"
VF_SUBNET = "192.168.0.0/16"       # oci-hpc-oke variables.tf ipam_subnet; must not overlap the VCN / pod CIDRs
VF_PER_NODE_BLOCK = 64             # >= 16 VFs of one whole-node pod, with room for restarts


def rdma_vf_network(cfg: StackConfig) -> list[dict[str, Any]]:
    """[nv-ipam IPPool, NetworkAttachmentDefinition] for OCI RDMA VFs, or [] when the stack has no
    OCI RoCE pool or does not manage the Network Operator. Neither kind has a schema in schemas/:
    tests check their fields and that spec.config is valid JSON (see tests/test_addons.py)."""
    if cfg.cloud != "oci" or not cfg.addons.network_operator.enabled:
        return []
    if "roce" not in {profile_for(cfg, p).kind for p in cfg.node_pools}:
        return []
    import json
    operator_ns = cfg.addons.network_operator.namespace or _DEFAULT_NS["networkOperator"]   # nv-ipam reads pools there
    pool = {"apiVersion": "nv-ipam.nvidia.com/v1alpha1", "kind": "IPPool",
            "metadata": {"name": VF_IP_POOL, "namespace": operator_ns},
            "spec": {"subnet": VF_SUBNET, "perNodeBlockSize": VF_PER_NODE_BLOCK}}
    # The chain after the VF's netdev, as oci-hpc-oke terraform/files/nvidia-network-operator/sriov-network.yaml
    # (commit 61d210ac) gives its SriovNetwork in metaPlugins: tuning (sysctls + mtu 4220), rdma, sbr. Their
    # first plugin is the sriov CNI (SR-IOV Network Operator); ours is host-device (module comment above).
    config = {
        "cniVersion": "0.3.1",
        "name": OCI_VF_NETWORK,
        "plugins": [
            # host-device moves the VF netdev (PCI address from the device plugin) into the pod.
            {"type": "host-device", "ipam": {"type": "nv-ipam", "poolName": VF_IP_POOL}},
            # Up to 16 VFs share one subnet in a pod: answer ARP only on the interface that owns the
            # address, do not drop replies by reverse-path filtering, accept packets from local addresses
            # (the sysctls of oci-hpc-oke's chain), and the VF MTU 4220 of its SriovNetworkNodePolicy.
            {"type": "tuning", "mtu": oci.VF_MTU,
             "sysctl": {"net.ipv4.conf.all.arp_announce": "2",
                        "net.ipv4.conf.all.arp_ignore": "1",
                        "net.ipv4.conf.all.arp_filter": "1",
                        "net.ipv4.conf.all.rp_filter": "0",
                        "net.ipv4.conf.all.accept_local": "1"}},
            # k8snetworkplumbingwg/rdma-cni: moves the VF's RDMA device (the HCA NCCL opens) into the pod's
            # network namespace; it needs the host's RDMA subsystem in exclusive netns mode (its README).
            {"type": "rdma"},
            # source-based routing: replies leave by the VF that received the request (16 VFs, one subnet).
            {"type": "sbr"},
        ],
    }
    nad = {"apiVersion": "k8s.cni.cncf.io/v1", "kind": "NetworkAttachmentDefinition",
           "metadata": {"name": OCI_VF_NETWORK, "namespace": OCI_VF_NETWORK_NAMESPACE,
                        "annotations": {"k8s.v1.cni.cncf.io/resourceName": OCI_VF_RESOURCE}},
           "spec": {"config": json.dumps(config, sort_keys=True)}}
    return [pool, nad, rdma_cni_installer(cfg)]


def rdma_cni_installer(cfg: StackConfig) -> dict[str, Any]:
    """DaemonSet that puts the `rdma` CNI binary into /opt/cni/bin on the RoCE pools' nodes.

    oci-hpc-oke gets it from the SR-IOV Network Operator (chart value sriov-network-operator.images.rdmaCni,
    ../shared/schemas/network-operator/values.yaml), which this stack keeps off, and the v26.4.1
    NicClusterPolicy has no rdma-cni component. Shape from k8snetworkplumbingwg/rdma-cni
    deployment/rdma-cni-daemonset.yaml: privileged, hostNetwork, host /opt/cni/bin mounted at
    /host/opt/cni/bin (where the image's entrypoint copies the binary), 100m / 50Mi; the image is the
    operator's own build at the operator's version (the values.yaml tag form)."""
    version = _version("networkOperator", cfg.addons.network_operator)
    roce_pools = [p.name for p in cfg.node_pools if profile_for(cfg, p).kind == "roce"]
    affinity = {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
        {"matchExpressions": [{"key": pools.POOL_LABEL, "operator": "In", "values": roce_pools}]}]}}}
    res = {"cpu": "100m", "memory": "50Mi"}
    return _daemonset("rdma-cni", {
        "priorityClassName": "system-node-critical", "affinity": affinity, "hostNetwork": True,
        "tolerations": [{"operator": "Exists"}],
        "volumes": [{"name": "cnibin", "hostPath": {"path": "/opt/cni/bin"}}],
        "containers": [{
            "name": "rdma-cni",
            "image": f"{_MELLANOX_REPO}/rdma-cni:network-operator-v{version.lstrip('v')}",
            "securityContext": {"privileged": True},
            "resources": {"requests": dict(res), "limits": dict(res)},
            "volumeMounts": [{"name": "cnibin", "mountPath": "/host/opt/cni/bin"}],
        }],
    })


# ------------------------------------------------------------------------------------------
# GCP: TCPXO NCCL plugin installer + NRI device injector (no Helm chart upstream)
# ------------------------------------------------------------------------------------------
# Source: GoogleCloudPlatform/container-engine-accelerators gpudirect-tcpxo/nccl-tcpxo-installer.yaml
# and nri_device_injector/nri-device-injector.yaml (structure), hardware.md section 2 (image pin
# nccl-plugin-gpudirecttcpx-dev:v1.0.15). Issue 30: container-engine-accelerators@992db812 (2026-06-11) still runs
# v1.0.15 with daemon v1.0.21, the pair its gpudirect-tcpxo/README.md:57-70 releases together (Jan 9, 2026);
# the "moved to v1.0.16" said here before matched no upstream file.
TCPXO_INSTALLER_IMAGE = "us-docker.pkg.dev/gce-ai-infra/gpudirect-tcpxo/nccl-plugin-gpudirecttcpx-dev:v1.0.15"
NRI_INJECTOR_IMAGE = ("gcr.io/gke-release/nri-device-injector@sha256:"
                      "6e79483d52abdc28454bf186320b10a56b0f117a10e8d65d5c74dbb821a76970")


# Mirrors the upstream installer's "pre-installation" step (PCI id 1ae0:0084 = the A3 Mega GPU NICs).
_APERTURE_SCRIPT = "\n".join([
    "set -e",
    "/sbin/iptables -I INPUT -p tcp -m tcp -j ACCEPT",
    "modprobe import-helper",
    "mkdir -p /dev/aperture_devices",
    "for bdf in $(lspci -nn -D | grep '1ae0:0084' | cut -d' ' -f1); do",
    "  dst=/dev/aperture_devices/$bdf; mkdir -p $dst; umount -R $dst 2>/dev/null || true",
    "  mount --bind $(readlink -f /sys/bus/pci/devices/$bdf) $dst",
    "done",
    "chmod -R a+r /dev/aperture_devices/ && chmod a+rw /dev/aperture_devices/*/resource* || true",
])


def _daemonset(name: str, pod_spec: dict[str, Any]) -> dict[str, Any]:
    labels = {"k8s-app": name}
    return {"apiVersion": "apps/v1", "kind": "DaemonSet",
            "metadata": {"name": name, "namespace": "kube-system", "labels": labels},
            "spec": {"selector": {"matchLabels": labels}, "updateStrategy": {"type": "RollingUpdate"},
                     "template": {"metadata": {"labels": labels}, "spec": pod_spec}}}


# issue 30: the TCPX and gIB plugins need their installers too: the fabric profile pins NCCL_NET to them and
# mounts /home/kubernetes/bin/nvidia/lib64 (and /home/kubernetes/bin/gib), which nothing filled for TCPX / RDMA
# pools before. container-engine-accelerators@992db812 gpudirect-tcpx/nccl-tcpx-installer.yaml (image v3.1.9, the
# version cluster-toolkit@10470803 gpu_direct.tf:34 pairs with RxDM v2.0.12, ours) and
# gpudirect-rdma/nccl-rdma-installer.yaml (gIB v1.1.1): an init container running the image's
# /scripts/container_entry.sh install, copying the libraries to the host, then pause. Ours select the pools by our
# pool label instead of upstream's gke-accelerator label.
TCPX_INSTALLER_IMAGE = "us-docker.pkg.dev/gce-ai-infra/gpudirect-tcpx/nccl-plugin-gpudirecttcpx-dev:v3.1.9"
GIB_INSTALLER_IMAGE = "us-docker.pkg.dev/gce-ai-infra/gpudirect-gib/nccl-plugin-gib:v1.1.1"
_PAUSE = [{"name": "pause", "image": "registry.k8s.io/pause:3.10"}]


def _installer_base(cfg: StackConfig, kind: str) -> dict[str, Any]:
    """Pod spec fields every installer shares: this stack's pools of `kind` only (by our pool label), tolerating
    everything like upstream, host network and PID namespace."""
    names = [p.name for p in cfg.node_pools if profile_for(cfg, p).kind == kind]
    affinity = {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
        {"matchExpressions": [{"key": pools.POOL_LABEL, "operator": "In", "values": names}]}]}}}
    return {"priorityClassName": "system-node-critical", "affinity": affinity,
            "tolerations": [{"operator": "Exists"}], "hostNetwork": True, "hostPID": True}


def _tcpx_installer(cfg: StackConfig) -> dict[str, Any]:
    return _daemonset("nccl-tcpx-installer", {
        **_installer_base(cfg, "tcpx"),
        "volumes": [{"name": "var-lib", "hostPath": {"path": "/var/lib"}},
                    {"name": "library-dir-host", "hostPath": {"path": "/home/kubernetes/bin"}}],
        "initContainers": [{
            "name": "nccl-tcpx-installer", "image": TCPX_INSTALLER_IMAGE,
            "securityContext": {"privileged": True}, "resources": {"requests": {"cpu": "150m"}},
            "volumeMounts": [{"name": "var-lib", "mountPath": "/var/lib"},
                             {"name": "library-dir-host", "mountPath": "/usr/local"}],
            "command": ["/bin/sh", "-c"],
            "args": ["set -ex; /scripts/container_entry.sh install --install-nccl; "
                     "mkdir -p /usr/local/nvidia/lib64; cp -r /var/lib/tcpx/lib64/. /usr/local/nvidia/lib64"],
        }],
        "containers": copy.deepcopy(_PAUSE),
    })


def _gib_installer(cfg: StackConfig) -> dict[str, Any]:
    lib, gib = "/usr/local/home/kubernetes/bin/nvidia/lib64", "/usr/local/home/kubernetes/bin/gib"
    return _daemonset("nccl-rdma-installer", {
        **_installer_base(cfg, "gcp-rdma"),
        "volumes": [{"name": "library-dir-host",
                     "hostPath": {"path": "/home/kubernetes/bin/nvidia/lib64", "type": "DirectoryOrCreate"}},
                    {"name": "gib", "hostPath": {"path": "/home/kubernetes/bin/gib"}}],
        "initContainers": [{
            "name": "nccl-rdma-installer", "image": GIB_INSTALLER_IMAGE,
            "securityContext": {"privileged": True}, "resources": {"requests": {"cpu": "150m"}},
            "volumeMounts": [{"name": "library-dir-host", "mountPath": lib}, {"name": "gib", "mountPath": gib}],
            "command": ["/bin/sh", "-c"],
            "args": [f"set -ex; /scripts/container_entry.sh install; cp -r /var/lib/gib/lib64/. {lib}; "
                     f"cp -r /var/lib/gib/. {gib}"],
        }],
        "containers": copy.deepcopy(_PAUSE),
    })


def gcp_daemonsets(cfg: StackConfig) -> list[dict[str, Any]]:
    if cfg.cloud != "gcp":
        return []
    kinds = {profile_for(cfg, p).kind for p in cfg.node_pools}
    out = ([_tcpx_installer(cfg)] if "tcpx" in kinds else []) + ([_gib_installer(cfg)] if "gcp-rdma" in kinds else [])
    if "tcpxo" not in kinds:
        return out
    base = _installer_base(cfg, "tcpxo")
    installer = _daemonset("nccl-tcpxo-installer", {
        **base,
        "volumes": [{"name": "var-lib", "hostPath": {"path": "/var/lib"}},
                    {"name": "library-dir-host", "hostPath": {"path": "/home/kubernetes/bin"}}],
        "initContainers": [{
            # On the host: accept the data-path TCP traffic, load the import-helper module, and expose
            # each TCPXO NIC's PCI BAR under /dev/aperture_devices/<BDF> (what the workload mounts).
            # upstream's "ubuntu", fully qualified (issue 30: every image we render names its registry)
            "name": "pre-installation", "image": "docker.io/library/ubuntu", "securityContext": {"privileged": True},
            "command": ["nsenter", "-at", "1", "--", "bash", "-c", _APERTURE_SCRIPT],
        }, {
            "name": "nccl-tcpxo-installer", "image": TCPXO_INSTALLER_IMAGE,
            "securityContext": {"privileged": True}, "resources": {"requests": {"cpu": "150m"}},
            "volumeMounts": [{"name": "var-lib", "mountPath": "/var/lib"},
                             {"name": "library-dir-host", "mountPath": "/usr/local"}],
            "command": ["/bin/sh", "-c"],
            "args": ["set -ex; chmod 755 /scripts/container_entry.sh; "
                     "/scripts/container_entry.sh install --install-nccl; "
                     "mkdir -p /usr/local/nvidia/lib64; cp -r /var/lib/tcpxo/lib64/. /usr/local/nvidia/lib64"],
        }],
        "containers": copy.deepcopy(_PAUSE),
    })
    injector = _daemonset("device-injector", {
        **base,
        "containers": [{
            "name": "device-injector", "image": NRI_INJECTOR_IMAGE,
            "securityContext": {"privileged": True}, "resources": {"requests": {"cpu": "150m"}},
            "volumeMounts": [{"name": "dev", "mountPath": "/dev"}, {"name": "nri", "mountPath": "/var/run/nri"}],
        }],
        "volumes": [{"name": "nri", "hostPath": {"path": "/var/run/nri"}},
                    {"name": "dev", "hostPath": {"path": "/dev"}}],
    })
    return out + [installer, injector]


# ------------------------------------------------------------------------------------------
# What a workload's objects need from the add-ons before they are created
# ------------------------------------------------------------------------------------------
# schedulerName a pod names -> the add-on (config key) that runs that scheduler and its pod webhooks
SCHEDULER_ADDON = {"volcano": "volcano", "kai-scheduler": "kai"}
GPU_RESOURCE = "nvidia.com/gpu"
# Where a workload names its Volcano Queue: a Volcano Job's spec.queue, or this annotation (LWS, MPIJob pods)
VOLCANO_QUEUE_ANNOTATION = "scheduling.volcano.sh/queue-name"


@dataclass
class Needs:
    """What one workload's objects need to exist before them (addons_needed)."""
    groups: list[str] = field(default_factory=list)     # API groups of their kinds (CRDs, webhooks)
    addons: list[str] = field(default_factory=list)     # add-on keys: the scheduler their pods name, device plugin
    queues: list[str] = field(default_factory=list)     # Volcano Queues they name
    # PriorityClasses their pods or jobs name (priorityClassName): the API server refuses a pod naming one that does
    # not exist yet, so the workload waits for those, not for every PriorityClass of the stack (issue 48: waiting
    # for all of them gave each workload a dependency per PriorityClass, workloads x classes edges)
    priority_classes: list[str] = field(default_factory=list)


def _scan(node: Any, seen: dict[str, set[str]], under: str = "") -> None:
    if isinstance(node, dict):
        name = node.get("schedulerName")
        if isinstance(name, str):
            seen["schedulers"].add(name)
        queue = node.get(VOLCANO_QUEUE_ANNOTATION) if under == "annotations" else (
            node.get("queue") if under == "spec" else None)
        if isinstance(queue, str):
            seen["queues"].add(queue)
        priority = node.get("priorityClassName")
        if isinstance(priority, str):
            seen["priorityClasses"].add(priority)
        for key in ("limits", "requests"):
            res = node.get(key)
            if isinstance(res, dict) and GPU_RESOURCE in res:
                seen["addons"].add("nvidiaDevicePlugin")   # no node advertises nvidia.com/gpu before it runs
        for k, v in node.items():
            if isinstance(v, (dict, list)):
                _scan(v, seen, str(k))
    elif isinstance(node, list):
        for v in node:
            if isinstance(v, (dict, list)):
                _scan(v, seen, under)


def addons_needed(objects: list[dict[str, Any]]) -> Needs:
    """What `objects` (one workload's manifests) need from the add-ons before they are created: the API groups
    of their apiVersions (the CRDs and webhooks of custom kinds, looked up with ClusterAddons.crd_ready; core
    groups select nothing), the scheduler add-on their pods name (volcano, kai), the GPU device plugin when a
    container requests nvidia.com/gpu, and the Volcano Queues they name (Volcano refuses a job whose queue
    does not exist). One walk over the objects."""
    seen: dict[str, set[str]] = {"schedulers": set(), "addons": set(), "queues": set(), "priorityClasses": set()}
    for o in objects:
        _scan(o, seen)
    keys = seen["addons"] | {SCHEDULER_ADDON[s] for s in seen["schedulers"] if s in SCHEDULER_ADDON}
    groups = {str(o.get("apiVersion", "")).rpartition("/")[0] for o in objects} - {""}
    return Needs(sorted(groups), sorted(keys), sorted(seen["queues"]), sorted(seen["priorityClasses"]))
