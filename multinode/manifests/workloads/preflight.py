"""Preflight for multi-node gangs (issue 34): init containers that check a pod's GPUs and the gang's fabric before
the workload starts. Pure.

What every GPU pod of a multi-node gang gets (workloads[].preflight, on by default; `enabled: false` opts out;
single-node workloads and the nccl-test check itself get none):
  1. `preflight-dcgm`: DCGM diagnostics on the pod's own GPUs, `dcgmi diag -r <level>` (level 1 "quick deployment
     checks, normally lasting seconds", level 2 "medium validation, normally lasting approximately two minutes":
     docs.nvidia.com/datacenter/dcgm/latest/reference/command-line-reference/dcgmi/dcgmi-diag.html; DCGM's user guide
     calls level 1 the readiness metric: .../user-guide/dcgm-diagnostics.html). Image: the DCGM the GPU Operator pins
     (DCGM_IMAGE below). Issue 40: it runs as upstream runs it, against the node's own privileged host engine (the
     GPU Operator's `nvidia-dcgm` Service), where the stack has one; elsewhere there is no DCGM part unless the
     workload opts in (preflight.dcgm: hostEngine with an address, or embedded). dcgm_setting below.
  2. `preflight-nccl` (kinds whose rendezvous host an init container can reach, RENDEZVOUS below): an NCCL
     all-reduce among the gang's own pods, `python3 -m torch.distributed.run` with the c10d rendezvous on the gang's
     first pod, in the workload's own image, with the pool's fabric (the FabricProfile's env with the NCCL_NET pin,
     devices, mounts, capabilities: rendered here, because the fabric policies mutate only `containers`), failing
     below the floor: preflight.minBusBandwidthGbps / 8, else the catalog's per-node fabric bandwidth of the pool's
     machine / 8 x busBandwidthEfficiency (nccl_test.catalog_threshold: the NCCL check's floor, one function).

Why not NVSentinel's preflight (NVIDIA/NVSentinel docs/configuration/preflight.md, read at 7661ca7d): it is a
mutating webhook injecting the same two kinds of checks into every GPU pod of a labelled namespace, but its
bandwidth floor is one value for the whole chart (`BW_THRESHOLD_GBPS` in the injected container's env), not per
machine and fabric, and its gang discovery reads one PodGroup kind or `spec.workloadRef` (not LeaderWorkerSet
groups). Its advantage we lack: a failing check reports a HealthEvent and NVSentinel's fault quarantine cordons the
node. Ours fails the init container (log line MULTINODE_PREFLIGHT {...} naming the node) and taints nothing: what
happens next is the gang controller's (docs/preflight.md).
"""
from __future__ import annotations

import dataclasses
import math
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from ... import fabric, pools
from ...config import StackConfig, Workload
from ...errors import Problem
from .. import addons
from . import common as c
from . import nccl_test, training, volcano

DCGM_IMAGE = "nvcr.io/nvidia/cloud-native/dcgm:4.6.0-1-ubuntu24.04"
DCGM_IMAGE_SOURCE = ("NVIDIA/gpu-operator@v26.7.0 deployments/gpu-operator/values.yaml:290-292 (dcgm.repository, "
                     "image, version: the standalone host engine the GPU Operator pins; schemas/gpu-operator/"
                     "values.yaml, schemas/PROVENANCE.md)")
DCGM_NAME, NCCL_NAME = "preflight-dcgm", "preflight-nccl"
VERDICT_TAG = "MULTINODE_PREFLIGHT"
RDZV_PORT = 29510                   # not the workloads' own rendezvous ports (29400, 29500): nothing to mix up
MESSAGE_BYTES = 1 << 30             # 1 GiB per all-reduce: on the bandwidth plateau of every catalog fabric
JOIN_TIMEOUT_S = 600                # the whole gang must reach the rendezvous within 10 minutes
NO_TORCH_ENGINES = ("nim", "mpirun")   # images not known to carry PyTorch's launcher
SKIP_KINDS = ("nccl-test",)         # the check itself
# The operator renders these pods from each component's podTemplate, whose initContainers reach every pod of a
# multi-node component (leader and workers, Grove or LWS): docs/preflight.md cites the Dynamo operator's source.
# dgd.py places the init containers per component (for_component below); apply() leaves these kinds alone.
OPERATOR_RENDERED = ("dynamo",)


