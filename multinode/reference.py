"""The config reference: every key of the stack file's models, generated from them.

    multinode reference                 print docs/config-reference.md (make reference writes it)
    multinode explain <key>             one key's entry, e.g. `multinode explain nodePools[].diskSizeGb`

The shape of each key (type, default, allowed values, limits) is read from the pydantic models of
multinode/config.py, its meaning from multinode/config_docs.py (the same text the package schema carries); the
cloud a key applies to is the one its meaning names (`aws, oci: ...`), every cloud otherwise. The example is the
key's value in the first example stack (stacks/, then the guide stacks of tests/guides/) that sets it,
else one made from the key's shape.
tests/test_reference.py fails when docs/config-reference.md is not what `multinode reference`
prints. Keys are written as a stack file nests them under `multinode:` (`nodePools[].machine`: the `machine` key of
every entry of the `multinode:nodePools` list; `addons.kyverno.version`).
"""
from __future__ import annotations

import argparse
import difflib
import json
import re
import sys
import types
import typing
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal, get_args, get_origin

from pydantic import BaseModel
from pydantic_core import PydanticUndefined

from . import config, config_docs

ROOT = Path(__file__).resolve().parent.parent
CLOUDS = ("aws", "azure", "gcp", "oci", "existing")
_CLOUD_PREFIX = re.compile(r"\b((?:aws|azure|gcp|oci|existing)(?:(?:, | and | or |/)(?:aws|azure|gcp|oci|existing))*)"
                           r"(?: \([^)]*\))?:")


@dataclass(frozen=True)
class Entry:
    key: str             # nodePools[].machine
    model: str           # NodePool
    field: str           # machine (the camelCase key)
    type: str
    required: bool
    default: str
    allowed: tuple[str, ...]
    limits: str
    clouds: str
    secret: bool
    meaning: str
    example: str
    example_source: str


def _strip_none(t: Any) -> Any:
    if get_origin(t) in (typing.Union, types.UnionType):
        rest = [a for a in get_args(t) if a is not type(None)]
        return rest[0] if len(rest) == 1 else typing.Union[tuple(rest)]      # noqa: UP007 - a runtime Union
    return t


def _type_text(t: Any) -> str:
    t = _strip_none(t)
    origin = get_origin(t)
    if origin is Literal:
        return "string (one of the allowed values)" if all(isinstance(v, str) for v in get_args(t)) else "enum"
    if origin is list:
        return f"list of {_type_text(get_args(t)[0])}"
    if origin is dict:
        k, v = get_args(t)
        return f"map of {_type_text(k)} to {_type_text(v)}"
    if origin in (typing.Union, types.UnionType):
        return " or ".join(_type_text(a) for a in get_args(t))
    if isinstance(t, type) and issubclass(t, BaseModel):
        return f"object ({t.__name__})"
    return {str: "string", int: "integer", float: "number", bool: "boolean"}.get(t, "any" if t is Any else str(t))


def _allowed(t: Any) -> tuple[str, ...]:
    t = _strip_none(t)
    if get_origin(t) is Literal:
        return tuple(str(v) for v in get_args(t))
    if get_origin(t) in (list, dict):
        return _allowed(get_args(t)[-1])
    return ()


def _limits(field: Any) -> str:
    out = []
    for m in field.metadata:
        for attr, text in (("ge", ">= {}"), ("gt", "> {}"), ("le", "<= {}"), ("lt", "< {}"),
                           ("min_length", "at least {} item(s)"), ("max_length", "at most {} item(s)")):
            v = getattr(m, attr, None)
            if v is not None:
                out.append(text.format(v))
    return ", ".join(out)


def _default(field: Any) -> tuple[bool, str]:
    if field.default is PydanticUndefined and field.default_factory is None:
        return True, ""
    value = field.default_factory() if field.default_factory is not None else field.default
    if isinstance(value, BaseModel):
        return False, "its keys' defaults"
    if value is None:
        return False, "none (unset)"
    return False, json.dumps(value, default=str)


def _clouds(meaning: str) -> str:
    found: list[str] = []
    for m in _CLOUD_PREFIX.finditer(meaning):
        for c in re.split(r", | and | or |/", m.group(1)):
            if c not in found:
                found.append(c)
    return ", ".join(c for c in CLOUDS if c in found) if found else "all"


