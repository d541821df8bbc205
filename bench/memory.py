"""Measure 7, memory: peak Python memory while 100 children run at once.

The parent's first turn emits ``children`` ``task`` calls in one message and
runs them with ``ainvoke`` (so all are in flight together; each child's model
sleeps ``latency_s``). The figure is the ``tracemalloc`` peak during that run
above what was allocated before it, in MiB. Each agent first delegates once
outside the measurement, so ours has already compiled its (lazily built)
child graph, as deepagents compiled its own at construction.
"""

from __future__ import annotations

import asyncio
import tracemalloc
from typing import Any

from bench.common import (
    OURS,
    THEIRS,
    answer,
    answered,
    delegating_agent,
    quiet_gc,
    record,
    scripted,
    sides,
    spec,
    theirs_note,
    user,
)
from deep_agent._testing import tool_call

NAME = "memory"
MIB = 1024 * 1024


def _agent(side: str, children: int, latency_s: float) -> Any:
    def calls(n: int) -> dict[str, Any]:
        return {
            "tool_calls": [
                tool_call("task", description=f"item {i}: answer at once", subagent_type="worker")
                for i in range(n)
            ]
        }

    child_model = scripted(rules=[("item", [answer("item done")])], latency_s=latency_s)
    parent_model = scripted(
        rules=[("warm up", [calls(1), "warm"])], responses=[calls(children), "all done"]
    )
    # 100 calls in one run: past our default per-run cap of 50, which would refuse half of them.
    return delegating_agent(side, parent_model, [spec("worker", model=child_model)], uncapped_run=True)


async def _peak(agent: Any, children: int) -> float:
    await agent.ainvoke(user("warm up"))
    quiet_gc()
    tracemalloc.start()
    try:
        base, _ = tracemalloc.get_traced_memory()
        tracemalloc.reset_peak()
        state = await agent.ainvoke(user("process every item"))
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    answers = [m for m in state["messages"] if m.type == "tool"]
    if len(answers) != children or not all(answered(m, "item done") for m in answers):
        raise RuntimeError(f"memory: unexpected child answers {[m.text for m in answers[:3]]}...")
    return (peak - base) / MIB


def run(quick: bool = False) -> list[dict[str, Any]]:
    children, latency_s = (5, 0.02) if quick else (100, 0.2)
    peaks = {side: asyncio.run(_peak(_agent(side, children, latency_s), children)) for side in sides()}
    ours, theirs = peaks[OURS], peaks.get(THEIRS)
    return [
        record(
            NAME,
            unit="MiB",
            ours=ours,
            theirs=theirs,
            goal="report (no target)",
            met=None,
            sizes={"children": children, "child_latency_s": latency_s, "path": "ainvoke"},
            notes=theirs_note(
                "tracemalloc peak above the pre-run baseline while all children are in flight."
            ),
            detail={f"{side}_kib_per_child": peak * 1024 / children for side, peak in peaks.items()},
        )
    ]
