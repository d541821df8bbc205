"""Text from agent files made safe to print on a terminal.

A file name, a field value or an error message that quotes one can hold
control characters: an escape sequence would clear the screen, move the
cursor over an error line or retitle the window; a newline would forge a
line of output (``ok   other.md``); a bidirectional override would show
text in another order than it is. :func:`printable` writes each of them as
a visible escape, so what the command prints is what the file holds.

Example::

    printable("x\\x1b[2Kx.md")     # 'x\\\\x1b[2Kx.md'
    printable("line 1\\nline 2\\x1b[2J", lines=True)   # newline kept, the escape written out
"""

from __future__ import annotations

import re

# C0 (newline and tab included), DEL, C1, and the bidirectional embeddings, overrides and isolates.
_UNSAFE = re.compile("[\x00-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069]")
# The same, less newline and tab: for model text, whose lines are its own and whose escapes are not.
_UNSAFE_IN_LINES = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069]")


def _escape(match: re.Match[str]) -> str:
    return match.group().encode("unicode_escape").decode("ascii")


def printable(text: object, *, lines: bool = False) -> str:
    """``str(text)`` with every control character written as its escape (``\\x1b``, ``\\n``, ``\\u202e``).

    ``lines=True`` keeps newlines and tabs as they are: a model's answer is
    shown as the lines it wrote, but an escape sequence in it still cannot
    clear the screen or hide what follows.
    """
    return (_UNSAFE_IN_LINES if lines else _UNSAFE).sub(_escape, str(text))
