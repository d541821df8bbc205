"""The instructions set (``--instructions``): the delegation overhead counted in instructions and cache misses.

Timing cannot tell two sides apart that differ by a few percent on a shared
machine: the overhead measure is a difference of two medians, and it moves
with the load by more than that. Instructions do not. For each side, mode
(``invoke``/``ainvoke``) and kind of run (``task``: one delegation;
``noop``: one no-op tool call), two processes are counted under cachegrind
(:mod:`bench._counted_runs`), one making ``few`` runs and one ``many``
after the same warm-up, garbage collection off; their difference over
``many - few`` is one run's instructions, over all threads, with imports,
construction and warm-up cancelled out. The processes of one side and mode
are children forked from one process after its imports and warm-up, so
those are run under cachegrind once, not once per count. The delegation's cost is the
``task`` run minus the ``noop`` run, the same difference the overhead
measure times. ``PYTHONHASHSEED`` is fixed so that repeats agree.

The same runs also simulate a fixed cache (32 KiB L1 for code and for data,
1 MiB last level: :data:`CACHE`, so the figures do not depend on the host)
and count its **last-level misses** (code and data, reads and writes): the
memory traffic a clock sees and an instruction count does not. A shared
virtual machine's share of a real last-level cache is about that size, and
each such miss costs some 50-100 ns there. This is reported, not judged: it
says why two sides that run the same instructions can take different time.

It needs valgrind (Debian's ``valgrind`` package) and takes a few minutes
(each process runs some 50 times slower under cachegrind; two at a time);
``--quick`` (one side, ``invoke``) is one such process, about a minute.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import tempfile
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from bench.common import OURS, THEIRS, record, sides, theirs_note

NAME = "instructions"
GOAL_RATIO = 1.0
CACHE = ("--I1=32768,8,64", "--D1=32768,8,64", "--LL=1048576,16,64")
"""The simulated caches: sizes, ways, line bytes."""
_EVENTS = re.compile(rb"^events: (.+)$", re.M)
_TOTALS = re.compile(rb"^(?:summary|totals): (.+)$", re.M)
_LAST_LEVEL_MISSES = ("ILmr", "DLmr", "DLmw")


def _valgrind() -> str:
    found = shutil.which("valgrind")
    if found is None:
        raise RuntimeError("the instructions set needs valgrind on PATH (Debian's valgrind package)")
    return found


def _count(valgrind: str, out_dir: Path, side: str, mode: str, runs: tuple[int, ...], *,
           warmup: int) -> dict[tuple[str, str, int, str], dict[str, int]]:
    """Cachegrind's event totals, all threads, of each child making ``runs`` runs of each kind, by job."""
    out = out_dir / f"cachegrind.{side}.{mode}"
    env = {**os.environ, "PYTHONHASHSEED": "0"}
    root = str(Path(__file__).resolve().parents[1])
    env["PYTHONPATH"] = os.pathsep.join(p for p in (root, env.get("PYTHONPATH")) if p)
    jobs = [f"{kind}:{n}" for kind in ("task", "noop") for n in runs]
    done = subprocess.run(
        [valgrind, "--tool=cachegrind", "--cache-sim=yes", *CACHE, f"--cachegrind-out-file={out}.%p",
         sys.executable, "-m", "bench._counted_runs", side, mode, str(warmup), *jobs],
        cwd=root, env=env, capture_output=True, timeout=1800)
    counts: dict[tuple[str, str, int, str], dict[str, int]] = {}
    for line in done.stdout.decode(errors="replace").splitlines():
        kind, n, pid = line.split()
        text = Path(f"{out}.{pid}").read_bytes() if Path(f"{out}.{pid}").exists() else b""
        events, totals = _EVENTS.search(text), _TOTALS.search(text)
        if events is not None and totals is not None:
            counts[(side, kind, int(n), mode)] = dict(zip(events.group(1).decode().split(),
                                                          map(int, totals.group(1).split()), strict=False))
    if done.returncode != 0 or len(counts) != len(jobs):
        tail = done.stderr.decode(errors="replace")[-2000:]
        raise RuntimeError(f"instructions: the {side} {mode} counted runs failed "
                           f"(exit {done.returncode}, {len(counts)} of {len(jobs)} counts):\n{tail}")
    return counts


def _per_delegation(counts: dict[Any, dict[str, int]], side: str, mode: str, few: int, many: int,
                    events: tuple[str, ...]) -> tuple[float, dict[str, float]]:
    """``events`` summed per delegation (a task run minus a no-op run), and per run of each kind."""
    per_run = {kind: sum(counts[(side, kind, many, mode)][e] - counts[(side, kind, few, mode)][e]
                         for e in events) / (many - few) for kind in ("task", "noop")}
    return per_run["task"] - per_run["noop"], per_run


def run(quick: bool = False) -> list[dict[str, Any]]:
    few, many, warmup = (1, 2, 1) if quick else (10, 60, 10)
    modes = ("invoke",) if quick else ("invoke", "ainvoke")
    valgrind = _valgrind()
    jobs = [(side, mode) for mode in modes for side in sides()]
    counts: dict[tuple[str, str, int, str], dict[str, int]] = {}
    with tempfile.TemporaryDirectory(prefix="bench-cachegrind-") as tmp, ThreadPoolExecutor(2) as pool:
        def count(job: tuple[str, str]) -> dict[tuple[str, str, int, str], dict[str, int]]:
            return _count(valgrind, Path(tmp), job[0], job[1], (few, many), warmup=warmup)

        for found in pool.map(count, jobs):
            counts.update(found)
    records = []
    for mode in modes:
        instructions = {side: _per_delegation(counts, side, mode, few, many, ("Ir",)) for side in sides()}
        misses = {side: _per_delegation(counts, side, mode, few, many, _LAST_LEVEL_MISSES) for side in sides()}
        ours, theirs = instructions[OURS][0] / 1e6, (instructions[THEIRS][0] / 1e6 if THEIRS in sides() else None)
        sizes = {"runs_few": few, "runs_many": many, "warmup": warmup}
        records.append(record(
            f"{NAME}.{mode}", unit="M instructions", ours=ours, theirs=theirs,
            goal=f"ours <= {GOAL_RATIO} x theirs", met=None if theirs is None else ours <= GOAL_RATIO * theirs,
            sizes=sizes,
            notes=theirs_note("Instructions (cachegrind, all threads, collection off) of a run with one `task` "
                              "call minus a run with one no-op tool call: the overhead measure, counted."),
            detail={f"{side}_{kind}_run_m": count / 1e6
                    for side in sides() for kind, count in instructions[side][1].items()},
        ))
        records.append(record(
            f"{NAME}.{mode}.cache_misses", unit="k last-level misses", ours=misses[OURS][0] / 1e3,
            theirs=misses[THEIRS][0] / 1e3 if THEIRS in sides() else None, goal="report", met=None,
            sizes={**sizes, "cache": " ".join(CACHE)},
            notes=theirs_note("Last-level cache misses (code and data, reads and writes) of the same runs, "
                              "per delegation, in a simulated 1 MiB last-level cache: memory traffic, "
                              "which costs time without costing instructions."),
            detail={f"{side}_{kind}_run_k": count / 1e3
                    for side in sides() for kind, count in misses[side][1].items()},
        ))
    return records
