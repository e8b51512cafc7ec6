"""The CrossGuard entry point `pulumi preview --policy-pack policy` runs. It only builds the pack;
the rules live in policy.rules and run offline through policy.pack.evaluate (`plan`).

The team's policy config (stacks/policy-config.json, or the file $MULTINODE_POLICY_CONFIG names; the file `plan`
reads) is the pack's initial config; a file given with `--policy-pack-config` is applied by the CLI on top."""
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))   # the repo root: multinode, policy

from pulumi_policy import EnforcementLevel, PolicyPack  # noqa: E402

from multinode.errors import ConfigError  # noqa: E402
from policy.config import for_pack, initial_config  # noqa: E402
from policy.pack import policies  # noqa: E402
from policy.wire import install  # noqa: E402

install()        # a resource's properties converted from protobuf once, not once per policy (policy/wire.py)

try:
    team_config = for_pack()
except ConfigError as e:          # a bad file stops the pack with the message plan gives, not a traceback
    sys.exit(str(e))

PolicyPack(
    name="multinode",
    description="Multi-node GPU topology contract: parallelism, gangs, fabric, node pools, checkpoint storage",
    enforcement_level=EnforcementLevel.MANDATORY,
    policies=policies(),
    initial_config=initial_config(team_config) or None,
)
