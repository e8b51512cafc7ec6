"""The CrossGuard entry point `pulumi preview --policy-pack policy` runs. It only builds the pack;
the rules live in policy.rules and run offline through policy.pack.evaluate (`plan`)."""
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))   # the repo root: multinode, policy

from pulumi_policy import EnforcementLevel, PolicyPack  # noqa: E402

from policy.pack import policies  # noqa: E402

PolicyPack(
    name="multinode",
    description="Multi-node GPU topology contract: parallelism, gangs, fabric, node pools, checkpoint storage",
    enforcement_level=EnforcementLevel.MANDATORY,
    policies=policies(),
)
