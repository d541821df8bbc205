"""The background runtime is an owned object: closed on demand or when dropped, leaving nothing behind."""

from __future__ import annotations

import asyncio
import gc
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
from middleware import BackgroundSubagentMiddleware
from subagents import BackgroundRuntime
from subagents.background import RuntimeClosed
from subagents._settings import DelegationSettings


@tool
async def spin() -> str:
    """One small step of long work."""
    await asyncio.sleep(0.02)
    return "spun"


SPINNER = {"name": "spinner", "description": "Works until stopped.", "tools": ["spin"], "max_turns": 2000}


def model() -> ScriptedChatModel:
    return ScriptedChatModel(
        rules=[
            (NOTICE, ["noted"]),
            ("spin job", [{"tool_calls": [tool_call("spin")]}] * 2000),
            ("quick job", [lambda m: f"quick answer to {m[-1].text}"]),
            ("PARENT spin", [start(("spin job", "spinner")), "started"]),
            ("PARENT quick", [start(("quick job", "general-purpose")), "started"]),
            ("PARENT check", [on_task("check_async_task"), "checked"]),
            ("PARENT follow", [on_task("update_async_task", message="quick job, again"), "sent"]),
        ],
        default="ok",
    )


def thread() -> dict[str, Any]:
    return {"configurable": {"thread_id": f"rt-{time.monotonic_ns()}"}}


def loop_thread(runtime: BackgroundRuntime) -> threading.Thread:
    async def here() -> threading.Thread:
        return threading.current_thread()

    return runtime.run(here())


def test_close_cancels_running_tasks_records_them_lost_and_stops_the_thread(run, background):
    middleware = background([SPINNER])
    saver, config = InMemorySaver(), thread()
    agent = create_agent(model(), [spin], middleware=[middleware], checkpointer=saver)
    out = run(agent, user("PARENT spin"), config)
    (task_id,) = started_ids(out["messages"])
    task = middleware.runtime.table.get(task_id)
    wait_for(lambda: task.session.meter.model_calls >= 2)
    worker = loop_thread(middleware.runtime)
    closed_calls: list[str] = []
    middleware.runtime.on_close.append(lambda: closed_calls.append("sync"))

    async def aclose() -> None:
        closed_calls.append("async")

    middleware.runtime.on_close.append(aclose)
    middleware.close()
    middleware.close()  # idempotent
    assert not worker.is_alive() and sorted(closed_calls) == ["async", "sync"]
    assert task.fields["status"] == "lost" and "closed" in task.fields["error"]
    assert BackgroundRuntime.find(middleware.runtime.id) is None
    with pytest.raises(RuntimeClosed):
        middleware.runtime.run(asyncio.sleep(0))

    # The parent goes on: its background tools answer with an error, nothing raises.
    out = run(agent, user("PARENT check"), config)
    refused = last_tool_result(out)
    assert refused.status == "error" and "runtime was closed" in refused.content
    # A new graph on the same thread sees the task of the closed runtime as lost.
    again = create_agent(model(), [spin], middleware=[background([SPINNER])], checkpointer=saver)
    out = run(again, user("PARENT anything?"), config)
    assert ledger(out)[task_id]["status"] == "lost" and f"{task_id} (spinner): lost." in notices(out)[0]
    # As a lost foreground task's: cancelled, with a transcript reference (its own, or ``none:``), never empty.
    for record in (task.fields, ledger(out)[task_id]):
        assert record["stop_reason"] == "cancelled" and record["transcript"]


def test_a_dropped_middleware_closes_its_runtime(run):
    middleware = BackgroundSubagentMiddleware([SPINNER])
    runtime = middleware.runtime
    agent = create_agent(model(), [spin], middleware=[middleware], checkpointer=InMemorySaver())
    out = run(agent, user("PARENT spin"), thread())
    (task_id,) = started_ids(out["messages"])
    task = runtime.table.get(task_id)  # a closed runtime lets go of its tasks: keep the entry to read it
    worker = loop_thread(runtime)
    del agent, middleware, out
    gc.collect()
    wait_for(lambda: runtime.closed and not worker.is_alive())
    assert task.fields["status"] == "lost" and len(runtime.table) == 0


