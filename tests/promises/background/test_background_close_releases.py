"""Closing a background middleware releases what its tasks held: the runtime, the tasks, their sessions.

Measured with ``gc`` and ``tracemalloc`` over 200 finished tasks. What may
stay is the process-wide transcript table (bounded, by design: a task's
transcript outlives its runtime) and a little of the interpreter's own.
"""

from __future__ import annotations

import gc
import tracemalloc
import weakref
from typing import Any

from helpers.background import NOTICE, start
from langchain.agents import create_agent

from deep_agent.testing import ScriptedChatModel
from middleware import BackgroundSubagentMiddleware
from subagents import wait_for_background
from subagents.transcripts import MEMORY

TASKS = 200


def _round() -> tuple[Any, Any]:
    model = ScriptedChatModel(rules=[
        (NOTICE, ["noted"]), ("bg job", ["answer"]),
        ("PARENT start", [start(*[(f"bg job {k}", "general-purpose") for k in range(TASKS)]), "started"]),
    ], default="ok")
    middleware = BackgroundSubagentMiddleware()
    agent = create_agent(model, [], middleware=[middleware])
    out = agent.invoke({"messages": [{"role": "user", "content": "PARENT start"}]})
    assert wait_for_background(out["async_tasks"], 120, tasks=middleware.tasks)
    middleware.close()
    return weakref.ref(middleware.runtime), weakref.ref(middleware)


def _collect() -> None:
    for _ in range(3):  # a task's finished coroutines let go of the runtime's cycle one pass later
        gc.collect()


def test_closing_releases_the_runtime_and_everything_its_tasks_held():
    _round()  # imports, caches and compiled graphs of the first use
    _collect()
    tracemalloc.start()
    try:
        before, table_before = tracemalloc.get_traced_memory()[0], MEMORY.bytes
        runtime, middleware = _round()
        _collect()
        held = tracemalloc.get_traced_memory()[0] - before
    finally:
        tracemalloc.stop()
    assert runtime() is None and middleware() is None
    transcripts = MEMORY.bytes - table_before
    assert held - transcripts < 100 * 1024, (held, transcripts)
