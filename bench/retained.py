"""Measure 7b, memory kept under repetition: what 10,000 sequential delegations leave behind.

Each delegation is one parent ``invoke`` (a plain ``create_agent`` parent
with the side's delegation middleware, as every measure builds it; no
checkpointer, so nothing needs to outlive the run) whose single ``task``
call runs a child that answers at once. After a warm-up outside the
measurement, ``tracemalloc`` traces the whole repetition; the figure is the
traced memory still allocated once the last run has returned and
``gc.collect()`` has run, in MiB: what the process keeps for delegations
that are over. ``detail`` adds the objects kept (``gc.get_objects()``) and,
for ours, what our in-process transcript table holds (its own count).

The scripted models are told to forget the requests they saw after each run
(their call log is a test aid, and would otherwise grow on both sides).
"""

from __future__ import annotations

import gc
import tracemalloc
from typing import Any

from bench.common import (
    OURS,
    THEIRS,
    answer,
    answered,
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

NAME = "retained"
MIB = 1024 * 1024
GOAL_MIB = 2.0

_PROMPT = user("please delegate")


def _agent(side: str) -> tuple[Any, Any]:
    model = scripted(
        rules=[
            ("child job", [answer("done")]),
            (
                "please delegate",
                [{"tool_calls": [tool_call("task", description="child job: answer at once",
                                           subagent_type="worker")]}, "finished"],
            ),
        ]
    )
    return delegating_agent(side, model, [spec("worker", model=model)], [noop]), model


def _once(agent: Any, model: Any) -> None:
    state = agent.invoke(_PROMPT)
    model.calls.clear()
    if not answered(state["messages"][-2], "done"):
        raise RuntimeError(f"retained: unexpected child answer {state['messages'][-2].text[:80]!r}")


def _table_bytes(side: str) -> int:
    if side != OURS:
        return 0
    from subagents._transcripts import MEMORY

    return MEMORY.bytes


def _kept(side: str, runs: int, warm: int) -> dict[str, float]:
    agent, model = _agent(side)
    for _ in range(warm):
        _once(agent, model)
    gc.collect()
    objects, table = len(gc.get_objects()), _table_bytes(side)
    tracemalloc.start()
    try:
        base = tracemalloc.get_traced_memory()[0]
        for _ in range(runs):
            _once(agent, model)
        gc.collect()
        kept = tracemalloc.get_traced_memory()[0] - base
    finally:
        tracemalloc.stop()
    return {
        "mib": kept / MIB,
        "bytes_per_delegation": kept / runs,
        "objects_per_delegation": (len(gc.get_objects()) - objects) / runs,
        "table_mib": (_table_bytes(side) - table) / MIB,
    }


def run(quick: bool = False) -> list[dict[str, Any]]:
    runs, warm = (20, 5) if quick else (10_000, 100)
    kept = {side: _kept(side, runs, warm) for side in sides()}
    ours, theirs = kept[OURS], kept.get(THEIRS)
    detail: dict[str, Any] = {}
    for side, figures in kept.items():
        for key, value in figures.items():
            if side == OURS or key != "table_mib":
                detail[f"{side}_{key}"] = value
    return [
        record(
            NAME,
            unit="MiB",
            ours=ours["mib"],
            theirs=None if theirs is None else theirs["mib"],
            goal=f"ours <= {GOAL_MIB:g} MiB",
            met=ours["mib"] <= GOAL_MIB,
            sizes={"delegations": runs, "warm_up": warm, "path": "invoke", "checkpointer": None,
                   "parent": "create_agent"},
            notes=theirs_note("tracemalloc memory still allocated after the runs and gc.collect(), "
                              "above the pre-run baseline."),
            detail=detail,
        )
    ]
