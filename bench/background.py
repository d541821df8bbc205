"""Measure 6, background throughput: 100 local background tasks under the cap.

A parent built with ``BackgroundSubagentMiddleware`` starts ``tasks``
background tasks in one turn (one ``start_async_task`` call each); every
child makes one model call of ``latency_s``. The clock runs from the
parent's invoke until every task has settled in this process
(:func:`subagents.wait_for_background`), so the parent's own turn counts.
The figure is wall time over the ideal, ``ceil(tasks / cap) * latency``.
deepagents has no local background tasks (its async subagents need a
LangGraph server), so theirs is null.

Measure ``background.start``: the CPU time of one task start when the
runtime's table already holds ``1,000`` tasks (started in one go, as one
parent message with many ``start_async_task`` calls does: one running, the
rest pending behind a cap of 1), against the same with ``100``. A start must
not scan the table: the goal is a growth of at most 1.5x for 10x the tasks.
CPU medians (``time.process_time``), since wall time moves with the load.

Measure ``background.batch``: ``1,000`` tasks of ``0.1`` s each (one child
model call of that latency) under a cap of ``50``, started in one parent
turn, then waited for, on ``invoke`` and ``ainvoke``, with ``InMemorySaver``
and with a SQLite file (``SqliteSaver`` on ``invoke``, ``AsyncSqliteSaver``
on ``ainvoke``). Each row is wall time over the ideal
(``ceil(1000 / 50) * 0.1 = 2 s``), with the process CPU time per task and
the seconds the starting turn took against the batch's end: that turn must
return before the batch ends, on ``invoke`` too.

Measure ``background.share``: of the ``InMemorySaver`` batch's CPU a task,
on each path, what is ours: the batch's figure minus the floor measured
right after it with LangChain and LangGraph alone (:func:`_floor_cpu_ms`).
The goal is at most 0.5 ms a task above that floor.
"""

from __future__ import annotations

import asyncio
import math
import sqlite3
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from langchain.agents import create_agent
from langgraph.checkpoint.memory import InMemorySaver

from bench.common import answer, median, noop, quiet_gc, record, scripted, spec, theirs_note, user
from deep_agent._testing import tool_call
from middleware import BackgroundSubagentMiddleware
from subagents import (
    BackgroundRuntime,
    BackgroundTasks,
    SubagentRegistry,
    TaskCall,
    coerce_spec,
    wait_for_background,
)
from subagents._settings import DelegationSettings

NAME = "background"
GOAL = 1.2
START_GROWTH_GOAL = 1.5
BATCH_GOALS = {"memory": 1.5, "sqlite": 2.0}
"""Wall over ideal for ``background.batch``, per checkpointer."""
BATCH_CPU_MS_GOAL = 2.0
SHARE_GOAL_MS = 0.5
"""Our own CPU a batch task may cost above the framework's floor (``background.share.*``)."""


def _agent(tasks: int, cap: int, latency_s: float,
           checkpointer: Any = None) -> tuple[Any, BackgroundSubagentMiddleware]:
    worker = scripted(rules=[("job", [answer("job done")])], latency_s=latency_s)
    parent = scripted(
        responses=[
            {"tool_calls": [tool_call("start_async_task", description=f"job {i}", subagent_type="worker")
                            for i in range(tasks)]},
            "started",
        ]
    )
    middleware = BackgroundSubagentMiddleware(
        [spec("worker", model=worker)], settings=DelegationSettings.of(
            general_purpose=False, max_background_tasks=cap, max_delegations=None, notify=False,
        ),
    )
    saver = InMemorySaver() if checkpointer is None else checkpointer
    return create_agent(parent, middleware=[middleware], checkpointer=saver), middleware


