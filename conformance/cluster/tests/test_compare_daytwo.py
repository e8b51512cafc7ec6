"""compare.py day_two_findings (no Go needed): the findings of build/<stack>/day-two.json (daytwo.go) fail the box
like the others, and a box asked to play day two that wrote no report is a finding itself. The scenarios are run on
the engines in test_box_daytwo.py."""
from __future__ import annotations

import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
import compare  # noqa: E402


def test_the_report_findings_and_not_checked_are_carried(tmp_path: Path) -> None:
    (tmp_path / "day-two.json").write_text(json.dumps({
        "findings": ["drain: node gpu-0 still holds 1 pod(s) after 20s of evictions"],
        "notChecked": ["Job multinode/b: a batch gang not played"]}))
    got = compare.day_two_findings(tmp_path, {})
    assert got["findings"] == ["day two: drain: node gpu-0 still holds 1 pod(s) after 20s of evictions"]
    assert got["notChecked"] == ["day two: Job multinode/b: a batch gang not played"]


def test_a_clean_report_has_no_finding(tmp_path: Path) -> None:
    (tmp_path / "day-two.json").write_text(json.dumps({"findings": [], "notChecked": []}))
    assert compare.day_two_findings(tmp_path, {}) == {"findings": [], "notChecked": []}


def test_no_report_is_a_finding_with_the_box_error(tmp_path: Path) -> None:
    got = compare.day_two_findings(tmp_path, {"error": "control plane: boom"})
    assert got["findings"] == ["day two: the box wrote no day-two.json (control plane: boom)"]
