"""The wheel's build hook: schemas/ (the upstream CRDs and chart values the package reads at run time) goes into the
wheel as multinode/schemas/. Only in a real wheel: an editable install (`uv sync` in this checkout) reads schemas/ in
place (multinode/schemafiles.py), and a `force-include` in pyproject.toml would also copy the 13 MB into every
development venv's site-packages, where nothing reads it (hatchling 1.33.0 builders/wheel.py: an editable build
uses `force_include_editable` when a hook sets it, else the same `force-include`)."""
from __future__ import annotations

from typing import Any

from hatchling.builders.hooks.plugin.interface import BuildHookInterface


class SchemasHook(BuildHookInterface):
    PLUGIN_NAME = "custom"

    def initialize(self, version: str, build_data: dict[str, Any]) -> None:
        if version == "standard":
            build_data["force_include"]["schemas"] = "multinode/schemas"
