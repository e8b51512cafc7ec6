"""A strict YAML reader for stack files: plain JSON values only, read the way the Pulumi CLI reads them.

Why not `yaml.safe_load`: PyYAML implements YAML 1.1, the Pulumi CLI (Go) reads stack files with
gopkg.in/yaml.v2 (pulumi/pulumi sdk/go/common/encoding/marshal.go), and the two disagree on plain
scalars a user writes every day. In a nested value (a map or list under a config key) yaml.v2 reads
(sdk/go/common/resource/config/value.go unmarshals into interface{} and re-encodes it as JSON):

    form          PyYAML (1.1)     Pulumi CLI (yaml.v2)       YAML 1.2 core   here
    1:30          90               "1:30"                     "1:30"          refused: quote it
    017           15               15                         17              refused: write 17 or quote it
    0o17 / 0x1F   "0o17" / 31      15 / 31                    15 / 31         refused: write decimal
    1_000         1000             1000                       "1_000"         refused: write 1000
    yes/no/on/off True/False       true/false                 "yes"...        refused: true/false or quote
    y / n         "y" / "n"        true / false               "y" / "n"       refused: quote it
    2024-01-01    date             "2024-01-01"               "2024-01-01"    refused: quote it
    1e3           "1e3"            1000 (float)               1000.0          1000.0 (both read a float)
    .nan / .inf   nan / inf        json.Marshal fails         nan / inf       refused: not JSON
A top-level scalar (`multinode:key: value`) is always read as its raw text by the CLI (Value.unmarshalValue
tries a string first), so the same refusals keep `plan` and `pulumi up` reading one value.

Also refused, each as a config error with the key path and line: duplicate keys (YAML forbids them,
PyYAML keeps the last silently), explicit tags other than `!!str` (`!!binary`, `!!set`, `!!python/...`,
`!!timestamp`), merge keys (`<<`), nesting deeper than MAX_DEPTH, integers beyond +-2**53 (Pulumi sends
numbers as IEEE doubles: larger ones change value in transit), more than one document, files over
MAX_BYTES.

Aliases (`&a` / `*a`) are accepted, because the CLI reads them and PyYAML's own dumper writes them for
repeated values (tests/corpus was generated that way), but expanded within a bound: the size of every
anchored value is counted as it is parsed, each alias adds its size to the document's total, and the file
is refused once the total passes MAX_NODES -- before anything is copied. A "billion laughs" file (nine
levels of nine aliases, 10**9 values) is refused after reading a few hundred events, in milliseconds. An
alias inside its own anchor (`&a {x: *a}`), an alias used as a key and an alias to an undefined anchor
are refused. Each alias becomes a copy, as the CLI writes it on the next `pulumi config set`.

The reader walks PyYAML's event stream iteratively (no composer or constructor recursion), so deep
nesting is refused at MAX_DEPTH instead of ending in a RecursionError.
"""
from __future__ import annotations

import copy
import math
import re
from collections.abc import Callable
from typing import Any

import yaml
from yaml import events as ev

from . import limits
from .errors import ConfigError, Problem

# libyaml's event parser when PyYAML has it (the wheels do), ~10x faster on a long stack file than the
# pure-Python parser. Both are YAML 1.1 parsers and what is read from their events is decided here, not by a
# resolver. Measured differences over the stack files in stacks/, tests/ and examples/ and 840 random
# mutations of them: the wording of syntax errors (same line and column), and a tab inside a plain scalar
# (`name: lab-cl<TAB>uster`), which the pure-Python scanner refuses and libyaml -- like gopkg.in/yaml.v2, the
# Pulumi CLI's reader, a port of libyaml -- reads as part of the value (the key's own check then judges it).
_EVENTS = getattr(yaml, "CSafeLoader", yaml.SafeLoader)

