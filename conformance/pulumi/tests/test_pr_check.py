"""The pull-request check (`make pr-check STACK=...`, engine.py pr-check): `pulumi preview --policy-pack policy`
on the real engine passes a clean stack and fails a planted mandatory violation with the rule's name.
Needs the binaries of `make pulumi-tools`; `make pulumi-check` builds them and runs this file.

The stacks: existing-dev reduced as in test_engine_preview.py (no add-on installed by the stack, so the preview
needs neither the charts nor a reachable cluster)."""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from test_engine_preview import ENGINE, HERE, ROOT, offline_stack, planted_stack

pytestmark = pytest.mark.skipif(
    not (HERE / "bin" / "pulumi").exists() or not (HERE / "bin" / "pulumi-resource-kubernetes").exists(),
    reason="the Pulumi CLI and kubernetes provider are not built: run `make pulumi-tools` (make pulumi-check "
           "builds them and runs these tests)")


def pr_check(tmp_path: Path, name: str, doc: dict) -> subprocess.CompletedProcess[str]:
    stack_file = tmp_path / f"Pulumi.{name}.yaml"
    stack_file.write_text(yaml.safe_dump(doc, sort_keys=False))
    return subprocess.run([sys.executable, str(ENGINE), "pr-check", str(stack_file), "--out", str(tmp_path / "w")],
                          capture_output=True, text=True, cwd=ROOT, timeout=900)


def test_pr_check_passes_a_clean_stack(tmp_path: Path) -> None:
    r = pr_check(tmp_path, "clean", offline_stack())
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    assert "pr-check: clean: passed, no mandatory finding" in r.stdout


def test_pr_check_fails_a_planted_mandatory_violation_naming_the_rule(tmp_path: Path) -> None:
    r = pr_check(tmp_path, "planted", planted_stack())
    assert r.returncode == 1, r.stdout[-3000:] + r.stderr[-3000:]
    fails = [ln for ln in r.stdout.splitlines() if ln.startswith("pr-check: FAIL")]
    assert len(fails) == 1 and "mandatory policy env-defined-once on urn:pulumi:planted::" in fails[0], fails
    assert "pr-check: planted: 1 mandatory finding(s) (env-defined-once)" in r.stdout
