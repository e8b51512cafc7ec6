"""The fleet stack's checks step (as multinode/checks.py is a cluster stack's): the shape and contract
(fleet/config.py), every member's own stack (fleet/members.py), and that every workload fits whole in at
least one member (fleet/fit.py). `load(raw)` is what `plan` and the fleet program call: one ConfigError
listing every problem, before any resource. Pure: no Pulumi."""
from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from ..errors import ConfigError
from . import fit, members
from .config import FleetConfig, shape, top_level_keys


def load(raw: Mapping[str, Any], secret_keys: Iterable[str] = (), source: str = "fleet stack") -> FleetConfig:
    secrets = set(secret_keys)
    try:
        fleet, problems = shape(raw, secrets)
    except ConfigError as e:
        raise ConfigError(e.problems, source) from None
    if problems:
        raise ConfigError(problems, source)
    named = top_level_keys(raw)[4:]      # after fleet, hfToken, ngcApiKey, imagePullSecret: the kubeconfig keys
    cfg = FleetConfig(fleet=fleet, hf_token=_text(raw.get("hfToken")), ngc_api_key=_text(raw.get("ngcApiKey")),
                      image_pull_secret=_text(raw.get("imagePullSecret")),
                      kubeconfig_keys={k: str(raw[k]) for k in named if k in raw})
    cfg.members, problems = members.load_members(cfg)
    if not problems:
        cfg.fits, problems = fit.check(cfg)
    if problems:
        raise ConfigError(problems, source)
    return cfg


def _text(value: Any) -> str | None:
    return None if value is None else str(value)
