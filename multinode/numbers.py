"""Numbers that only fail after the model download: config checks on values several keys must agree on.

- DeepSpeed: train_batch_size = train_micro_batch_size_per_gpu x gradient_accumulation_steps x data-parallel
  world size, when all three are given (DeepSpeed asserts it at start, deepspeed/runtime/config.py
  `_batch_assertion`). The data-parallel size is the world size (nodes x GPUs per node) divided by the model
  parallel size (tensorParallel x pipelineParallel) -- what DeepSpeed reads from its mpu.
- A capacity reservation holds its capacity in one zone (AWS AZ, GCP zone, OCI availability domain) of one
  region: a pool in another zone, or a cluster in another region, never consumes it. Where the reservation
  is, is read from capacityReservation.zone, or from a GCP reservation path projects/P/zones/Z/reservations/N.
- A memory-backed /dev/shm (shmSizeGi, a tmpfs charged to the pod's memory) larger than what the pods a node
  holds may use is an advisory, not an error (issue 31): the kubelet sizes a memory-backed emptyDir at the
  smallest of its sizeLimit, the pod's memory limit and the node's allocatable memory (k8s.io/kubernetes@v1.33.13
  pkg/volume/emptydir/empty_dir.go:114-146 calculateEmptyDirMemorySize), and the scheduler does not count it,
  so the pod runs with a smaller /dev/shm than asked. Machines without a memory fact are skipped.
- A multi-node workload with a small /dev/shm is an advisory: vLLM's multi-node example runs every node with
  `docker run --shm-size 10.24g` (vllm-project/vllm@0c37e239 examples/online_serving/run_cluster.sh), and NCCL's
  SHM transport and the data loaders' worker processes pass their buffers through /dev/shm.
Pure: returns Problems, never raises.
"""
from __future__ import annotations

import re
from typing import Any

from . import allocatable, catalog
from .errors import Problem

MULTI_NODE_SHM_GI = 10          # >= vLLM's multi-node --shm-size 10.24g (10.24e9 bytes = 9.5 GiB)
_GCP_RESERVATION_ZONE = re.compile(r"(?:^|/)zones/([a-z0-9-]+)/reservations/")


def _int(v: Any) -> int | None:
    if isinstance(v, bool):
        return None
    if isinstance(v, int):
        return v
    if isinstance(v, float) and v.is_integer():
        return int(v)
    if isinstance(v, str) and v.strip().isdigit():
        return int(v)
    return None


def whole_numbers(value: Any) -> Any:
    """JSON-like data with whole floats as integers. Two sources write integers as floats: a stack file's `5e8`
    reads as the float 500000000.0 (multinode/safeyaml.py), and the Pulumi engine sends every number of a
    component's args as a double (components/package.py). DeepSpeed's integer fields want 500000000, and a
    Helm value or manifest must render as the YAML a stack file gives."""
    if isinstance(value, dict):
        return {k: whole_numbers(v) for k, v in value.items()}
    if isinstance(value, list):
        return [whole_numbers(v) for v in value]
    if isinstance(value, float) and value.is_integer() and abs(value) < 2**63:
        return int(value)
    return value


def deepspeed_problems(cfg: Any, i: int, w: Any) -> list[Problem]:
    ds = w.deepspeed_config
    if not isinstance(ds, dict):
        return []
    total, micro, accum = (_int(ds.get(k)) for k in
                           ("train_batch_size", "train_micro_batch_size_per_gpu", "gradient_accumulation_steps"))
    if total is None or micro is None or accum is None:
        return []
    world = w.nodes * cfg.gpus_per_node(w)
    model_parallel = (w.tensor_parallel or 1) * w.pipeline_parallel
    if world % model_parallel:
        return []            # topology.check_training reports a world size the model parallel size does not divide
    dp = world // model_parallel
    if total == micro * accum * dp:
        return []
    mp = f" / model parallel {model_parallel}" if model_parallel > 1 else ""
    return [Problem(f"workloads[{i}].deepspeedConfig.train_batch_size",
                    f"{total}, but train_micro_batch_size_per_gpu {micro} x gradient_accumulation_steps {accum} x "
                    f"data-parallel size {dp} ({w.nodes} nodes x {cfg.gpus_per_node(w)} GPUs{mp}) = "
                    f"{micro * accum * dp}; DeepSpeed refuses to start: set train_batch_size {micro * accum * dp}")]