MAX_DEPTH = limits.MAX_DEPTH             # Kubernetes objects in `manifests` nest ~15 deep; DeepSpeed configs ~5
MAX_BYTES = limits.STACK_FILE_BYTES      # the example stacks are ~2 KB; a stack with many manifests ~100 KB
MAX_NODES = 100_000           # values in the document once aliases are expanded (the examples hold ~100)
MAX_PROBLEMS = 30
MAX_SAFE_INT = 2 ** 53         # JSON numbers Pulumi carries exactly (protobuf Value is a double)

_STR_TAG = "tag:yaml.org,2002:str"
_ALLOWED_COLLECTION_TAGS = (None, "tag:yaml.org,2002:map", "tag:yaml.org,2002:seq")

_NULL = {"", "~", "null", "Null", "NULL"}
_TRUE = {"true", "True", "TRUE"}
_FALSE = {"false", "False", "FALSE"}
# yaml.v2's resolve table reads these as booleans; YAML 1.2 reads them as strings.
_YAML11_BOOL = {"y", "Y", "yes", "Yes", "YES", "n", "N", "no", "No", "NO",
                "on", "On", "ON", "off", "Off", "OFF"}
_INT = re.compile(r"^[-+]?(0|[1-9][0-9]*)\Z")
_FLOAT = re.compile(r"^[-+]?(\.[0-9]+|[0-9]+(\.[0-9]*)?)([eE][-+]?[0-9]+)?\Z")    # yaml.v2 yamlStyleFloat
_NONFINITE = re.compile(r"^[-+]?\.(inf|Inf|INF)\Z|^\.(nan|NaN|NAN)\Z")
_LEADING_ZERO = re.compile(r"^[-+]?0[0-9_]+\Z")
_PREFIXED = re.compile(r"^[-+]?0[xXoObB][0-9a-fA-F_]+\Z")
_UNDERSCORE_NUM = re.compile(r"^[-+]?[0-9][0-9_]*(\.[0-9_]*)?\Z")
_SEXAGESIMAL = re.compile(r"^[-+]?[0-9][0-9_]*(:[0-5]?[0-9])+(\.[0-9_]*)?\Z")
# YAML 1.1 timestamp (what both PyYAML and yaml.v2 try first on a plain scalar starting with a digit)
_TIMESTAMP = re.compile(r"^[0-9]{4}-[0-9]{1,2}-[0-9]{1,2}"
                        r"(([Tt]|[ \t]+)[0-9]{1,2}:[0-9]{2}:[0-9]{2}(\.[0-9]*)?"
                        r"([ \t]*(Z|[-+][0-9]{1,2}(:[0-9]{2})?))?)?\Z")


class _Refused(Exception):
    """A plain scalar with no single reading; carries the fix."""


def _quote_hint(text: str) -> str:
    return f"write it quoted (\"{text}\") if you mean the text" if len(text) <= 40 else "quote it if you mean the text"