def _once(tasks: int, cap: int, latency_s: float, rep: int) -> tuple[float, float]:
    """Wall and CPU seconds of one run."""
    agent, middleware = _agent(tasks, cap, latency_s)
    start, cpu = time.perf_counter(), time.process_time()
    state = agent.invoke(user("go"), {"configurable": {"thread_id": f"bench-background-{rep}"}})
    ledger = state["async_tasks"]
    if not wait_for_background(ledger, timeout_s=120):
        raise RuntimeError("background: tasks did not settle within 120 s")
    seconds, cpu = time.perf_counter() - start, time.process_time() - cpu
    entries = [middleware.runtime.table.get(task_id) for task_id in ledger]
    statuses = {entry.fields["status"] if entry is not None else "missing" for entry in entries}
    middleware.close()
    if len(ledger) != tasks or statuses != {"completed"}:
        raise RuntimeError(f"background: {len(ledger)} tasks, statuses {statuses}")
    return seconds, cpu


def _call(i: int) -> TaskCall:
    config = {"configurable": {"thread_id": "bench-start", "checkpoint_ns": ""}, "metadata": {}}
    return TaskCall(subagent_type="worker", description=f"job {i}", parent_state={},
                    tool_call_id=f"call-{i}", parent_config=config)


async def _fill_and_time(tasks: BackgroundTasks, runtime: BackgroundRuntime, held: int,
                         timed_starts: int) -> list[float]:
    """Start ``held`` tasks (they stay in the table, pending); CPU seconds of each next start."""
    for i in range(held):
        await tasks.start(_call(i), {})
    await asyncio.sleep(0)
    if len(runtime.table) != held:
        raise RuntimeError(f"background.start: {len(runtime.table)} tasks in the table, expected {held}")
    cpu = []
    for i in range(held, held + timed_starts):
        before = time.process_time()
        await tasks.start(_call(i), {})
        cpu.append(time.process_time() - before)
    return cpu


def _start_cpu(held: int, timed_starts: int) -> float:
    """Median CPU seconds of one start with ``held`` tasks in the table."""
    worker = scripted(default=answer("job done"), latency_s=600)  # holds the only slot until closed
    registry = SubagentRegistry([coerce_spec(spec("worker", model=worker))])
    with BackgroundRuntime() as runtime:
        tasks = BackgroundTasks(registry, max_concurrent=1, runtime=runtime)
        return median(runtime.run(_fill_and_time(tasks, runtime, held, timed_starts)))


def _start_record(quick: bool) -> dict[str, Any]:
    small, large, timed_starts, reps = (10, 100, 20, 1) if quick else (100, 1000, 200, 5)
    _start_cpu(5, 5)  # warm up
    smalls, larges = [], []
    for _ in range(reps):  # interleaved, so a busy moment of the machine hits both sides
        quiet_gc()
        smalls.append(_start_cpu(small, timed_starts))
        quiet_gc()
        larges.append(_start_cpu(large, timed_starts))
    at_small, at_large = median(smalls), median(larges)
    growth = at_large / at_small if at_small > 0 else None
    return record(
        f"{NAME}.start",
        unit="CPU ms per start",
        ours=at_large * 1000,
        theirs=None,
        goal=f"growth ({large} / {small} tasks) <= {START_GROWTH_GOAL}",
        met=growth is not None and growth <= START_GROWTH_GOAL,
        sizes={"tasks_in_table": large, "compared_with": small, "timed_starts": timed_starts, "reps": reps},
        notes=theirs_note("CPU median of one start_async_task start (BackgroundTasks.start) with the "
                          "table already holding that many tasks. No deepagents peer."),
        detail={"cpu_ms_per_start_small": at_small * 1000, "growth": growth},
    )


@contextmanager
def _sync_saver(kind: str, path: str) -> Iterator[Any]:
    """The checkpointer of one ``invoke`` batch: in memory, or ``SqliteSaver`` on a file."""
    if kind == "memory":
        yield InMemorySaver()
        return
    from langgraph.checkpoint.sqlite import SqliteSaver

    conn = sqlite3.connect(path, check_same_thread=False)
    try:
        yield SqliteSaver(conn)
    finally:
        conn.close()


