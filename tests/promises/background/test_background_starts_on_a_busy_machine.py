"""A busy machine never refuses background work; a blocked loop is still reported.

The loop's watchdog let a waiting caller go when a probe callback it posted
went unanswered for ``STALL_S``. With 1,000 starts queued on a loaded
machine the probe waits behind them, so half the starts of one turn were
refused as "a background task is blocking it" while nothing blocked. The
loop now counts as blocked only when it began no callback for the whole
stretch and its thread slept through it (see ``LoopProbe``). The turn below
runs on ``ainvoke`` with ``AsyncSqliteSaver``, as in the report, with every
core hogged: before, some of its 1,000 starts were refused.
"""

from __future__ import annotations

import asyncio
import threading
from typing import Any

from langchain.agents import create_agent
from langchain_core.tools import tool
from langgraph.checkpoint.sqlite.aio import AsyncSqliteSaver

from helpers.background import background, start, started_ids  # noqa: F401 - background is a fixture
from helpers.cpu_hog import cpu_hog, on_one_core
from helpers.graphs import user
from deep_agent._testing import ScriptedChatModel, tool_call
from subagents.background import wait_for_background
from subagents._settings import DelegationSettings

STARTS = 1000


@tool
async def nap() -> str:
    """Wait a little, as a child's I/O would."""
    await asyncio.sleep(0.1)
    return "rested"


def test_a_thousand_starts_on_a_busy_machine_are_all_started_and_all_run(background, tmp_path):
    parent = ScriptedChatModel(rules=[
        ("PARENT start", [start(*[(f"job {k}", "worker") for k in range(STARTS)]), "started"]),
    ], default="ok")
    child = ScriptedChatModel(rules=[("job", [{"tool_calls": [tool_call("nap")]}, "done"])], default="done")
    middleware = background([{"name": "worker", "description": "Works.", "model": child, "tools": [nap]}],
    settings=DelegationSettings.of(max_background_tasks=STARTS, max_delegations=None, notify=False))

    async def turn() -> dict[str, Any]:
        async with AsyncSqliteSaver.from_conn_string(str(tmp_path / "checkpoints.db")) as saver:
            agent = create_agent(parent, middleware=[middleware], checkpointer=saver)
            return await agent.ainvoke(user("PARENT start"), {"configurable": {"thread_id": "busy"}})

    # On one core, with two spinners on it: the process is as busy as on a machine with every core hogged, and
    # the other workers of a test run keep the other cores (the turn and its runs take a minute hogged).
    with on_one_core(), cpu_hog():
        out = asyncio.run(turn())
        refused = [m.text for m in out["messages"] if m.type == "tool" and m.status != "success"]
        assert refused == [] and len(started_ids(out["messages"])) == STARTS
        assert wait_for_background(out["async_tasks"], timeout_s=600)
    assert {background.status(task_id) for task_id in out["async_tasks"]} == {"completed"}


def test_a_blocking_call_on_the_loop_is_still_reported_on_a_busy_machine(background, monkeypatch):
    from subagents.background import RuntimeStalled

    import subagents.background._runtime as loop_thread

    monkeypatch.setattr(loop_thread, "STALL_S", 0.5)
    runtime = background().runtime
    entered, release = threading.Event(), threading.Event()

    async def block() -> None:
        await asyncio.sleep(0.01)  # the spawning call is answered first
        entered.set()
        release.wait(60)  # a blocking call inside async code; the test releases it

    async def spawned() -> None:
        runtime.spawn(block())

    with cpu_hog():
        runtime.run(spawned())
        assert entered.wait(60)
        try:
            stalled = None
            try:
                runtime.run(asyncio.sleep(0))
            except RuntimeStalled as exc:
                stalled = exc
            assert stalled is not None and runtime.stalled()
        finally:
            release.set()
    runtime.run(asyncio.sleep(0))  # the loop answers again once the call returns
    assert not runtime.stalled()
