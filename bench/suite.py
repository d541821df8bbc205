"""Running the measures and printing them: ``python -m bench [--quick] [--only NAME,...] [--remote] ...``.

Every measure prints one JSON object per line (``measure``, ``unit``,
``ours``, ``theirs``, ``ratio`` = ours / theirs, ``goal``, ``met``,
``sizes``, ``notes``, sometimes ``detail``), then the suite prints a short
table and the total time. ``--quick`` runs every measure at tiny sizes (the
smoke test uses it); its figures mean nothing. ``--remote`` adds the remote
set (:mod:`bench.remote`: background tasks on ``langgraph dev`` servers it
starts itself, a few minutes), which is opt-in; ``--scale`` adds the scale
set (:mod:`bench.scale`: cost as runs grow, a few minutes, and
:mod:`bench.long_thread`: 1,000 delegations on one thread through each
side's ``create_deep_agent``, one process a side, ``--only long_thread``
alone), also opt-in;
``--instructions`` adds the delegation overhead counted in instructions
and cache misses under cachegrind (:mod:`bench.instructions`: needs valgrind, a few minutes).
``--only realmodel`` runs the task-set eval of small local models
(:mod:`bench.realmodel`: SmolLM2 on llama.cpp's server, a few minutes).
``--only aegra`` runs the aegra part of the remote set alone, ``--only langgraph_dev`` the ``langgraph dev`` part.
``--only knockout`` runs the overhead with parts of our governance switched
off one layer at a time (:mod:`bench.knockout`: about three minutes), to
show what each part costs.
"""

from __future__ import annotations

import argparse
import sys
import time
import warnings
from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import Any

from bench import (
    background,
    budget,
    construction,
    context,
    fanout,
    footprint,
    instructions,
    knockout,
    long_thread,
    memory,
    overhead,
    realmodel,
    remote,
    remote_aegra,
    retained,
    runaway,
    scale,
    wrapup,
)
from bench.common import deepagents_version, dumps, use_peer

MEASURES: dict[str, Callable[[bool], list[dict[str, Any]]]] = {
    overhead.NAME: overhead.run,
    construction.NAME: construction.run,
    fanout.NAME: fanout.run,
    runaway.NAME: runaway.run,
    context.NAME: context.run,
    background.NAME: background.run,
    memory.NAME: memory.run,
    budget.NAME: budget.run,
    footprint.NAME: footprint.run,
    wrapup.NAME: wrapup.run,
}
"""Measure name -> ``run(quick)``, in the order of the issue that defines them."""

def _remote(quick: bool) -> Iterator[dict[str, Any]]:
    """The remote set: on ``langgraph dev`` servers, then on the aegra pair."""
    yield from remote.run(quick)
    yield from remote_aegra.run(quick)


REMOTE_MEASURES: dict[str, Callable[[bool], Iterable[dict[str, Any]]]] = {remote.NAME: _remote}
"""Opt-in measures that start servers of their own (``--remote``, or ``--only remote``)."""

AEGRA_MEASURES: dict[str, Callable[[bool], Iterable[dict[str, Any]]]] = {remote_aegra.ONLY: remote_aegra.run}
"""The aegra part of the remote set alone (``--only aegra``; it is also in ``--remote``)."""

DEV_MEASURES: dict[str, Callable[[bool], Iterable[dict[str, Any]]]] = {remote.ONLY: remote.run}
"""The ``langgraph dev`` part of the remote set alone (``--only langgraph_dev``; it is also in ``--remote``)."""

SCALE_MEASURES: dict[str, Callable[[bool], Iterable[dict[str, Any]]]] = {
    scale.NAME: scale.run, long_thread.NAME: long_thread.run, retained.NAME: retained.run}
"""Opt-in measures of cost as runs grow (``--scale``, or ``--only scale`` / ``long_thread`` / ``retained``; minutes)."""

INSTRUCTION_MEASURES: dict[str, Callable[[bool], Iterable[dict[str, Any]]]] = {instructions.NAME: instructions.run}
"""Opt-in: the delegation overhead counted under cachegrind (``--instructions``; needs valgrind, minutes)."""

KNOCKOUT_MEASURES: dict[str, Callable[[bool], Iterable[dict[str, Any]]]] = {knockout.NAME: knockout.run}
"""Opt-in: the overhead with parts of our governance switched off, one layer at a time (``--only knockout``)."""

