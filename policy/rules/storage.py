"""Checkpoint storage: shared by every node (ReadWriteMany) and never lost by destroy or replace.

Checkpoint storage = the stack's storage claim (config storage.name / existingClaim), any PVC/PV/
StorageClass labelled as ours (app.kubernetes.io/managed-by: multinode), any PVC a multi-node gang
mounts, and the PVs and StorageClasses those claims use.
"""
from __future__ import annotations

from collections.abc import Iterator

from multinode.manifests import storage as sm

from .. import objects
from ..engine import MANDATORY, Context, Resource, Rule

RWX = "ReadWriteMany"


def _ours(r: Resource) -> bool:
    labels = objects.mapping(objects.get(r.props, "metadata", "labels"))
    return all(labels.get(k) == v for k, v in sm.MANAGED_BY.items())


def _claims_mounted_by_gangs(resources: list[Resource]) -> set[tuple[str | None, str]]:
    out: set[tuple[str | None, str]] = set()
    for r in resources:
        if not r.is_k8s:
            continue
        ns = objects.text(objects.get(r.props, "metadata", "namespace"))
        for g in objects.gangs(r.props, r.name):
            if not g.multi_node:
                continue
            for role in g.gpu_roles:
                for v in objects.seq(role.spec.get("volumes")):
                    claim = objects.get(v, "persistentVolumeClaim", "claimName")
                    if isinstance(claim, str):
                        out.add((ns, claim))
    return out


def checkpoint_objects(resources: list[Resource], ctx: Context) -> dict[str, list[Resource]]:
    kinds: dict[str, list[Resource]] = {"PersistentVolumeClaim": [], "PersistentVolume": [], "StorageClass": []}
    by_kind: dict[str, list[Resource]] = {k: [r for r in resources if r.is_k8s and r.props.get("kind") == k]
                                          for k in kinds}
    names: set[str] = set()
    cfg = ctx.config
    if cfg is not None and getattr(cfg, "storage", None) is not None:
        names |= {n for n in (cfg.storage.name, cfg.storage.existing_claim) if n}
    mounted = _claims_mounted_by_gangs(resources)
    for pvc in by_kind["PersistentVolumeClaim"]:
        # names compared by value: only text counts (a map or list for a name matches nothing)
        name = objects.text(objects.get(pvc.props, "metadata", "name"))
        ns = objects.text(objects.get(pvc.props, "metadata", "namespace"))
        if _ours(pvc) or name in names or (ns, name) in mounted or (None, name) in mounted:
            kinds["PersistentVolumeClaim"].append(pvc)
    def field(r: Resource, *path: str) -> str | None:
        return objects.text(objects.get(r.props, *path))

    volume_names = {field(p, "spec", "volumeName") for p in kinds["PersistentVolumeClaim"]} - {None}
    claim_names = {field(p, "metadata", "name") for p in kinds["PersistentVolumeClaim"]} - {None}
    classes = {field(p, "spec", "storageClassName") for p in kinds["PersistentVolumeClaim"]}
    for pv in by_kind["PersistentVolume"]:
        if (_ours(pv) or field(pv, "metadata", "name") in volume_names
                or field(pv, "spec", "claimRef", "name") in claim_names):
            kinds["PersistentVolume"].append(pv)
    classes |= {field(p, "spec", "storageClassName") for p in kinds["PersistentVolume"]}
    for sc in by_kind["StorageClass"]:
        if _ours(sc) or field(sc, "metadata", "name") in classes:
            kinds["StorageClass"].append(sc)
    return kinds


def check_rwx(resources: list[Resource], ctx: Context) -> Iterator[tuple[Resource, str]]:
    cp = checkpoint_objects(resources, ctx)
    for r in cp["PersistentVolumeClaim"] + cp["PersistentVolume"]:
        modes = objects.seq(objects.get(r.props, "spec", "accessModes"))
        if objects.UNKNOWN in modes or RWX in modes:
            continue
        yield r, (f"{r.label}: checkpoint storage has accessModes {list(modes)}, but the pods of a multi-node "
                  f"gang mount it from several nodes at once; use accessModes [{RWX}] on a file system that "
                  f"supports it (FSx for Lustre, EFS, Azure Files/Lustre, Filestore, OCI FSS)")


def check_retained(resources: list[Resource], ctx: Context) -> Iterator[tuple[Resource, str]]:
    allow = ctx.allow_delete
    if allow is None:
        allow = bool(ctx.setting("checkpoint-storage-retained", "allowDelete", False))
    if allow:
        return
    cp = checkpoint_objects(resources, ctx)
    for pv in cp["PersistentVolume"]:
        policy = objects.get(pv.props, "spec", "persistentVolumeReclaimPolicy")
        if policy not in (None, "Retain", objects.UNKNOWN):
            yield pv, (f"{pv.label}: persistentVolumeReclaimPolicy {policy}, so deleting the claim deletes the "
                       f"checkpoints; set persistentVolumeReclaimPolicy Retain (or storage.allowDelete true "
                       f"if this data may go)")
    for sc in cp["StorageClass"]:
        policy = sc.props.get("reclaimPolicy")
        if policy not in ("Retain", objects.UNKNOWN):
            yield sc, (f"{sc.label}: reclaimPolicy {policy or 'unset (Kubernetes defaults to Delete)'} for "
                       f"checkpoint volumes; set reclaimPolicy Retain (or storage.allowDelete true)")
    for r in cp["PersistentVolumeClaim"] + cp["PersistentVolume"]:
        if r.protect or r.retain_on_delete is None or r.retain_on_delete:
            continue          # retain_on_delete None: not visible (pulumi preview passes only protect)
        yield r, (f"{r.label}: checkpoint storage is neither protected nor retained (protect false, "
                  f"retainOnDelete false), so `pulumi destroy` or a replace deletes it; register it with "
                  f"retainOnDelete (or protect), or set storage.allowDelete true")


RULES = [
    Rule("checkpoint-storage-rwx",
         "Checkpoint storage (the stack's claim and every PVC a multi-node gang mounts, with their PVs) is "
         "ReadWriteMany.",
         MANDATORY, check_rwx, scope="stack"),
    Rule("checkpoint-storage-retained",
         "Checkpoint PVs use reclaim policy Retain, their StorageClasses reclaimPolicy Retain, and the claims "
         "and volumes are protected or retained on delete, unless storage.allowDelete.",
         MANDATORY, check_retained, scope="stack",
         config={"allowDelete": {"type": "boolean", "default": False,
                                 "description": "under pulumi preview (no stack config): checkpoints may be deleted"}}),
]
