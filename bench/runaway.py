"""Measure 4, runaway child: a child whose model calls a tool forever.

The child's model answers every turn with another tool call. Ours stops the
child at its ``max_turns`` and hands the parent an error result; the parent
answers. deepagents sets no limit of its own: its child would run until
the recursion limit ``create_agent`` compiles into every agent (9,999 graph
steps, so about 3,000-5,000 model calls), so the bench stops their child
itself, by making the scripted model raise after ``cap_calls`` calls or
``cap_s`` seconds, and reports their figures as lower bounds ("theirs >= N").
That raise propagates out of their parent run: deepagents' parent never gets
control back, so their "seconds" is time until the run died.

"model calls" counts calls that reached the child's model; "seconds" is wall
time of the parent run (the parent's model has no latency).
"""

from __future__ import annotations

import asyncio
import time
from typing import Any

from bench.common import (
    OURS,
    THEIRS,
    BenchCapReached,
    call_counter,
    delegating_agent,
    noop,
    record,
    scripted,
    sides,
    spec,
    theirs_note,
    user,
)
from deep_agent._testing import tool_call

NAME = "runaway"
GOAL_FRACTION = 0.1
"""A "small fraction": ours at most this share of theirs (a lower bound for theirs)."""


def _run_once(side: str, mode: str, sizes: dict[str, Any]) -> dict[str, Any]:
    counter = call_counter(
        {"tool_calls": [tool_call("noop")]},
        cap_calls=sizes["cap_calls"] if side == THEIRS else None,
        cap_s=sizes["cap_s"] if side == THEIRS else None,
    )
    child_model = scripted(default=counter, latency_s=sizes["child_latency_s"])
    parent_model = scripted(
        responses=[
            {"tool_calls": [tool_call("task", description="poll forever", subagent_type="poller")]},
            "the poller failed; carrying on",
        ]
    )
    agent = delegating_agent(
        side,
        parent_model,
        [spec("poller", model=child_model, tools=[noop], max_turns=sizes["max_turns"])],
    )
    inputs = user("start the poller")
    start = time.perf_counter()
    outcome = "parent answered"
    try:
        if mode == "invoke":
            state = agent.invoke(inputs)
        else:
            state = asyncio.run(agent.ainvoke(inputs))
        error = next(m for m in state["messages"] if m.type == "tool")
        if error.status != "error":
            outcome = "child returned without error"
    except BenchCapReached:
        outcome = "run died at the bench cap"
    except Exception as exc:  # noqa: BLE001 - reported, not hidden
        outcome = f"run died: {type(exc).__name__}"
    return {
        "seconds": time.perf_counter() - start,
        "calls": counter.calls,
        "capped": counter.capped,
        "outcome": outcome,
    }


def run(quick: bool = False) -> list[dict[str, Any]]:
    sizes = (
        {"max_turns": 3, "child_latency_s": 0.0, "cap_calls": 20, "cap_s": 2.0}
        if quick
        else {"max_turns": 10, "child_latency_s": 0.02, "cap_calls": 150, "cap_s": 8.0}
    )
    records = []
    for mode in ("invoke", "ainvoke"):
        results = {side: _run_once(side, mode, sizes) for side in sides()}
        ours, theirs = results[OURS], results.get(THEIRS)
        bound = ""
        if theirs is not None:
            sign = ">=" if theirs["capped"] else "="
            bound = (
                f" theirs {sign} {theirs['calls']} calls / {theirs['seconds']:.2f} s "
                f"({theirs['outcome']})."
            )
        notes = f"ours: {ours['outcome']}.{bound}"
        for metric, unit in (("calls", "model calls"), ("seconds", "s")):
            ours_value = float(ours[metric])
            theirs_value = None if theirs is None else float(theirs[metric])
            if metric == "calls":
                goal = f"ours <= max_turns ({sizes['max_turns']})"
                met = ours["calls"] <= sizes["max_turns"] and ours["outcome"] == "parent answered"
            else:
                goal = f"ours <= {GOAL_FRACTION} x theirs (theirs is a lower bound)"
                met = None if theirs_value is None else ours_value <= GOAL_FRACTION * theirs_value
            records.append(
                record(
                    f"{NAME}.{mode}.{metric}",
                    unit=unit,
                    ours=ours_value,
                    theirs=theirs_value,
                    goal=goal,
                    met=met,
                    sizes=sizes,
                    notes=theirs_note(notes),
                )
            )
    return records
