"""The two comparisons of conformance/pulumi, each shown to catch a planted difference (no binaries needed)."""
from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import e2e  # noqa: E402
import engine  # noqa: E402

URN = "urn:pulumi:s::multinode::multinode:index:Platform$multinode:index:Workload$kubernetes:batch/v1:Job::j"
PLAN_URN = "urn:pulumi:s::multinode::multinode:index:Workload$kubernetes:batch/v1:Job::j"


def finding(urn: str, policy: str = "no-literal-secrets-in-env") -> dict[str, str]:
    return {"policy": policy, "enforcementLevel": "mandatory", "urn": urn, "message": "m"}


def test_same_findings_no_lines() -> None:
    assert engine.compare([finding(URN)], [finding(URN)]) == []


def test_a_finding_only_plan_has_is_a_line() -> None:
    lines = engine.compare([], [finding(PLAN_URN)])
    assert len(lines) == 1 and lines[0].startswith("policy.json: no-literal-secrets-in-env")


def test_a_finding_only_the_engine_has_is_a_line() -> None:
    lines = engine.compare([finding(URN, "gang-whole")], [])
    assert len(lines) == 1 and lines[0].startswith("engine: gang-whole")


def test_same_finding_under_another_urn_is_a_urn_line() -> None:
    assert [line.split(":")[0] for line in engine.compare([finding(URN)], [finding(PLAN_URN)])] == ["urn"]


def test_subset_diff_accepts_canonical_forms_and_catches_changes() -> None:
    assert e2e.subset_diff({"s": "1024Gi", "ro": False, "k": ["a"]}, {"s": "1Ti", "k": ["a"], "extra": 1}) == []
    assert e2e.subset_diff({"s": "1024Gi"}, {"s": "1Gi"}) == [".s: expected '1024Gi', found '1Gi'"]
    assert e2e.subset_diff({"ro": True}, {}) == [".ro: expected True, found None"]
    assert e2e.subset_diff({"k": ["a", "b"]}, {"k": ["a"]}) == [".k: expected 2 items, found 1"]


def test_provided_variant_marks_every_enabled_addon_and_installs_none(tmp_path: Path) -> None:
    import yaml

    from multinode import checks, stackfile
    from multinode.manifests import addons

    root = Path(__file__).resolve().parents[3]
    dst = tmp_path / "Pulumi.existing-dev.yaml"
    marked = e2e.provided_variant(root / "stacks" / "Pulumi.existing-dev.yaml", dst)
    assert {"volcano", "lws", "grove", "kai", "kyverno", "trainer"} <= set(marked)
    assert "dynamo" not in marked and "gpuOperator" not in marked      # off in existing-dev: left off
    raw, secrets, _ = stackfile.read_stack_file(dst)
    cfg = checks.load(raw, secrets)
    assert addons.addon_releases(cfg) == [] and addons.fabric_releases(cfg) == []
    assert cfg.fabric.enabled and len(cfg.workloads) == 7                # the stack as it is otherwise
    assert yaml.safe_load(dst.read_text())["config"]["multinode:workloads"] == \
        yaml.safe_load((root / "stacks" / "Pulumi.existing-dev.yaml").read_text())["config"]["multinode:workloads"]


def test_skip_await_transform_annotates_only_the_named_types() -> None:
    class Args:
        def __init__(self, type_: str) -> None:
            self.type_, self.props, self.opts = type_, {"metadata": {"name": "x", "annotations": {"a": "b"}}}, None

    engine.SKIP_AWAIT.clear()
    engine.SKIP_AWAIT.add("kubernetes:batch/v1:Job")
    try:
        out = engine._skip_await_transform(Args("kubernetes:batch/v1:Job"))
        assert out.props["metadata"]["annotations"] == {"a": "b", "pulumi.com/skipAwait": "true"}
        assert engine._skip_await_transform(Args("kubernetes:core/v1:ConfigMap")) is None
    finally:
        engine.SKIP_AWAIT.clear()
