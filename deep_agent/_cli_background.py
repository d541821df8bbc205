"""The background tasks of a command-line turn: wait for them, and ask when one waits for approval.

After the root has answered, ``deep-agent run`` keeps the live tree up
while the turn's local background tasks (``start_async_task``) finish. A
background child that pauses on a risky call is ``waiting_for_approval``:
the live view stops and the terminal asks exactly as for a ``task`` child
(:mod:`deep_agent._cli_approvals`), naming the task's agent type; ``--yes``
approves. The answer resumes the task through its runner, on the runtime's
loop, and the wait goes on. When nobody can answer (stdin is not a
terminal, no ``--yes``), the run stops with an error naming the tool and
saying it is a background task.

Example (inside the turn's coroutine)::

    await settle_background(tree, console, ask=TerminalAsker(console), approve_all=False)
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Callable, Mapping
from types import SimpleNamespace
from typing import Any

from rich.console import Console
from rich.live import Live

from deep_agent._cli_approvals import TerminalAsker, decide, nobody_to_ask
from deep_agent._live_view import TaskTree
from deep_agent._stderr_relay import relayed_stderr

BACKGROUND_WAIT_S = 600.0
"""How long the run waits for background tasks to run (time spent asking does not count)."""
RUNNING = frozenset({"pending", "running"})
ASKING = "waiting_for_approval"


def unsettled(tree: TaskTree) -> list[str]:
    """The turn's local background tasks that run, wait to run, or wait for approval."""
    return [task.id for task in _live(tree) if task.fields.get("status") in RUNNING | {ASKING}]


async def settle_background(tree: TaskTree, console: Console, *, ask: TerminalAsker, approve_all: bool) -> None:
    """Keep the tree up until the turn's background tasks settle; ask about each one that waits."""
    if not unsettled(tree):
        return
    console.print(f"[dim]waiting for {len(unsettled(tree))} background task(s); Ctrl-C leaves them[/dim]")
    while True:
        deadline = time.monotonic() + BACKGROUND_WAIT_S
        with relayed_stderr(console), Live(tree, console=console, refresh_per_second=8):
            while not (waiting := _asking(tree)) and _running(tree) and time.monotonic() < deadline:
                await asyncio.sleep(0.1)
            if not waiting:
                tree.stop_clock()
        end_line(console)
        if not waiting:
            return
        for task in waiting:
            await answer_task(task, ask=ask, approve_all=approve_all,
                              announce=lambda line: console.print(f"[magenta]{line}[/magenta]", highlight=False))


async def answer_task(task: Any, *, ask: TerminalAsker, approve_all: bool,
                      announce: Callable[[str], None]) -> None:
    """Ask about a waiting background task's pending calls, then resume it on its runtime's loop."""
    agent = str(task.call.subagent_type)
    pending = list(task.fields.get("approval_request") or [])
    interrupts = [SimpleNamespace(id=item.get("id"), value=_named(item.get("value"), agent, task.id))
                  for item in pending]

    def ask_here(who: str, tool: str, args: Mapping[str, Any]) -> str | None:
        if not ask.can_ask():
            raise nobody_to_ask(tool, f"{who}, a background task")
        return ask(who, tool, args)

    answers = decide(interrupts, ask=ask_here, approve_all=approve_all, announce=announce)
    # One interrupt is answered with its value; several by interrupt id (as the runner's own answers are).
    resume = next(iter(answers.values())) if len(answers) == 1 else answers
    runner = task.runner
    record = {**task.fields, "id": task.id}
    # A JSON object message is the resume value as it is (subagents.background_approval.resume_for).
    await runner.runtime.arun(runner.steer(record, json.dumps(resume), task.call))


def end_line(console: Console) -> None:
    if not console.is_terminal:
        console.line()  # a redirected Live view ends without one


def _named(value: Any, agent: str, task_id: str) -> Any:
    """The interrupt's value, naming the background task's agent as a ``task`` child's does."""
    if not isinstance(value, Mapping):
        return value
    return {**value, "subagent": {**(value.get("subagent") or {}), "agent_type": agent, "task_id": task_id}}


def _live(tree: TaskTree) -> list[Any]:
    from subagents.background import known_task

    return [task for task_id in list(tree.background) if (task := known_task(task_id)) is not None]


def _running(tree: TaskTree) -> bool:
    return any(task.fields.get("status") in RUNNING for task in _live(tree))


def _asking(tree: TaskTree) -> list[Any]:
    return [task for task in _live(tree) if task.fields.get("status") == ASKING]
