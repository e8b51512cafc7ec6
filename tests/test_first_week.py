"""Issue 31: a user's first week. Each test writes the stack a user would write (from a guide's own YAML or a
vendor's docs) and plans it as they would, then asserts what `plan` decides."""
from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from multinode import plan as mplan
from tests import policy_fixtures as F

CORPUS = Path(__file__).resolve().parent / "corpus"


def stack_doc(name: str = "mpijob-np") -> dict[str, Any]:
    """A valid existing-cluster stack file (2 x p5.48xlarge, EFA) from the corpus, its manifests removed."""
    doc = yaml.safe_load((CORPUS / f"{name}.yaml").read_text())
    doc["config"].pop("multinode:manifests", None)
    return doc


def plan_doc(doc: dict[str, Any], tmp_path: Path, name: str = "user") -> mplan.PlanResult:
    f = tmp_path / f"Pulumi.{name}.yaml"
    f.write_text(yaml.safe_dump(doc))
    return mplan.plan(name, tmp_path / "build", f)


def mandatory(res: mplan.PlanResult) -> list[dict[str, Any]]:
    return [v for v in res.violations if v["enforcementLevel"] == "mandatory"]


# ------------------------------------------------------------------ every "does not fit" is a finding
def mpijob_with_gpu_launcher() -> dict[str, Any]:
    """mpi-operator v2beta1: the launcher is its own pod; here it asks 8 GPUs on the same machine as the workers."""
    job = F.mpijob(np=16)
    launcher = job["spec"]["mpiReplicaSpecs"]["Launcher"]["template"]["spec"]
    launcher["containers"][0]["resources"] = {"limits": {"nvidia.com/gpu": 8}}
    launcher["nodeSelector"] = {"node.kubernetes.io/instance-type": "p5.48xlarge"}
    return job


def test_mpijob_launcher_with_gpus_counts_and_a_gang_larger_than_the_pool_fails_plan(tmp_path):
    doc = stack_doc()
    doc["config"]["multinode:manifests"] = [mpijob_with_gpu_launcher()]     # 1 launcher + 2 workers on 2 nodes
    res = plan_doc(doc, tmp_path)
    assert res.placement is not None and not res.placement.fits
    assert "does not fit" in "\n".join(mplan.placement.table(res.placement))
    found = [v for v in mandatory(res) if v["policy"] == "stack-fits-node-pools"]
    assert len(found) == 1 and "byo-nccl (3) needs 3 nodes" in found[0]["message"], res.violations
    assert res.exit_code == mplan.EXIT_POLICY

    # the same job on a pool of 3 nodes fits: the launcher's node is the third one
    doc["config"]["multinode:nodePools"][0]["nodeCount"] = 3
    res = plan_doc(doc, tmp_path, "user3")
    assert res.placement.fits and res.exit_code == mplan.EXIT_OK, res.violations
