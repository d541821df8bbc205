"""Measure 1, delegation overhead: what one ``task`` call costs beyond a no-op tool call.

The parent makes one tool call and then answers. In the delegating run the
call is ``task`` to a child whose model answers at once; in the baseline run
it is a no-op tool. Both runs use the same agent and a zero-latency scripted
model, so the difference of the two medians is the price of delegation
itself: isolating state, running the child graph, recording, writing back.
Runs of the two sides and the two kinds are interleaved so that drift on a
noisy machine hits all four alike.
"""

from __future__ import annotations

import asyncio
import functools
from typing import Any

from bench.common import (
    OURS,
    THEIRS,
    answer,
    answered,
    atimed,
    delegating_agent,
    median,
    noop,
    quiet_gc,
    record,
    scripted,
    sides,
    spec,
    theirs_note,
    timed,
    user,
)
from deep_agent.testing import tool_call

NAME = "overhead"
GOAL_RATIO = 0.5

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


def _sync(agents: dict[str, Any], runs: int, warmup: int) -> dict[tuple[str, bool], list[float]]:
    times: dict[tuple[str, bool], list[float]] = {}
    for side, delegated in _schedule(warmup):
        _check(agents[side].invoke(DELEGATE if delegated else BASELINE), delegated)
    quiet_gc()
    for side, delegated in _schedule(runs):
        seconds, state = timed(functools.partial(agents[side].invoke, DELEGATE if delegated else BASELINE))
        _check(state, delegated)
        times.setdefault((side, delegated), []).append(seconds)
    return times


async def _async(
    agents: dict[str, Any], runs: int, warmup: int
) -> dict[tuple[str, bool], list[float]]:
    times: dict[tuple[str, bool], list[float]] = {}
    for side, delegated in _schedule(warmup):
        _check(await agents[side].ainvoke(DELEGATE if delegated else BASELINE), delegated)
    quiet_gc()
    for side, delegated in _schedule(runs):
        seconds, state = await atimed(agents[side].ainvoke(DELEGATE if delegated else BASELINE))
        _check(state, delegated)
        times.setdefault((side, delegated), []).append(seconds)
    return times


def run(quick: bool = False) -> list[dict[str, Any]]:
    runs, warmup = (5, 2) if quick else (60, 5)
    records = []
    for mode in ("invoke", "ainvoke"):
        agents = _agents()
        if mode == "invoke":
            times = _sync(agents, runs, warmup)
        else:
            times = asyncio.run(_async(agents, runs, warmup))
        overhead_ms: dict[str, float | None] = {OURS: None, THEIRS: None}
        detail: dict[str, Any] = {}
        for side in sides():
            task_ms = median(times[(side, True)]) * 1000
            noop_ms = median(times[(side, False)]) * 1000
            overhead_ms[side] = task_ms - noop_ms
            detail[f"{side}_task_run_ms"] = task_ms
            detail[f"{side}_noop_run_ms"] = noop_ms
        ours, theirs = overhead_ms[OURS], overhead_ms[THEIRS]
        met = None if theirs is None or ours is None else ours <= GOAL_RATIO * theirs
        records.append(
            record(
                f"{NAME}.{mode}",
                unit="ms",
                ours=ours,
                theirs=theirs,
                goal=f"ours <= {GOAL_RATIO} x theirs",
                met=met,
                sizes={"runs": runs, "warmup": warmup, "model_latency_s": 0},
                notes=theirs_note(
                    "Median run with one `task` call to a child that answers at once, minus "
                    "the median run with one no-op tool call; same agent, same scripted model."
                ),
                detail=detail,
            )
        )
    return records