def resolve_plain(text: str) -> Any:
    """The JSON value of an unquoted scalar, or _Refused when YAML 1.1, YAML 1.2 and the Pulumi CLI differ."""
    if text in _NULL:
        return None
    if text in _TRUE:
        return True
    if text in _FALSE:
        return False
    if text in _YAML11_BOOL:
        raise _Refused(f"YAML 1.1 and the Pulumi CLI read this as a boolean, YAML 1.2 as the text {text!r}; "
                       f"write true or false, or {_quote_hint(text)}")
    if _NONFINITE.match(text):
        raise _Refused("is not a finite number (JSON, Kubernetes and Pulumi have no NaN or infinity); "
                       "write a number, or " + _quote_hint(text))
    if _LEADING_ZERO.match(text):
        raise _Refused(f"a number with a leading zero is octal to YAML 1.1 and the Pulumi CLI, decimal to "
                       f"YAML 1.2; write it without the leading zero, or {_quote_hint(text)}")
    if _INT.match(text):
        # issue 48: int() of over 4,300 digits raises ValueError (Python's int_max_str_digits): the length first
        n = int(text) if len(text) <= limits.NUMBER_CHARS else MAX_SAFE_INT + 1
        if abs(n) > MAX_SAFE_INT:
            raise _Refused(f"an integer beyond +-2**53 changes value on its way through Pulumi (numbers travel "
                           f"as doubles); {_quote_hint(text)}")
        return n
    if _FLOAT.match(text):
        if len(text) > limits.NUMBER_CHARS:
            raise _Refused(f"a number written with {len(text)} characters; no setting needs that many digits: "
                           f"write it shorter, or {_quote_hint(text)}")
        f = float(text)
        if not math.isfinite(f):
            raise _Refused("is too large to be a finite number; write a smaller number or " + _quote_hint(text))
        return f
    if _TIMESTAMP.match(text):
        raise _Refused(f"an unquoted date/time is a timestamp to YAML 1.1 (not a JSON value); {_quote_hint(text)}")
    if _SEXAGESIMAL.match(text):
        raise _Refused(f"YAML 1.1 reads this as a base-60 number, YAML 1.2 and the Pulumi CLI as text; "
                       f"{_quote_hint(text)}")
    if _PREFIXED.match(text):
        raise _Refused(f"hex/octal/binary numbers are read differently by the Pulumi CLI for a top-level key "
                       f"and a nested one; write the number in decimal, or {_quote_hint(text)}")
    if _UNDERSCORE_NUM.match(text) and "_" in text:
        raise _Refused(f"YAML 1.1 and the Pulumi CLI drop the underscores, YAML 1.2 reads text; write the digits "
                       f"without underscores, or {_quote_hint(text)}")
    return text


def _fmt_path(parts: list[Any]) -> str:
    out = ""
    for p in parts:
        if isinstance(p, int):
            out += f"[{p}]"
        else:
            out += ("." if out else "") + str(p)
    return out


class _Frame:
    __slots__ = ("kind", "value", "key", "seen", "anchor", "size", "depth")

    def __init__(self, kind: str, anchor: str | None):
        self.kind = kind                      # "map" | "seq"
        self.value: Any = {} if kind == "map" else []
        self.key: Any = _NO_KEY               # map: the pending key
        self.seen: dict = {}                  # map: key -> line of first occurrence
        self.anchor = anchor
        self.size = 1                         # nodes in this value once every alias is expanded
        self.depth = 0                        # levels below this one


_NO_KEY = object()      # a map waiting for its next key
_BAD_KEY = object()     # a refused key: its value is read and dropped
_IN_KEY = object()      # a map whose key is a (refused) collection being read


