"""Measure 3, fan-out: 16 children in parallel, each with 0.5 s of model latency.

The parent's first turn emits 16 ``task`` calls in one message; each child's
model sleeps ``latency_s`` and answers. The parent's model has no latency.
The figure is wall time over the ideal, ``ceil(children / cap) * latency``:
1.0 means delegation added nothing to the model's own latency.

deepagents has no concurrency cap for its ``task`` tool, so the capped run
is ours alone. On the ``invoke`` path LangGraph's tool node runs parallel
tool calls on a thread pool sized by the run config's ``max_concurrency``
(default: Python's ``min(32, cpus + 4)``), which bounds both sides alike on
a small machine; the ``ainvoke`` path has no such bound.
"""

from __future__ import annotations

import asyncio
import math
import os
from typing import Any

from bench.common import (
    OURS,
    THEIRS,
    answer,
    answered,
    atimed,
    delegating_agent,
    median,
    quiet_gc,
    record,
    scripted,
    sides,
    spec,
    theirs_note,
    timed,
    user,
)
from deep_agent._testing import tool_call

NAME = "fanout"
GOAL = 1.1


def _agent(side: str, children: int, latency_s: float, cap: int | None) -> Any:
    child_model = scripted(rules=[("part", [answer("part done")])], latency_s=latency_s)
    parent_model = scripted(
        responses=[
            {
                "tool_calls": [
                    tool_call("task", description=f"part {i}: answer at once", subagent_type="worker")
                    for i in range(children)
                ]
            },
            "all parts done",
        ]
    )
    return delegating_agent(
        side, parent_model, [spec("worker", model=child_model)], max_concurrent=cap
    )


def _check(state: dict[str, Any], children: int) -> None:
    answers = [m for m in state["messages"] if m.type == "tool"]
    if len(answers) != children or not all(answered(m, "part done") for m in answers):
        raise RuntimeError(f"fanout: unexpected child answers {[m.text for m in answers[:3]]}...")


def _time(agent: Any, mode: str, children: int) -> float:
    inputs = user("run all parts")
    quiet_gc()
    if mode == "invoke":
        seconds, state = timed(lambda: agent.invoke(inputs))
    else:
        seconds, state = asyncio.run(atimed(agent.ainvoke(inputs)))
    _check(state, children)
    return seconds


def run(quick: bool = False) -> list[dict[str, Any]]:
    children, latency_s, cap, reps = (4, 0.05, 2, 2) if quick else (16, 0.5, 4, 5)
    records = []
    for mode in ("ainvoke", "invoke"):
        for label, limit in (("uncapped", None), (f"cap{cap}", cap)):
            ideal = math.ceil(children / (limit or children)) * latency_s
            agents = {
                side: _agent(side, children, latency_s, limit)
                for side in sides()
                if side == OURS or limit is None
            }
            times: dict[str, list[float]] = {}
            for _ in range(reps):
                for side, agent in agents.items():
                    times.setdefault(side, []).append(_time(agent, mode, children))
            ours = median(times[OURS]) / ideal
            theirs = median(times[THEIRS]) / ideal if THEIRS in times else None
            note = "Wall time of the whole parent run over ceil(children/cap) * latency."
            if limit is not None:
                note += " deepagents has no concurrency cap: theirs is null."
            if mode == "invoke":
                note += (
                    f" invoke runs parallel tool calls on LangGraph's thread pool "
                    f"(default min(32, cpus + 4) = {min(32, (os.cpu_count() or 1) + 4)} threads here)."
                )
            records.append(
                record(
                    f"{NAME}.{mode}.{label}",
                    unit="x ideal",
                    ours=ours,
                    theirs=theirs,
                    goal=f"ours <= {GOAL}",
                    met=ours <= GOAL,
                    sizes={
                        "children": children,
                        "child_latency_s": latency_s,
                        "cap": limit,
                        "ideal_s": ideal,
                        "reps": reps,
                    },
                    notes=theirs_note(note),
                )
            )
    return records
