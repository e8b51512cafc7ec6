"""Config errors: one message listing every problem, each with its key path and the fix.

Everything a message repeats from a stack file is hostile text (issue 48): `printable` escapes control and format
characters (a newline would forge another problem line, an escape sequence would drive the terminal, U+202E would
reverse what follows), hides the userinfo of a URL or an image reference (`user:pass@registry/...`), and cuts the
text to a bounded length. Problem and ConfigError apply it to every path and message they render.
"""
from __future__ import annotations

import re
import unicodedata
from collections.abc import Iterable
from dataclasses import dataclass

PATH_CHARS = 200          # a key path as shown (a real one is < 80)
MESSAGE_CHARS = 4000      # one problem's message as shown (the longest real ones, with their fix, are ~800)
SHOWN_PROBLEMS = 50       # problems listed in one error; the rest are counted

# `scheme://user:pass@host` and `user:pass@registry/repo` (an image reference with registry credentials): the part
# before '@' is hidden. A digest reference (`repo@sha256:...`) has its '@' after the last '/' and is left alone.
_USERINFO = re.compile(r"(?P<pre>(?:[A-Za-z][A-Za-z0-9+.-]*://)|(?:^|(?<=[\s'\"(=,]))(?=[^\s'\"/@]*:[^\s'\"/@]*@))"
                       r"[^\s'\"/@]+@")


def _escape(ch: str) -> str:
    if ch == "\n":
        return "\\n"
    if ch == "\t":
        return "\\t"
    if ch == "\r":
        return "\\r"
    code = ord(ch)
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}" if code < 0x10000 else f"\\U{code:08x}"


def hide_userinfo(text: str) -> str:
    """`user:pass@host` parts (URLs, image references) replaced by `[credentials hidden]@`."""
    if "@" not in text:
        return text
    return _USERINFO.sub(lambda m: (m.group("pre") or "") + "[credentials hidden]@", text)


def printable(text: str, limit: int = MESSAGE_CHARS) -> str:
    """`text` safe to print: control/format characters escaped, credentials in URLs hidden, cut to `limit`."""
    text = str(text)
    total = len(text)
    if total > limit * 2:
        text = text[:limit * 2]
    if not text.isprintable():
        text = "".join(_escape(ch) if not ch.isprintable() and (ch != " ") and
                       unicodedata.category(ch)[0] in "CZ" else ch for ch in text)
    text = hide_userinfo(text)
    if len(text) > limit or total > len(text):
        text = text[:limit - 40] + f"... [{total - limit + 40} more characters not shown]"
    return text


@dataclass(frozen=True)
class Problem:
    path: str      # key path as the user wrote it, e.g. "workloads[0].tensorParallel"
    message: str   # states the bad value and the fix

    def __str__(self) -> str:
        message = printable(self.message)
        return f"{printable(self.path, PATH_CHARS)}: {message}" if self.path else message


class ConfigError(Exception):
    """Raised before any resource is registered; str() is the whole user-facing message."""

    def __init__(self, problems: Iterable[Problem], source: str = "stack config"):
        self.problems: list[Problem] = list(problems)
        self.source = source
        super().__init__(self.render())

    def head(self) -> str:
        n = len(self.problems)
        return f"{printable(self.source, PATH_CHARS)}: {n} problem{'s' if n != 1 else ''}"

    def lines(self) -> list[str]:
        shown = [f"  - {p}" for p in self.problems[:SHOWN_PROBLEMS]]
        if len(self.problems) > SHOWN_PROBLEMS:
            shown.append(f"  ... and {len(self.problems) - SHOWN_PROBLEMS} more problems not shown (fix these first)")
        return shown

    def render(self) -> str:
        return "\n".join([self.head() + " (keys under the `multinode:` namespace)"] + self.lines())

    def __str__(self) -> str:
        return self.render()