# The node's own DCGM host engine, as every upstream runs `dcgmi diag` (issue 40): NVSentinel's preflight points its
# dcgm-diag init container at the GPU Operator's Service (NVIDIA/NVSentinel@e002c5dc distros/kubernetes/nvsentinel/
# charts/preflight/values.yaml:141-142 DCGM_HOSTENGINE_ADDR "nvidia-dcgm.gpu-operator.svc:5555"). That Service
# (NVIDIA/gpu-operator assets/state-dcgm/0500_service.yaml) has `internalTrafficPolicy: Local`: a pod reaches the host
# engine of its own node, whose DaemonSet runs privileged (assets/state-dcgm/0400_dcgm.yml, port 5555). dcgmi takes
# the engine as `--host <host>:<port>` (NVIDIA/DCGM@72fa3fe dcgmi/CommandLineParser.cpp:64-65, 2007).
HOST_ENGINE_PORT = addons.DCGM_PORT
# DCGM runs one diagnostic at a time per host engine; a second pod of the same node gets "already running" and
# waits (NVSentinel's dcgm-diag retries on DCGM_ST_DIAG_ALREADY_RUNNING the same way: preflight-checks/dcgm-diag/
# dcgm_diag/diag.py get_dcgm_status_name).
BUSY_RETRIES, BUSY_WAIT_S = 30, 10


@dataclass(frozen=True)
class DcgmSetting:
    mode: str                       # "hostEngine", "embedded" or "" (no DCGM part)
    host_engine: str | None         # "<host>:<port>" in hostEngine mode
    why_none: str = ""


def default_host_engine(cfg: StackConfig) -> str:
    ns = cfg.addons.gpu_operator.namespace or addons.default_namespace("gpuOperator")
    return f"{addons.GPU_OPERATOR_DCGM_SERVICE}.{ns}.svc:{HOST_ENGINE_PORT}"


def dcgm_setting(cfg: StackConfig, w: Workload) -> DcgmSetting:
    """Where the workload's DCGM diagnostics run. auto: the node's host engine where this stack installs the GPU
    Operator (addons.gpu_operator_dcgm_here: its standalone DCGM is then turned on), else none, with the reason."""
    pf = w.preflight
    if pf.dcgm == "off":
        return DcgmSetting("", None, "preflight.dcgm off")
    if pf.dcgm == "embedded":
        return DcgmSetting("embedded", None)
    if pf.dcgm == "hostEngine":
        return DcgmSetting("hostEngine", pf.dcgm_host_engine or default_host_engine(cfg))
    if pf.dcgm_host_engine:
        return DcgmSetting("hostEngine", pf.dcgm_host_engine)
    if addons.gpu_operator_dcgm_here(cfg):
        return DcgmSetting("hostEngine", default_host_engine(cfg))
    return DcgmSetting("", None, "no DCGM host engine on this stack (the GPU Operator is not installed here): set "
                                 "preflight.dcgm hostEngine with preflight.dcgmHostEngine to the node-local DCGM "
                                 "your cluster runs, or embedded (docs/preflight.md)")


def _rendezvous(w: Workload) -> tuple[str | None, str]:
    """(shell expression of the gang's first pod's host name, or None; why not). The host must resolve before the
    pods are Ready (they are in their init containers)."""
    if w.kind == "lws-inference":
        # LWS adds LWS_LEADER_ADDRESS to init containers too (sigs.k8s.io/lws@v0.9.0 pkg/utils/pod/pod_utils.go:
        # 174-175); its headless Service publishes not-ready addresses (pkg/utils/controller/controller_utils.go:50)
        return "$LWS_LEADER_ADDRESS", ""
    if w.kind == "volcano-training":
        # the svc plugin's host names; its Service publishes not-ready pods only with --publish-not-ready-addresses
        # (volcano.sh/volcano@v1.14.1 pkg/controllers/job/plugins/svc/svc.go:64,235): set by with_preflight below
        return volcano.master_host(w), ""
    if w.kind == "indexed-job":
        return f"{w.name}-0.{w.name}", ""        # subdomain + our headless Service (publishNotReadyAddresses)
    if w.kind == "dynamo":
        return None, ("kind dynamo: the Dynamo operator renders the pods and owns their rendezvous (the leader host "
                      "it puts into the main container's command): DCGM diagnostics only")
    return None, (f"kind {w.kind}: its rendezvous host is not available to init containers (set by the operator "
                  f"into the main containers only, or no stable host name): DCGM diagnostics only")