REALMODEL_MEASURES: dict[str, Callable[[bool], Iterable[dict[str, Any]]]] = {realmodel.NAME: realmodel.run}
"""Opt-in: the small-local-model task-set eval on SmolLM2 on llama.cpp (``--only realmodel``; minutes)."""
_ALL = {
    **MEASURES, **REALMODEL_MEASURES, **REMOTE_MEASURES, **AEGRA_MEASURES, **DEV_MEASURES, **SCALE_MEASURES,
    **INSTRUCTION_MEASURES, **KNOCKOUT_MEASURES,
}


def run_measures(
    names: Sequence[str] | None = None,
    *,
    quick: bool = False,
    emit: Callable[[dict[str, Any]], None] | None = None,
) -> list[dict[str, Any]]:
    """Run the named measures (all by default) and return their records."""
    chosen = list(names or MEASURES)
    unknown = [n for n in chosen if n not in _ALL]
    if unknown:
        raise ValueError(f"unknown measure(s) {', '.join(unknown)}; choose from {', '.join(_ALL)}")
    records = []
    for name in chosen:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            for rec in _ALL[name](quick):
                if quick:
                    rec["met"] = None  # tiny sizes: the goals do not apply
                records.append(rec)
                if emit is not None:
                    emit(rec)
    return records


def format_table(records: Sequence[dict[str, Any]]) -> str:
    """A short human table of the records."""
    rows = [("measure", "unit", "ours", "theirs", "ratio", "met", "goal")]
    for r in records:
        met = {True: "yes", False: "NO", None: "-"}[r["met"]]
        rows.append(
            (
                r["measure"],
                r["unit"],
                _cell(r["ours"]),
                _cell(r["theirs"]),
                _cell(r["ratio"]),
                met,
                r["goal"],
            )
        )
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]) - 1)]
    lines = []
    for row in rows:
        # The last column is not padded: zip stops at the widths.
        cells = [c.ljust(w) if i < 2 else c.rjust(w) for i, (c, w) in enumerate(zip(row, widths, strict=False))]
        lines.append("  ".join([*cells, row[-1]]))
    lines.insert(1, "-" * len(lines[0]))
    return "\n".join(lines)


def _cell(value: float | None) -> str:
    if value is None:
        return "null"
    return f"{value:.3g}"


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m bench",
        description="Governed subagents vs deepagents' SubAgentMiddleware on scripted workloads.",
    )
    parser.add_argument("--quick", action="store_true", help="tiny sizes (smoke test); figures mean nothing")
    parser.add_argument(
        "--no-peer", action="store_true", help="measure ours only, even if deepagents is installed"
    )
    parser.add_argument(
        "--only", default=None, help=f"comma-separated measures to run ({', '.join(_ALL)})"
    )
    parser.add_argument(
        "--remote", action="store_true",
        help="also run the remote set: background tasks on langgraph dev servers it starts (minutes)",
    )
    parser.add_argument(
        "--scale", action="store_true",
        help="also run the scale set: 1,000 delegations on SQLite, ledgers of 5,000, 2,000 calls at once (minutes)",
    )
    parser.add_argument(
        "--instructions", action="store_true",
        help="also count the delegation overhead in instructions and cache misses under cachegrind "
             "(needs valgrind; minutes)",
    )
    parser.add_argument("--runs", type=int, default=None,
                        help=f"long_thread: runs on the one thread (default {long_thread.RUNS:,}; --quick: 12)")
    args = parser.parse_args(argv)
    long_thread.set_runs(args.runs)
    names = [n.strip() for n in args.only.split(",") if n.strip()] if args.only else None
    if names and any(n not in _ALL for n in names):
        parser.error(f"--only: choose from {', '.join(_ALL)}")
    for wanted, extra in ((args.remote, REMOTE_MEASURES), (args.scale, SCALE_MEASURES),
                          (args.instructions, INSTRUCTION_MEASURES)):
        if wanted:
            names = [*(names or MEASURES), *(n for n in extra if n not in (names or ()))]

    if args.no_peer:
        use_peer(False)
    start = time.perf_counter()
    records = run_measures(names, quick=args.quick, emit=lambda r: print(dumps(r), flush=True))
    total = time.perf_counter() - start
    peer = deepagents_version()
    print()
    print(format_table(records))
    print()
    print(
        f"{len(records)} records in {total:.1f} s"
        f"{' (quick sizes: figures mean nothing)' if args.quick else ''}; "
        f"peer: {'deepagents ' + peer if peer else 'none'}"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
