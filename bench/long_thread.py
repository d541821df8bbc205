"""One long thread at the factory level (``--scale``, or ``--only long_thread``): does it stay small?

Each side's own ``create_deep_agent`` (ours: :func:`deep_agent.create_deep_agent`;
theirs: deepagents'), on the same scripted model, makes ``runs`` sequential
delegations on one thread, one parent run (one ``task`` call) each, in a
process of its own per side and checkpointer, so neither side's imports,
caches or heap weigh on the other:

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

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from bench.common import OURS, THEIRS, record, sides, theirs_note

NAME = "long_thread"
GOAL = 1.1


def _side(side: str, saver: str, runs: int) -> dict[str, Any]:
    """One side's figures, measured in a process of its own (:mod:`bench._long_thread_side`)."""
    env = dict(os.environ)
    root = str(Path(__file__).resolve().parents[1])
    env["PYTHONPATH"] = os.pathsep.join(p for p in (root, env.get("PYTHONPATH")) if p)
    done = subprocess.run([sys.executable, "-m", "bench._long_thread_side", side, saver, str(runs)],
                          cwd=root, env=env, capture_output=True, text=True, timeout=3600)
    lines = [line for line in done.stdout.splitlines() if line.startswith("{")]
    if done.returncode != 0 or not lines:
        raise RuntimeError(f"long_thread: the {side} {saver} process failed (exit {done.returncode}):\n"
                           f"{done.stderr[-2000:]}")
    found: dict[str, Any] = json.loads(lines[-1])
    return found


def _rows(found: dict[str, dict[str, Any]], runs: int, saver: str,
          rows: tuple[tuple[str, str, str, bool], ...]) -> Iterator[dict[str, Any]]:
    theirs = found.get(THEIRS)
    detail = {f"{side}_{k}": v for side, f in found.items() for k, v in f.items()}
    for key, unit, what, goal in rows:
        ours_v, theirs_v = found[OURS][key], None if theirs is None else theirs[key]
        yield record(
            f"{NAME}.{saver}.{key}", unit=unit, ours=ours_v, theirs=theirs_v,
            goal=f"ours <= {GOAL} x theirs" if goal else "report",
            met=None if theirs_v is None or not goal else ours_v <= GOAL * theirs_v,
            sizes={"sequential_delegations": runs,
                   "checkpointer": "SqliteSaver" if saver == "sqlite" else "InMemorySaver",
                   "agents": "create_deep_agent on both sides, one process a side"},
            notes=theirs_note(f"{what}; one parent run with one `task` call each, all on one thread."),
            detail=detail,
        )


def run(quick: bool = False) -> Iterator[dict[str, Any]]:
    """The long-thread records: SQLite first, then memory."""
    runs = 12 if quick else 1000
    yield from _rows({side: _side(side, "sqlite", runs) for side in sides()}, runs, "sqlite", (
        ("db_bytes", "bytes", "Size of the SQLite database after all runs", True),
        ("bytes_per_run", "bytes per run (least-squares slope)", "Stored bytes each run adds", True),
        ("growth_cpu", "x (last 10% / first 10%, CPU)",
         "Per-run CPU median of the last 10% of runs over the first 10%", True),
        ("cpu_slope_us", "us more CPU each run than the run before (least-squares slope)",
         "How much dearer each run gets as the thread grows, in absolute terms", True),
        ("reload_ms", "ms (CPU, median over the last 10% of runs)",
         "Reading the latest checkpoint back (get_state) after each of the last 10% of runs", False),
    ))
    yield from _rows({side: _side(side, "memory", runs) for side in sides()}, runs, "memory", (
        ("rss_growth_bytes", "bytes", "Resident memory the process gains over the runs on InMemorySaver", True),
    ))
