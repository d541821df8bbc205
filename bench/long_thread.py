"""One long thread (``--scale``, or ``--only long_thread [--runs N]``): does it stay small and cheap?

At two levels, each against deepagents in the same run: the factory level,
each side's own ``create_deep_agent`` (ours: :func:`deep_agent.create_deep_agent`;
theirs: deepagents'), and the middleware level, one plain ``create_agent``
graph holding the side's ``SubAgentMiddleware`` and nothing else
(``long_thread.middleware.sqlite.*``: per-run CPU at the end, ``get_state``
and the database's bytes; ``long_thread.middleware.postgres.*``: the same on
``PostgresSaver``, a database a side on a throwaway server the bench starts
as the tests do, left out, said on stderr, where none starts; its bytes are
the checkpoint tables' with their indexes and TOAST, and the CPU is this
process's alone, not the server's). On the same scripted model, each makes ``runs``
sequential delegations on one thread, one parent run (one ``task`` call)
each, in a process of its own per side, level and checkpointer, so neither
side's imports, caches or heap weigh on the other:

* ``long_thread.sqlite.*`` -- on ``SqliteSaver``: the database's bytes at
  the end (connection closed, so the WAL is folded in); the stored bytes
  each run adds (the least-squares slope of the checkpoint and write blobs'
  bytes over the run index, sampled 20 times); per-run CPU, the
  median of the last 10% of runs over the first 10%, and its least-squares
  slope over the run index (a side whose first runs are cheaper reads a
  steeper ratio for the same absolute growth); and the CPU to reload the
  latest checkpoint (``get_state``, which reads the database each time),
  the median of one read after each of the last 10% of runs: a read's cost
  rises and falls with the distance to the last snapshots. ``detail`` also
  has the read of the very last one through a fresh connection and graph.
* ``long_thread.memory.rss_growth_bytes`` -- on ``InMemorySaver``: how much the process's
  resident memory grows over the runs (after a warm-up run, collected).

``detail`` has each side's checkpoints per run (root and children), CPU
totals and wall times. Times are CPU (``time.process_time``) unless named wall.
"""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from bench.common import OURS, THEIRS, record, sides, theirs_note

NAME = "long_thread"
ROOT = Path(__file__).resolve().parents[1]
GOAL = 1.1


RUNS = 1000
"""Runs on the thread by default (``--quick``: 12)."""

_chosen: list[int] = []  # the run count ``--runs`` gave, if it did


def set_runs(runs: int | None) -> None:
    """The run count of the measure, whether quick or not (``python -m bench --only long_thread --runs N``)."""
    if runs is not None and runs < 2:
        raise ValueError(f"--runs: at least 2 runs on the thread, not {runs}")
    _chosen[:] = [] if runs is None else [runs]


def _side(side: str, saver: str, runs: int, level: str = "factory", url: str | None = None) -> dict[str, Any]:
    """One side's figures, measured in a process of its own (:mod:`bench._long_thread_side`)."""
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(ROOT), env.get("PYTHONPATH")) if p)
    done = subprocess.run([sys.executable, "-m", "bench._long_thread_side", side, saver, str(runs), level,
                           *([url] if url else [])],
                          cwd=ROOT, env=env, capture_output=True, text=True, timeout=4 * 3600)
    lines = [line for line in done.stdout.splitlines() if line.startswith("{")]
    if done.returncode != 0 or not lines:
        raise RuntimeError(f"long_thread: the {side} {saver} {level} process failed (exit {done.returncode}):\n"
                           f"{done.stderr[-2000:]}")
    found: dict[str, Any] = json.loads(lines[-1])
    return found


SAVERS = {"sqlite": "SqliteSaver", "postgres": "PostgresSaver", "memory": "InMemorySaver"}

Row = tuple[str, str, str, float | None]
"""(figure, unit, what it is, goal as a ratio to theirs or ``None`` to report)."""


