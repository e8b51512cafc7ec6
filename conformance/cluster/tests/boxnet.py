"""The flags every box test starts `clusterbox` with: as root, the box runs in a network namespace it creates with
only loopback (`--netns`, netns.go), like `make cluster-check`'s boxes, so nothing a planted-defect box starts can
send a packet outside it. Not root (a developer's machine without the privilege): on the host's loopback, as
before, which the test's output says through the box's observed.json (`netns` absent)."""
from __future__ import annotations

import os


def netns_flags() -> list[str]:
    return ["--netns"] if os.geteuid() == 0 else []
