"""cloud existing: a claim on an existing StorageClass is kept, and the stack says plainly that the data
behind it survives only if that class retains (its reclaimPolicy cannot be read offline)."""
from __future__ import annotations

import json

import pulumi
import pytest

from components.clouds import existing as exmod
from multinode import checks

from .cloudrun import of_type, one, run
from .conftest import example_raw

PVC = "kubernetes:core/v1:PersistentVolumeClaim"
PV = "kubernetes:core/v1:PersistentVolume"


@pytest.fixture
def warned(monkeypatch):
    msgs = []
    monkeypatch.setattr(pulumi.log, "warn", lambda msg, *a, **k: msgs.append(msg))
    return msgs


def _run(**storage):
    raw, secrets = example_raw("existing-dev")
    raw["storage"] = dict(raw["storage"], **storage)
    return run(raw, secrets, "existing-dev")


def test_claim_on_an_existing_class_is_kept_and_its_reclaim_policy_is_warned_about(warned):
    r = _run()
    pvc = one(r, PVC)
    assert (pvc.protect, pvc.retain_on_delete) == (True, True)
    assert pvc.inputs["spec"]["storageClassName"] == "efs-sc"
    assert pvc.inputs["spec"]["accessModes"] == ["ReadWriteMany"]
    assert pvc.inputs["spec"]["resources"]["requests"]["storage"] == "1024Gi"
    assert not of_type(r, PV)                     # dynamically provisioned: the class makes the volume
    # under plan it is one of the advisories (printed once, with an id), not a second warning on stderr
    assert not [m for m in warned if "existingStorageClass" in m]
    raw, secrets = example_raw("existing-dev")
    (adv,) = [p for p in checks.advisories(checks.load(raw, secrets)) if p.path == "storage.existingStorageClass"]
    msg = str(adv)
    assert "'efs-sc'" in msg and "reclaimPolicy: Retain" in msg and "storage.existingClaim" in msg


def test_existing_claim_creates_no_claim_and_no_warning(warned):
    r = _run(existingClaim="team-checkpoints", existingStorageClass=None)
    assert not of_type(r, PVC)
    assert not [m for m in warned if "existingStorageClass" in m]
    # the workloads mount the named claim
    assert '"claimName": "team-checkpoints"' in json.dumps([x.inputs for x in r.registrations])


def test_allow_delete_drops_the_keep_and_the_warning(warned):
    r = _run(allowDelete=True)
    pvc = one(r, PVC)
    assert (pvc.protect, pvc.retain_on_delete) == (False, False)
    assert not [m for m in warned if "existingStorageClass" in m]


def test_warning_names_the_class_and_how_to_check_it():
    msg = exmod.storage_class_warning("fast-nfs")
    assert "kubectl get storageclass fast-nfs" in msg and "Retain" in msg
