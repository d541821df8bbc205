"""The background loop outlives what a child raises; a parent outlives a loop that died anyway."""

from __future__ import annotations

import asyncio
import threading
import time
from typing import Any

import pytest
from langchain.agents import create_agent
from langchain_core.tools import tool
from langgraph.checkpoint.memory import InMemorySaver

from helpers.background import (  # noqa: F401 - background is a fixture
    NOTICE,
    background,
    last_tool_result,
    ledger,
    notices,
    on_task,
    start,
    started_ids,
    wait_for,
)
from helpers.graphs import user
from deep_agent._testing import ScriptedChatModel, tool_call
from subagents.background import RuntimeClosed

pytestmark = pytest.mark.busy  # .ci/run runs it again with every core hogged


def thread() -> dict[str, Any]:
    return {"configurable": {"thread_id": f"loop-{time.monotonic_ns()}"}}


@pytest.mark.parametrize("exit_type", [KeyboardInterrupt, SystemExit])
def test_a_child_raising_an_exit_fails_alone_and_its_sibling_and_the_parent_go_on(run, background, exit_type):
    release = threading.Event()

    @tool
    def boom(x: str) -> str:
        """Explode."""
        raise exit_type()

    @tool
    async def slow(x: str) -> str:
        """Slow work, held until released."""
        while not release.is_set():
            await asyncio.sleep(0.01)
        return "slow done"

    model = ScriptedChatModel(rules=[
        (NOTICE, ["noted"]),
        ("boom job", [{"tool_calls": [tool_call("boom", x="1")]}, "never"]),
        ("slow job", [{"tool_calls": [tool_call("slow", x="1")]}, "slow finished"]),
        ("PARENT start", [start(("slow job", "general-purpose"), ("boom job", "general-purpose")), "started"]),
    ], default="ok")
    middleware = background()
    agent = create_agent(model, [boom, slow], middleware=[middleware], checkpointer=InMemorySaver())
    config = thread()
    out = run(agent, user("PARENT start"), config)
    slow_id, boom_id = started_ids(out["messages"])
    wait_for(lambda: background.status(boom_id) == "error")
    assert exit_type.__name__ in background.task(boom_id).fields["error"]
    assert background.status(slow_id) == "running"  # not cancelled by a dead loop
    release.set()
    wait_for(lambda: background.status(slow_id) == "completed")

    out = run(agent, user("PARENT anything new?"), config)
    assert ledger(out)[slow_id]["result"] == "slow finished"
    assert ledger(out)[boom_id]["status"] == "error" and exit_type.__name__ in notices(out)[0]
    assert not middleware.runtime.closed


def kill_the_loop(runtime: Any) -> None:
    """Stop the loop the way nothing should: a loop callback raising KeyboardInterrupt (no task to guard it)."""
    def die() -> None:
        raise KeyboardInterrupt

    async def schedule() -> None:
        loop = asyncio.get_running_loop()
        type(loop).call_soon(loop, die)  # past the runtime's guard on the loop's own call_soon
        await asyncio.sleep(3600)

    async def here() -> threading.Thread:
        return threading.current_thread()

    loop_thread = runtime.run(here())
    waited: list[BaseException] = []

    def wait() -> None:
        try:
            runtime.run(schedule())
        except BaseException as exc:  # noqa: BLE001 - what the waiter got is the point
            waited.append(exc)

    waiter = threading.Thread(target=wait, daemon=True)
    waiter.start()
    waiter.join(20)  # a hang guard: a waiter on a dead loop must be told, not left waiting
    assert not waiter.is_alive() and len(waited) == 1 and isinstance(waited[0], RuntimeClosed)
    wait_for(lambda: not loop_thread.is_alive())


def test_a_parent_outlives_a_background_loop_that_died(run, background):
    @tool
    async def spin() -> str:
        """One small step of long work."""
        await asyncio.sleep(0.02)
        return "spun"

    model = ScriptedChatModel(rules=[
        (NOTICE, ["noted"]),
        ("spin job", [{"tool_calls": [tool_call("spin")]}] * 2000),
        ("PARENT start", [start(("spin job", "spinner")), "started"]),
        ("PARENT check", [on_task("check_async_task"), "checked"]),
    ], default="ok")
    middleware = background([{"name": "spinner", "description": "Spins.", "tools": ["spin"], "max_turns": 2000}])
    agent = create_agent(model, [spin], middleware=[middleware], checkpointer=InMemorySaver())
    config = thread()
    out = run(agent, user("PARENT start"), config)
    (task_id,) = started_ids(out["messages"])
    task = wait_for(lambda: background.task(task_id))  # kept: a closed runtime lets go of its tasks
    wait_for(lambda: task.session.meter.model_calls >= 2)
    kill_the_loop(middleware.runtime)

    out = run(agent, user("PARENT anything new?"), config)  # no RuntimeError('Event loop is closed')
    assert out["messages"][-1].text == "ok" and notices(out) == []  # nothing to poll, as after close()
    assert middleware.runtime.closed and task.fields["status"] == "lost"
    out = run(agent, user("PARENT check"), config)
    refused = last_tool_result(out)
    assert refused.status == "error" and "runtime was closed" in refused.content