def _sub_models(t: Any) -> list[tuple[str, type[BaseModel]]]:
    """(key suffix, model) for a field whose values are (lists or maps of) models."""
    t = _strip_none(t)
    if isinstance(t, type) and issubclass(t, BaseModel):
        return [("", t)]
    if get_origin(t) is list:
        return [("[]", m) for _, m in _sub_models(get_args(t)[0])]
    if get_origin(t) is dict:
        return [(".<name>", m) for _, m in _sub_models(get_args(t)[1])]
    if get_origin(t) in (typing.Union, types.UnionType):
        return [s for a in get_args(t) for s in _sub_models(a)]
    return []


def _walk(model: type[BaseModel], prefix: str, seen: tuple[type[BaseModel], ...]) -> typing.Iterator[
        tuple[str, type[BaseModel], str, Any]]:
    for name, field in model.model_fields.items():
        key = field.alias or name
        path = f"{prefix}{key}"
        yield path, model, key, field
        for suffix, sub in _sub_models(field.annotation):
            if sub not in seen:
                yield from _walk(sub, f"{path}{suffix}.", (*seen, sub))


def _example_stacks() -> list[tuple[str, dict[str, Any]]]:
    import yaml
    out = []
    files = [*sorted((ROOT / "stacks").glob("Pulumi.*.yaml")),
             *sorted((ROOT / "tests" / "guides").glob("Pulumi.*.yaml"))]
    for p in files:
        try:
            doc = yaml.safe_load(p.read_text(encoding="utf-8")) or {}
        except yaml.YAMLError:
            continue
        conf = doc.get("config") if isinstance(doc, dict) else None
        if isinstance(conf, dict) and "multinode:fleet" not in conf:
            raw = {k.split(":", 1)[1]: v for k, v in conf.items() if isinstance(k, str) and k.startswith("multinode:")}
            out.append((str(p.relative_to(ROOT)), raw))
    return out


def _values_at(node: Any, parts: list[str]) -> typing.Iterator[Any]:
    if not parts:
        yield node
        return
    head, rest = parts[0], parts[1:]
    if head.endswith("[]"):
        items = node.get(head[:-2]) if isinstance(node, dict) else None
        for item in items if isinstance(items, list) else []:
            yield from _values_at(item, rest)
    elif head == "<name>":
        for item in node.values() if isinstance(node, dict) else []:
            yield from _values_at(item, rest)
    elif isinstance(node, dict) and head in node:
        yield from _values_at(node[head], rest)


def _split(key: str) -> list[str]:
    return [p for p in re.split(r"\.(?![^<]*>)", key) if p]


def _flow(value: Any) -> str:
    text = json.dumps(value, default=str, ensure_ascii=False)
    return text if len(text) <= 160 else text[:157] + "..."


def _made_example(entry_type: str, allowed: tuple[str, ...], default: str, key: str) -> str:
    if allowed:
        return json.dumps(allowed[0])
    if default and default not in ("none (unset)", "its keys' defaults"):
        return default
    if entry_type.startswith("integer"):
        return "1"
    if entry_type.startswith("boolean"):
        return "true"
    if entry_type.startswith("list"):
        return "[]"
    if entry_type.startswith(("map", "object")):
        return "{}"
    return json.dumps(f"<{key.rsplit('.', 1)[-1]}>")


def entries() -> list[Entry]:
    stacks = _example_stacks()
    secrets = set(config.SECRET_KEYS) if hasattr(config, "SECRET_KEYS") else set()
    out = []
    for path, model, key, field in _walk(config.StackConfig, "", (config.StackConfig,)):
        meaning = next((config_docs.FIELDS[f"{m.__name__}.{key}"] for m in model.__mro__
                        if f"{getattr(m, '__name__', '')}.{key}" in config_docs.FIELDS), "")
        required, default = _default(field)
        allowed = _allowed(field.annotation)
        ty = _type_text(field.annotation)
        secret = key in secrets or meaning.startswith("Secret")
        example, source = "", ""
        if secret:
            example, source = f"pulumi config set --secret multinode:{path} <value>", "(a secret: set it encrypted)"
        else:
            for name, raw in stacks:
                found = [v for v in _values_at(raw, _split(path)) if v is not None]
                if found:
                    example, source = _flow(found[0]), name
                    break
        if not example:
            example, source = _made_example(ty, allowed, default, path), "(made from the key's shape)"
        out.append(Entry(path, model.__name__, key, ty, required, default, allowed, _limits(field),
                         _clouds(meaning), secret, meaning, example, source))
    return out


