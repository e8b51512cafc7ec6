"""The executables installed with the package besides `multinode` ([project.scripts] in pyproject.toml), so any
Pulumi engine finds them without this repository:

- pulumi-resource-multinode: the component provider (the schema of `multinode schema`), as a plugin binary on PATH;
- multinode-policy-pack: the CrossGuard pack as a binary analyzer plugin. `pulumi preview --policy-pack <path of
  this executable>` starts it directly (pulumi/pulumi pkg/v3@v3.274.0 resource/plugin/analyzer_plugin.go
  NewPolicyAnalyzer: a policy pack path that is an executable file is launched as a binary analyzer plugin), with
  the interpreter the package is installed in. `multinode policy-path` prints that path.
"""
from __future__ import annotations

import shutil
import sys
from pathlib import Path

PACK_SCRIPT = "multinode-policy-pack"


def provider() -> None:
    from .package_schema import host
    host(sys.argv[1:])


def policy_pack() -> None:
    from policy.analyzer import serve
    serve()


def policy_pack_path() -> Path | None:
    """The installed pack executable: beside this interpreter (a venv's bin/), else on PATH."""
    here = Path(sys.executable).parent / PACK_SCRIPT
    if here.is_file():
        return here
    found = shutil.which(PACK_SCRIPT)
    return Path(found) if found else None


def policy_path_main(argv: list[str], prog: str = "multinode policy-path") -> int:
    import argparse
    ap = argparse.ArgumentParser(prog=prog, description="Print the path of the policy pack to give to "
                                 "`pulumi preview --policy-pack` (the executable installed with the package).")
    ap.parse_args(argv)
    path = policy_pack_path()
    if path is None:
        print(f"{prog}: no {PACK_SCRIPT} executable beside {sys.executable} or on PATH: install the multinode "
              f"package (pip/uv) into this environment", file=sys.stderr)
        return 2
    print(path)
    return 0