def load(text: str, source: str = "stack file",
         secret_path: Callable[[list[str]], bool] | None = None) -> Any:
    """Parse one YAML document into plain JSON values (dict, list, str, int, float, bool, None).

    Raises ConfigError listing every refused construct with its key path and line. `secret_path(parts)`
    says whether a path holds a credential: refusals there never repeat the value."""
    if len(text.encode("utf-8", "surrogatepass")) > MAX_BYTES:
        raise ConfigError([Problem("", f"the stack file is over {MAX_BYTES // (1024 * 1024)} MiB; a stack file "
                                       f"holds settings, not data: move large objects to their own files")], source)
    problems: list[Problem] = []
    stack: list[_Frame] = []
    result: list[Any] = []
    docs = 0
    anchors: dict[str, tuple[Any, int, int]] = {}     # name -> (value, expanded size, depth)
    expanded = 0                                       # nodes in the document with aliases expanded

    def path_here(extra: Any = _NO_KEY) -> list[Any]:
        parts: list[Any] = []
        for f in stack:
            if f.kind == "seq":
                parts.append(len(f.value))
            elif f.key is not _NO_KEY:
                parts.append(f.key if isinstance(f.key, str) else "?")
        if extra is not _NO_KEY:
            parts.append(extra)
        return parts

    def display(parts: list[Any]) -> str:
        # paths read from the `config:` mapping drop the leading "config." (keys are what users type)
        if parts and parts[0] == "config" and len(parts) > 1:
            parts = parts[1:]
        text = _fmt_path(parts)
        return text if len(text) <= 120 else text[:60] + "..." + text[-40:]

    def refuse(parts: list[Any], line: int, message: str) -> None:
        if len(problems) < MAX_PROBLEMS:
            problems.append(Problem(display(parts), f"(line {line + 1}) {message}"))

    def is_secret(parts: list[Any]) -> bool:
        return bool(secret_path and secret_path([p for p in parts if isinstance(p, str)][1:]
                                                if parts and parts[0] == "config" else parts))

    def expecting_key() -> bool:
        return bool(stack) and stack[-1].kind == "map" and stack[-1].key is _NO_KEY

    def add(value: Any, size: int = 1, depth: int = 0) -> None:
        if not stack:
            result.append(value)
            return
        top = stack[-1]
        top.size += size
        top.depth = max(top.depth, depth + 1)
        if top.kind == "seq":
            top.value.append(value)
        else:
            if top.key is not _BAD_KEY:
                top.value[top.key] = value
            top.key = _NO_KEY

    def add_key(node: ev.ScalarEvent, line: int) -> None:
        top = stack[-1]
        key: Any = node.value
        plain = node.style in (None, "") and node.implicit[0]
        if node.tag not in (None, "!", _STR_TAG) and not (plain and node.tag is None):
            refuse(path_here(node.value), line, f"explicit YAML tag {node.tag} on a key; write a plain key")
            key = _BAD_KEY
        elif plain and node.value == "<<":
            refuse(path_here(), line, "YAML merge keys (<<) are not accepted in a stack file (the YAML 1.2 "
                                      "core schema has none); write the keys out")
            key = _BAD_KEY
        elif plain:
            try:
                resolved = resolve_plain(node.value)
            except _Refused as e:
                refuse(path_here(node.value), line, f"key {node.value!r}: {e}")
                resolved = _BAD_KEY
            if resolved is None:
                refuse(path_here("~"), line, "a null key; give the key a name")
                key = _BAD_KEY
            elif resolved is _BAD_KEY:
                key = _BAD_KEY
            elif not isinstance(resolved, str) and (isinstance(resolved, bool) or str(resolved) != node.value):
                # the CLI turns a non-string key into text with %v; keep keys whose text is the same everywhere
                refuse(path_here(node.value), line, f"key {node.value!r} is not read as the same text "
                                                    f"everywhere; quote the key")
                key = _BAD_KEY
        if key is not _BAD_KEY:
            if key in top.seen:
                refuse(path_here(key), line, f"duplicate key {key!r} (first at line {top.seen[key] + 1}); YAML "
                                             f"forbids it and only one of the two would be used: keep one")
                key = _BAD_KEY
            else:
                top.seen[key] = line
        top.key = key

    def scalar_value(e: ev.ScalarEvent, line: int) -> Any:
        parts = path_here()
        if any("\ud800" <= ch <= "\udfff" for ch in e.value):
            # "\ud800" in a double-quoted scalar: a lone UTF-16 surrogate is no Unicode text, cannot be sent
            # as UTF-8 (Pulumi's serialization fails on it)
            refuse(parts, line, "holds a lone UTF-16 surrogate escape (\\ud800-\\udfff), which is not text; "
                                "write the character itself or remove the escape")
            return None
        plain = e.style in (None, "") and e.implicit[0]
        if e.tag not in (None, "!", _STR_TAG) and not (plain and e.tag is None):
            refuse(parts, line, f"explicit YAML tag {e.tag} is not accepted in a stack file (only plain JSON "
                                f"values: text, numbers, true/false, null, lists, maps); "
                                f"{'remove the tag' if is_secret(parts) else _quote_hint(e.value)}")
            return None
        if not plain:
            return e.value
        try:
            return resolve_plain(e.value)
        except _Refused as r:
            if is_secret(parts):      # a credential: say what to do, never what was written
                refuse(parts, line, "[secret]: this unquoted value is not read the same way by YAML 1.1, YAML 1.2 "
                                    "and the Pulumi CLI; quote it, or better store it with "
                                    "`pulumi config set --secret`")
            else:
                refuse(parts, line, f"{repr(e.value) if len(e.value) <= 40 else 'the value'}: {r}")
            return None

    try:
        for e in yaml.parse(text, Loader=_EVENTS):
            line = e.start_mark.line if e.start_mark else 0
            if isinstance(e, ev.DocumentStartEvent):
                docs += 1
                if docs > 1:
                    refuse([], line, "more than one YAML document (---); a stack file is one mapping")
                    break
                continue
            if isinstance(e, (ev.StreamStartEvent, ev.StreamEndEvent, ev.DocumentEndEvent)):
                continue
            if isinstance(e, ev.AliasEvent):
                if expecting_key():
                    refuse(path_here(), line, f"an alias (*{e.anchor}) used as a key; write the key out")
                    stack[-1].key = _BAD_KEY
                    continue
                if any(f.anchor == e.anchor for f in stack):
                    refuse(path_here(), line, f"the alias *{e.anchor} sits inside its own anchor &{e.anchor} "
                                              f"(a value that contains itself); write the value out")
                    add(None)
                    continue
                if e.anchor not in anchors:
                    refuse(path_here(), line, f"alias *{e.anchor} names no anchor defined before it")
                    add(None)
                    continue
                value, size, depth = anchors[e.anchor]
                expanded += size
                if expanded > MAX_NODES:
                    refuse(path_here(), line, f"with its aliases expanded the file holds over {MAX_NODES} values "
                                              f"(an alias bomb?); write the values out instead of nesting aliases")
                    break
                if len(stack) + depth >= MAX_DEPTH:
                    refuse(path_here(), line, f"the alias *{e.anchor} nests the value deeper than {MAX_DEPTH} levels")
                    break
                # a copy: the Pulumi CLI writes every alias out as a copy too, and no later edit may change two keys
                add(copy.deepcopy(value), size, depth)
                continue
            if isinstance(e, ev.ScalarEvent):
                expanded += 1
                if expecting_key():
                    add_key(e, line)
                    continue
                value = scalar_value(e, line)
                if e.anchor:
                    anchors[e.anchor] = (value, 1, 0)
                add(value)
                continue
            if isinstance(e, (ev.MappingStartEvent, ev.SequenceStartEvent)):
                expanded += 1
                kind = "map" if isinstance(e, ev.MappingStartEvent) else "seq"
                if expecting_key():
                    refuse(path_here(), line, "a list or map used as a key; keys are plain text")
                    stack[-1].key = _IN_KEY       # read the key's body, then drop it
                if e.tag not in _ALLOWED_COLLECTION_TAGS:
                    refuse(path_here(), line, f"explicit YAML tag {e.tag} is not accepted in a stack file (only "
                                              f"plain JSON values); write a plain {kind}")
                if len(stack) >= MAX_DEPTH:
                    refuse(path_here(), line, f"nested deeper than {MAX_DEPTH} levels; a stack setting never "
                                              f"needs that depth")
                    break
                stack.append(_Frame(kind, e.anchor))
                continue
            if isinstance(e, (ev.MappingEndEvent, ev.SequenceEndEvent)):
                frame = stack.pop()
                if frame.anchor:
                    anchors[frame.anchor] = (frame.value, frame.size, frame.depth)
                if stack and stack[-1].kind == "map" and stack[-1].key is _IN_KEY:
                    stack[-1].key = _BAD_KEY      # that collection was a (refused) key: its value follows
                    continue
                add(frame.value, frame.size, frame.depth)
                continue
    except yaml.YAMLError as err:
        mark = getattr(err, "problem_mark", None)
        where = f" (line {mark.line + 1}, column {mark.column + 1})" if mark else ""
        problem = getattr(err, "problem", None) or str(err)
        raise ConfigError([Problem("", f"not valid YAML{where}: {problem}; fix the file's indentation or quoting")],
                          source) from None
    if problems:
        raise ConfigError(problems, source)
    return result[0] if result else None
