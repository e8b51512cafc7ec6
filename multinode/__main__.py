"""Command line: `python -m multinode plan <stack>` (offline) and `python -m multinode release <stack>`."""
from __future__ import annotations

import sys

USAGE = """usage: python -m multinode <command> ...
commands:
  plan <stack> [--out DIR] [--all]   render what a stack would create, offline; exit 0 ok, 1 policy, 2 config
  release <stack> [--promote-from SRC] [--dry-run] [--report PATH] [--timeout S]
                                     preview with policies, up, NCCL bandwidth gate, JSON report (needs the Pulumi CLI)
"""


def main(argv=None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if not argv or argv[0] in ("-h", "--help"):
        print(USAGE)
        return 0 if argv else 2
    cmd, rest = argv[0], argv[1:]
    if cmd == "plan":
        from .plan import main as plan_main
        return plan_main(rest)
    if cmd == "release":
        from .release import main as release_main
        return release_main(rest)
    print(f"unknown command {cmd!r}\n{USAGE}", file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main())
