"""The CrossGuard entry point `pulumi preview --policy-pack policy` runs (from this repository's checkout): the
pack of policy/analyzer.py. Installed from the wheel, the same pack is the `multinode-policy-pack` executable
(`multinode policy-path` prints its path)."""
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))   # the repo root: multinode, policy

from policy.analyzer import serve  # noqa: E402

serve()
