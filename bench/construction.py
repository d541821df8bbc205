"""Measure 2, construction: importing the factory, and building a parent agent with 1, 10 and 100 subagents.

``construction.import`` is the first thing a user's program pays:
``from deep_agent import create_deep_agent`` against
``from deepagents import create_deep_agent``, each in a fresh interpreter,
the sides alternating; the wall-time median, with the count of modules each
leaves in ``sys.modules`` in ``detail``.

"Building" is what a user's program does once: construct the delegation
middleware over N specs and compile the parent with ``create_agent``. Our
registry validates the specs and compiles a child only when it is first
used, so the cost should stay flat in N; deepagents compiles every child up
front. Each figure is the median of several builds, sides interleaved.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path
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
GOAL_IMPORT = 1.0

_PACKAGE = {OURS: "deep_agent", THEIRS: "deepagents"}
_IMPORT_PROBE = (
    "import json, sys, time\n"
    "t, c = time.perf_counter(), time.process_time()\n"
    "from {package} import create_deep_agent\n"
    "print(json.dumps([time.perf_counter() - t, time.process_time() - c, len(sys.modules)]))\n"
)


def _import_once(side: str, pycache: str) -> tuple[float, float, int]:
    """Wall and CPU seconds to import ``create_deep_agent`` in a fresh interpreter, and the modules it leaves loaded.

    Both sides read bytecode from one cache folder the first (discarded) run
    filled: an installed wheel has its bytecode, a source checkout run with
    PYTHONDONTWRITEBYTECODE would recompile ours on every start and not theirs.
    """
    root = str(Path(__file__).resolve().parents[1])
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [root, os.environ.get("PYTHONPATH")])),
           "PYTHONPYCACHEPREFIX": pycache}
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    out = subprocess.run([sys.executable, "-c", _IMPORT_PROBE.format(package=_PACKAGE[side])],
                         capture_output=True, text=True, env=env, cwd=root, check=True, timeout=120)
    wall, cpu, modules = json.loads(out.stdout.strip().splitlines()[-1])
    return float(wall), float(cpu), int(modules)


def _import_record(reps: int) -> dict[str, Any]:
    found: dict[str, list[tuple[float, float, int]]] = {side: [] for side in sides()}
    with tempfile.TemporaryDirectory(prefix="bench-pycache-") as pycache:
        for side in sides():
            _import_once(side, pycache)
        for rep in range(reps):
            order = sides() if rep % 2 == 0 else tuple(reversed(sides()))
            for side in order:
                found[side].append(_import_once(side, pycache))
    ms = {side: median([wall for wall, _, _ in runs]) * 1000 for side, runs in found.items()}
    cpu_ms = {side: median([cpu for _, cpu, _ in runs]) * 1000 for side, runs in found.items()}
    modules = {side: runs[-1][2] for side, runs in found.items()}
    ours, theirs = ms[OURS], ms.get(THEIRS)
    return record(
        f"{NAME}.import",
        unit="ms",
        ours=ours,
        theirs=theirs,
        goal=f"ours <= {GOAL_IMPORT} x theirs",
        met=None if theirs is None else ours <= GOAL_IMPORT * theirs,
        sizes={"reps": reps},
        notes=theirs_note(
            "Median wall time of `from <package> import create_deep_agent` in a fresh interpreter, "
            "bytecode cached for both, the sides alternating; modules = len(sys.modules) after it."
        ),
        detail={**{f"{side}_modules": n for side, n in modules.items()},
                **{f"{side}_cpu_ms": v for side, v in cpu_ms.items()}},
    )


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
    records = [_import_record(1 if quick else 11)]
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
