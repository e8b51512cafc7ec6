"""Checkpoint storage objects: StorageClass, static PersistentVolume, PersistentVolumeClaim.

Checkpoints are never lost by destroy or replace: static PVs use `Retain`, StorageClasses use
`Retain` unless the stack sets storage.allowDelete, and the components protect/retain them.
"""
from __future__ import annotations

from typing import Any

MANAGED_BY = {"app.kubernetes.io/managed-by": "multinode"}


def reclaim_policy(allow_delete: bool) -> str:
    return "Delete" if allow_delete else "Retain"


def storage_class(name: str, provisioner: str, parameters: dict[str, str], allow_delete: bool,
                  mount_options: list[str] | None = None, binding: str = "Immediate") -> dict[str, Any]:
    obj: dict[str, Any] = {
        "apiVersion": "storage.k8s.io/v1", "kind": "StorageClass",
        "metadata": {"name": name, "labels": dict(MANAGED_BY)},
        "provisioner": provisioner,
        "parameters": dict(parameters),
        "reclaimPolicy": reclaim_policy(allow_delete),
        "volumeBindingMode": binding,
        "allowVolumeExpansion": True,
    }
    if mount_options:
        obj["mountOptions"] = list(mount_options)
    return obj


def static_pv(name: str, driver: str, volume_handle: str, size_gib: int, allow_delete: bool,
              attributes: dict[str, str] | None = None, mount_options: list[str] | None = None,
              storage_class_name: str = "") -> dict[str, Any]:
    csi: dict[str, Any] = {"driver": driver, "volumeHandle": volume_handle}
    if attributes:
        csi["volumeAttributes"] = dict(attributes)
    obj: dict[str, Any] = {
        "apiVersion": "v1", "kind": "PersistentVolume",
        "metadata": {"name": name, "labels": dict(MANAGED_BY)},
        "spec": {
            "capacity": {"storage": f"{size_gib}Gi"},
            "accessModes": ["ReadWriteMany"],
            "persistentVolumeReclaimPolicy": reclaim_policy(allow_delete),
            "storageClassName": storage_class_name,
            "volumeMode": "Filesystem",
            "csi": csi,
        },
    }
    if mount_options:
        obj["spec"]["mountOptions"] = list(mount_options)
    return obj


def pvc(name: str, namespace: str, size_gib: int, storage_class_name: str = "",
        volume_name: str | None = None) -> dict[str, Any]:
    spec: dict[str, Any] = {
        "accessModes": ["ReadWriteMany"],
        "storageClassName": storage_class_name,
        "resources": {"requests": {"storage": f"{size_gib}Gi"}},
    }
    if volume_name:
        spec["volumeName"] = volume_name
    return {
        "apiVersion": "v1", "kind": "PersistentVolumeClaim",
        "metadata": {"name": name, "namespace": namespace, "labels": dict(MANAGED_BY)},
        "spec": spec,
    }


def namespace(name: str) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name, "labels": dict(MANAGED_BY)}}
