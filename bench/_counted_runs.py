"""The process the instructions measure counts: warm up, then ``n`` runs of one kind, collection off.

``python -m bench._counted_runs SIDE KIND N MODE`` builds the overhead
measure's agent for ``SIDE`` (``ours``/``theirs``), warms it up with
``warmup`` runs of each kind, turns the garbage collector off, and makes
``N`` runs of ``KIND`` (``task``: one delegation; ``noop``: one no-op tool
call) with ``MODE`` (``invoke``/``ainvoke``). Under callgrind, two such
processes that differ only in ``N`` differ by exactly ``N`` runs' worth of
instructions: imports, construction and warm-up cancel out.
"""

from __future__ import annotations

import asyncio
import gc
import sys

from bench import overhead
from bench.common import OURS, THEIRS, use_peer


def main(argv: list[str]) -> None:
    side, kind, n, mode, warmup = argv[0], argv[1], int(argv[2]), argv[3], int(argv[4])
    if side == OURS:
        use_peer(False)  # deepagents is not imported into our side's count
    agent = overhead._agents()[OURS if side == OURS else THEIRS]
    message = overhead.DELEGATE if kind == "task" else overhead.BASELINE

    async def arun() -> None:
        for _ in range(warmup):
            await agent.ainvoke(overhead.DELEGATE)
            await agent.ainvoke(overhead.BASELINE)
        gc.collect()
        gc.disable()
        for _ in range(n):
            await agent.ainvoke(message)

    if mode == "ainvoke":
        asyncio.run(arun())
        return
    for _ in range(warmup):
        agent.invoke(overhead.DELEGATE)
        agent.invoke(overhead.BASELINE)
    gc.collect()
    gc.disable()
    for _ in range(n):
        agent.invoke(message)


if __name__ == "__main__":
    main(sys.argv[1:])