def test_a_child_blocking_the_loop_does_not_hold_the_parent_and_a_refused_cancel_never_runs_late(
        run, background, monkeypatch):
    """A blocking call inside async code (a sync HTTP client, time.sleep) stops the loop running anything."""
    import subagents.background._runtime as loop_thread

    monkeypatch.setattr(loop_thread, "STALL_S", 0.5)
    entered, release = threading.Event(), threading.Event()

    @tool
    async def fetch(url: str) -> str:
        """Fetch a page, badly: a blocking wait inside a coroutine."""
        entered.set()
        release.wait(60)  # a hang guard only: the test releases it
        return "page"

    model = ScriptedChatModel(rules=[
        (NOTICE, ["noted"]),
        ("crawl job", [{"tool_calls": [tool_call("fetch", url="http://x")]}, "crawled"]),
        ("PARENT start", [start(("crawl job", "general-purpose")), "started"]),
        ("PARENT cancel", [on_task("cancel_async_task"), "tried"]),
    ], default="ok")
    middleware = background()
    agent = create_agent(model, [fetch], middleware=[middleware], checkpointer=InMemorySaver())
    config = thread()
    (task_id,) = started_ids(run(agent, user("PARENT start"), config)["messages"])
    assert entered.wait(15)

    out = run(agent, user("PARENT cancel it"), config)  # its notices and the cancel both wait on the loop
    assert not release.is_set()  # the turn ended while the child still blocked the loop
    refused = last_tool_result(out)
    assert refused.status == "error" and "has run nothing for 0.5s" in refused.content
    release.set()
    wait_for(lambda: background.status(task_id) == "completed")  # the refused cancel never ran later
    out = run(agent, user("PARENT anything new?"), config)
    assert ledger(out)[task_id]["result"] == "crawled" and not middleware.runtime.closed


@pytest.mark.parametrize("schedule", ["call_soon", "call_later", "done_callback", "threadsafe"])
def test_an_exit_raised_by_a_plain_callback_on_the_loop_fails_nothing_but_that_callback(run, background, schedule):
    """asyncio lets an exit out of run_forever from any callback, not only from tasks."""
    @tool
    async def boom() -> str:
        """Schedule work that raises an exit."""
        loop = asyncio.get_running_loop()

        def exit_now(*_: Any) -> None:
            raise KeyboardInterrupt("from a callback")

        if schedule == "call_soon":
            loop.call_soon(exit_now)
        elif schedule == "call_later":
            loop.call_later(0.01, exit_now)
        elif schedule == "done_callback":
            done = loop.create_future()
            done.add_done_callback(exit_now)
            done.set_result(None)
        else:
            threading.Thread(target=loop.call_soon_threadsafe, args=(exit_now,)).start()
        await asyncio.sleep(0.1)
        return "scheduled"

    model = ScriptedChatModel(rules=[
        (NOTICE, ["noted"]),
        ("boom job", [{"tool_calls": [tool_call("boom")]}, "boom done"]),
        ("PARENT start", [start(("boom job", "boomer")), "started"]),
    ], default="ok")
    middleware = background([{"name": "boomer", "description": "booms", "tools": ["boom"]}])
    agent = create_agent(model, [boom], middleware=[middleware], checkpointer=InMemorySaver())
    config = thread()
    (task_id,) = started_ids(run(agent, user("PARENT start"), config)["messages"])
    wait_for(lambda: background.status(task_id) == "completed")
    assert not middleware.runtime.closed and middleware.runtime._alive()
    assert ledger(run(agent, user("PARENT news"), config))[task_id]["result"] == "boom done"


def test_a_start_whose_caller_was_let_go_starts_nothing_when_the_loop_moves_again(background, monkeypatch):
    """The start had begun (its first step ran between two blocking stints), then the loop stalled again."""
    from subagents.background import RuntimeStalled
    import subagents.background._runtime as loop_thread

    monkeypatch.setattr(loop_thread, "STALL_S", 0.3)
    middleware = background()
    runtime = middleware.runtime
    release = threading.Event()

    async def begin_then_wait() -> None:  # the start's first steps, then an await the blocked loop cannot serve
        await asyncio.sleep(0.05)
        return await middleware.tasks.local.start("t-late", _call("late job"))

    async def block() -> None:
        await asyncio.sleep(0.01)  # let the start begin first
        release.wait(30)  # a blocking call inside async code

    runtime.run(_spawned(runtime, block()))
    with pytest.raises(RuntimeStalled):
        runtime.run(begin_then_wait())
    release.set()
    time.sleep(0.3)
    assert runtime.table.get("t-late") is None  # its caller heard "unavailable": nothing may have started


def test_a_wait_on_a_blocked_loop_returns_false_never_raises(background, monkeypatch):
    from subagents import wait_for_background
    import subagents.background._runtime as loop_thread

    monkeypatch.setattr(loop_thread, "STALL_S", 0.3)
    middleware = background()
    release = threading.Event()

    async def block() -> None:
        await asyncio.sleep(0.01)  # the spawning call is answered first
        release.wait(30)

    middleware.runtime.run(_spawned(middleware.runtime, block()))
    try:
        remote = {"r1": {"id": "r1", "agent_type": "crawler", "runner": "remote", "status": "running",
                         "thread_id": "th", "run_id": "ru", "description": "crawl", "created_at": 1.0}}
        assert wait_for_background(remote, timeout_s=10, tasks=middleware.tasks) is False
    finally:
        release.set()


async def _spawned(runtime: Any, coro: Any) -> None:
    runtime.spawn(coro)


def _call(description: str) -> Any:
    from subagents import TaskCall

    return TaskCall("general-purpose", description, {"messages": []}, "call_late", {})
