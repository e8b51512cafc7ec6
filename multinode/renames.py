"""An offline preview of the one diff that costs money: a protected or retained resource replaced or deleted.

`plan` compares the registrations of this run with build/<stack>/resources.json of the previous run (when there is
one) and warns, naming each resource, when one that was protected or retained on delete
- is gone from this run (its URN changed: a rename of the component or of the resource, or it was removed):
  `pulumi up` creates the new one, then stops at deleting the protected old one (the data is kept, the cost is
  doubled) or, if only retained, leaves it behind unmanaged;
- keeps its URN but a name it is created under changes (the file system's, share's, instance's or export's own
  name, a Kubernetes object's name or namespace, a static volume's handle): the provider replaces it.
It also warns when an EKS add-on that was not protected is gone while one of the same addonName is registered
under another URN: `pulumi up` adopts the add-on as the new resource (resolveConflicts OVERWRITE) and then
deletes the old resource, which removes the add-on from the cluster (the CSI driver of the checkpoint storage).

What it does not see: every other input a provider replaces on (each provider's ForceNew fields); `pulumi
preview` against the real state shows those. A storage rename is fixed by `storage.resourceName: <old name>`:
every storage resource keeps its name, only what is displayed (tags) follows `storage.name`.
Pure: reads nothing but what it is given.
"""
from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from . import limits, safefile
from .errors import ConfigError

# The inputs a resource is created under (its own name in the cloud, or where it lives): a change replaces it.
_NAME_INPUTS = ("name", "shareName", "accountName", "instanceId", "filesystem", "fileShares", "path",
                "rootDirectory", "availabilityDomain", "subnetIds", "location", "resourceGroupName")
_K8S_NAME_INPUTS = (("metadata", "name"), ("metadata", "namespace"), ("spec", "csi", "volumeHandle"),
                    ("spec", "volumeName"), ("spec", "storageClassName"))
_STORAGE = "multinode:index:CheckpointStorage"
_ADDON = "aws:eks/addon:Addon"
MAX_BYTES = limits.PREVIOUS_RECORDS_BYTES    # a previous resources.json larger than this is not read


def previous_records(path: Path) -> list[dict[str, Any]] | None:
    """The records of a previous resources.json; None when there is none or it is not ours (unreadable)."""
    if not os.path.lexists(path):
        return None
    try:      # issue 48: read as any file plan reads (a regular file, bounded, bounded JSON); a bad one is not ours
        data = safefile.load_json(safefile.read_text(path, "the previous resources.json", MAX_BYTES),
                                  "the previous resources.json", str(path))
    except ConfigError:
        return None
    if not isinstance(data, list):
        return None
    return [r for r in data if isinstance(r, dict) and isinstance(r.get("urn"), str)]


def _at(inputs: Any, path: tuple[str, ...]) -> Any:
    for p in path:
        inputs = inputs.get(p) if isinstance(inputs, dict) else None
    return inputs


def _kept(r: dict[str, Any]) -> str:
    return " and ".join(w for w, on in (("protected", r.get("protect")), ("retained on delete",
                                                                         r.get("retainOnDelete"))) if on)


def _label(r: dict[str, Any]) -> str:
    return f"{str(r.get('type'))} {str(r.get('name'))!r}"


def _storage_hint(previous: list[dict[str, Any]], current: list[dict[str, Any]]) -> str:
    old = [str(r.get("name")) for r in previous if r.get("type") == _STORAGE]
    new = [str(r.get("name")) for r in current if r.get("type") == _STORAGE]
    if old and new and old[0] != new[0]:
        return (f" (the checkpoint storage was named {old[0]!r}, now {new[0]!r}: keep its resources with "
                f"storage.resourceName: {old[0]})")
    return ""


def _changed_names(old: dict[str, Any], new: dict[str, Any]) -> list[str]:
    a, b = old.get("inputs"), new.get("inputs")
    if not isinstance(a, dict) or not isinstance(b, dict):
        return []
    if str(old.get("type", "")).startswith("kubernetes:"):
        return [".".join(p) for p in _K8S_NAME_INPUTS if _at(a, p) != _at(b, p)]
    return [k for k in _NAME_INPUTS if a.get(k) != b.get(k)]


def warnings(previous: list[dict[str, Any]], current: list[dict[str, Any]]) -> list[str]:
    """One message per protected / retained resource the new plan would replace or delete (see the module doc)."""
    now = {str(r.get("urn")): r for r in current}
    hint = _storage_hint(previous, current)
    out: list[str] = []
    for r in previous:
        kept = _kept(r)
        urn = str(r.get("urn"))
        if kept:
            if urn not in now:
                out.append(f"{_label(r)} ({kept}) is not in this plan: its URN changed or it was removed{hint}. "
                           f"`pulumi up` would create its successor and then "
                           + ("stop at deleting the protected old one (data kept, cost doubled)" if r.get("protect")
                              else "leave the old one behind, unmanaged (cost doubled)"))
                continue
            changed = _changed_names(r, now[urn])
            if changed:
                out.append(f"{_label(r)} ({kept}) would be replaced: {', '.join(changed)} changed{hint}. `pulumi up` "
                           f"would create a new one beside it (a protected resource stops the update)")
        elif r.get("type") == _ADDON and urn not in now:
            name = _at(r.get("inputs"), ("addonName",))
            if any(c.get("type") == _ADDON and _at(c.get("inputs"), ("addonName",)) == name for c in current):
                out.append(f"{_label(r)} (EKS add-on {name}) moves to another URN{hint}: `pulumi up` would adopt the "
                           f"add-on as the new resource and then delete the old resource, which removes {name} "
                           f"from the cluster")
    return out
