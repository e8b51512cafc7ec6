"""The pack itself: build the CrossGuard PolicyPack, which serves the engine until it is stopped. Started by
policy/__main__.py (`pulumi preview --policy-pack policy`, through the Python language host) and by the
`multinode-policy-pack` executable installed with the package (a binary analyzer plugin: multinode/entry_points.py).
The rules live in policy.rules and run offline through policy.pack.evaluate (`plan`).

The team's policy config (policy-config.json in the stack folder, or the file $MULTINODE_POLICY_CONFIG names; the
file `plan` reads: policy/config.py pack_default_path) is the pack's initial config; a file given with
`--policy-pack-config` is applied by the CLI on top."""
from __future__ import annotations

import sys


def port_goes_out_at_once() -> None:
    """Make what is written to stdout reach the engine at once. The engine reads the pack's gRPC port from its first
    stdout line and waits for it without a timeout; pulumi_policy writes the port to sys.stdout.buffer and does not
    flush (pulumi-policy 1.21.0 pulumi_policy/policy.py:137), so under a buffered stdout (a pipe, without python -u
    or PYTHONUNBUFFERED, as when the engine starts the installed `multinode-policy-pack`) the port stays in the
    buffer and `pulumi preview --policy-pack` waits forever. The Python language host starts a pack with -u; the
    executable has no host, so stdout is made unbuffered here (TextIOWrapper.buffer is then the file itself)."""
    import io
    if isinstance(sys.stdout, io.TextIOWrapper) and not isinstance(sys.stdout.buffer, io.RawIOBase):
        sys.stdout.flush()
        sys.stdout = io.TextIOWrapper(io.FileIO(sys.stdout.fileno(), "w", closefd=False),
                                      encoding=sys.stdout.encoding, errors=sys.stdout.errors, write_through=True)


def serve() -> None:
    port_goes_out_at_once()
    from pulumi_policy import EnforcementLevel, PolicyPack

    from multinode.errors import ConfigError
    from policy.config import for_pack, initial_config
    from policy.pack import policies
    from policy.wire import install

    install()      # a resource's properties converted from protobuf once, not once per policy (policy/wire.py)
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