@dataclass(frozen=True)
class Plan:
    workload: str
    kind: str
    nodes: int                      # pods (= nodes) of the largest gang
    gpus_per_node: int
    dcgm_level: int
    rendezvous: str | None          # None: no NCCL part
    floor_gbytes: float | None      # GB/s
    floor_source: str
    why_no_nccl: str = ""
    dcgm: DcgmSetting = DcgmSetting("embedded", None)

    @property
    def nccl(self) -> bool:
        return self.rendezvous is not None and self.floor_gbytes is not None

    @property
    def has_dcgm(self) -> bool:
        return bool(self.dcgm.mode)


def gang_nodes(cfg: StackConfig, w: Workload) -> int:
    rw = cfg.resolved(w)
    return max((g.nodes for g in rw.serving_gangs()), default=1)


def plan(cfg: StackConfig, w: Workload) -> Plan | None:
    """The workload's preflight, or None (opted out, single-node, or a kind that gets none)."""
    if not w.preflight.enabled or w.kind in SKIP_KINDS:
        return None
    nodes = gang_nodes(cfg, w)
    if nodes <= 1:
        return None
    pool = cfg.pool(w.node_pool)
    host, why = _rendezvous(w)
    floor: float | None = None
    source = ""
    if host is not None and w.engine in NO_TORCH_ENGINES:
        host, why = None, f"engine {w.engine}: its image is not known to carry PyTorch: DCGM diagnostics only"
    if host is not None and fabric.profile_for(cfg, pool).nccl_net is None:
        host, why = None, ("the pool has no fabric (fabric.enabled false or none on the machine): the catalog floor "
                           "is the fabric's; DCGM diagnostics only")
    if host is not None:
        if w.preflight.min_bus_bandwidth_gbps is not None:
            floor, source = round(w.preflight.min_bus_bandwidth_gbps / 8, 2), "preflight.minBusBandwidthGbps"
        else:
            try:
                floor, source = nccl_test.catalog_threshold(cfg.machine(pool), w.bus_bandwidth_efficiency)
            except nccl_test.ThresholdUnknown as e:
                host, why = None, (f"the catalog does not confirm the bandwidth of {e}: set "
                                   f"preflight.minBusBandwidthGbps for the NCCL part")
    p = Plan(w.name, w.kind, nodes, cfg.gpus_per_node(w), w.preflight.dcgm_diag_level, host, floor, source, why,
             dcgm_setting(cfg, w))
    return p if (p.nccl or p.has_dcgm) else None


