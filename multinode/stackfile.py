"""Read stack config from a stack file (offline `plan`) or from the Pulumi runtime (`pulumi up`).

Both paths produce the same thing: a mapping of `multinode` keys (prefix stripped) and the set of
keys that are secrets, which `config.load` validates.
"""
from __future__ import annotations

import copy
import difflib
import json
import os
from collections import OrderedDict
from pathlib import Path
from typing import Any

from . import credentials, limits, safefile, safeyaml
from .config import NAMESPACE, PROVIDER_NAMESPACES, SECRET_KEYS, SECRET_PLACEHOLDER
from .errors import ConfigError, Problem

ROOT = Path(__file__).resolve().parent.parent
# This repository's stack files, when the package runs from its checkout (an editable install: Pulumi.yaml and
# stacks/ beside the package); None when it runs installed from the wheel (site-packages has neither).
STACKS_DIR: Path | None = ROOT / "stacks" if (ROOT / "Pulumi.yaml").is_file() and (ROOT / "stacks").is_dir() else None


def project_stacks_dir(project: Path | None = None) -> Path:
    """Where the stack files of the Pulumi project in `project` (default: the working folder, where the Pulumi
    CLI starts the program) live: Pulumi.yaml's `stackConfigDir` when it names one, else the project folder
    (https://www.pulumi.com/docs/iac/concepts/projects/project-file/: stackConfigDir)."""
    folder = Path.cwd() if project is None else project
    try:
        doc = safeyaml.load(safefile.read_text(folder / "Pulumi.yaml", "the project file", limits.STACK_FILE_BYTES),
                            str(folder / "Pulumi.yaml"))
    except (ConfigError, OSError):
        return folder
    sub = doc.get("stackConfigDir") if isinstance(doc, dict) else None
    return folder / sub if isinstance(sub, str) and sub else folder


def stacks_dir() -> Path:
    """The folder `plan <stack>` and the program look in: this repository's stacks/ in its checkout, else the
    stack folder of the Pulumi project in the working folder (a project `multinode new` wrote)."""
    return STACKS_DIR if STACKS_DIR is not None else project_stacks_dir()


# Every top-level key of a stack settings file `Pulumi.<stack>.yaml`, per Pulumi's "Stack settings file
# reference" (https://www.pulumi.com/docs/iac/concepts/projects/stack-settings-file/) and the Automation
# API's StackSettings (secretsProvider, encryptedKey, encryptionSalt, config) plus `environment` (ESC).
# Only `config` carries multinode settings; the others belong to the Pulumi CLI (secrets encryption, ESC
# environments) and are accepted and ignored, so the stack files `pulumi stack init` writes plan as is.
STACK_FILE_KEYS = (
    "config",
    "secretsprovider",   # `pulumi stack init --secrets-provider ...` (awskms://, azurekeyvault://, gcpkms://, ...)
    "encryptedkey",      # the data key encrypted by a cloud KMS secrets provider
    "encryptionsalt",    # passphrase secrets provider: the salt `pulumi stack init` writes
    "environment",       # Pulumi ESC environment(s) imported into the stack's config
)


def _unknown_top_level_key(key: str) -> Problem:
    close = difflib.get_close_matches(key, STACK_FILE_KEYS, n=1, cutoff=0.6)
    hint = f"did you mean {close[0]!r}? " if close else ""
    return Problem(key, f"unknown top-level key in a stack file; {hint}a stack file holds "
                        f"{', '.join(STACK_FILE_KEYS)}; multinode settings go under `config:` as "
                        f"`{NAMESPACE}:<key>`")


def stack_path(stack: str) -> Path:
    return stacks_dir() / f"Pulumi.{stack}.yaml"


def list_stacks() -> list[str]:
    return sorted(p.name[len("Pulumi."):-len(".yaml")] for p in stacks_dir().glob("Pulumi.*.yaml"))


def _strip_secure(value: Any) -> tuple[Any, bool]:
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


def _is_credential_path(parts: list[str]) -> bool:
    """Whether a key path in `config:` holds a credential (the YAML reader then never repeats its value)."""
    if not parts:
        return False
    ns, _, key = parts[0].rpartition(":")
    return ((ns in ("", NAMESPACE) and key in SECRET_KEYS) or key in credentials.PROVIDER_CREDENTIALS.get(ns, ())
            or any(credentials.looks_secret(p) for p in parts))


# (path, text) -> what read_stack_file returned for it, for the last few files: `plan` reads the stack file and
# the program it runs reads the same file again for its key names (read_pulumi_config); the strict YAML
# reader is pure Python (~1.5 ms per workload entry). Keyed by the whole text, so an edited file is read
# again; callers get copies.
_READ: OrderedDict[tuple[str, str], tuple[dict[str, Any], set[str], dict[str, str]]] = OrderedDict()
_READ_KEEP = 4


