"""The judge of the model rollout through `pulumi up` (conformance/pulumi/rollout_up.py, issue 44 scenario 4): the
engine's steps of an image change pass only when the LeaderWorkerSet alone is updated in place and its diff is the
images. The steps below are the shape engine.py step_events records (the passing one as the box's run of nim-lws
recorded it in build/day-two-up/nim-lws/engines/pulumi/rollout/steps.json)."""
from __future__ import annotations

import sys
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "conformance" / "pulumi"))
import rollout_up  # noqa: E402

URN = ("urn:pulumi:nim-lws::multinode::multinode:index:Platform$multinode:index:Workload$"
       "kubernetes:leaderworkerset.x-k8s.io/v1:LeaderWorkerSet::llama-405b-nim-leaderworkerset-llama-405b-nim")
IMAGES = {"spec.leaderWorkerTemplate.leaderTemplate.spec.containers[0].image": "update",
          "spec.leaderWorkerTemplate.workerTemplate.spec.containers[0].image": "update"}


def step(op: str = "update", diff: dict[str, str] | None = None, keys: list[str] | None = None,
         urn: str = URN, type_: str = rollout_up.LWS_TYPE) -> dict:
    return {"urn": urn, "type": type_, "op": op, "keys": keys or [], "diffs": [],
            "detailedDiff": dict(IMAGES if diff is None else diff)}


def test_an_update_of_the_images_only_passes() -> None:
    assert rollout_up.judge([step()]) == []


@pytest.mark.parametrize("op", ["replace", "create-replacement", "delete-replaced"])
def test_a_replace_of_the_leaderworkerset_fails_naming_it(op: str) -> None:
    problems = rollout_up.judge([step(op=op, keys=["spec"])])
    assert any(f"is '{op}', not an update in place" in p for p in problems), problems


def test_a_diff_beyond_the_images_fails_naming_the_path() -> None:
    problems = rollout_up.judge([step(diff={**IMAGES, "spec.replicas": "update"})])
    assert problems == ["the LeaderWorkerSet's diff is not the images only: also ['spec.replicas']"]


def test_no_step_for_the_leaderworkerset_and_another_resource_changed_fail() -> None:
    other = step(urn="urn:pulumi:s::multinode::kubernetes:core/v1:Service::leader",
                 type_="kubernetes:core/v1:Service", diff={"spec.ports[0].port": "update"})
    problems = rollout_up.judge([other])
    assert "the engine sent no step for the LeaderWorkerSet (no change)" in problems
    assert any(p.startswith("the up also updates leader (kubernetes:core/v1:Service)") for p in problems), problems


@pytest.mark.parametrize("img,want", [
    ("nvcr.io/nim/meta/llama-3.1-405b-instruct:1.8.0", "nvcr.io/nim/meta/llama-3.1-405b-instruct:1.8.0-rollout"),
    ("localhost:5000/vllm", "localhost:5000/vllm:rollout"),
    ("docker.io/vllm/vllm-openai:v0.31.0@sha256:abc", "docker.io/vllm/vllm-openai:v0.31.0-rollout"),
])
def test_next_image_is_the_box_rule(img: str, want: str) -> None:
    # the same rule as conformance/cluster/daytwo_rollout.go nextImage: the box counts a pod new by this image
    assert rollout_up.next_image(img) == want


def test_the_changed_copy_changes_the_first_lws_workload_image_only(tmp_path: Path) -> None:
    src = ROOT / "tests" / "guides" / "Pulumi.nim-lws.yaml"
    dst = tmp_path / "rollout" / src.name
    workload, old, new = rollout_up.changed_copy(src, dst)
    before, after = yaml.safe_load(src.read_text()), yaml.safe_load(dst.read_text())
    assert (workload, new) == ("llama-405b-nim", old + "-rollout")
    after["config"]["multinode:workloads"][0]["image"] = old
    assert after == before
