"""A stack listed in known_failures.json must still fail in the box, and only for its known reason.

Usage: expect_fail.py <build/stack dir> <box exit code>. Exit 0 when the box failed, every finding of
cluster.json concerns the listed workload, and one finding carries the listed text; exit 1 otherwise (a new
finding, or the known failure gone: then remove its entry, the stack now passes as it should).
"""
from __future__ import annotations

import json
import sys
from pathlib import Path

KNOWN = Path(__file__).with_name("known_failures.json")


def verdict(stack_dir: Path, box_rc: int) -> tuple[bool, str]:
    entry = json.loads(KNOWN.read_text())[stack_dir.name]
    if box_rc == 0:
        return False, f"{stack_dir.name}: listed as a known failure but the box passed: remove it from {KNOWN.name}"
    findings = json.loads((stack_dir / "cluster.json").read_text())["findings"]
    other = [f for f in findings if not f.startswith(entry["workload"])]
    if other:
        return False, f"{stack_dir.name}: findings beyond the known failure: {other}"
    if not any(entry["mustInclude"] in f for f in findings):
        return False, f"{stack_dir.name}: failed, but not with the known reason ({entry['mustInclude']!r}): {findings}"
    return True, f"{stack_dir.name}: KNOWN FAILURE, as expected: {entry['reason']}"


if __name__ == "__main__":
    ok, msg = verdict(Path(sys.argv[1]), int(sys.argv[2]))
    print(msg)
    sys.exit(0 if ok else 1)