@contextlib.contextmanager
def _postgres() -> Iterator[Any]:
    """A throwaway Postgres server (the tests' own, ``tests/helpers/postgres``); ``None`` (said on stderr) without."""
    tests = str(ROOT / "tests")
    if tests not in sys.path:
        sys.path.insert(0, tests)
    from helpers.postgres import PostgresUnavailable, running_postgres  # type: ignore[import-not-found]

    with contextlib.ExitStack() as stack:
        try:
            server = stack.enter_context(running_postgres())
        except PostgresUnavailable as exc:
            print(f"long_thread: no Postgres rows, no server starts here: {exc}", file=sys.stderr)
            server = None
        yield server


def _rows(found: dict[str, dict[str, Any]], runs: int, prefix: str, saver: str, agents: str,
          rows: tuple[Row, ...]) -> Iterator[dict[str, Any]]:
    theirs = found.get(THEIRS)
    detail = {f"{side}_{k}": v for side, f in found.items() for k, v in f.items()}
    for key, unit, what, goal in rows:
        ours_v, theirs_v = found[OURS][key], None if theirs is None else theirs[key]
        yield record(
            f"{prefix}.{saver}.{key}", unit=unit, ours=ours_v, theirs=theirs_v,
            goal=f"ours <= {goal} x theirs" if goal else "report",
            met=None if theirs_v is None or not goal else ours_v <= goal * theirs_v,
            sizes={"sequential_delegations": runs,
                   "checkpointer": SAVERS[saver], "agents": agents},
            notes=theirs_note(f"{what}; one parent run with one `task` call each, all on one thread."),
            detail=detail,
        )


def run(quick: bool = False) -> Iterator[dict[str, Any]]:
    """The long-thread records: the factory level on SQLite, then on memory, then the middleware level."""
    runs = _chosen[0] if _chosen else 12 if quick else RUNS
    factory = "create_deep_agent on both sides, one process a side"
    yield from _rows({side: _side(side, "sqlite", runs) for side in sides()}, runs, NAME, "sqlite", factory, (
        ("db_bytes", "bytes", "Size of the SQLite database after all runs", GOAL),
        ("bytes_per_run", "bytes per run (least-squares slope)", "Stored bytes each run adds", GOAL),
        ("growth_cpu", "x (last 10% / first 10%, CPU)",
         "Per-run CPU median of the last 10% of runs over the first 10%", GOAL),
        ("cpu_slope_us", "us more CPU each run than the run before (least-squares slope)",
         "How much dearer each run gets as the thread grows, in absolute terms", GOAL),
        ("reload_ms", "ms (CPU, median over the last 10% of runs)",
         "Reading the latest checkpoint back (get_state) after each of the last 10% of runs", None),
    ))
    yield from _rows({side: _side(side, "memory", runs) for side in sides()}, runs, NAME, "memory", factory, (
        ("rss_growth_bytes", "bytes", "Resident memory the process gains over the runs on InMemorySaver", GOAL),
    ))
    middleware = "create_agent with the side's SubAgentMiddleware and nothing else, one process a side"
    found = {side: _side(side, "sqlite", runs, "middleware") for side in sides()}
    yield from _rows(found, runs, f"{NAME}.middleware", "sqlite", middleware, _middleware_rows("SQLite database"))
    with _postgres() as server:
        if server is not None:
            found = {side: _side(side, "postgres", runs, "middleware", server.create_database()) for side in sides()}
            yield from _rows(found, runs, f"{NAME}.middleware", "postgres", middleware,
                             _middleware_rows("Postgres checkpoint tables (indexes and TOAST too)"))


def _middleware_rows(database: str) -> tuple[Row, ...]:
    return (
        ("last_cpu_ms", "ms (CPU, median of the last 10% of runs)", "Per-run CPU at the thread's end", 1.1),
        ("reload_ms", "ms (CPU, median over the last 10% of runs)",
         "Reading the latest checkpoint back (get_state) after each of the last 10% of runs", 1.5),
        ("db_bytes", "bytes", f"Size of the {database} after all runs", 1.1),
        ("growth_cpu", "x (last 10% / first 10%, CPU)",
         "Per-run CPU median of the last 10% of runs over the first 10%", None),
    )
