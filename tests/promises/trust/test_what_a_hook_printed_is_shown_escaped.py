"""What a hook printed reaches the terminal, the log and the model as text: its control characters are escaped.

A ``PostToolUse`` check (``python3 -m py_compile`` on the written file)
echoes a line of the agent's file on its stderr, which its warning
(``HookOutcome.describe``) carries. Before: it was kept raw, so the agent's
escape sequences (clear the screen, hide text, write over a line) reached the
user's terminal through the logged warning.
"""

from __future__ import annotations

from subagents.definitions._hooks import run_hook


def test_a_hooks_escape_sequences_are_shown_not_acted_on():
    outcome = run_hook(r"printf 'bad\033[2J\033[8mhidden\rall\302\233checks passed\n\tend\n' >&2; exit 1", {}, 60)
    said = outcome.describe()
    assert "\x1b" not in said and "\r" not in said and "\x9b" not in said, repr(said)
    assert r"bad\x1b[2J\x1b[8mhidden\x0dall\x9bchecks" in said, said
    assert "passed\n\tend" in said  # newline and tab stay
