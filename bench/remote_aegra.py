"""The remote set on aegra: settle time on two aegra instances (one Postgres, one Redis) against raw ``langgraph-sdk``.

Part of ``python -m bench --remote`` (or ``--only remote``), after the
``langgraph dev`` measures of :mod:`bench.remote`. It starts the pair the
integration tests start (``tests/helpers/aegra.py``: aegra in a Python 3.12
venv of its own, cached with the tests', a throwaway Postgres cluster and
Redis), serving a child that answers at once, and measures the time for N =
10, 50 and 200 tasks to settle, ours (one parent turn starting them, then
:func:`subagents.wait_for_background`) and raw ``langgraph-sdk`` (create
thread and run for each, then join), interleaved, both through instance A
while both instances' workers take the runs; then the polling cost of one
parent turn with 200 live tasks (children that run for minutes) over an idle
turn. Without a Python 3.12 (or the Postgres and Redis binaries) it yields
nothing and says why on stderr. ``python -m bench --only aegra`` runs this
set alone.

Example::

    for record in run(quick=False):   # remote.aegra.settle.n10, .n50, .n200, remote.aegra.poll.n200
        print(record["ours"], record["theirs"])
"""

from __future__ import annotations

import contextlib
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from bench.common import median, record
from bench.remote import (
    NAME,
    POLL_GOAL_MS,
    SETTLE_GOAL,
    counted_requests,
    ours_settle,
    parent_middleware,
    polling_cost_ms,
    raw_settle,
)

ROOT = Path(__file__).resolve().parents[1]
CACHE = ROOT / ".pytest_cache" / "d" / "aegra"
"""Where the tests keep aegra's venv (pytest's cache): made once, shared with them."""
GRAPH = "child"
ONLY = "aegra"
"""The name that runs this set alone: ``python -m bench --only aegra``."""
LONG_JOB = "long job"
"""Descriptions the child works on for minutes (``tests/helpers/aegra_child``): tasks that stay live."""


@contextlib.contextmanager
def _pair() -> Iterator[Any]:
    """The aegra pair of the tests, on a Postgres cluster of its own; ``None`` (said on stderr) when it cannot start."""
    tests = str(ROOT / "tests")
    if tests not in sys.path:
        sys.path.insert(0, tests)
    import pytest
    from helpers.aegra import aegra_pair  # type: ignore[import-not-found]  # the tests' helpers, on sys.path above
    from helpers.postgres import PostgresUnavailable, running_postgres  # type: ignore[import-not-found]

    CACHE.mkdir(parents=True, exist_ok=True)
    stack = contextlib.ExitStack()
    try:
        postgres = stack.enter_context(running_postgres())
        a, _b = stack.enter_context(aegra_pair(CACHE, postgres, {"AEGRA_CHILD_SECONDS": "0"}))
    except (pytest.skip.Exception, pytest.fail.Exception, PostgresUnavailable) as exc:
        stack.close()
        print(f"remote.aegra: skipped, the aegra pair cannot start here: {exc}", file=sys.stderr)
        yield None
        return
    with stack:
        yield a


def run(quick: bool = False) -> Iterator[dict[str, Any]]:
    """The records, each as soon as it is measured."""
    plan = ((3, 2),) if quick else ((10, 9), (50, 9), (200, 3))  # (tasks, interleaved repetitions)
    poll_tasks, poll_reps = (6, 3) if quick else (200, 7)
    with _pair() as a:
        if a is None:
            return
        parent = parent_middleware(a.url, GRAPH)  # one parent process serves every run of ours, as in production
        ours_settle(a.url, 2, GRAPH, parent)  # warm up both sides: graphs loaded, connections open
        raw_settle(a.url, 2, GRAPH)
        for tasks, reps in plan:
            ours, theirs, sent_ours, sent_theirs = [], [], [], []
            for _ in range(reps):  # interleaved, so drift on a shared machine hits both sides alike
                with counted_requests() as sent:
                    ours.append(ours_settle(a.url, tasks, GRAPH, parent))
                sent_ours.append(sent[0] / tasks)
                with counted_requests() as sent:
                    theirs.append(raw_settle(a.url, tasks, GRAPH))
                sent_theirs.append(sent[0] / tasks)
            yield record(
                f"{NAME}.aegra.settle.n{tasks}",
                unit="s",
                ours=median(ours),
                theirs=median(theirs),
                goal=f"ratio <= {SETTLE_GOAL}",
                met=median(ours) / median(theirs) <= SETTLE_GOAL,
                sizes={"tasks": tasks, "reps": reps, "instances": 2},
                notes="aegra, two API instances on one Postgres and one Redis; both sides through instance A. "
                "Theirs is raw langgraph-sdk (create thread + run, join each); ours one parent turn, then "
                "wait_for_background.",
            )
            yield record(
                f"{NAME}.aegra.requests.n{tasks}",
                unit="HTTP requests per task",
                ours=max(sent_ours),
                theirs=max(sent_theirs),
                goal="ours <= theirs",
                met=max(sent_ours) <= max(sent_theirs),
                sizes={"tasks": tasks, "reps": reps, "instances": 2},
                notes="The settle runs above, counted at the HTTP client: the most of any run, each side. "
                "Theirs: thread create, run create, join.",
                detail={"ours_min": min(sent_ours), "theirs_min": min(sent_theirs)},
            )
        parent.tasks.runtime.close()
        # Last: the long children hold the workers until the pair stops.
        cost, detail = polling_cost_ms(a.url, poll_tasks, poll_reps, GRAPH, LONG_JOB)
        yield record(
            f"{NAME}.aegra.poll.n{poll_tasks}",
            unit="ms per parent turn",
            ours=cost,
            theirs=None,
            goal=f"ours < {POLL_GOAL_MS:g}",
            met=cost < POLL_GOAL_MS,
            sizes={"live_tasks": poll_tasks, "reps": poll_reps, "instances": 2},
            notes="aegra pair: a parent turn with that many live remote tasks minus a turn with none (median). "
            "No raw-SDK counterpart: theirs is null.",
            detail=detail,
        )
