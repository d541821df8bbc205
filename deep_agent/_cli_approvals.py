"""Approving risky calls in the terminal.

When a run pauses for human approval (LangChain's
``HumanInTheLoopMiddleware``, in the root or inside a child), the command
line shows each pending call -- which agent, which tool, its arguments --
and asks: approve, or reject with a reason that the agent reads as the
tool's result. ``--yes`` approves every call. When nobody can answer
(stdin is not a terminal and ``--yes`` was not given), the run stops with
an error naming the tool, rather than waiting forever.

Example::

    resume = decide(interrupts, ask=TerminalAsker(console), approve_all=False)
    agent.astream(Command(resume=resume), config)
"""

from __future__ import annotations

import contextlib
import json
import signal
import sys
import threading
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Any

from rich.text import Text

from deep_agent._cli_errors import ApprovalNeeded
from deep_agent._terminal_text import printable

MAX_ARG_CHARS = 400

Asker = Callable[[str, str, Mapping[str, Any]], str | None]
"""``(agent, tool, args) -> None`` to approve, or the reason for a rejection."""


def nobody_to_ask(tool: str, agent: str) -> ApprovalNeeded:
    """The error for a call that needs approval when stdin is not a terminal."""
    return ApprovalNeeded(
        f"{tool} (called by {agent}) needs approval, but stdin is not a terminal: pass --yes "
        "to approve every call, or --permission-mode never_confirm"
    )


def describe_call(agent: str, tool: str, args: Mapping[str, Any]) -> str:
    """The call as plain text, control characters escaped: the person approving sees what would run."""
    shown = []
    for key, value in args.items():
        text = value if isinstance(value, str) else json.dumps(value, default=str)
        text = text if len(text) <= MAX_ARG_CHARS else text[:MAX_ARG_CHARS] + f"... [{len(text)} chars]"
        shown.append(f"    {printable(key)}: {printable(text)}")
    return f"{printable(agent)} wants to call {printable(tool)}\n" + "\n".join(shown)


class TerminalAsker:
    """Asks on the terminal; refuses to wait when stdin is not one."""

    def __init__(self, console: Any, *, stdin: Any = None) -> None:
        self.console = console
        self.stdin = stdin if stdin is not None else sys.stdin

    def can_ask(self) -> bool:
        """Whether stdin is a terminal someone can answer on."""
        return _interactive(self.stdin)

    def __call__(self, agent: str, tool: str, args: Mapping[str, Any]) -> str | None:
        if not self.can_ask():
            raise nobody_to_ask(tool, agent)
        # The call is model text: never read as markup (a "[/x]" would crash the prompt, "[conceal]" hide text).
        self.console.print(Text.assemble("\n", ("Approval needed", "bold magenta"), ": ",
                                         describe_call(agent, tool, args)), highlight=False)
        with ctrl_c_interrupts():
            while True:
                answer = self.console.input(Text("Approve? [y]es / [n]o: ")).strip().lower()
                if answer in ("y", "yes"):
                    return None
                if answer in ("n", "no"):
                    reason = self.console.input(Text("Reason (the agent reads it): ")).strip()
                    return reason or "the user rejected this call"
                self.console.print("Please answer y or n.")


@contextlib.contextmanager
def ctrl_c_interrupts() -> Iterator[None]:
    """Within the block, Ctrl-C raises ``KeyboardInterrupt`` at once (on the main thread).

    The prompt blocks the event loop's thread, and ``asyncio.run``'s own
    handler only cancels the main task, which cannot happen until the loop
    runs again: the first Ctrl-C would wait for the answer (and whatever it
    approved would run first).
    """
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        yield
    finally:
        if previous is not None:  # None: a handler not set from Python, which cannot be restored
            signal.signal(signal.SIGINT, previous)


def decide(interrupts: Sequence[Any], *, ask: Asker, approve_all: bool,
           announce: Callable[[str], None] = lambda _: None) -> dict[str, Any]:
    """The resume value for every pending interrupt, keyed by interrupt id."""
    resume: dict[str, Any] = {}
    for interrupt in interrupts:
        value = getattr(interrupt, "value", None)
        if not isinstance(value, Mapping) or "action_requests" not in value:
            raise ApprovalNeeded(f"the run paused for something other than a tool approval: {str(value)[:200]}")
        agent = str((value.get("subagent") or {}).get("agent_type") or "the root agent")
        decisions = []
        for request in value.get("action_requests") or ():
            tool, args = str(request.get("name")), dict(request.get("args") or {})
            if approve_all:
                announce(f"approved {tool} ({agent}) — --yes")
                decisions.append({"type": "approve"})
                continue
            reason = ask(agent, tool, args)
            if reason is None:
                announce(f"approved {tool} ({agent})")
                decisions.append({"type": "approve"})
            else:
                announce(f"rejected {tool} ({agent}): {reason}")
                decisions.append({"type": "reject", "message": f"The user rejected this call: {reason}"})
        resume[interrupt.id] = {"decisions": decisions}
    return resume


def _interactive(stream: Any) -> bool:
    try:
        return bool(stream.isatty())
    except Exception:  # noqa: BLE001 - a closed or odd stdin is not a terminal
        return False
