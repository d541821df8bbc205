"""Measure 6, background throughput: 100 local background tasks under the runner's cap.

The in-process background runner is not built yet; it will start each task
as an asyncio task driving :meth:`subagents.TaskRunner.arun`, with the
runner's ``max_concurrent`` cap deciding how many run at once. This measure
drives exactly that: ``tasks`` calls of ``arun`` started together, each child
one model call of ``latency_s``. The figure is wall time over the ideal,
``ceil(tasks / cap) * latency``. deepagents has no local background tasks
(its async subagents need a LangGraph server), so theirs is null.
"""

from __future__ import annotations

import asyncio
import math
import time
from typing import Any

from bench.common import answer, answered, median, quiet_gc, record, scripted, spec, theirs_note
from subagents import SubagentRegistry, TaskCall, TaskRunner

NAME = "background"
GOAL = 1.2


async def _drive(runner: TaskRunner, model: Any, tasks: int) -> tuple[float, list[Any]]:
    calls = [
        TaskCall(
            subagent_type="worker",
            description=f"job {i}: answer at once",
            parent_state={"messages": []},
            tool_call_id=f"call_bg_{i}",
            parent_config={"configurable": {"thread_id": "bench-background"}},
            parent_model=model,
        )
        for i in range(tasks)
    ]
    start = time.perf_counter()
    running = [asyncio.create_task(runner.arun(call)) for call in calls]
    results = await asyncio.gather(*running)
    return time.perf_counter() - start, results


def run(quick: bool = False) -> list[dict[str, Any]]:
    tasks, cap, latency_s, reps = (6, 2, 0.02, 1) if quick else (100, 10, 0.5, 3)
    model = scripted(rules=[("job", [answer("job done")])], latency_s=latency_s)
    runner = TaskRunner(SubagentRegistry([spec("worker", model=model)]), max_concurrent=cap)
    asyncio.run(_drive(runner, model, 1))  # compile the child once, outside the timing
    walls = []
    for _ in range(reps):
        quiet_gc()
        seconds, results = asyncio.run(_drive(runner, model, tasks))
        answers = [c.update["messages"][-1] for c in results]
        if not all(answered(m, "job done") for m in answers):
            raise RuntimeError(f"background: unexpected answers {[m.text for m in answers[:3]]}...")
        walls.append(seconds)
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
            sizes={
                "tasks": tasks,
                "cap": cap,
                "child_latency_s": latency_s,
                "ideal_s": ideal,
                "reps": reps,
            },
            notes=theirs_note(
                "Drives TaskRunner.arun from asyncio tasks under max_concurrent, as the "
                "planned in-process background runner will (the feature is not built yet). "
                "No deepagents peer for local background tasks: theirs is null. Within a cap, "
                "children share one event loop, so each child's own CPU time (overhead_ms_per_task) "
                "queues behind the others'."
            ),
            detail={"wall_s": wall, "overhead_ms_per_task": (wall - ideal) / tasks * 1000},
        )
    ]
