"""The `multinode` command (console script) and `python -m multinode`: `plan` (offline), `release`, `reference`,
`explain`, `check-cluster`, `schema`, `new` (a project of the team's own), `policy-path`; `--version`."""
from __future__ import annotations

import sys

# name -> (one-line help, module with `main(argv, prog=...)`); modules are imported only when run.
COMMANDS = {
    "plan": ("render what a stack would create, offline (no Pulumi CLI, no cloud); "
             "exit 0 ok, 1 policy violation, 2 bad config", "multinode.plan"),
    "release": ("preview with the policy pack, up, NCCL bandwidth gate, JSON report (needs the Pulumi CLI)",
                "multinode.release.cli"),
    "reference": ("print the config reference, every key of the stack file (docs/config-reference.md)",
                  "multinode.reference"),
    "explain": ("print one config key's reference entry: type, default, allowed values, limits, clouds, example",
                "multinode.reference"),
    "check-cluster": ("check a live cluster (kubeconfig) against what the stack expects of it, one line per check; "
                      "exit 0 ok, 1 a check failed, 2 bad stack or cluster unreachable", "multinode.check_cluster"),
    "schema": ("print the package schema of the components (what `pulumi package get-schema` shows)",
               "multinode.package_schema"),
    "new": ("write a Pulumi project of your own that uses this package (--cloud aws|azure|gcp|oci|existing)",
            "multinode.scaffold"),
    "policy-path": ("print the policy pack's path for `pulumi preview --policy-pack`",
                    "multinode.entry_points:policy_path_main"),
}


def usage(prog: str) -> str:
    width = max(len(c) for c in COMMANDS)
    lines = [f"usage: {prog} <command> [options]   ({prog} <command> --help for its options; "
             f"{prog} --version)", "commands:"]
    lines += [f"  {name:<{width}}  {text}" for name, (text, _) in COMMANDS.items()]
    return "\n".join(lines)


def main(argv: list[str] | None = None, prog: str = "python -m multinode") -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    if not args or args[0] in ("-h", "--help"):
        print(usage(prog))
        return 0 if args else 2
    if args[0] in ("-V", "--version"):
        from .package_schema import version
        print(f"multinode {version()}")
        return 0
    cmd, rest = args[0], args[1:]
    if cmd not in COMMANDS:
        print(f"unknown command {cmd!r}\n{usage(prog)}", file=sys.stderr)
        return 2
    import importlib

    module_name, _, func = COMMANDS[cmd][1].partition(":")
    entry = getattr(importlib.import_module(module_name), func or "main")
    try:
        return int(entry(rest, prog=f"{prog} {cmd}"))
    except SystemExit as e:       # argparse's --help (0) and usage errors (2)
        return e.code if isinstance(e.code, int) else (0 if e.code is None else 2)


def _run(prog: str) -> int:
    """main(), quiet when the reader of stdout goes away (`multinode schema | head`): the rest of the output
    is dropped and the exit status is the shell's for SIGPIPE, with no traceback."""
    import os
    if sys.argv[1:2] == ["plan"]:
        from . import gcpolicy
        gcpolicy.for_batch()          # a one-shot process; before the imports, most of the heap a collection walks
    try:
        code = main(prog=prog)
        sys.stdout.flush()
        return code
    except BrokenPipeError:
        # stdout's buffer still holds unwritten text: point the descriptor at /dev/null so the interpreter's
        # final flush does not raise again
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 128 + 13


def entry_point() -> None:
    """The `multinode` console script ([project.scripts] in pyproject.toml)."""
    sys.exit(_run("multinode"))


if __name__ == "__main__":
    sys.exit(_run("python -m multinode"))
