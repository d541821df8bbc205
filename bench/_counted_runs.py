"""The process the instructions measure counts: warm up, then ``n`` runs of one kind, collection off.

``python -m bench._counted_runs SIDE KIND N MODE`` builds the overhead
measure's agent for ``SIDE`` (``ours``/``theirs``), warms it up with
``warmup`` runs of each kind, turns the garbage collector off, and makes
``N`` runs of ``KIND`` (``task``: one delegation; ``noop``: one no-op tool
call) with ``MODE`` (``invoke``/``ainvoke``). Under cachegrind, two such
processes that differ only in ``N`` differ by exactly ``N`` runs' worth of
instructions: imports, construction and warm-up cancel out.
"""

from __future__ import annotations

import asyncio
import gc
import sys
from typing import Any

from bench import overhead
from bench.common import OURS, THEIRS, use_peer

COLLECTION_OFF = None
"""In the sequence of runs: where the warm-up ends and the collector is turned off."""


def _sequence(kind: str, n: int, warmup: int) -> list[Any]:
    """The messages to run, in order: ``warmup`` runs of each kind, then ``n`` of ``kind``."""
    counted = overhead.DELEGATE if kind == "task" else overhead.BASELINE
    return [*[overhead.DELEGATE, overhead.BASELINE] * warmup, COLLECTION_OFF, *[counted] * n]


def _collection_off() -> None:
    gc.collect()
    gc.disable()


def main(argv: list[str]) -> None:
    side, kind, n, mode, warmup = argv[0], argv[1], int(argv[2]), argv[3], int(argv[4])
    if side == OURS:
        use_peer(False)  # deepagents is not imported into our side's count
    agent = overhead._agents()[OURS if side == OURS else THEIRS]
    sequence = _sequence(kind, n, warmup)

    async def arun() -> None:
        for message in sequence:
            _collection_off() if message is COLLECTION_OFF else await agent.ainvoke(message)

    if mode == "ainvoke":
        asyncio.run(arun())
    else:
        for message in sequence:
            _collection_off() if message is COLLECTION_OFF else agent.invoke(message)


if __name__ == "__main__":
    main(sys.argv[1:])