async def _astarted(kind: str, path: str, make: Any, config: dict[str, Any]) -> tuple[Any, Any, float]:
    """One ``ainvoke`` starting turn: the state, the middleware and the turn's seconds."""
    if kind == "memory":
        agent, middleware = make(InMemorySaver())
        start = time.perf_counter()
        return await agent.ainvoke(user("go"), config), middleware, time.perf_counter() - start
    from langgraph.checkpoint.sqlite.aio import AsyncSqliteSaver

    async with AsyncSqliteSaver.from_conn_string(path) as saver:
        agent, middleware = make(saver)
        start = time.perf_counter()
        return await agent.ainvoke(user("go"), config), middleware, time.perf_counter() - start


def _batch_once(path: str, kind: str, tasks: int, cap: int, latency_s: float, folder: str) -> dict[str, float]:
    """One batch: the starting turn's seconds, the batch's wall seconds and CPU seconds."""
    db = str(Path(folder) / f"{path}-{kind}-{time.monotonic_ns()}.sqlite")
    config = {"configurable": {"thread_id": "bench-batch"}}

    def make(saver: Any) -> tuple[Any, BackgroundSubagentMiddleware]:
        return _agent(tasks, cap, latency_s, saver)

    quiet_gc()
    wall, cpu = time.perf_counter(), time.process_time()
    with _sync_saver(kind, db) as saver:
        if path == "invoke":
            agent, middleware = make(saver)
            state = agent.invoke(user("go"), config)
            turn = time.perf_counter() - wall
        else:
            # The async saver's connection is closed once the turn returns: outcomes are
            # stored by the runtime on a connection of its own, so the wait needs none.
            state, middleware, turn = asyncio.run(_astarted(kind, db, make, config))
        ledger = state["async_tasks"]
        try:
            if not wait_for_background(ledger, timeout_s=300):
                raise RuntimeError("background.batch: tasks did not settle within 300 s")
            wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
            statuses = {e.fields["status"] if (e := middleware.runtime.table.get(t)) is not None else "missing"
                        for t in ledger}
        finally:
            middleware.close()
    if len(ledger) != tasks or statuses != {"completed"}:
        raise RuntimeError(f"background.batch: {len(ledger)} tasks, statuses {statuses}")
    return {"turn_s": turn, "wall_s": wall, "cpu_s": cpu}


def _floor_cpu_ms(path: str, tasks: int, cap: int, latency_s: float) -> dict[str, float]:
    """CPU ms a task of LangChain and LangGraph alone, in the batch's shape, before any code of ours.

    The parent's: a ``create_agent`` turn whose one message calls a no-op
    tool ``tasks`` times (each call a task on the tool node, then the
    tools-to-model edge). The child's: ``tasks`` runs of a ``create_agent``
    graph of one scripted model call of ``latency_s``, ``cap`` at a time on
    one loop, each on a thread of its own, checkpointed once as it stops
    (``durability="exit"``), as a background child runs.
    """
    parent = scripted(responses=[{"tool_calls": [tool_call("noop") for _ in range(tasks)]}, "done"])
    agent: Any = create_agent(parent, [noop], checkpointer=InMemorySaver())
    config = {"configurable": {"thread_id": "floor"}}
    quiet_gc()
    cpu = time.process_time()
    if path == "invoke":
        agent.invoke(user("go"), config)
    else:
        asyncio.run(agent.ainvoke(user("go"), config))
    parent_ms = (time.process_time() - cpu) / tasks * 1000
    child: Any = create_agent(scripted(default=answer("job done"), latency_s=latency_s), checkpointer=InMemorySaver())

    async def children() -> None:
        slots = asyncio.Semaphore(cap)

        async def one(i: int) -> None:
            async with slots:
                await child.ainvoke(user(f"job {i}"), {"configurable": {"thread_id": f"child-{i}"}},
                                    durability="exit")

        await asyncio.gather(*(one(i) for i in range(tasks)))

    quiet_gc()
    cpu = time.process_time()
    asyncio.run(children())
    return {"parent_ms": parent_ms, "child_ms": (time.process_time() - cpu) / tasks * 1000}