# ------------------------------------------------------------------ the containers
def dcgm_script(level: int, host_engine: str | None = None) -> str:
    """The DCGM check. host_engine None: the opt-in embedded engine (`nv-hostengine -n` in the container). Else the
    node's own engine: the pod's GPUs (their UUIDs, nvidia-smi) are mapped to the engine's GPU ids (`dcgmi discovery
    -l` prints "| <id> | ... Device UUID: GPU-..." rows: NVIDIA/DCGM@72fa3fe dcgmi/Query.cpp:44,54) and only those are
    diagnosed (`-i`, dcgmi/CommandLineParser.cpp:2125-2130): another pod's GPUs on the same node are not touched."""
    verdict = (f'echo "{VERDICT_TAG} {{\\"check\\": \\"dcgm-diag\\", \\"level\\": {level}, \\"node\\": '
               f'\\"${{NODE_NAME:-}}\\", \\"pass\\": $PASS, \\"exit_code\\": $RC, \\"reason\\": \\"$WHY\\"}}"')
    if host_engine is None:
        return f"""set -u
WHY=""
nv-hostengine -n >/tmp/nv-hostengine.log 2>&1 &
for i in $(seq 1 30); do dcgmi discovery -l >/dev/null 2>&1 && break; sleep 1; done
dcgmi diag -r {level}
RC=$?
if [ "$RC" -eq 0 ]; then PASS=true; else PASS=false; WHY="dcgmi diag failed"; fi
{verdict}
[ "$RC" -eq 0 ] || exit 1
"""
    return f"""set -u
H={host_engine}
WHY=""
for i in $(seq 1 30); do dcgmi discovery --host "$H" -l >/tmp/dcgm-gpus.txt 2>&1 && break; sleep 2; done
UUIDS=$(nvidia-smi --query-gpu=uuid --format=csv,noheader 2>/dev/null | tr -d ' ' | paste -sd, -)
IDS=$(awk -F'|' -v want="$UUIDS" 'BEGIN {{ n = split(want, u, ","); for (i = 1; i <= n; i++) w[u[i]] = 1 }}
  {{ g = $2; gsub(/ /, "", g); if (g ~ /^[0-9]+$/) id = g
     if (match($3, /GPU-[0-9a-fA-F-]+/)) {{
       x = substr($3, RSTART, RLENGTH); if (x in w) o = o (o == "" ? "" : ",") id }} }}
  END {{ print o }}' /tmp/dcgm-gpus.txt)
if [ -z "$UUIDS" ] || [ -z "$IDS" ]; then
  RC=2; WHY="the pod's GPUs ($UUIDS) were not found on the DCGM host engine $H"; cat /tmp/dcgm-gpus.txt
else
  for i in $(seq 1 {BUSY_RETRIES}); do
    dcgmi diag --host "$H" -r {level} -i "$IDS" >/tmp/dcgm-diag.txt 2>&1
    RC=$?
    cat /tmp/dcgm-diag.txt
    grep -qi "already running" /tmp/dcgm-diag.txt || break
    sleep {BUSY_WAIT_S}
  done
  [ "$RC" -eq 0 ] || WHY="dcgmi diag failed on DCGM GPU ids $IDS"
fi
if [ "$RC" -eq 0 ]; then PASS=true; else PASS=false; fi
{verdict}
[ "$RC" -eq 0 ] || exit 1
"""


NCCL_PROGRAM = f'''import json, os, sys, time
import torch
import torch.distributed as dist
floor = float(os.environ["PREFLIGHT_FLOOR_GBPS"])
size = int(os.environ["PREFLIGHT_MESSAGE_BYTES"])
local = int(os.environ["LOCAL_RANK"])
torch.cuda.set_device(local)
dist.init_process_group("nccl")
n = dist.get_world_size()
x = torch.ones(size // 4, dtype=torch.float32, device="cuda")
for _ in range(5):
    dist.all_reduce(x)
torch.cuda.synchronize()
dist.barrier()
iters = 20
t0 = time.perf_counter()
for _ in range(iters):
    dist.all_reduce(x)
torch.cuda.synchronize()
t = torch.tensor([(time.perf_counter() - t0) / iters], device="cuda")
dist.all_reduce(t, op=dist.ReduceOp.MAX)
busbw = size / t.item() / 1e9 * 2 * (n - 1) / n   # nccl-tests' all_reduce bus bandwidth, GB/s
ok = busbw >= floor
if local == 0:
    print("{VERDICT_TAG} " + json.dumps({{"check": "nccl-allreduce", "node": os.environ.get("NODE_NAME", ""),
          "ranks": n, "busbw_GBps": round(busbw, 2), "threshold_GBps": floor, "pass": ok}}), flush=True)
dist.destroy_process_group()
sys.exit(0 if ok else 1)
'''


def nccl_script(p: Plan) -> str:
    # is_host: the gang's first pod hosts the c10d store whatever its DNS record's state (training.store_host_lines)
    return (f"set -u\ncat > /tmp/multinode_preflight_nccl.py <<'EOF'\n{NCCL_PROGRAM}EOF\n"
            + training.store_host_lines(p.rendezvous or "")
            + f"exec python3 -m torch.distributed.run --nnodes={p.nodes} --nproc_per_node={p.gpus_per_node} "
            f"--rdzv_backend=c10d --rdzv_endpoint={p.rendezvous}:{RDZV_PORT} --rdzv_id={p.workload}-preflight "
            f"--rdzv_conf=join_timeout={JOIN_TIMEOUT_S},is_host=${training.STORE_HOST_VAR} --max_restarts=0 "
            "/tmp/multinode_preflight_nccl.py\n")


