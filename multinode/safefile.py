"""Read a file plan is given or picks up by itself (the stack file, the policy config), as hostile input (issue 48).

* only a regular file (a symlink is followed to one): a directory, a FIFO, a socket or a device (/dev/zero,
  /dev/stdin) is refused before anything is read from it; it is opened non-blocking so that opening a FIFO with no
  writer cannot hang, and checked with fstat on the open descriptor (no race between the check and the read);
* at most `limit` bytes are read, whatever the size the file system reports (a file that grows while read, a
  /proc file that reports 0): one more byte than the limit means refused;
* decoded as UTF-8; a byte order mark of UTF-16/UTF-32 (what a Windows editor writes by "Unicode") is named
  (a UTF-8 BOM is left to the parser: YAML reads it as the stream's BOM, JSON refuses it, as Go's encoding/json).
Every refusal is a ConfigError naming the path and the fix (`plan` exits 2), never an OSError traceback.
"""
from __future__ import annotations

import codecs
import itertools
import json
import math
import os
import re
import stat
from pathlib import Path
from typing import Any

from . import limits
from .errors import ConfigError, Problem

_BOMS = ((codecs.BOM_UTF32_LE, "UTF-32 (little-endian)"), (codecs.BOM_UTF32_BE, "UTF-32 (big-endian)"),
         (codecs.BOM_UTF16_LE, "UTF-16 (little-endian)"), (codecs.BOM_UTF16_BE, "UTF-16 (big-endian)"))


def _kind(mode: int) -> str:
    for test, name in ((stat.S_ISDIR, "a directory"), (stat.S_ISFIFO, "a FIFO (named pipe)"),
                       (stat.S_ISSOCK, "a socket"), (stat.S_ISCHR, "a character device"),
                       (stat.S_ISBLK, "a block device")):
        if test(mode):
            return name
    return "not a regular file"


def _mib(n: int) -> str:
    return f"{n / (1024 * 1024):g} MiB"


def read_text(path: Path | str, what: str, limit: int, error: type[ConfigError] = ConfigError,
              fix: str = "give the path of a UTF-8 text file") -> str:
    """The text of `path` (UTF-8, BOM dropped), or `error` naming the path, what is wrong and the fix. `what` names
    the file in messages ("the stack file", "the policy config")."""
    src = str(path)

    def refuse(message: str) -> ConfigError:
        return error([Problem("", message)], src)

    try:
        fd = os.open(src, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0))
    except IsADirectoryError:
        raise refuse(f"{what} is a directory, not a file; {fix}") from None
    except FileNotFoundError:
        raise refuse(f"cannot read {what}: it does not exist; {fix}") from None
    except OSError as e:
        raise refuse(f"{what} cannot be opened ({e.strerror or type(e).__name__}); {fix}") from None
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise refuse(f"{what} is {_kind(st.st_mode)}, not a regular file; plan reads only regular files "
                         f"(never a pipe or a device, which could block or never end); {fix}")
        if st.st_size > limit:
            raise refuse(f"{what} is {_mib(st.st_size)}, over the {_mib(limit)} plan reads; {what} holds settings, "
                         f"not data: move large objects to their own files")
        chunks: list[bytes] = []
        got = 0
        while got <= limit:
            try:
                chunk = os.read(fd, min(1 << 20, limit + 1 - got))
            except BlockingIOError:     # not a regular file after all (cannot happen after S_ISREG): stop
                break
            if not chunk:
                break
            chunks.append(chunk)
            got += len(chunk)
        if got > limit:
            raise refuse(f"{what} grew past the {_mib(limit)} plan reads while it was read; {fix}")
    except OSError as e:
        raise refuse(f"{what} cannot be read ({e.strerror or type(e).__name__}); {fix}") from None
    finally:
        os.close(fd)
    return decode(b"".join(chunks), what, src, error)