def _batch_record(quick: bool) -> list[dict[str, Any]]:
    tasks, cap, latency_s = (20, 5, 0.02) if quick else (1000, 50, 0.1)
    ideal = math.ceil(tasks / cap) * latency_s
    rows = []
    with tempfile.TemporaryDirectory(prefix="bench-batch-") as folder:
        _batch_once("invoke", "memory", 4, 2, 0.0, folder)  # warm up: imports and graph compiles
        _floor_cpu_ms("ainvoke", 4, 2, 0.0)
        for kind in ("memory", "sqlite"):
            for path in ("invoke", "ainvoke"):
                got = _batch_once(path, kind, tasks, cap, latency_s, folder)
                ours = got["wall_s"] / ideal
                cpu_ms = got["cpu_s"] / tasks * 1000
                goal = BATCH_GOALS[kind]
                saver = {"memory": "InMemorySaver", "sqlite": "SqliteSaver" if path == "invoke"
                         else "AsyncSqliteSaver"}[kind]
                rows.append(record(
                    f"{NAME}.batch.{path}.{kind}",
                    unit="x ideal",
                    ours=ours,
                    theirs=None,
                    goal=f"wall <= {goal}x ideal, CPU <= {BATCH_CPU_MS_GOAL} ms a task, turn returns first",
                    met=ours <= goal and cpu_ms <= BATCH_CPU_MS_GOAL and got["turn_s"] < got["wall_s"] - latency_s,
                    sizes={"tasks": tasks, "cap": cap, "child_latency_s": latency_s, "ideal_s": ideal,
                           "path": path, "checkpointer": saver},
                    notes=theirs_note("One parent turn starts every task, then wait_for_background; "
                                      "wall and process CPU from the parent's call to the batch's end."),
                    detail={"wall_s": got["wall_s"], "cpu_ms_per_task": cpu_ms,
                            "starting_turn_s": got["turn_s"]},
                ))
                if kind == "memory":
                    rows.append(_share_record(path, cpu_ms, _floor_cpu_ms(path, tasks, cap, latency_s),
                                              tasks, cap, latency_s))
    return rows


def _share_record(path: str, cpu_ms: float, floor: dict[str, float], tasks: int, cap: int,
                  latency_s: float) -> dict[str, Any]:
    """``background.share.PATH``: what a task of the batch costs beyond the framework's floor, measured right after."""
    ours = cpu_ms - floor["parent_ms"] - floor["child_ms"]
    return record(
        f"{NAME}.share.{path}",
        unit="CPU ms a task above the framework floor",
        ours=ours,
        theirs=None,
        goal=f"<= {SHARE_GOAL_MS} ms",
        met=ours <= SHARE_GOAL_MS,
        sizes={"tasks": tasks, "cap": cap, "child_latency_s": latency_s, "path": path,
               "checkpointer": "InMemorySaver"},
        notes=theirs_note("The background.batch row's process CPU a task (InMemorySaver) minus the floor "
                          "measured right after it with LangChain and LangGraph alone: a create_agent turn "
                          "calling a no-op tool once a task, and a create_agent child of one model call a "
                          "task, cap at a time, durability='exit'."),
        detail={"cpu_ms_per_task": cpu_ms, "floor_parent_ms": floor["parent_ms"],
                "floor_child_ms": floor["child_ms"]},
    )


def run(quick: bool = False) -> list[dict[str, Any]]:
    tasks, cap, latency_s, reps = (6, 2, 0.02, 1) if quick else (100, 10, 0.5, 3)
    _once(2, 2, 0.0, -1)  # warm up: compile the graphs once, outside the timing
    walls, cpus = [], []
    for rep in range(reps):
        quiet_gc()
        wall_s, cpu_s = _once(tasks, cap, latency_s, rep)
        walls.append(wall_s)
        cpus.append(cpu_s)
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
            detail={"wall_s": wall, "overhead_ms_per_task": (wall - ideal) / tasks * 1000,
                    "cpu_ms_per_task": median(cpus) / tasks * 1000},
        ),
        _start_record(quick),
        *_batch_record(quick),
    ]
