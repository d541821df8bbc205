"""Approvals on the command line (``--yes`` approves every call), and the turn's background tasks waited for. When
nobody can answer (stdin is not a terminal), the run stops with an error naming the tool, never waits forever."""

from __future__ import annotations

import asyncio
import contextlib
import json
import signal
import sys
import time
from collections.abc import Callable, Collection, Mapping, Sequence
from types import SimpleNamespace
from typing import Any

from rich.console import Console
from rich.live import Live
from rich.text import Text

from deep_agent.cli._errors import ApprovalNeeded
from deep_agent.cli._live_view import TaskTree, relayed_stderr
from deep_agent.cli._terminal import TypedLines, discard_typed_ahead, printable
from subagents._runner import stop_on_ctrl_c

Asker = Callable[[str, str, Mapping[str, Any]], str | None]
"""``(agent, tool, args) -> None`` to approve, or the reason for a rejection."""


def nobody_to_ask(tool: str, agent: str) -> ApprovalNeeded:
    return ApprovalNeeded(f"{tool} (called by {agent}) needs approval, but stdin is not a terminal: pass --yes "
                          "to approve every call, or --permission-mode never_confirm")


def describe_call(agent: str, tool: str, args: Mapping[str, Any]) -> str:
    """The whole call as plain text, control characters escaped, nothing cut: padding must not hide its end."""
    shown = [f"    {printable(key)}: {printable(value if isinstance(value, str) else json.dumps(value, default=str))}"
             for key, value in args.items()]
    return f"{printable(agent)} wants to call {printable(tool)}\n" + "\n".join(shown)


# The answers (each word or its first letter): the prompt and its help line are written from this table.
ANSWERS = {"yes": "approve", "no": "reject, with a reason the agent reads",
           "always": "approve {tool} for the rest of this run"}
HELP_LINE = "   ".join(f"{word[0]}: {does}" for word, does in ANSWERS.items())
PROMPT = "Approve? " + " / ".join(f"[{word[0]}]{word[1:]}" for word in ANSWERS) + ": "


class TerminalAsker:
    """Asks on the terminal (refused when stdin is not one); an ``a`` (always) answer puts the tool in
    :attr:`always` (this object only, never on disk)."""

    def __init__(self, console: Any, *, stdin: Any = None) -> None:
        self.console = console
        self.stdin = stdin if stdin is not None else sys.stdin
        self.always: set[str] = set()

    def can_ask(self) -> bool:
        with contextlib.suppress(Exception):  # a closed or odd stdin is not a terminal
            return bool(self.stdin.isatty())
        return False

    def __call__(self, agent: str, tool: str, args: Mapping[str, Any]) -> str | None:
        if not self.can_ask():
            raise nobody_to_ask(tool, agent)
        # The call is model text: never read as markup (a "[/x]" would crash the prompt, "[conceal]" hide text).
        self.console.print(Text.assemble("\n", ("Approval needed", "bold magenta"), ": ",
                                         describe_call(agent, tool, args)), highlight=False)
        self.console.print(Text(HELP_LINE.format(tool=printable(tool)), style="dim"), highlight=False)
        discard_typed_ahead(self.stdin)
        # The prompt blocks the loop's thread, so asyncio.run's handler (a cancellation) would wait for it:
        # within it Ctrl-C raises KeyboardInterrupt at once (and TypedLines never holds it until Enter).
        with stop_on_ctrl_c(then=signal.default_int_handler):
            while True:
                text = self.console.input(Text(PROMPT), stream=TypedLines(self.stdin)).strip().lower()
                answer = next((word for word in ANSWERS if text in (word, word[0])), None)
                if answer in ("yes", "always"):
                    self.always |= {tool} if answer == "always" else set()
                    return None
                if answer == "no":
                    reason = self.console.input(Text("Reason (the agent reads it): "),
                                                stream=TypedLines(self.stdin)).strip()
                    return reason or "the user rejected this call"
                *first, last = (word[0] for word in ANSWERS)
                self.console.print(f"Please answer {', '.join(first)} or {last}.")


