"""`pulumi preview --policy-pack policy` on the real engine (conformance/pulumi/engine.py): a clean stack passes
with the same findings as `multinode plan`, and a planted mandatory violation fails the preview with the
rule's name. Needs the binaries of `make pulumi-tools`; `make pulumi-check` builds them and runs this file."""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

HERE = Path(__file__).resolve().parent.parent
ROOT = HERE.parent.parent
ENGINE = HERE / "engine.py"
MULTINODE = Path(sys.executable).parent / "multinode"

pytestmark = pytest.mark.skipif(
    not (HERE / "bin" / "pulumi").exists() or not (HERE / "bin" / "pulumi-resource-kubernetes").exists(),
    reason="the Pulumi CLI and kubernetes provider are not built: run `make pulumi-tools` (make pulumi-check "
           "builds them and runs these tests)")


def plan(stack_file: Path, out: Path) -> Path:
    """`multinode plan --file` of the stack file; returns its policy.json (plan exits 1 on a mandatory finding)."""
    r = subprocess.run([str(MULTINODE), "plan", "--file", str(stack_file), "--out", str(out)],
                       capture_output=True, text=True, cwd=ROOT)
    assert r.returncode in (0, 1), r.stdout + r.stderr
    return out / stack_file.name.removeprefix("Pulumi.").removesuffix(".yaml") / "policy.json"


def preview(stack: str, stack_file: Path, policy_json: Path, out: Path) -> tuple[subprocess.CompletedProcess[str], dict]:
    r = subprocess.run([sys.executable, str(ENGINE), "preview", stack, "--file", str(stack_file),
                        "--plan", str(policy_json), "--out", str(out), "--fresh"],
                       capture_output=True, text=True, cwd=ROOT, timeout=900)
    report = json.loads((out / "preview.json").read_text())
    return r, report


def test_clean_stack_passes_with_the_plans_findings(tmp_path: Path) -> None:
    stack_file = ROOT / "stacks" / "Pulumi.dynamo-dev.yaml"
    policy_json = plan(stack_file, tmp_path / "build")
    r, report = preview("dynamo-dev", stack_file, policy_json, tmp_path / "engine")
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    assert not report["failed"]
    assert report["findings"] == [] == json.loads(policy_json.read_text())
    assert report["changeSummary"].get("create", 0) > 0       # the engine really planned the stack's resources


def test_planted_mandatory_violation_fails_preview_with_the_rule_name(tmp_path: Path) -> None:
    doc = yaml.safe_load((ROOT / "stacks" / "Pulumi.dynamo-dev.yaml").read_text())
    # A literal credential in a workload's env: the program's own config checks let WANDB_API_KEY through
    # (only the keys multinode itself owns are refused there); the pack's no-literal-secrets-in-env refuses it.
    doc["config"]["multinode:workloads"][0]["env"] = {"WANDB_API_KEY": "0123456789abcdef0123456789abcdef"}
    stack_file = tmp_path / "Pulumi.planted.yaml"
    stack_file.write_text(yaml.safe_dump(doc, sort_keys=False))
    policy_json = plan(stack_file, tmp_path / "build")
    r, report = preview("planted", stack_file, policy_json, tmp_path / "engine")
    assert r.returncode != 0
    assert report["failed"]                                    # the CLI itself failed the preview
    assert "no-literal-secrets-in-env" in r.stdout             # the engine's own output names the rule
    names = {(f["policy"], f["enforcementLevel"]) for f in report["findings"]}
    assert names == {("no-literal-secrets-in-env", "mandatory")}
    # the engine found what `multinode plan` found: no difference lines
    assert (tmp_path / "engine" / "policy-diff.txt").read_text() == ""
