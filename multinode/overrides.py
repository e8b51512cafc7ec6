"""Overrides checked against the machine facts and the rendered pods (config checks, pure).

- fabric.devicesPerGpu overrides the fabric count of every pool (fabric devices a full-node pod requests,
  GKE GPU networks, OCI RDMA VFs). On a catalog machine whose count the catalog confirms, a different value
  makes pods request more devices than the node has (they never schedule) or fewer NICs than it has (NCCL
  runs without part of the fabric; NVIDIA's NeMo platform docs warn of exactly this). Refused there; a
  machine described by machineSpec is the fact itself, so the override is not second-guessed.
- workloads[].env may not redefine a variable the renderer (or the pool's fabric policy) sets for
  parallelism, rank, rendezvous or the fabric with another value: Kubernetes keeps the last of two same-named
  entries, so the value that was checked would not be the one that runs. A user value equal to ours is
  accepted (issue 31: `NCCL_IB_DISABLE: "0"` on InfiniBand agrees with the fabric): the fabric policy replaces
  a same-named entry with the same value, and the workload's container keeps one entry
  (manifests/workloads/common.container drops an exact repeat). Which names and values the renderer sets is
  read from the rendered pods themselves (the workload's builder with env cleared) and the fabric profile: no
  list to keep in step.
"""
from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

from .errors import Problem

# Names of the categories the renderer owns (matched against what it actually renders).
_OWNED = re.compile(r"(PARALLEL|WORLD_SIZE|NNODES|NUM_NODES|MULTI_NODE|LEADER_ROLE|NPROC|RANK|"
                    r"JOB_COMPLETION_INDEX|MASTER_ADDR|MASTER_PORT|RDZV|"
                    r"^PET_|^LWS_|^NCCL_|^FI_|^UCX_|^GLOO_|^OMPI_MCA_|^NVSHMEM_|^DYN_|^MPI_HOST)")
_WHAT = {"fabric": "the fabric policy of pool {pool!r} (from the catalog; change it with fabric.* keys or machineSpec)",
         "workload": "the {kind} renderer (from nodes, gpusPerNode, tensorParallel and pipelineParallel)"}


def devices_per_gpu_problems(cfg: Any) -> list[Problem]:
    from . import catalog, fabric
    dpg = cfg.fabric.devices_per_gpu
    if dpg is None:
        return []
    out: list[Problem] = []
    for pool in cfg.node_pools:
        if pool.machine_spec is not None or pool.machine is None:
            continue
        try:
            m = cfg.machine(pool)
        except (KeyError, catalog.UnknownMachine):
            continue
        kind = fabric.effective_kind(cfg, m)
        if not fabric.needs_count(cfg, kind) or not m.fabric_nics or "fabric_nics" in m.unconfirmed:
            continue
        count = fabric.fabric_count(cfg, m)
        if count == m.fabric_nics:
            continue
        what = {"efa": "EFA interfaces", "roce": "RDMA virtual functions", "infiniband": "InfiniBand HCAs"
                }.get(kind, "GPU NICs (one GPU network each)")
        out.append(Problem("fabric.devicesPerGpu", (
            f"{dpg:g} per GPU x {m.gpus} GPUs = {count} {what} per node, but {m.name} (pool {pool.name!r}) has "
            f"{m.fabric_nics} (catalog, sources {m.source}); pods would ask for devices the node does not have or "
            f"leave part of its fabric unused: remove fabric.devicesPerGpu (the catalog count is used), or describe "
            f"the machine with nodePools[].machineSpec.fabricNics if it really differs")))
    return out


def _rendered_env(cfg: Any, w: Any) -> dict[str, tuple[str, set[str | None]]]:
    """name -> (who sets it, the values it is set to; None for a valueFrom), for the workload rendered without
    the user's env."""
    from . import fabric
    from .manifests.workloads import build
    owned: dict[str, tuple[str, set[str | None]]] = {}
    for name, value in fabric.profile_for(cfg, cfg.pool(w.node_pool)).env.items():
        owned[name] = (_WHAT["fabric"].format(pool=w.node_pool), {str(value)})
    bare = w.model_copy(update={"env": {}})
    for obj in build(cfg, bare).objects:
        for c in _containers(obj):
            for e in c.get("env") or []:
                if isinstance(e, dict) and isinstance(e.get("name"), str) and _OWNED.search(e["name"]):
                    who, values = owned.setdefault(e["name"], (_WHAT["workload"].format(kind=w.kind), set()))
                    values.add(str(e["value"]) if "value" in e and "valueFrom" not in e else None)
    return owned


def _containers(node: Any) -> Iterator[dict[str, Any]]:
    if isinstance(node, dict):
        for key in ("containers", "initContainers"):
            if isinstance(node.get(key), list):
                yield from (c for c in node[key] if isinstance(c, dict))
        if isinstance(node.get("mainContainer"), dict):          # DGD v1alpha1
            yield node["mainContainer"]
        for v in node.values():
            yield from _containers(v)
    elif isinstance(node, list):
        for v in node:
            yield from _containers(v)


def env_problems(cfg: Any) -> list[Problem]:
    """Call only on a config that passed every other check (the builders assume one)."""
    out: list[Problem] = []
    for i, w in enumerate(cfg.workloads):
        if not w.env:
            continue
        owned = _rendered_env(cfg, w)
        for name, value in w.env.items():
            if name not in owned:
                continue
            who, values = owned[name]
            given = value if isinstance(value, str) else None      # a valueFrom reference: never what we set
            if given is not None and values == {given}:
                continue              # the value we set anyway: agreeing with us is not a redefinition
            shown = repr(given) if given is not None else "a valueFrom"
            ours = " / ".join(sorted(repr(v) if v is not None else "a valueFrom" for v in values))
            key = "fabric.socketInterface" if name in ("NCCL_SOCKET_IFNAME", "GLOO_SOCKET_IFNAME") else "the stack key"
            out.append(Problem(f"workloads[{i}].env.{name}", (
                f"{name} is set by {who} to {ours}, and env gives {shown}; a second value in env would "
                f"silently replace the one that was checked: remove it (or give the same value) and set {key} "
                f"instead")))
    return out
