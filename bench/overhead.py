"""Measure 1, delegation overhead: what one ``task`` call costs beyond a no-op tool call.

``overhead.noop.*`` sets the no-op run itself beside deepagents': what the
middleware costs a parent that does not delegate.

The parent makes one tool call and then answers. In the delegating run the
call is ``task`` to a child whose model answers at once; in the baseline run
it is a no-op tool. Both runs use the same agent and a zero-latency scripted
model, so the difference of the two medians is the price of delegation
itself: isolating state, running the child graph, recording, writing back.
Runs of the two sides and the two kinds are interleaved so that drift on a
noisy machine hits all four alike.

The figure judged is CPU time (``time.process_time``: every thread of the
process, so the ``invoke`` child's tool-node worker thread counts): wall
time on a shared machine moves with the load by more than the difference
between the two sides. The wall figures are in ``detail``.

``overhead.gc.*`` reports, from the same runs, the garbage collector's
generation-0 collections per delegation (``gc.get_stats()``, read between
runs): the mean over delegating runs minus the mean over no-op runs. A
collection starts when more than 700 new container objects are alive at
once, so the figure follows how many objects a delegation holds at its peak.
Its ``detail`` also counts the objects one delegating ``invoke`` run leaves
for the collector (unreachable, but in a reference cycle): a figure that does
not move with the load or the collector's phase.
"""

from __future__ import annotations

import asyncio
import functools
import gc
import statistics
from typing import Any

from bench.common import (
    OURS,
    THEIRS,
    acpu_and_wall,
    answer,
    answered,
    cpu_and_wall,
    delegating_agent,
    median,
    noop,
    quiet_gc,
    record,
    scripted,
    sides,
    spec,
    theirs_note,
    user,
)
from deep_agent._testing import tool_call

NAME = "overhead"
GOAL_RATIO = 1.0
NOOP_GOAL_RATIO = 1.05
"""A parent that does not delegate pays at most this much more than with deepagents' middleware."""

DELEGATE = user("please delegate")
BASELINE = user("please noop")


def _model() -> Any:
    return scripted(
        rules=[
            ("child job", [answer("done")]),
            (
                "please delegate",
                [
                    {
                        "tool_calls": [
                            tool_call(
                                "task", description="child job: answer at once", subagent_type="worker"
                            )
                        ]
                    },
                    "finished",
                ],
            ),
            ("please noop", [{"tool_calls": [tool_call("noop")]}, "finished"]),
        ]
    )


def _agents() -> dict[str, Any]:
    agents = {}
    for side in sides():
        model = _model()
        agents[side] = delegating_agent(side, model, [spec("worker", model=model)], [noop])
    return agents


def _check(state: dict[str, Any], delegated: bool) -> None:
    tool_messages = [m for m in state["messages"] if m.type == "tool"]
    expected = "done" if delegated else "ok"
    if len(tool_messages) != 1 or not answered(tool_messages[0], expected):
        raise RuntimeError(f"overhead: unexpected tool result {[m.text for m in tool_messages]}")


def _schedule(runs: int) -> list[tuple[str, bool]]:
    order = [(side, delegated) for side in sides() for delegated in (True, False)]
    schedule = []
    for i in range(runs):
        shift = i % len(order)
        schedule.extend(order[shift:] + order[:shift])
    return schedule


Times = dict[tuple[str, bool], list[tuple[float, float, int, int]]]
"""(side, delegated) -> (CPU seconds, wall seconds, generation-0 collections, all collections) of each run."""


def _collections() -> tuple[int, int]:
    stats = gc.get_stats()
    return stats[0]["collections"], sum(s["collections"] for s in stats)


def _sync(agents: dict[str, Any], runs: int, warmup: int) -> Times:
    times: Times = {}
    for side, delegated in _schedule(warmup):
        _check(agents[side].invoke(DELEGATE if delegated else BASELINE), delegated)
    quiet_gc()
    for side, delegated in _schedule(runs):
        message = DELEGATE if delegated else BASELINE
        gen0, every = _collections()
        cpu, wall, state = cpu_and_wall(functools.partial(agents[side].invoke, message))
        gen0_after, every_after = _collections()
        _check(state, delegated)
        times.setdefault((side, delegated), []).append((cpu, wall, gen0_after - gen0, every_after - every))
    return times


async def _async(agents: dict[str, Any], runs: int, warmup: int) -> Times:
    times: Times = {}
    for side, delegated in _schedule(warmup):
        _check(await agents[side].ainvoke(DELEGATE if delegated else BASELINE), delegated)
    quiet_gc()
    for side, delegated in _schedule(runs):
        message = DELEGATE if delegated else BASELINE
        gen0, every = _collections()
        cpu, wall, state = await acpu_and_wall(functools.partial(agents[side].ainvoke, message))
        gen0_after, every_after = _collections()
        _check(state, delegated)
        times.setdefault((side, delegated), []).append((cpu, wall, gen0_after - gen0, every_after - every))
    return times