def test_an_injected_runtime_serves_two_graphs_and_outlives_neither(run, background):
    with BackgroundRuntime() as runtime:
        saver, config = InMemorySaver(), thread()
        first = create_agent(model(), middleware=[background(settings=DelegationSettings.of(background_runtime=runtime))], checkpointer=saver)
        out = run(first, user("PARENT quick"), config)
        (task_id,) = started_ids(out["messages"])
        wait_for(lambda: runtime.table.get(task_id).fields["status"] == "completed")
        second = create_agent(model(), middleware=[background(settings=DelegationSettings.of(background_runtime=runtime))], checkpointer=saver)
        out = run(second, user("PARENT news"), config)
        assert ledger(out)[task_id]["result"] == "quick answer to quick job"
    assert runtime.closed


def test_finished_tasks_are_evicted_by_age_without_another_start_and_nothing_is_lost(run, background):
    runtime = BackgroundRuntime(settled_max_age_s=0.2)
    middleware = background(settings=DelegationSettings.of(background_runtime=runtime))
    agent = create_agent(model(), middleware=[middleware], checkpointer=InMemorySaver())
    config = thread()
    out = run(agent, user("PARENT quick"), config)
    (task_id,) = started_ids(out["messages"])
    wait_for(lambda: runtime.table.get(task_id) is not None
             and runtime.table.get(task_id).fields["status"] == "completed")
    wait_for(lambda: runtime.table.get(task_id) is None)  # no later start needed: its timer evicts it
    # The outcome is still reported, and a follow-up rebuilds the conversation from the record.
    out = run(agent, user("PARENT news"), config)
    assert ledger(out)[task_id]["status"] == "completed"
    assert "quick answer to quick job" in notices(out)[0]
    out = run(agent, user("PARENT follow"), config)
    assert "rebuilt from the record" in last_tool_result(out).content
    wait_for(lambda: runtime.table.get(task_id) is not None
             and runtime.table.get(task_id).fields["status"] == "completed")


def test_finished_tasks_are_evicted_by_bytes_oldest_first(run, background):
    runtime = BackgroundRuntime(settled_max_bytes=1)  # room for no finished task beyond the newest
    middleware = background(settings=DelegationSettings.of(background_runtime=runtime))
    agent = create_agent(model(), middleware=[middleware], checkpointer=InMemorySaver())
    config = thread()
    ids = []
    for _ in range(3):
        out = run(agent, user("PARENT quick"), config)
        ids.append(started_ids(out["messages"])[-1])
        wait_for(lambda: runtime.table.get(ids[-1]) is None or
                 runtime.table.get(ids[-1]).fields["status"] == "completed")
    assert all(runtime.table.get(i) is None for i in ids)
    assert runtime.table.settled_bytes == 0
    out = run(agent, user("PARENT news"), config)
    assert {ledger(out)[i]["status"] for i in ids} == {"completed"}


def test_closing_from_a_task_on_the_runtime_itself_does_not_deadlock():
    runtime = BackgroundRuntime()

    async def close_from_inside() -> None:
        runtime.close()

    runtime.run(close_from_inside())
    wait_for(lambda: runtime.closed)
    assert BackgroundRuntime.find(runtime.id) is None


def test_coroutines_run_in_a_clean_context():
    import contextvars

    marker: contextvars.ContextVar[str] = contextvars.ContextVar("marker", default="clean")

    async def read() -> str:
        return marker.get()

    with BackgroundRuntime() as runtime:
        marker.set("parent's")
        assert runtime.run(read()) == "clean"
        assert asyncio.run(runtime.arun(read())) == "clean"


def test_on_close_runs_every_callback_once_even_if_one_fails_or_the_loop_never_started():
    for started in (False, True):
        runtime = BackgroundRuntime()
        if started:
            runtime.run(asyncio.sleep(0))
        calls: list[str] = []

        def broken() -> None:
            raise OSError("pool already gone")

        async def aclose() -> None:
            calls.append("async")

        runtime.on_close.extend([lambda: calls.append("sync"), broken, aclose])
        runtime.close()
        runtime.close()
        assert sorted(calls) == ["async", "sync"], started


def test_a_child_forked_while_a_task_runs_forgets_the_runtime_and_exits():
    import os

    from helpers.processes import forked_exit_code

    runtime = BackgroundRuntime()

    async def start() -> None:
        runtime.spawn(asyncio.sleep(60))

    runtime.run(start())
    held = [runtime]
    pid = os.fork()
    if pid == 0:  # pragma: no cover - the child: it has no loop thread, so nothing may wait for one
        code = 1
        try:
            held.clear()
            del runtime
            gc.collect()
            code = 0
        finally:
            os._exit(code)
    assert forked_exit_code(pid, 20) == 0, "the forked child hung or failed"
    assert not held[0].closed and held[0].run(asyncio.sleep(0, "runs on")) == "runs on"  # the parent's is untouched
    held[0].close()
