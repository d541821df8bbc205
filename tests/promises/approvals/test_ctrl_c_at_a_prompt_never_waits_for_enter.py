"""A Ctrl-C at a prompt (an approval, its reason, the folder-trust question) ends the wait at once, wherever the
signal lands.

Python runs a signal's handler on the main thread, between bytecodes. The kernel may hand SIGINT to any thread, and
one that lands after the prompt is written but before the read starts does not interrupt that read: a prompt that
blocked in ``input()`` then waited for Enter with the handler pending (a terminal test that pressed Ctrl-C as the
prompt appeared, on a busy machine, timed out with only ``^C`` on the screen). Here the signal goes to another
thread on purpose, as the kernel may choose; a line is typed only after a long hang guard.
"""

from __future__ import annotations

import contextlib
import io
import os
import signal
import threading
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from rich.console import Console

from deep_agent.cli._approvals import TerminalAsker
from deep_agent.cli._terminal import TypedLines

HANG_GUARD_S = 60.0  # only a prompt that waits for Enter meets it


@pytest.fixture
def terminal() -> Iterator[tuple[Any, Callable[[str], None]]]:
    """A pseudo-terminal in line mode: its stdin, and a function that types on its keyboard."""
    keyboard, screen = os.openpty()
    stdin = open(screen, encoding="utf-8")  # noqa: SIM115 - closed after the test

    def type_line(text: str) -> None:
        with contextlib.suppress(OSError):
            os.write(keyboard, text.encode())

    yield stdin, type_line
    stdin.close()
    os.close(keyboard)


class Screen(io.StringIO):
    """What the asker shows; each prompt it writes is answered by the next of ``answers``: a line typed once the
    prompt is up (what was typed before it is discarded), or a function called."""

    def __init__(self, type_line: Callable[[str], None], answers: list[Any]) -> None:
        super().__init__()
        self.type_line, self.answers = type_line, answers

    def write(self, text: str) -> int:
        if text.rstrip().endswith(":") and self.answers:
            answer = self.answers.pop(0)
            answer() if callable(answer) else self.type_line(answer)
        return super().write(text)


def asker(stdin: Any, type_line: Callable[[str], None], *answers: Any) -> TerminalAsker:
    screen = Screen(type_line, list(answers))
    return TerminalAsker(Console(file=screen, force_terminal=True, width=120), stdin=stdin)


@pytest.mark.parametrize("prompt", ["approval", "rejection's reason", "trust question"])
def test_a_ctrl_c_landing_on_another_thread_ends_the_prompt_without_a_line_typed(terminal, prompt):
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler
    stdin, type_line = terminal
    typed = threading.Event()  # set if the prompt read nothing until the hang guard typed a line

    def hang_guard() -> None:
        typed.set()
        type_line("y\nhang guard\n")

    guard = threading.Timer(HANG_GUARD_S, hang_guard)
    press = threading.Timer(0.3, lambda: signal.pthread_kill(threading.get_ident(), signal.SIGINT))
    guard.start()
    try:
        with pytest.raises(KeyboardInterrupt):
            if prompt == "trust question":
                press.start()
                TypedLines(stdin).readline()
            else:  # pressed once the prompt named is up
                answers = ["n\n"] if prompt == "rejection's reason" else []
                asker(stdin, type_line, *answers, press.start)("editor", "Edit", {"file_path": "notes.txt"})
    finally:
        press.cancel()
        guard.cancel()
    assert not typed.is_set(), "the Ctrl-C waited for a line to be typed"


def test_lines_typed_are_read_one_per_prompt_and_an_ended_input_is_end_of_file(terminal):
    stdin, type_line = terminal
    ask = asker(stdin, type_line, "n\n", "keep it lower-case\n")
    assert ask("editor", "Edit", {}) == "keep it lower-case"
    type_line("always\n")
    assert TypedLines(stdin).readline() == "always\n"
    with pytest.raises(EOFError, match="input ended before an answer"):
        TypedLines(io.StringIO("")).readline()