def _overhead_ms(times: Times, side: str, which: int) -> tuple[float, float, float]:
    """(delegating run - no-op run, delegating run, no-op run), medians in ms of CPU (0) or wall (1)."""
    task_ms = median([t[which] for t in times[(side, True)]]) * 1000
    noop_ms = median([t[which] for t in times[(side, False)]]) * 1000
    return task_ms - noop_ms, task_ms, noop_ms


def _collections_per_delegation(times: Times, side: str, which: int) -> float:
    """Mean collections of a delegating run minus a no-op run's: ``which`` 2 generation 0, 3 any."""
    return (statistics.fmean(t[which] for t in times[(side, True)])
            - statistics.fmean(t[which] for t in times[(side, False)]))


def _left_to_the_collector(agent: Any) -> int:
    """Objects one delegating run leaves unreachable in reference cycles (freed only by a collection)."""
    for _ in range(3):  # the first runs fill caches (a child built on first use, LangChain's) once
        _check(agent.invoke(DELEGATE), True)
    gc.collect()
    gc.set_debug(gc.DEBUG_SAVEALL)
    try:
        _check(agent.invoke(DELEGATE), True)
        gc.collect()
        return len(gc.garbage)
    finally:
        gc.set_debug(0)
        gc.garbage.clear()


def _gc_record(times: Times, mode: str, runs: int, left: dict[str, int]) -> dict[str, Any]:
    gen0 = {side: _collections_per_delegation(times, side, 2) for side in sides()}
    every = {side: _collections_per_delegation(times, side, 3) for side in sides()}
    return record(
        f"{NAME}.gc.{mode}",
        unit="gen-0 collections per delegation",
        ours=gen0[OURS],
        theirs=gen0.get(THEIRS),
        goal="report",
        met=None,
        sizes={"runs": runs},
        notes=theirs_note(
            "Generation-0 collections during a delegating run minus during a no-op run, means over "
            "the overhead runs; collections of any generation, and the objects one delegating invoke "
            "run leaves in reference cycles, in detail."
        ),
        detail={**{f"{side}_all_generations": v for side, v in every.items()},
                **{f"{side}_objects_left_to_the_collector": n for side, n in left.items()}},
    )


def run(quick: bool = False) -> list[dict[str, Any]]:
    runs, warmup = (5, 2) if quick else (1000, 10)
    records = []
    left: dict[str, int] = {}
    for mode in ("invoke", "ainvoke"):
        agents = _agents()
        left = left or {side: _left_to_the_collector(agents[side]) for side in sides()}
        if mode == "invoke":
            times = _sync(agents, runs, warmup)
        else:
            times = asyncio.run(_async(agents, runs, warmup))
        overhead_ms: dict[str, float | None] = {OURS: None, THEIRS: None}
        detail: dict[str, Any] = {}
        for side in sides():
            overhead_ms[side], detail[f"{side}_task_run_cpu_ms"], detail[f"{side}_noop_run_cpu_ms"] = (
                _overhead_ms(times, side, 0))
            detail[f"{side}_wall_ms"], detail[f"{side}_task_run_wall_ms"], detail[f"{side}_noop_run_wall_ms"] = (
                _overhead_ms(times, side, 1))
        if THEIRS in sides() and detail[f"{THEIRS}_wall_ms"] > 0:
            detail["wall_ratio"] = detail[f"{OURS}_wall_ms"] / detail[f"{THEIRS}_wall_ms"]
        ours, theirs = overhead_ms[OURS], overhead_ms[THEIRS]
        met = None if theirs is None or ours is None else ours <= GOAL_RATIO * theirs
        records.append(
            record(
                f"{NAME}.{mode}",
                unit="ms CPU",
                ours=ours,
                theirs=theirs,
                goal=f"ours <= {GOAL_RATIO} x theirs",
                met=met,
                sizes={"runs": runs, "warmup": warmup, "model_latency_s": 0},
                notes=theirs_note(
                    "CPU median of a run with one `task` call to a child that answers at once, minus "
                    "that of a run with one no-op tool call; same agent, same scripted model. "
                    "Wall figures in detail."
                ),
                detail=detail,
            )
        )
        if THEIRS in sides():
            noop_ours, noop_theirs = detail[f"{OURS}_noop_run_cpu_ms"], detail[f"{THEIRS}_noop_run_cpu_ms"]
            records.append(record(
                f"{NAME}.noop.{mode}", unit="ms CPU", ours=noop_ours, theirs=noop_theirs,
                goal=f"ours <= {NOOP_GOAL_RATIO} x theirs", met=noop_ours <= NOOP_GOAL_RATIO * noop_theirs,
                sizes={"runs": runs, "warmup": warmup, "model_latency_s": 0},
                notes=theirs_note("CPU median of the whole run with one no-op tool call and no delegation: what "
                                  "the middleware costs a parent that does not delegate. Wall figures in detail "
                                  "of the record above."),
            ))
        records.append(_gc_record(times, mode, runs, left))
    return records
