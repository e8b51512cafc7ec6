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
GO_IMPORT_PATH = "github.com/multinode-gpu/multinode/sdk/go/multinode"


def _checkout_pyproject() -> Path | None:
    """pyproject.toml of the checkout the package runs from (an editable install), or None when installed."""
    path = ROOT / "pyproject.toml"
    return path if path.is_file() and (ROOT / "multinode" / "__init__.py").is_file() else None


def version() -> str:
    """The package's semver version: pyproject.toml's [project].version (one place). Run from the checkout, read
    from that file; installed, from the distribution's metadata, which the build wrote from the same field."""
    path = _checkout_pyproject()
    if path is not None:
        with path.open("rb") as f:
            return str(tomllib.load(f)["project"]["version"])
    from importlib.metadata import version as dist_version
    return dist_version(NAME)


def _project() -> dict[str, Any]:
    """pyproject.toml's [project] fields the schema carries (description, license, urls), from the checkout or
    from the installed distribution's metadata (core metadata: Summary, License-Expression, Project-URL)."""
    path = _checkout_pyproject()
    if path is not None:
        with path.open("rb") as f:
            return dict(tomllib.load(f)["project"])
    from importlib.metadata import metadata
    meta = metadata(NAME).json        # core metadata as a dict (importlib.metadata PackageMetadata.json)
    urls = dict(str(u).split(", ", 1) for u in (meta.get("project_url") or []) if ", " in str(u))
    return {"description": meta.get("summary"), "license": meta.get("license_expression") or meta.get("license"),
            "urls": urls}


def provider() -> Any:
    """The component provider hosting the package's components (imports pulumi and pulumi_kubernetes,
    no cloud SDK: a cloud's module is loaded when a component of that cloud is constructed). Its schema is the
    analyzer's, completed by `complete` (what the analyzer cannot say)."""
    # components/ is outside mypy's `files` (pyproject.toml); importing it by name keeps it so
    package = importlib.import_module("components.package")
    p = package.Provider(list(package.COMPONENTS), NAME, version=version())
    p.schema = json.dumps(complete(json.loads(p.schema)))
    return p


def _pascal(member: str) -> str:
    """An enum member's schema name from its Python name (LWS_INFERENCE -> LwsInference, NONE -> None): the
    convention of Pulumi's own packages (pulumi-eks), from which every code generator derives its identifier
    (Python's turns LwsInference back into LWS_INFERENCE)."""
    return "".join(w[:1].upper() + w[1:].lower() for w in member.split("_") if w)


def complete(spec: dict[str, Any]) -> dict[str, Any]:
    """The analyzer's schema plus what it cannot derive from Python annotations:
    - the package's description, keywords, homepage, repository and license (pyproject.toml [project]);
    - each secret key (config.SECRET_KEYS) marked `secret` as an input and as an output, so every generated SDK
      wraps it as a secret and the engine stores it encrypted;
    - enum members named in PascalCase, without empty descriptions."""
    from multinode import config
    project = _project()
    urls = {k.lower(): v for k, v in dict(project.get("urls") or {}).items()}
    spec = dict(spec)
    spec.update({k: v for k, v in {
        "description": project.get("description"),
        "keywords": ["pulumi", "kubernetes", "gpu", "multi-node", "aws", "azure", "gcp", "oci", "kind/component"],
        "homepage": urls.get("homepage"),
        "repository": urls.get("repository"),
        "license": project.get("license"),
    }.items() if v})
    # The Go SDK's import path, explicit (Pulumi's codegen/go ExtractImportBasePath would otherwise derive it): the
    # repository's address + sdk/go/multinode, so the packed Go SDK is the module github.com/multinode-gpu/multinode/
    # sdk/go (conformance/sdkgen/pack.py). A generated Go SDK is used through a `replace` line (`pulumi package add`,
    # examples/go/go.mod).
    language = dict(spec.get("language") or {})
    language["go"] = {**dict(language.get("go") or {}), "importBasePath": GO_IMPORT_PATH}
    spec["language"] = language
    secret = set(config.SECRET_KEYS)
    for res in spec.get("resources", {}).values():
        for section in ("inputProperties", "properties"):
            for key, prop in res.get(section, {}).items():
                if key in secret:
                    prop["secret"] = True
    for typ in spec.get("types", {}).values():
        for member in typ.get("enum") or []:
            member["name"] = _pascal(member["name"])
            if member.get("description") is None:
                member.pop("description", None)
    return spec


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
