"""Measure 6, background throughput: 100 local background tasks under the cap.

A parent built with ``BackgroundSubagentMiddleware`` starts ``tasks``
background tasks in one turn (one ``start_async_task`` call each); every
child makes one model call of ``latency_s``. The clock runs from the
parent's invoke until every task has settled in this process
(:func:`subagents.wait_for_background`), so the parent's own turn counts.
The figure is wall time over the ideal, ``ceil(tasks / cap) * latency``.
deepagents has no local background tasks (its async subagents need a
LangGraph server), so theirs is null.
"""

from __future__ import annotations

import math
import time
from typing import Any

from langchain.agents import create_agent
from langgraph.checkpoint.memory import InMemorySaver

from bench.common import answer, median, quiet_gc, record, scripted, spec, theirs_note, user
from deep_agent.testing import tool_call
from middleware import BackgroundSubagentMiddleware
from subagents import wait_for_background
from subagents.background_local import known_task

NAME = "background"
GOAL = 1.2


def _agent(tasks: int, cap: int, latency_s: float) -> Any:
    worker = scripted(rules=[("job", [answer("job done")])], latency_s=latency_s)
    parent = scripted(
        responses=[
            {"tool_calls": [tool_call("start_async_task", description=f"job {i}", subagent_type="worker")
                            for i in range(tasks)]},
            "started",
        ]
    )
    middleware = BackgroundSubagentMiddleware(
        [spec("worker", model=worker)], general_purpose=False, max_concurrent_tasks=cap, notify=False
    )
    return create_agent(parent, middleware=[middleware], checkpointer=InMemorySaver())


def _once(tasks: int, cap: int, latency_s: float, rep: int) -> float:
    agent = _agent(tasks, cap, latency_s)
    start = time.perf_counter()
    state = agent.invoke(user("go"), {"configurable": {"thread_id": f"bench-background-{rep}"}})
    ledger = state["async_tasks"]
    if not wait_for_background(ledger, timeout_s=120):
        raise RuntimeError("background: tasks did not settle within 120 s")
    seconds = time.perf_counter() - start
    statuses = {known_task(task_id).fields["status"] for task_id in ledger}
    if len(ledger) != tasks or statuses != {"completed"}:
        raise RuntimeError(f"background: {len(ledger)} tasks, statuses {statuses}")
    return seconds


def run(quick: bool = False) -> list[dict[str, Any]]:
    tasks, cap, latency_s, reps = (6, 2, 0.02, 1) if quick else (100, 10, 0.5, 3)
    _once(2, 2, 0.0, -1)  # warm up: compile the graphs once, outside the timing
    walls = []
    for rep in range(reps):
        quiet_gc()
        walls.append(_once(tasks, cap, latency_s, rep))
    ideal = math.ceil(tasks / cap) * latency_s
    wall = median(walls)
    ours = wall / ideal
    return [
        record(
            NAME,
            unit="x ideal",
            ours=ours,
            theirs=None,
            goal=f"ours <= {GOAL}",
            met=ours <= GOAL,
            sizes={"tasks": tasks, "cap": cap, "child_latency_s": latency_s, "ideal_s": ideal, "reps": reps},
            notes=theirs_note(
                "One parent turn starts every task with start_async_task; timed until all have "
                "settled. No deepagents peer for local background tasks: theirs is null."
            ),
            detail={"wall_s": wall, "overhead_ms_per_task": (wall - ideal) / tasks * 1000},
        )
    ]
