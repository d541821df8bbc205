"""Free-form user data as the CLI shows it: control characters escaped, and cut to a size a terminal can take.

Example::

    printable("x\x1b[2Kx.md")          # 'x\\x1b[2Kx.md'
    preview({"notes": "x" * 10_000})   # {'notes': 'xxx...x... [9800 more characters]'}
"""

from __future__ import annotations

import contextlib
import re
import select
import unicodedata
from collections.abc import Mapping
from typing import Any

# An escape sequence would clear the screen or move the cursor, a newline forge a line of output, a bidi
# override reorder text, a zero-width character hide it: printable() writes each as a visible escape.

UNSAFE_CATEGORIES = frozenset({"Cc", "Cf", "Zl", "Zp", "Co", "Cs", "Cn"})

# Unicode's default-ignorable characters outside UNSAFE_CATEGORIES: they show nothing.
INVISIBLE = frozenset(
    "\u034f\u115f\u1160\u17b4\u17b5\u3164\uffa0"  # combining grapheme joiner, Hangul and Khmer fillers
    + "".join(map(chr, range(0x180B, 0x1810)))  # Mongolian variation selectors and vowel separator
    + "".join(map(chr, range(0xFE00, 0xFE10)))  # variation selectors
    + "".join(map(chr, range(0xE0100, 0xE01F0)))  # variation selectors supplement
)

_NOT_PLAIN = re.compile("[^\x20-\x7e]")  # only these are looked up: plain ASCII passes at C speed


def printable(text: object, *, lines: bool = False) -> str:
    """``str(text)`` with every unsafe character written as its escape (``\\x1b``, ``\\u202e``); ``lines=True``
    keeps newlines and tabs (a model's answer shown as the lines it wrote)."""
    kept = "\n\t" if lines else ""

    def escape(match: re.Match[str]) -> str:
        char = match.group()
        if char in kept or (unicodedata.category(char) not in UNSAFE_CATEGORIES and char not in INVISIBLE):
            return char
        return char.encode("unicode_escape").decode("ascii")

    return _NOT_PLAIN.sub(escape, str(text))


# YAML aliases let a small file repeat one long value thousands of times: preview() bounds what is shown.
MAX_STRING = 200  # characters of one string (or key)
MAX_ITEMS = 50  # items of one list or mapping
MAX_VALUES = 200  # values in all, keys included
MAX_DEPTH = 8  # levels shown (a value that contains itself too)


def preview(value: Any) -> Any:
    """``value`` as JSON-ready data within the bounds above, every cut marked."""
    # Imported here: the rest of this module serves `deep-agent --help`, which must not load LangChain.
    from subagents._errors import safe_text

    left = MAX_VALUES

    def take(value: Any, depth: int) -> Any:
        nonlocal left
        left -= 1
        if value is None or isinstance(value, (bool, float)):
            return value
        if isinstance(value, int):  # a long one reads as text: a huge int's str() is slow or refused
            return value if abs(value) < 10**18 else safe_text(f"{value:e}", MAX_STRING)
        if not isinstance(value, (Mapping, list, tuple, set, frozenset)):  # a string, or any other object
            return safe_text(value, MAX_STRING)
        if depth >= MAX_DEPTH:
            return "... [nested too deep to show]"
        mapping = isinstance(value, Mapping)
        shown: list[Any] = []
        for count, item in enumerate(value.items() if isinstance(value, Mapping) else value):
            if count >= MAX_ITEMS or left <= 0:
                more = f"{len(value) - count} more {'keys' if mapping else 'items'}"
                shown.append(("...", f"[{more}]") if mapping else f"... [{more}]")
                break
            if mapping:
                left -= 1  # the key
                item = (safe_text(item[0], MAX_STRING), take(item[1], depth + 1))
            shown.append(item if mapping else take(item, depth + 1))
        return dict(shown) if mapping else shown

    return take(value, 0)


def discard_typed_ahead(stdin: Any) -> None:
    """Drop what was typed before a prompt: a ``y`` typed early must not answer a question not yet shown."""
    with contextlib.suppress(Exception):  # no termios (Windows), not a terminal, or closed
        import termios

        if stdin is not None and stdin.isatty():
            termios.tcflush(stdin.fileno(), termios.TCIFLUSH)


class TypedLines:
    """``stdin`` as ``Console.input``'s ``stream``: the next line typed, where a Ctrl-C never waits for Enter (Python
    runs a signal's handler between bytecodes, never in a blocking read: the wait polls each ``POLL_S``, and the
    read starts once a terminal's line mode has a whole line)."""

    POLL_S = 0.1

    def __init__(self, stdin: Any) -> None:
        self.stdin = stdin

    def readline(self) -> str:
        with contextlib.suppress(AttributeError, ValueError, OSError, TypeError):  # no descriptor: read as it is
            while not select.select([self.stdin], [], [], self.POLL_S)[0]:
                pass
        line = str(self.stdin.readline())
        if not line:
            raise EOFError("the input ended before an answer")  # as input() does: none will ever come
        return line