NODE_NAME_ENV: dict[str, Any] = {"name": "NODE_NAME", "valueFrom": {"fieldRef": {"fieldPath": "spec.nodeName"}}}


def _fabric_container(cont: dict[str, Any], profile: fabric.FabricProfile, gpus: int) -> dict[str, Any]:
    """What the fabric policy gives a GPU container (manifests/kyverno.py container_mutations), rendered here:
    the policies mutate only `containers`, and an init container must carry it itself."""
    limits = cont.setdefault("resources", {}).setdefault("limits", {})
    if profile.device_resource and profile.devices_per_node:
        limits[profile.device_resource] = str(math.ceil(gpus * profile.devices_per_node / profile.gpus_per_node))
    limits.update(profile.extra_resources)
    cont["env"] = [*cont.get("env", []), *({"name": k, "value": v} for k, v in profile.env.items())]
    cont["volumeMounts"] = [*cont.get("volumeMounts", []), *(dict(m) for m in profile.volume_mounts)]
    if profile.capabilities:
        cont["securityContext"] = {"capabilities": {"add": list(profile.capabilities)}}
    return cont


def init_containers(cfg: StackConfig, w: Workload, p: Plan) -> list[dict[str, Any]]:
    gpus = p.gpus_per_node
    out: list[dict[str, Any]] = []
    if p.has_dcgm:
        dcgm_env: list[dict[str, Any]] = [NODE_NAME_ENV]
        if p.dcgm.mode == "hostEngine":
            # nvidia-smi names the pod's GPUs: the NVIDIA container toolkit mounts it with the `utility` capability
            # (NVIDIA/nvidia-container-toolkit docs "Driver Capabilities": utility = nvidia-smi, NVML)
            dcgm_env.append({"name": "NVIDIA_DRIVER_CAPABILITIES", "value": "compute,utility"})
        out.append(c.container(DCGM_NAME, DCGM_IMAGE, command=c.shell(dcgm_script(p.dcgm_level, p.dcgm.host_engine)),
                               env=dcgm_env, gpus=gpus))
    if p.nccl:
        profile = fabric.profile_for(cfg, cfg.pool(w.node_pool))
        env: list[dict[str, Any]] = [NODE_NAME_ENV, {"name": "PREFLIGHT_FLOOR_GBPS", "value": f"{p.floor_gbytes:g}"},
                                     {"name": "PREFLIGHT_MESSAGE_BYTES", "value": str(MESSAGE_BYTES)}]
        nccl = c.container(NCCL_NAME, c.image(cfg, w), command=c.shell(nccl_script(p)), env=env, gpus=gpus,
                           mounts=[{"name": c.SHM_VOLUME, "mountPath": "/dev/shm"}])
        out.append(_fabric_container(nccl, profile, gpus))
    return out


def for_component(cfg: StackConfig, w: Workload, nodes: int, gpus_per_node: int) -> list[dict[str, Any]]:
    """The preflight init containers of one component of an operator-rendered workload (a DGD component spanning
    `nodes` nodes with `gpus_per_node` GPUs per pod): DCGM only; none for a one-node component or when the workload
    gets no preflight."""
    p = plan(cfg, w)
    if p is None or nodes <= 1:
        return []
    return init_containers(cfg, w, dataclasses.replace(p, nodes=nodes, gpus_per_node=gpus_per_node))


def _gpu_spec(spec: Any) -> bool:
    return isinstance(spec, dict) and isinstance(spec.get("containers"), list) and any(
        isinstance(x, dict) and "nvidia.com/gpu" in ((x.get("resources") or {}).get("limits") or {})
        for x in spec["containers"])


