"""The instructions set (``--instructions``): the delegation overhead counted in instructions, not timed.

Timing cannot tell two sides apart that differ by a few percent on a shared
machine: the overhead measure is a difference of two medians, and it moves
with the load by more than that. Instructions do not. For each side, mode
(``invoke``/``ainvoke``) and kind of run (``task``: one delegation;
``noop``: one no-op tool call), two processes run under callgrind
(:mod:`bench._counted_runs`), one making ``few`` runs and one ``many``
after the same warm-up, garbage collection off; their difference over
``many - few`` is one run's instructions, over all threads, with imports,
construction and warm-up cancelled out. The delegation's cost is the
``task`` run minus the ``noop`` run, the same difference the overhead
measure times. ``PYTHONHASHSEED`` is fixed so that repeats agree.

It needs valgrind (Debian's ``valgrind`` package) and takes a few minutes
(each process runs some 50 times slower under callgrind; two at a time).
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
_TOTAL = re.compile(rb"^(?:summary|totals): (\d+)", re.M)


def _valgrind() -> str:
    found = shutil.which("valgrind")
    if found is None:
        raise RuntimeError("the instructions set needs valgrind on PATH (Debian's valgrind package)")
    return found


def _count(valgrind: str, out_dir: Path, side: str, kind: str, runs: int, mode: str, *, warmup: int) -> int:
    """Instructions, all threads, of one process making ``runs`` runs of ``kind``."""
    out = out_dir / f"callgrind.{side}.{kind}.{runs}.{mode}"
    env = {**os.environ, "PYTHONHASHSEED": "0"}
    root = str(Path(__file__).resolve().parents[1])
    env["PYTHONPATH"] = os.pathsep.join(p for p in (root, env.get("PYTHONPATH")) if p)
    done = subprocess.run(
        [valgrind, "--tool=callgrind", f"--callgrind-out-file={out}", sys.executable, "-m", "bench._counted_runs",
         side, kind, str(runs), mode, str(warmup)],
        cwd=root, env=env, capture_output=True, timeout=1800)
    found = _TOTAL.search(out.read_bytes()) if out.exists() else None
    if done.returncode != 0 or found is None:
        tail = done.stderr.decode(errors="replace")[-2000:]
        raise RuntimeError(f"instructions: the {side} {kind} x{runs} ({mode}) process failed "
                           f"(exit {done.returncode}):\n{tail}")
    return int(found.group(1))


def run(quick: bool = False) -> list[dict[str, Any]]:
    few, many, warmup = (1, 2, 1) if quick else (10, 60, 10)
    modes = ("invoke",) if quick else ("invoke", "ainvoke")
    valgrind = _valgrind()
    jobs = [(side, kind, runs, mode) for mode in modes for side in sides()
            for kind in ("task", "noop") for runs in (few, many)]
    with tempfile.TemporaryDirectory(prefix="bench-callgrind-") as tmp, ThreadPoolExecutor(2) as pool:
        counts = dict(zip(jobs, pool.map(lambda job: _count(valgrind, Path(tmp), *job, warmup=warmup), jobs),
                          strict=True))
    records = []
    for mode in modes:
        per_run = {(side, kind): (counts[(side, kind, many, mode)] - counts[(side, kind, few, mode)]) / (many - few)
                   for side in sides() for kind in ("task", "noop")}
        overhead = {side: (per_run[(side, "task")] - per_run[(side, "noop")]) / 1e6 for side in sides()}
        ours, theirs = overhead[OURS], overhead.get(THEIRS)
        records.append(record(
            f"{NAME}.{mode}", unit="M instructions", ours=ours, theirs=theirs,
            goal=f"ours <= {GOAL_RATIO} x theirs", met=None if theirs is None else ours <= GOAL_RATIO * theirs,
            sizes={"runs_few": few, "runs_many": many, "warmup": warmup},
            notes=theirs_note("Instructions (callgrind, all threads, collection off) of a run with one `task` "
                              "call minus a run with one no-op tool call: the overhead measure, counted."),
            detail={f"{side}_{kind}_run_m": count / 1e6 for (side, kind), count in per_run.items()},
        ))
    return records