def read_stack_file(path: Path) -> tuple[dict[str, Any], set[str], dict[str, str]]:
    """(multinode keys -> value, secret keys, all config as Pulumi passes it: key -> string)."""
    src = str(path)
    if not os.path.lexists(path):
        known = ", ".join(list_stacks()) or "none"
        raise ConfigError([Problem("", f"no stack file {path}; known stacks: {known}")], src)
    # a regular file, size-checked before it is read, UTF-8 (issue 48: a FIFO, a folder, /dev/zero, UTF-16)
    text = safefile.read_text(path, "the stack file", limits.STACK_FILE_BYTES,
                              fix="give --file the path of a Pulumi.<stack>.yaml stack file (UTF-8 YAML)")
    key = (src, text)
    if key not in _READ:
        _READ[key] = _read_stack_text(text, src)
        while len(_READ) > _READ_KEEP:
            _READ.popitem(last=False)
    raw, secrets, wire = _READ[key]
    return copy.deepcopy(raw), set(secrets), dict(wire)


def _read_stack_text(text: str, src: str) -> tuple[dict[str, Any], set[str], dict[str, str]]:
    # strict reader: refuses YAML that PyYAML and the Pulumi CLI read differently (multinode/safeyaml.py)
    doc = safeyaml.load(text, src, _is_credential_path) or {}
    if not isinstance(doc, dict):
        raise ConfigError([Problem("", "a stack file is a mapping with a `config:` key")], src)
    problems = [_unknown_top_level_key(str(k)) for k in doc if k not in STACK_FILE_KEYS]
    config = doc.get("config") or {}
    if not isinstance(config, dict):
        problems.append(Problem("config", "must be a mapping of `multinode:<key>: value`"))
        config = {}
    raw: dict[str, Any] = {}
    secrets: set[str] = set()
    wire: dict[str, str] = {}
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


# Set by `recording.run_program` while it runs the program under mocks: the stack file `plan` read (or
# None), so the program never picks up a different file of the same stack name from stacks/.
_PROGRAM_STACK_FILE: list[Path | None] = []


def program_stack_file(stack: str) -> Path | None:
    """The stack file whose key names the program checks: under `plan`, the file plan validated; under the
    Pulumi CLI, `stacks/Pulumi.<stack>.yaml` (Pulumi.yaml's stackConfigDir) when it exists."""
    if _PROGRAM_STACK_FILE:
        return _PROGRAM_STACK_FILE[-1]
    path = stack_path(stack)
    return path if path.exists() else None


def under_plan() -> bool:
    """True while `plan` runs the program under its mocks (recording.run_program): plan lists the advisories itself,
    once, with their ids (multinode/advisories.py), so the program does not log them a second time."""
    return bool(_PROGRAM_STACK_FILE)


def read_pulumi_config(stack_file: Path | None = None) -> tuple[dict[str, Any], set[str]]:
    """The `multinode` keys the Pulumi engine passed to this program, and which are secret.

    Values come through the public `pulumi.Config` API (which also sees what `pulumi.runtime.set_all_config`
    sets under mocks). That API can look keys up but not list them, so the names looked up are every key
    the schema knows plus every key of the stack file (`stack_file`, checked like `plan` checks it): a
    typo there reaches `config.load` and is refused with a did-you-mean. Keys that only an ESC
    `environment:` supplies are read when the schema knows them; a misspelt one there cannot be seen.
    A key is secret when the stack file stores it `secure:` or the engine passed it as a secret: the
    Python language host passes config and secret key names in PULUMI_CONFIG / PULUMI_CONFIG_SECRET_KEYS
    (read by `pulumi.Config` and `pulumi.runtime.get_config_secret_keys_env`), mocks and providers through
    `set_all_config` (`pulumi.runtime.is_config_secret`).
    """
    import pulumi  # imported here: the pure core does not need Pulumi

    from .config import top_level_keys

    conf = pulumi.Config(NAMESPACE)
    file_keys: set[str] = set()
    file_secrets: set[str] = set()
    if stack_file is not None:
        file_raw, file_secrets, _ = read_stack_file(stack_file)
        file_keys = set(file_raw)
    engine_secrets = set(pulumi.runtime.get_config_secret_keys_env())
    raw: dict[str, Any] = {}
    secrets: set[str] = set()
    for key in sorted(set(top_level_keys()) | file_keys):
        value = conf.get(key)          # structured values arrive as JSON text; config.load parses them
        if value is None:
            continue
        raw[key] = value
        full_key = conf.full_key(key)
        if key in file_secrets or full_key in engine_secrets or pulumi.runtime.is_config_secret(full_key):
            secrets.add(key)
    return raw, secrets
