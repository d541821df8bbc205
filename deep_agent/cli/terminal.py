"""Free-form user data as the CLI shows it: cut to a size a terminal can take.

An agent file's ``metadata`` holds whatever the file wrote, and YAML aliases
let a small file repeat one long string or list thousands of times: printed
in full, one file could fill the screen with megabytes. :func:`preview`
returns a JSON-ready copy with long strings, lists and mappings cut, each
cut said in place, and at most :data:`MAX_VALUES` values in all.

Example::

    preview({"notes": "x" * 10_000})   # {'notes': 'xxx...x... [9800 more characters]'}
    preview(list(range(10**6)))        # [0, 1, ..., 49, '... [999950 more items]']
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Callable, Mapping
from typing import Any

# ----------------------------------------------------------------------------
# Text from agent files made safe to print on a terminal.
#
# A file name, a field value or an error message that quotes one can hold
# control characters: an escape sequence would clear the screen, move the
# cursor over an error line or retitle the window; a newline would forge a
# line of output (``ok   other.md``); a bidirectional override or an RTL mark
# would show text in another order than it is; a zero-width, format, tag or
# unassigned character would hide text or show nothing where something is.
# :func:`printable` writes each of them as a visible escape, so what the
# command prints is what the file holds.
#
# Example::
#
#     printable("x\x1b[2Kx.md")     # 'x\\x1b[2Kx.md'
#     printable("line 1\nline 2\x1b[2J", lines=True)   # newline kept, the escape written out
# ----------------------------------------------------------------------------


UNSAFE_CATEGORIES = frozenset({"Cc", "Cf", "Zl", "Zp", "Co", "Cs", "Cn"})
"""Unicode categories :func:`printable` escapes: control, format (bidi marks, zero-width,
soft hyphen, tags), line and paragraph separators, private use, surrogates, unassigned."""

INVISIBLE = frozenset(
    "\u034f\u115f\u1160\u17b4\u17b5\u3164\uffa0"  # combining grapheme joiner, Hangul and Khmer fillers
    + "".join(map(chr, range(0x180B, 0x1810)))  # Mongolian variation selectors and vowel separator
    + "".join(map(chr, range(0xFE00, 0xFE10)))  # variation selectors
    + "".join(map(chr, range(0xE0100, 0xE01F0)))  # variation selectors supplement
)
"""Unicode's default-ignorable characters outside :data:`UNSAFE_CATEGORIES` (letters and marks that show
nothing): escaped too, so a shown command holds no character the reader cannot see."""

_NOT_PLAIN = re.compile("[^\x20-\x7e]")  # only these are looked up: plain ASCII passes at C speed


def printable(text: object, *, lines: bool = False) -> str:
    """``str(text)`` with every character of :data:`UNSAFE_CATEGORIES` written as its escape (``\\x1b``, ``\\u202e``).

    ``lines=True`` keeps newlines and tabs as they are: a model's answer is
    shown as the lines it wrote, but an escape sequence in it still cannot
    clear the screen or hide what follows.
    """
    kept = "\n\t" if lines else ""

    def escape(match: re.Match[str]) -> str:
        char = match.group()
        if char in kept or (unicodedata.category(char) not in UNSAFE_CATEGORIES and char not in INVISIBLE):
            return char
        return char.encode("unicode_escape").decode("ascii")

    return _NOT_PLAIN.sub(escape, str(text))


MAX_STRING = 200
"""Characters kept of one string (or key)."""

MAX_ITEMS = 50
"""Items kept of one list or mapping."""

MAX_VALUES = 200
"""Values kept in all, keys included: with :data:`MAX_STRING`, a few tens of KB at most."""

MAX_DEPTH = 8
"""Levels of lists and mappings shown; deeper ones are elided (a value that contains itself, too)."""


def preview(value: Any) -> Any:
    """``value`` as JSON-ready data within the bounds above, every cut marked."""
    # Imported here: the rest of this module serves `deep-agent --help`, which must not load LangChain.
    from subagents.errors import safe_text

    return _Preview(safe_text).take(value, 0)


class _Preview:
    def __init__(self, safe_text: Callable[[Any, int], str]) -> None:
        self.left = MAX_VALUES
        self.safe_text = safe_text

    def take(self, value: Any, depth: int) -> Any:
        self.left -= 1
        if value is None or isinstance(value, (bool, float)):
            return value
        if isinstance(value, int):  # a long one reads as text: a huge int's str() is slow or refused
            return value if abs(value) < 10**18 else self.safe_text(f"{value:e}", MAX_STRING)
        if isinstance(value, str):
            return self.safe_text(value, MAX_STRING)
        if isinstance(value, Mapping) or isinstance(value, (list, tuple, set, frozenset)):
            if depth >= MAX_DEPTH:
                return "... [nested too deep to show]"
            return self._mapping(value, depth) if isinstance(value, Mapping) else self._items(value, depth)
        return self.safe_text(value, MAX_STRING)

    def _mapping(self, value: Mapping[Any, Any], depth: int) -> dict[str, Any]:
        shown: dict[str, Any] = {}
        for count, (key, item) in enumerate(value.items()):
            if count >= MAX_ITEMS or self.left <= 0:
                shown["..."] = f"[{len(value) - count} more keys]"
                break
            self.left -= 1
            shown[self.safe_text(key, MAX_STRING)] = self.take(item, depth + 1)
        return shown

    def _items(self, value: Any, depth: int) -> list[Any]:
        shown: list[Any] = []
        for count, item in enumerate(value):
            if count >= MAX_ITEMS or self.left <= 0:
                shown.append(f"... [{len(value) - count} more items]")
                break
            shown.append(self.take(item, depth + 1))
        return shown