def decide(interrupts: Sequence[Any], *, ask: Asker, approve_all: bool,
           announce: Callable[[str], None] = lambda _: None, always: Collection[str] = ()) -> dict[str, Any]:
    """The resume value for every pending interrupt, keyed by interrupt id; ``always``: tool names approved for
    the rest of the run, read at each call (so it covers the same batch)."""
    resume: dict[str, Any] = {}
    for interrupt in interrupts:
        value = getattr(interrupt, "value", None)
        if not isinstance(value, Mapping) or "action_requests" not in value:
            raise ApprovalNeeded(f"the run paused for something other than a tool approval: {str(value)[:200]}")
        agent = str((value.get("subagent") or {}).get("agent_type") or "the root agent")
        decisions = []
        for request in value.get("action_requests") or ():
            tool, args = str(request.get("name")), dict(request.get("args") or {})
            given = approve_all or tool in always
            if (reason := None if given else ask(agent, tool, args)) is None:
                how = f" — {'--yes' if approve_all else 'always, this run'}" if given else ""
                announce(f"approved {tool} ({agent}){how}")
                decisions.append({"type": "approve"})
            else:
                announce(f"rejected {tool} ({agent}): {reason}")
                decisions.append({"type": "reject", "message": f"The user rejected this call: {reason}"})
        resume[interrupt.id] = {"decisions": decisions}
    return resume


BACKGROUND_WAIT_S = 600.0  # how long the run waits for background tasks to run (time spent asking does not count)
RUNNING = frozenset({"pending", "running"})
ASKING = "waiting_for_approval"


def unsettled(tree: TaskTree) -> list[str]:
    """The turn's local background tasks that run, wait to run, or wait for approval."""
    return [task.id for task in _live(tree, RUNNING | {ASKING})]


async def settle_background(tree: TaskTree, console: Console, *, ask: TerminalAsker, approve_all: bool) -> None:
    """Keep the tree up until the turn's background tasks settle; ask about each one that waits."""
    if not unsettled(tree):
        return
    console.print(f"[dim]waiting for {len(unsettled(tree))} background task(s); Ctrl-C leaves them[/dim]")
    while True:
        deadline = time.monotonic() + BACKGROUND_WAIT_S
        with relayed_stderr(console), Live(tree, console=console, refresh_per_second=8):
            while not (waiting := _live(tree, {ASKING})) and _live(tree, RUNNING) and time.monotonic() < deadline:
                await asyncio.sleep(0.1)
            if not waiting:
                tree.stop_clock()
        end_line(console)
        if not waiting:
            return
        for task in waiting:
            await answer_task(task, ask=ask, approve_all=approve_all,
                              announce=lambda line: console.print(Text(printable(line), style="magenta")))


async def answer_task(task: Any, *, ask: TerminalAsker, approve_all: bool,
                      announce: Callable[[str], None]) -> None:
    """Ask about a waiting background task's pending calls, then resume it on its runtime's loop."""
    agent = str(task.call.subagent_type)
    interrupts = []
    for item in list(task.fields.get("approval_request") or []):
        value = item.get("value")
        if isinstance(value, Mapping):  # naming the background task's agent as a ``task`` child's does
            value = {**value, "subagent": {**(value.get("subagent") or {}), "agent_type": agent, "task_id": task.id}}
        interrupts.append(SimpleNamespace(id=item.get("id"), value=value))

    def ask_here(who: str, tool: str, args: Mapping[str, Any]) -> str | None:
        if not ask.can_ask():
            raise nobody_to_ask(tool, f"{who}, a background task")
        return ask(who, tool, args)

    answers = decide(interrupts, ask=ask_here, approve_all=approve_all, announce=announce, always=ask.always)
    # One interrupt is answered with its value; several by interrupt id (as the runner's own answers are).
    resume = next(iter(answers.values())) if len(answers) == 1 else answers
    # A JSON object message is the resume value as it is (subagents.definitions._permissions.resume_for).
    await task.runner.runtime.arun(task.runner.steer({**task.fields, "id": task.id}, json.dumps(resume), task.call))


def end_line(console: Console) -> None:
    if not console.is_terminal:
        console.line()  # a redirected Live view ends without one


def _live(tree: TaskTree, statuses: Collection[str]) -> list[Any]:
    from subagents.background import known_task

    tasks = [known_task(task_id) for task_id in list(tree.background)]
    return [task for task in tasks if task is not None and task.fields.get("status") in statuses]