def reservation_zone(cr: Any) -> str | None:
    if getattr(cr, "zone", None):
        return str(cr.zone)
    m = _GCP_RESERVATION_ZONE.search(str(cr.id))
    return m.group(1) if m else None


def _region(cfg: Any) -> str | None:
    region = cfg.cluster.region if cfg.cloud in ("aws", "oci") else cfg.cluster.location
    return region if isinstance(region, str) else None


def reservation_problems(cfg: Any) -> list[Problem]:
    out: list[Problem] = []
    region = _region(cfg)
    for i, pool in enumerate(cfg.node_pools):
        cr = pool.capacity_reservation
        where = reservation_zone(cr) if cr else None
        if not where:
            continue
        at = f"nodePools[{i}].capacityReservation"
        if pool.zone and pool.zone.lower() != where.lower():
            out.append(Problem(f"{at}.zone", f"reservation {cr.id} holds its capacity in {where}, but node pool "
                                             f"{pool.name!r} runs in zone {pool.zone}; the pool never consumes it: put "
                                             f"the pool in {where} (zone) or use a reservation in {pool.zone}"))
        elif cfg.cloud in ("aws", "gcp") and region and not where.lower().startswith(region.lower()):
            # AWS AZs and GCP zones are <region><suffix>; an OCI availability domain names its region differently
            out.append(Problem(f"{at}.zone", f"reservation {cr.id} holds its capacity in {where}, which is not in the "
                                             f"cluster's region {region}; use a reservation in {region}"))
    return out


def shm_advisories(cfg: Any, machines: dict) -> list[Problem]:
    """/dev/shm larger than the node's memory (the kubelet caps it), or small on a multi-node workload."""
    out: list[Problem] = []
    for i, w in enumerate(cfg.workloads):
        if w.nodes > 1 and w.shm_size_gi < MULTI_NODE_SHM_GI:
            out.append(Problem(f"workloads[{i}].shmSizeGi",
                               f"{w.shm_size_gi} GiB of /dev/shm for a {w.nodes}-node workload: NCCL's shared-memory "
                               f"transport and the data loaders' worker processes pass buffers through /dev/shm, and "
                               f"a full tmpfs fails them with 'No space left on device' or a bus error; vLLM's "
                               f"multi-node example runs each node with --shm-size 10.24g: use shmSizeGi "
                               f"{MULTI_NODE_SHM_GI} or more"))
        m: catalog.Machine | None = machines.get(w.node_pool)
        if m is None or m.memory_gib is None:
            continue
        a = allocatable.estimate(m, cfg.cloud)
        if a.memory_mib is None:
            continue
        gpn = w.gpus_per_node or m.gpus
        pods_per_node = max(1, m.gpus // max(1, gpn))
        have_gib = a.memory_mib / 1024
        need_gib = w.shm_size_gi * pods_per_node
        if need_gib <= have_gib:
            continue
        per = f" x {pods_per_node} pods per node ({gpn} of {m.gpus} GPUs each)" if pods_per_node > 1 else ""
        fit = int(have_gib // pods_per_node)
        out.append(Problem(f"workloads[{i}].shmSizeGi",
                           f"{w.shm_size_gi} GiB of memory-backed /dev/shm{per} = {need_gib} GiB, but {m.name} "
                           f"(pool {w.node_pool!r}) has {m.memory_gib} GiB, about {have_gib:.0f} GiB allocatable after "
                           f"the system reserve; the kubelet caps the volume at what the pod may use (its memory "
                           f"limit, else the node's allocatable memory) and the scheduler does not count it, so "
                           f"/dev/shm will be smaller than asked: use shmSizeGi {fit} or less to say what you get"))
    return out


def problems(cfg: Any, machines: dict) -> list[Problem]:
    out = reservation_problems(cfg)
    for i, w in enumerate(cfg.workloads):
        if w.node_pool in machines:
            out += deepspeed_problems(cfg, i, w)
    return out
