"""The package schema (`multinode schema`) and the provider host, from components/package.py.

The schema is what Pulumi's component analyzer derives from the components' typed args and outputs: the
same schema `pulumi package get-schema` shows for this repository, because the provider the CLI starts
(provider/__main__.py) builds it with the same call.
"""
from __future__ import annotations

import argparse
import importlib
import json
import sys
import tomllib
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
NAME = "multinode"


def version() -> str:
    """The package's semver version: pyproject.toml's [project].version (one place)."""
    with (ROOT / "pyproject.toml").open("rb") as f:
        return str(tomllib.load(f)["project"]["version"])


def provider() -> Any:
    """The component provider hosting the package's components (imports pulumi and pulumi_kubernetes,
    no cloud SDK: a cloud's module is loaded when a component of that cloud is constructed)."""
    # components/ is outside mypy's `files` (pyproject.toml); importing it by name keeps it so
    package = importlib.import_module("components.package")
    return package.Provider(list(package.COMPONENTS), NAME, version=version())


def schema() -> dict[str, Any]:
    return dict(json.loads(provider().schema))


def host(args: list[str]) -> None:
    """Serve the provider to the Pulumi engine (what `component_provider_host` does, with our version)."""
    from pulumi.provider import main
    main(provider(), args)


def main(argv: list[str], prog: str = "multinode schema") -> int:
    parser = argparse.ArgumentParser(prog=prog, description="Print the package schema of the components "
                                     "(what `pulumi package get-schema` shows for this repository).")
    parser.add_argument("--out", help="write it to this file instead of stdout")
    opts = parser.parse_args(argv)
    text = json.dumps(schema(), indent=2, sort_keys=True) + "\n"
    if opts.out:
        Path(opts.out).write_text(text)
    else:
        sys.stdout.write(text)
    return 0
