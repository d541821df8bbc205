"""The approval prompt names every answer it accepts, and accepts only those (before, it read ``[y]es / [n]o``
and took ``a`` too)."""

from __future__ import annotations

import re
from typing import Any

import pytest

from deep_agent.cli._approvals import PROMPT, TerminalAsker


class Terminal:
    """A console and a stdin that is a terminal: the prompts it shows, the answers typed in turn."""

    def __init__(self, *typed: str) -> None:
        self.typed = list(typed)
        self.prompts: list[str] = []
        self.printed: list[str] = []

    def isatty(self) -> bool:
        return True

    def input(self, prompt: Any, **_: Any) -> str:
        self.prompts.append(str(prompt))
        return self.typed.pop(0)

    def print(self, *parts: Any, **_: Any) -> None:
        self.printed.append(" ".join(str(p) for p in parts))


NAMED = re.findall(r"\[(\w)\](\w*)", PROMPT)
EFFECT = {"y": (None, set()), "a": (None, {"Edit"}), "n": ("keep it", set())}


@pytest.mark.parametrize("letter, rest", NAMED)
@pytest.mark.parametrize("spelled", ["letter", "word", "shouted"])
def test_each_answer_the_prompt_names_is_accepted_as_a_letter_or_a_word(letter, rest, spelled):
    typed = {"letter": letter, "word": letter + rest, "shouted": f"  {(letter + rest).upper()} "}[spelled]
    terminal = Terminal(typed, "keep it")  # a rejection asks for its reason next
    ask = TerminalAsker(terminal, stdin=terminal)
    assert (ask("editor", "Edit", {"file_path": "notes.txt"}), ask.always) == EFFECT[letter]
    assert terminal.prompts[0] == PROMPT


def test_the_prompt_names_every_answer_and_refuses_one_it_does_not_name():
    assert {letter for letter, _ in NAMED} == set(EFFECT)
    terminal = Terminal("x", "sure", "y")
    ask = TerminalAsker(terminal, stdin=terminal)
    assert ask("editor", "Edit", {}) is None
    assert terminal.prompts == [PROMPT] * 3
    assert terminal.printed.count("Please answer y, n or a.") == 2