def entry_text(e: Entry, heading: str = "###") -> str:
    lines = [f"{heading} `{e.key}`", ""]
    if e.meaning:
        lines += [e.meaning, ""]
    lines.append(f"- type: {e.type}")
    lines.append("- required" if e.required else f"- default: `{e.default}`")
    if e.allowed:
        lines.append("- allowed: " + ", ".join(f"`{v}`" for v in e.allowed))
    if e.limits:
        lines.append(f"- limits: {e.limits}")
    lines.append(f"- clouds: {e.clouds}")
    lines.append(f"- example: `{e.example}` {e.example_source}")
    lines.append(f"- model: `{e.model}.{e.field}` (multinode/config.py)")
    return "\n".join(lines) + "\n"


def markdown() -> str:
    es = entries()
    head = ["# Config reference", "",
            "GENERATED by `multinode reference` (`make reference`) from the config models (multinode/config.py) and",
            "what each key means (multinode/config_docs.py); do not edit: tests/test_reference.py compares this file",
            "with the command's output. One entry per key, as a stack file nests it under `multinode:`",
            "(`nodePools[].machine` is the `machine` key of each entry of `multinode:nodePools`). `multinode explain",
            "<key>` prints one entry. Limits are the ones the models enforce; the cloud modules and checks add",
            "cross-key rules (a zone in the cluster's region, parallel sizes against the machine...), reported by",
            "`multinode plan` with the key path.", "", f"{len(es)} keys.", ""]
    sections: dict[str, list[Entry]] = {}
    for e in es:
        sections.setdefault(e.key.split(".")[0].removesuffix("[]"), []).append(e)
    body = []
    for top, group in sections.items():
        body += [f"## {top}", ""]
        body += [entry_text(e) for e in group]
    return "\n".join(head + body).rstrip("\n") + "\n"


def lookup(key: str) -> Entry:
    """One key's entry; a KeyError naming the closest keys when there is none. `multinode:` prefixes, and list
    indexes (`nodePools[0].machine`) are accepted for the key as a stack file or an error message spells it."""
    norm = re.sub(r"\[\d+\]", "[]", key.strip().removeprefix("multinode:"))
    es = {e.key: e for e in entries()}
    if norm in es:
        return es[norm]
    lowered = {k.lower(): k for k in es}
    if norm.lower() in lowered:
        return es[lowered[norm.lower()]]
    # a key given without its list marks (nodePools.machine) or only its last part (diskSizeGb)
    bare = {k.replace("[]", ""): k for k in es}
    if norm in bare:
        return es[bare[norm]]
    tails = [k for k in es if k.rsplit(".", 1)[-1].lower() == norm.lower()]
    if len(tails) == 1:
        return es[tails[0]]
    close = tails or difflib.get_close_matches(norm, list(es), n=5, cutoff=0.6) or \
        difflib.get_close_matches(norm.rsplit(".", 1)[-1], [k.rsplit(".", 1)[-1] for k in es], n=5, cutoff=0.6)
    if close and close[0] not in es:          # close last parts: back to their full keys
        close = [k for k in es if k.rsplit(".", 1)[-1] in close][:5]
    hint = f"; did you mean {', '.join(close)}?" if close else "; `multinode reference` lists every key"
    raise KeyError(f"no config key {key!r}{hint}")


def main(argv: list[str] | None = None, prog: str = "multinode reference") -> int:
    if prog.endswith("explain"):
        ap = argparse.ArgumentParser(prog=prog, description="print one config key's reference entry")
        ap.add_argument("key", help="e.g. nodePools[].diskSizeGb, addons.kyverno.version, workloads[0].nodes")
        a = ap.parse_args(argv)
        try:
            print(entry_text(lookup(a.key), heading="#"), end="")
        except KeyError as e:
            print(f"error: {e.args[0]}", file=sys.stderr)
            return 2
        return 0
    ap = argparse.ArgumentParser(prog=prog, description="print the config reference (docs/config-reference.md)")
    ap.parse_args(argv)
    sys.stdout.write(markdown())
    return 0
