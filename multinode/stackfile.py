"""Read stack config from a stack file (offline `plan`) or from the Pulumi runtime (`pulumi up`).

Both paths produce the same thing: a mapping of `multinode` keys (prefix stripped) and the set of
keys that are secrets, which `config.load` validates.
"""
from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Dict, List, Set, Tuple

from . import credentials, safeyaml
from .config import NAMESPACE, PROVIDER_NAMESPACES, SECRET_KEYS, SECRET_PLACEHOLDER
from .errors import ConfigError, Problem

ROOT = Path(__file__).resolve().parent.parent
STACKS_DIR = ROOT / "stacks"


def stack_path(stack: str) -> Path:
    return STACKS_DIR / f"Pulumi.{stack}.yaml"


def list_stacks() -> List[str]:
    return sorted(p.name[len("Pulumi."):-len(".yaml")] for p in STACKS_DIR.glob("Pulumi.*.yaml"))


def _strip_secure(value: Any) -> Tuple[Any, bool]:
    """Replace `{secure: ...}` leaves with a placeholder; report whether any was found."""
    if isinstance(value, dict):
        # as the Pulumi CLI reads it (config/value.go isSecureValue): {secure: <text>} only; {secure: {...}} or
        # {secure: 5} is a plain object, and a secret key given one is refused as plain text
        if set(value) == {"secure"} and isinstance(value["secure"], str):
            return SECRET_PLACEHOLDER, True
        found = False
        out = {}
        for k, v in value.items():
            out[k], f = _strip_secure(v)
            found |= f
        return out, found
    if isinstance(value, list):
        items = [_strip_secure(v) for v in value]
        return [v for v, _ in items], any(f for _, f in items)
    return value, False


def _is_credential_path(parts: List[str]) -> bool:
    """Whether a key path in `config:` holds a credential (the YAML reader then never repeats its value)."""
    if not parts:
        return False
    ns, _, key = parts[0].rpartition(":")
    return ((ns in ("", NAMESPACE) and key in SECRET_KEYS) or key in credentials.PROVIDER_CREDENTIALS.get(ns, ())
            or any(credentials.looks_secret(p) for p in parts))


def read_stack_file(path: Path) -> Tuple[Dict[str, Any], Set[str], Dict[str, str]]:
    """(multinode keys -> value, secret keys, all config as Pulumi passes it: key -> string)."""
    src = str(path)
    if not path.exists():
        known = ", ".join(list_stacks()) or "none"
        raise ConfigError([Problem("", f"no stack file {path}; known stacks: {known}")], src)
    try:
        # strict reader: refuses YAML that PyYAML and the Pulumi CLI read differently (multinode/safeyaml.py)
        doc = safeyaml.load(path.read_text(encoding="utf-8"), src, _is_credential_path) or {}
    except UnicodeDecodeError as e:
        raise ConfigError([Problem("", f"not UTF-8 text ({e.reason} at byte {e.start}); save the file as UTF-8")],
                          src) from None
    if not isinstance(doc, dict):
        raise ConfigError([Problem("", "a stack file is a mapping with a `config:` key")], src)
    extra = sorted(set(doc) - {"config", "secretsprovider", "encryptedkey", "environment"})
    problems = [Problem(k, "unknown top-level key in a stack file; put settings under `config:`") for k in extra]
    config = doc.get("config") or {}
    if not isinstance(config, dict):
        problems.append(Problem("config", "must be a mapping of `multinode:<key>: value`"))
        config = {}
    raw: Dict[str, Any] = {}
    secrets: Set[str] = set()
    wire: Dict[str, str] = {}
    for full_key, value in config.items():
        ns, _, key = str(full_key).rpartition(":")
        ns = ns or NAMESPACE
        value, secret = _strip_secure(value)
        if ns != NAMESPACE and not secret and credentials.provider_credential(ns, key, value):
            problems.append(Problem(str(full_key), credentials.plain_provider_credential_message(str(full_key), ns)))
        wire[f"{ns}:{key}"] = value if isinstance(value, str) else json.dumps(value)
        if ns == NAMESPACE:
            raw[key] = value
            if secret:
                secrets.add(key)
        elif ns not in PROVIDER_NAMESPACES:
            problems.append(Problem(str(full_key), f"unknown config namespace {ns!r}; use `{NAMESPACE}:{key}`"))
    if problems:
        raise ConfigError(problems, src)
    return raw, secrets, wire


def read_pulumi_runtime() -> Tuple[Dict[str, Any], Set[str]]:
    """The `multinode` keys the Pulumi engine passed to this program, and which are secret."""
    from pulumi.runtime import config as rc  # imported here: the pure core does not need Pulumi

    raw: Dict[str, Any] = {}
    secrets: Set[str] = set()
    prefix = NAMESPACE + ":"
    merged = dict(rc.get_config_env())
    merged.update(rc.CONFIG.get())
    secret_keys = set(rc.get_config_secret_keys_env())
    for full_key, value in merged.items():
        if full_key.startswith(prefix):
            key = full_key[len(prefix):]
            raw[key] = value
            if rc.is_config_secret(full_key) or full_key in secret_keys:
                secrets.add(key)
    return raw, secrets
