"""expect_fail.py: a known failure passes only while it fails for its known reason (no Go needed).

known_failures.json is empty today (nim-lws, its only entry, passes since the product renders LWS exclusive placement
under Volcano as pod affinity): the mechanism is tested with a planted list."""
from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
import expect_fail  # noqa: E402

HELD = ("LeaderWorkerSet multinode/llama-405b-nim: pod multinode/llama-405b-nim-0 Pending: pod group is not ready, "
        "1 Pending, 2 minAvailable")


PLANTED = {"nim-lws": {"reason": "planted for the test", "workload": "LeaderWorkerSet multinode/llama-405b-nim: ",
                       "mustInclude": "minAvailable"}}


@pytest.fixture(autouse=True)
def planted_list(tmp_path, monkeypatch):
    known = tmp_path / "known_failures.json"
    known.write_text(json.dumps(PLANTED))
    monkeypatch.setattr(expect_fail, "KNOWN", known)


def test_the_repository_list_is_valid_json_of_entries():
    """The real list: a JSON object whose entries (none today) each name a workload, a reason and the text."""
    real = json.loads((Path(__file__).resolve().parents[1] / "known_failures.json").read_text())
    assert isinstance(real, dict)
    assert all({"reason", "workload", "mustInclude"} <= set(e) for e in real.values())


def stack(tmp_path: Path, findings: list[str]) -> Path:
    d = tmp_path / "nim-lws"
    d.mkdir()
    (d / "cluster.json").write_text(json.dumps({"findings": findings}))
    return d


def test_the_known_reason_is_expected(tmp_path):
    ok, msg = expect_fail.verdict(stack(tmp_path, [HELD]), 2)
    assert ok and "KNOWN FAILURE" in msg


def test_a_box_that_passes_means_the_entry_must_go(tmp_path):
    ok, msg = expect_fail.verdict(stack(tmp_path, []), 0)
    assert not ok and "remove it" in msg


def test_another_finding_fails(tmp_path):
    ok, msg = expect_fail.verdict(stack(tmp_path, [HELD, "Deployment multinode/x: pod Pending"]), 2)
    assert not ok and "beyond the known failure" in msg


def test_another_reason_fails(tmp_path):
    ok, msg = expect_fail.verdict(stack(tmp_path, ["LeaderWorkerSet multinode/llama-405b-nim: refused by webhook"]), 2)
    assert not ok and "not with the known reason" in msg
