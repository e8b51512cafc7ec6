"""What NVSentinel needs from a GPU node before any of its monitors is scheduled there (issue 40), per cloud.

Pure facts shared by the node pools (pools.node_labels: a label the node must carry from its first boot) and the
add-on's values and objects (manifests/addons.py). Read from NVIDIA/NVSentinel at e002c5dc (the v1.19.0 docs
registration, the commit of ../shared/charts/nvsentinel-v1.19.0); paths below are in that repository.

Which node labels select each monitor the chart enables by default (every DaemonSet's nodeSelector is fixed in
its template; `global.nodeSelector` can only add to it):
  gpu-health-monitor  nvsentinel.dgxc.nvidia.com/dcgm.version = 3.x | 4.x   (charts/gpu-health-monitor/templates/
                      daemonset-dcgm-4.x.yaml:134-135, -3.x.yaml the same)
  syslog-health-monitor  nvsentinel.dgxc.nvidia.com/driver.installed = "true" and .../kata.enabled
                      (charts/syslog-health-monitor/templates/_helpers.tpl:271-273)
  nic-health-monitor  .../driver.installed = "true"  (charts/nic-health-monitor/templates/daemonset.yaml:174-175)
  metadata-collector  nvidia.com/gpu.present = "true" and .../driver.installed = "true"
                      (charts/metadata-collector/templates/daemonset.yaml:89-91); runtimeClassName defaults to
                      "nvidia" (charts/metadata-collector/values.yaml:31)

Who sets those labels (labeler/pkg/labeler/labeler.go):
  dcgm.version     from the image of a DCGM pod (label app=nvidia-dcgm, the GPU Operator's standalone DCGM) on the
                   node (getDCGMVersionForNode, :440-472). In embedded-mode there is no such pod: "operators provide
                   the DCGM major version through the existing nvsentinel.dgxc.nvidia.com/dcgm.version node label"
                   (docs/designs/044-dcgm-source-modes.md:28), and the chart passes `--assume-dcgm-available` so the
                   labeler keeps a valid label it finds instead of removing it (charts/labeler/templates/
                   _helpers.tpl:65-79; labeler.go:863-866). So the pools we create carry it from registration.
  driver.installed from a ready driver pod (app=nvidia-driver-daemonset, the GPU Operator's driver container) or,
                   on GKE, a ready `k8s-app=nvidia-driver-installer` pod (getDriverLabelForNode, :595-620); with
                   `labeler.assumeDriverInstalled: true` it is "true" on every node labelled nvidia.com/gpu.present
                   =true (:596-598; charts/labeler/values.yaml:39-43; docs/labeler.md:87-96 for node images that
                   ship the driver). Our node images install the driver on every cloud (EKS AL2023 NVIDIA AMI,
                   AKS gpuProfile.driver Install, GKE gpu_driver_installation_config, OCI GPU images), except Azure
                   with the GPU Operator (AKS driver None, the operator's driver container runs: its pods label).
"""
from __future__ import annotations

from .config import StackConfig, installs

DCGM_VERSION_LABEL = "nvsentinel.dgxc.nvidia.com/dcgm.version"
# The major version the embedded monitor runs: the chart renders a -dcgm-4.x and a -dcgm-3.x DaemonSet, each
# selected by this label's value; 4.x is the image of the current DCGM line (the DCGM 4 libraries embed the host
# engine in-process: docs/configuration/gpu-health-monitor.md "Embedded Mode").
DCGM_MAJOR = "4.x"

# Clouds where the GPU Operator is part of the stack when addons.gpuOperator is on (manifests/addons.fabric_releases).
GPU_OPERATOR_CLOUDS = ("azure", "oci")

# The RuntimeClass embedded-mode needs (`gpu-health-monitor.runtimeClassName` is `required` in embedded-mode:
# charts/gpu-health-monitor/templates/daemonset-dcgm-4.x.yaml:125-126) and the metadata collector names by
# default. No managed cloud creates one; where we know the node's container runtime handler we create it:
#  aws:   the EKS AL2023 NVIDIA AMI's containerd runtime is named "nvidia" and is the default one
#         (awslabs/amazon-eks-ami nodeadm/internal/containerd/runtime_config_nvidia.go: nvidiaRuntimeName
#         "nvidia", binary /usr/bin/nvidia-container-runtime).
#  azure: AKS GPU (N-series) nodes run containerd with default_runtime_name "nvidia-container-runtime"
#         (Azure/AgentBaker pkg/agent/baker.go containerd template, `if IsNSeriesSKU`); AKS creates no
#         RuntimeClass object for it.
#  gcp:   GKE has no NVIDIA container runtime: the driver reaches a container through hostPath mounts (NVSentinel's
#         "Example 1: GCP GKE Configuration", which we render) and the embedded-mode container is privileged
#         (daemonset-dcgm-4.x.yaml:70-73), so the class names containerd's default handler "runc" (containerd's
#         default runtime name; not read from a GKE node's config: only a GKE cluster confirms it). It is not
#         called "nvidia": it does not inject anything.
#  oci, existing: not created (OKE's CRI-O runtime handlers were not read; an existing cluster has its own):
#         a plan note says the cluster must provide RuntimeClass "nvidia".
RUNTIME_CLASS = {
    "aws": ("nvidia", "nvidia"),
    "azure": ("nvidia", "nvidia-container-runtime"),
    "gcp": ("nvsentinel-gke-host-driver", "runc"),
}
NVIDIA_RUNTIME_CLASS = "nvidia"


def installed(cfg: StackConfig) -> bool:
    """The stack installs NVSentinel (on by default wherever it has GPU pools)."""
    return installs(cfg.addons.nvsentinel) and bool(cfg.node_pools)


def gpu_operator_here(cfg: StackConfig) -> bool:
    return installs(cfg.addons.gpu_operator) and cfg.cloud in GPU_OPERATOR_CLOUDS


def dcgm_mode(cfg: StackConfig) -> str:
    """operator-service where this stack runs the GPU Operator (its standalone DCGM), else embedded-mode (the
    cloud installs the driver: no DCGM DaemonSet or Service; NVSentinel's documented mode for that case)."""
    return "operator-service" if gpu_operator_here(cfg) else "embedded-mode"


def node_labels(cfg: StackConfig) -> dict[str, str]:
    """Labels a GPU node of a pool we create carries for NVSentinel: the DCGM major version in embedded-mode
    (nothing else writes it there; see the module docstring)."""
    if installed(cfg) and dcgm_mode(cfg) == "embedded-mode":
        return {DCGM_VERSION_LABEL: DCGM_MAJOR}
    return {}


def driver_from_node_image(cfg: StackConfig) -> bool:
    """True where the node image installs the NVIDIA driver (no driver pod exists for the labeler to see)."""
    return not (cfg.cloud == "azure" and gpu_operator_here(cfg))


def runtime_class(cfg: StackConfig) -> tuple[str, str] | None:
    """(name, handler) of the RuntimeClass this stack creates for embedded-mode, or None (none created)."""
    if not installed(cfg) or dcgm_mode(cfg) != "embedded-mode":
        return None
    return RUNTIME_CLASS.get(cfg.cloud)
