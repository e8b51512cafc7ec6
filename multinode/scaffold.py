"""`multinode new <dir> --cloud ...`: a Pulumi project of the team's own that depends on this package.

What it writes (nothing in it refers to this repository's folders; the stack template is package data,
multinode/templates/<cloud>.yaml):
- __main__.py        the package's program (multinode/program.py), three lines
- Pulumi.yaml        runtime python with the uv toolchain (the CLI runs `uv sync`, then the program in .venv)
- pyproject.toml     the dependency on multinode==<this version>, and where uv gets it ([tool.uv.sources]: this
                     repository's git tag by default, or the wheel/URL given with --package)
- Pulumi.<stack>.yaml  one stack, planning clean as written
- policy-config.json the team's policy config (read by `plan` and by the pack: stack folder, policy/config.py)
- .github/workflows/pr-check.yml  the pull-request check: `multinode plan`, then `pulumi preview` with the pack
- .gitignore
"""
from __future__ import annotations

import argparse
import importlib.resources
import json
import re
import sys
from pathlib import Path

from .package_schema import version

CLOUDS = ("aws", "azure", "gcp", "oci", "existing")
REPOSITORY = "https://github.com/multinode-gpu/multinode"      # pyproject.toml [project.urls] Repository

MAIN = '''"""Pulumi program: the multinode package's program (multinode/program.py) for this project's stacks."""
from multinode.program import main

main()
'''

PULUMI_YAML = '''name: {name}
description: Multi-node GPU work on Kubernetes ({cloud}), with the multinode package
runtime:
  name: python
  options:
    # The Pulumi CLI installs the program's environment with uv from pyproject.toml (uv.lock once `uv sync` wrote
    # it: commit that file) into .venv, and runs __main__.py there.
    toolchain: uv
    virtualenv: .venv
'''

PYPROJECT = '''[project]
name = "{name}"
version = "0.1.0"
description = "Pulumi project: multi-node GPU work on Kubernetes with the multinode package"
requires-python = ">=3.11"
dependencies = ["multinode=={version}"]

[tool.uv]
package = false          # a Pulumi program, not a package to build

[tool.uv.sources]
# Where uv gets multinode {version}: {source_note}
multinode = {source}
'''

WORKFLOW = '''# The pull-request check of this project: the offline plan (exit 1 on a mandatory policy violation,
# 2 on a bad stack file), then `pulumi preview` with the multinode policy pack (a mandatory violation
# fails the preview).
name: pr-check
on:
  pull_request:
jobs:
  check:
    runs-on: ubuntu-latest
    env:
      PULUMI_ACCESS_TOKEN: ${{{{ secrets.PULUMI_ACCESS_TOKEN }}}}
    steps:
      - uses: actions/checkout@v4
      - uses: astral-sh/setup-uv@v6
      - run: uv sync
      - name: multinode plan (offline, no cloud)
        run: uv run multinode plan {stack}
      # pulumi/actions without `command` installs the Pulumi CLI only (github.com/pulumi/actions README)
      - uses: pulumi/actions@v6
      - name: pulumi preview with the policy pack
        run: uv run pulumi preview --stack {stack} --policy-pack "$(uv run multinode policy-path)"
'''

GITIGNORE = ".venv/\nbuild/\n__pycache__/\n"

POLICY_CONFIG = {"all": "mandatory"}


def template(cloud: str, stack: str) -> str:
    """The starter stack file of `cloud`, from the package's data."""
    text = (importlib.resources.files("multinode") / "templates" / f"{cloud}.yaml").read_text(encoding="utf-8")
    return text.replace("{stack}", stack)


def project_files(name: str, cloud: str, stack: str, package: str | None) -> dict[str, str]:
    v = version()
    if package is None:
        source = f'{{ git = "{REPOSITORY}", tag = "v{v}" }}'
        note = "this release's tag in the multinode repository"
    elif re.match(r"^[a-z][a-z0-9+.-]*://", package):
        source = f'{{ url = "{package}" }}'
        note = "the URL given to `multinode new --package`"
    else:
        source = f'{{ path = "{Path(package).resolve()}" }}'
        note = "the file given to `multinode new --package`"
    return {
        "__main__.py": MAIN,
        "Pulumi.yaml": PULUMI_YAML.format(name=name, cloud=cloud),
        "pyproject.toml": PYPROJECT.format(name=name, version=v, source=source, source_note=note),
        f"Pulumi.{stack}.yaml": template(cloud, stack),
        "policy-config.json": json.dumps(POLICY_CONFIG, indent=2) + "\n",
        ".github/workflows/pr-check.yml": WORKFLOW.format(stack=stack),
        ".gitignore": GITIGNORE,
    }


def _project_name(folder: Path) -> str:
    name = re.sub(r"[^A-Za-z0-9_.-]+", "-", folder.resolve().name).strip("-.")
    return name or "multinode-project"


def main(argv: list[str], prog: str = "multinode new") -> int:
    ap = argparse.ArgumentParser(prog=prog, description="Write a Pulumi project that uses the multinode package: "
                                 "__main__.py, Pulumi.yaml (uv toolchain), pyproject.toml, one stack file, the "
                                 "policy config and a pull-request workflow. It plans clean as written.")
    ap.add_argument("dir", type=Path, help="the project folder (created; must be empty if it exists)")
    ap.add_argument("--cloud", required=True, choices=CLOUDS, help="where the GPU nodes run")
    ap.add_argument("--stack", default="dev", help="the stack's name (Pulumi.<stack>.yaml; default dev)")
    ap.add_argument("--name", help="the Pulumi project's name (default: the folder's name)")
    ap.add_argument("--package", metavar="WHEEL_OR_URL",
                    help="where uv gets multinode: a wheel file or a URL (default: the release tag in "
                         f"{REPOSITORY})")
    opts = ap.parse_args(argv)
    if not re.fullmatch(r"[A-Za-z0-9_.-]+", opts.stack):
        print(f"{prog}: --stack {opts.stack!r}: a stack name is letters, digits, '-', '_' and '.'", file=sys.stderr)
        return 2
    folder: Path = opts.dir
    if folder.exists() and (not folder.is_dir() or any(folder.iterdir())):
        print(f"{prog}: {folder} exists and is not an empty folder; give a new folder (nothing was written)",
              file=sys.stderr)
        return 2
    name = opts.name or _project_name(folder)
    files = project_files(name, opts.cloud, opts.stack, opts.package)
    for rel, text in files.items():
        path = folder / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
    print(f"wrote the Pulumi project {name} ({opts.cloud}, stack {opts.stack}) in {folder}:")
    for rel in files:
        print(f"  {rel}")
    print(f"next: cd {folder} && uv sync && uv run multinode plan {opts.stack}")
    return 0