def decode(data: bytes, what: str, src: str, error: type[ConfigError] = ConfigError) -> str:
    for bom, name in _BOMS:
        if data.startswith(bom):
            raise error([Problem("", f"{what} is {name} text (it starts with that byte order mark); plan and the "
                                     f"Pulumi CLI read UTF-8: save it as UTF-8 (in most editors: Save with "
                                     f"Encoding, UTF-8)")], src)
    # UTF-16 without a BOM decodes as "UTF-8" when the text is ASCII (every other byte NUL): no text file holds a
    # NUL, so one is refused as what it most likely is
    utf16 = len(data) >= 4 and (data[1:400:2].count(0) * 4 > len(data[1:400:2]) * 3
                                or data[0:400:2].count(0) * 4 > len(data[0:400:2]) * 3)
    guess = "; it looks like UTF-16 without a byte order mark (every other byte is zero)" if utf16 else ""
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as e:
        raise error([Problem("", f"{what} is not UTF-8 text (byte {e.start}: {e.reason}){guess}; save it as "
                                 f"UTF-8")], src) from None
    if "\x00" in text:
        raise error([Problem("", f"{what} is not UTF-8 text: it holds NUL bytes (byte {data.index(0)}){guess}; "
                                 f"save it as UTF-8")], src)
    return text


# ------------------------------------------------------------------ JSON, bounded
_JSON_TOKEN = re.compile(r'"[^"\\]*(?:\\.[^"\\]*)*"|[\[\]{}]', re.S)
_JSON_STRING = re.compile(r'"[^"\\]*(?:\\.[^"\\]*)*"', re.S)     # _JSON_TOKEN's string alternative
_BRACKET = re.compile(r"[\[\]{}]")
_DEPTH_STEP = {"[": 1, "{": 1, "]": -1, "}": -1}


def _max_depth(text: str) -> int:
    """The deepest nesting the _JSON_TOKEN scan of load_json reaches, in C passes over the text: the strings
    removed by the same pattern (a scan from the left that, where no string starts, steps one character on, as
    finditer does where neither alternative matches or a bracket does), the brackets left, their running sum.
    On plan's previous resources.json (6 MB at 4,096 nodes and 400 workloads) the Python loop over ~270,000
    tokens was most of reading it."""
    steps = map(_DEPTH_STEP.__getitem__, _BRACKET.findall(_JSON_STRING.sub("", text)))
    return max(itertools.accumulate(steps, initial=0))


class _Number(ValueError):
    pass


def _bounded_int(text: str) -> int:
    if len(text.lstrip("-")) > limits.NUMBER_CHARS:
        raise _Number(f"a number of {len(text)} digits; no setting takes a number that long")
    return int(text)


def _bounded_float(text: str) -> float:
    if len(text) > limits.NUMBER_CHARS:
        raise _Number(f"a number written with {len(text)} characters; write it shorter")
    value = float(text)
    if not math.isfinite(value):
        raise _Number(f"{text[:40]} is too large to be a finite number")
    return value


def _constant(text: str) -> Any:
    raise _Number(f"{text} is not JSON (Go's encoding/json, which the Pulumi CLI reads this file with, refuses "
                  f"NaN and Infinity)")


def load_json(text: str, what: str, src: str, error: type[ConfigError] = ConfigError) -> Any:
    """json.loads with the nesting and the length of numbers bounded (limits.MAX_DEPTH, NUMBER_CHARS): a deep file
    is refused before the parser recurses (RecursionError), a 5,000-digit number before int() refuses it
    (ValueError). Problems name the line."""
    depth = 0
    # the scan below finds the line of the first bracket too deep; a text that is nowhere too deep needs none
    for m in (_JSON_TOKEN.finditer(text) if _max_depth(text) > limits.MAX_DEPTH else ()):
        c = m.group()
        if c in "[{":
            depth += 1
            if depth > limits.MAX_DEPTH:
                line = text.count("\n", 0, m.start()) + 1
                raise error([Problem(f"line {line}", f"{what} nests deeper than {limits.MAX_DEPTH} levels; no "
                                                     f"setting needs that depth")], src)
        elif c in "]}":
            depth -= 1
    try:
        return json.loads(text, parse_int=_bounded_int, parse_float=_bounded_float, parse_constant=_constant)
    except _Number as e:
        raise error([Problem("", f"{what}: {e}")], src) from None
    except json.JSONDecodeError as e:
        raise error([Problem(f"line {e.lineno}", f"not JSON ({e.msg}); the Pulumi CLI reads {what} as JSON, so "
                                                 f"write it as JSON")], src) from None
    except (RecursionError, ValueError) as e:       # not expected after the checks above; still a config error
        raise error([Problem("", f"{what} cannot be read as JSON ({type(e).__name__}); write it as plain JSON")],
                    src) from None