def fabric_pod_specs(obj: Any, depth: int = 0) -> Iterator[dict[str, Any]]:
    """Pod specs with a GPU container whose pod carries the fabric label (or NeMo's annotation): a pod template
    ({metadata, spec}), or a Grove clique ({labels, annotations, spec: {podSpec}})."""
    if depth > 32:
        return
    if isinstance(obj, dict):
        spec, meta = obj.get("spec"), obj.get("metadata")
        if isinstance(spec, dict) and _gpu_spec(spec) and isinstance(meta, dict):
            if pools.asks_for_fabric(meta.get("labels"), meta.get("annotations")):
                yield spec
            return
        pod_spec = spec.get("podSpec") if isinstance(spec, dict) else None
        if isinstance(pod_spec, dict) and _gpu_spec(pod_spec):
            if pools.asks_for_fabric(obj.get("labels"), obj.get("annotations")):
                yield pod_spec
            return
        for v in obj.values():
            yield from fabric_pod_specs(v, depth + 1)
    elif isinstance(obj, list):
        for v in obj:
            yield from fabric_pod_specs(v, depth + 1)


def apply(cfg: StackConfig, w: Workload, objects: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The workload's objects with the preflight init containers in every multi-node GPU pod template (first, before
    the template's own init containers; the fabric's native sidecars, e.g. GCP's TCPXO daemon, go before them, so
    the all-reduce runs with the fabric up). Unchanged when the workload gets no preflight."""
    p = plan(cfg, w)
    if p is None or w.kind in OPERATOR_RENDERED:      # operator-rendered: placed by its renderer (for_component)
        return objects
    profile = fabric.profile_for(cfg, cfg.pool(w.node_pool))
    for obj in objects:
        for spec in fabric_pod_specs(obj):
            own = list(spec.get("initContainers") or [])
            sidecars = [dict(s) for s in profile.init_containers] if p.nccl else []
            names = {s.get("name") for s in sidecars}
            spec["initContainers"] = sidecars + init_containers(cfg, w, p) + [x for x in own
                                                                               if x.get("name") not in names]
            if p.nccl:
                have = {v.get("name") for v in spec.get("volumes") or []}
                spec["volumes"] = list(spec.get("volumes") or []) + [dict(v) for v in profile.volumes
                                                                     if v.get("name") not in have]
        if p.nccl and w.kind == "volcano-training" and obj.get("kind") == "Job":
            svc = obj["spec"]["plugins"].get("svc") or []
            if "--publish-not-ready-addresses=true" not in svc:
                obj["spec"]["plugins"]["svc"] = [*svc, "--publish-not-ready-addresses=true"]
    return objects


# ------------------------------------------------------------------ plan's report and advisories
def report(cfg: StackConfig) -> list[str]:
    lines = []
    for w in cfg.workloads:
        p = plan(cfg, w)
        if p is None:
            continue
        nccl = (f"NCCL all-reduce among the gang's {p.nodes} pods x {p.gpus_per_node} GPUs, floor "
                f"{p.floor_gbytes:g} GB/s ({p.floor_source})" if p.nccl else f"no NCCL part ({p.why_no_nccl})")
        if p.dcgm.mode == "hostEngine":
            dcgm = (f"dcgmi diag -r {p.dcgm_level} on each pod's GPUs against the node's host engine "
                    f"{p.dcgm.host_engine}")
        elif p.dcgm.mode == "embedded":
            dcgm = f"dcgmi diag -r {p.dcgm_level} on each pod's GPUs, embedded host engine (opt-in)"
        else:
            dcgm = f"no DCGM part ({p.dcgm.why_none})"
        lines.append(f"preflight {w.name}: {dcgm}; {nccl}")
    return lines


def advisories(cfg: StackConfig) -> list[Problem]:
    out = []
    for i, w in enumerate(cfg.workloads):
        p = plan(cfg, w)
        if p is not None and not p.nccl and "catalog does not confirm" in p.why_no_nccl:
            out.append(Problem(f"workloads[{i}].preflight.minBusBandwidthGbps",
                               f"workload {w.name}: the preflight runs no NCCL all-reduce: {p.why_no_nccl}"))
        if p is not None and p.dcgm.mode == "embedded":
            out.append(Problem(f"workloads[{i}].preflight.dcgm",
                               f"workload {w.name}: embedded starts an unprivileged nv-hostengine in every gang pod, "
                               f"which no upstream does (they run dcgmi diag against the node's privileged host "
                               f"engine); if it cannot start on your nodes, no gang starts: verify it on one node "
                               f"first, or use hostEngine (docs/preflight.md)"))
    return out

