"""A turn that starts background tasks never waits for the loop that runs them.

That loop is busy while tasks run (their model calls, their graphs), and a
start that waited for it waited behind the tasks already started: on
``invoke``, whose tool calls run a few at a time, the turn that started
1,000 tasks lasted about as long as the whole batch. A start is now recorded
in the tool's own thread and handed to the loop, which takes it in order.
The extreme case shows it without a clock: a loop held by a child for the
whole turn. Each start is answered ``Started`` (not "the loop is blocked"),
and every task runs once the loop moves again.
"""

from __future__ import annotations

import asyncio
import threading
import time
from typing import Any

import pytest
from langchain.agents import create_agent
from langgraph.checkpoint.memory import InMemorySaver

from helpers.background import background, start, started_ids  # noqa: F401 - background is a fixture
from helpers.graphs import user
from deep_agent._testing import ScriptedChatModel
from subagents.background import wait_for_background
from subagents._settings import DelegationSettings

pytestmark = pytest.mark.busy  # .ci/run runs it again with every core hogged

TASKS = 10


async def _spawned(runtime: Any, coro: Any) -> None:
    runtime.spawn(coro)


def test_starts_are_answered_while_the_loop_is_held_and_run_once_it_moves(run, background, monkeypatch):
    import subagents.background._runtime as loop_thread

    monkeypatch.setattr(loop_thread, "STALL_S", 0.5)  # the turn's own catch-up is let go after 0.5 s
    parent = ScriptedChatModel(rules=[
        ("PARENT start", [start(*[(f"job {k}", "worker") for k in range(TASKS)]), "started"]),
    ], default="ok")
    child = ScriptedChatModel(default="job done: every requested detail is included in this full report.")
    middleware = background([{"name": "worker", "description": "Works.", "model": child}],
    settings=DelegationSettings.of(max_background_tasks=TASKS, notify=False))
    agent = create_agent(parent, middleware=[middleware], checkpointer=InMemorySaver())
    config = {"configurable": {"thread_id": f"starts-{time.monotonic_ns()}"}, "max_concurrency": 2}
    release = threading.Event()

    async def hold() -> None:
        await asyncio.sleep(0.05)  # let the spawning call hear back first
        release.wait(60)  # a child's blocking call: the loop runs nothing else meanwhile

    middleware.runtime.run(_spawned(middleware.runtime, hold()))
    time.sleep(0.2)  # the hold has begun (a start made before it would only be the earlier)
    try:
        out = run(agent, user("PARENT start"), config)
    finally:
        release.set()

    answers = [m for m in out["messages"] if m.type == "tool"]
    assert [m.status for m in answers] == ["success"] * TASKS, [m.text for m in answers if m.status != "success"]
    ids = started_ids(out["messages"])
    assert len(ids) == TASKS and {r["status"] for r in out["async_tasks"].values()} == {"pending"}
    assert wait_for_background(out["async_tasks"], timeout_s=60)
    assert {background.status(i) for i in ids} == {"completed"}
