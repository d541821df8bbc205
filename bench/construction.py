"""Measure 2, construction: building a parent agent with 1, 10 and 100 subagents.

"Building" is what a user's program does once: construct the delegation
middleware over N specs and compile the parent with ``create_agent``. Our
registry validates the specs and compiles a child only when it is first
used, so the cost should stay flat in N; deepagents compiles every child up
front. Each figure is the median of several builds, sides interleaved.
"""

from __future__ import annotations

from typing import Any

from bench.common import (
    OURS,
    THEIRS,
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
)

NAME = "construction"
GOAL_RATIO_AT_MAX = 0.05
GOAL_FLATNESS = 1.5
"""Ours at the largest N over ours at N=1: "flat" means at most this."""


def _specs(n: int, model: Any) -> list[dict[str, Any]]:
    return [
        spec(
            f"worker-{i}",
            model=model,
            tools=[noop],
            description=f"Worker {i}: handles area {i} of the job and reports back.",
            system_prompt=f"You are worker {i}. Do the task with your tools; answer briefly.",
        )
        for i in range(n)
    ]


def _build_ms(side: str, n: int) -> float:
    model = scripted(responses=["done"])
    specs = _specs(n, model)
    quiet_gc()
    seconds, _ = timed(lambda: delegating_agent(side, model, specs, [noop]))
    return seconds * 1000


def run(quick: bool = False) -> list[dict[str, Any]]:
    counts = (1, 3, 10) if quick else (1, 10, 100)
    reps = 2 if quick else 7
    for side in sides():  # warm imports and caches before anything is timed
        _build_ms(side, 1)
    times: dict[tuple[str, int], list[float]] = {}
    for _ in range(reps):
        for n in counts:
            for side in sides():
                times.setdefault((side, n), []).append(_build_ms(side, n))
    ms = {key: median(values) for key, values in times.items()}
    top = counts[-1]
    records = []
    for n in counts:
        ours, theirs = ms[(OURS, n)], ms.get((THEIRS, n))
        goal, met = "report", None
        if n == top:
            goal = f"ours <= {GOAL_RATIO_AT_MAX} x theirs"
            met = None if theirs is None else ours <= GOAL_RATIO_AT_MAX * theirs
        records.append(
            record(
                f"{NAME}.{n}",
                unit="ms",
                ours=ours,
                theirs=theirs,
                goal=goal,
                met=met,
                sizes={"subagents": n, "reps": reps},
                notes=theirs_note(
                    "Median time to build the middleware over N specs and compile the parent "
                    "with create_agent."
                ),
            )
        )
    ours_flat = ms[(OURS, top)] / ms[(OURS, counts[0])]
    theirs_flat = (
        ms[(THEIRS, top)] / ms[(THEIRS, counts[0])] if (THEIRS, top) in ms else None
    )
    records.append(
        record(
            f"{NAME}.growth",
            unit=f"x (time at {top} / time at {counts[0]})",
            ours=ours_flat,
            theirs=theirs_flat,
            goal=f"ours <= {GOAL_FLATNESS} (flat in the number of subagents)",
            met=ours_flat <= GOAL_FLATNESS,
            sizes={"subagents": list(counts), "reps": reps},
            notes=theirs_note("How build time grows from the smallest to the largest N."),
        )
    )
    return records
