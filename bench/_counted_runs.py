"""The process the instructions measure counts: warm up once, then fork one child per count, collection off.

``python -m bench._counted_runs SIDE MODE WARMUP KIND:N [KIND:N ...]``
builds the overhead measure's agent for ``SIDE`` (``ours``/``theirs``),
warms it up with ``WARMUP`` runs of each kind, turns the garbage collector
off, and then, for each ``KIND:N`` in turn, forks a child that makes ``N``
runs of ``KIND`` (``task``: one delegation; ``noop``: one no-op tool call)
with ``MODE`` (``invoke``/``ainvoke``) and exits. It prints one line
``KIND N PID`` per child. Under cachegrind (``--cachegrind-out-file``
with ``%p``) each child leaves a file of its own, counting everything from
the parent's start to the child's exit: two children that differ only in
``N`` differ by exactly ``N`` runs' worth of instructions, and imports,
construction and warm-up, done once before the fork, cancel out. The fork
is what keeps the measure quick: under cachegrind the imports alone take
about a minute, and they are paid once per side and mode, not once per count.
"""

from __future__ import annotations

import asyncio
import gc
import os
import sys
from typing import Any

from bench import overhead
from bench.common import OURS, THEIRS, use_peer


def _message(kind: str) -> Any:
    return overhead.DELEGATE if kind == "task" else overhead.BASELINE


def _runs(agent: Any, messages: list[Any], mode: str) -> None:
    if mode == "ainvoke":
        async def arun() -> None:
            for message in messages:
                await agent.ainvoke(message)

        asyncio.run(arun())
    else:
        for message in messages:
            agent.invoke(message)


def _counted_child(agent: Any, kind: str, n: int, mode: str) -> int:
    """Fork a child that makes ``n`` runs of ``kind`` and exits; its pid, once it has exited."""
    sys.stdout.flush()
    sys.stderr.flush()
    pid = os.fork()
    if pid == 0:  # the child: the counted runs, then out without running the parent's exit handlers
        status = 0
        try:
            _runs(agent, [_message(kind)] * n, mode)
        except BaseException:  # noqa: BLE001 - reported, and the exit status says it failed
            import traceback

            traceback.print_exc()
            status = 1
        finally:
            sys.stdout.flush()
            sys.stderr.flush()
            os._exit(status)
    _, status = os.waitpid(pid, 0)
    if os.waitstatus_to_exitcode(status) != 0:
        raise SystemExit(f"_counted_runs: the {kind} x{n} child failed (status {status})")
    return pid


def main(argv: list[str]) -> None:
    side, mode, warmup, jobs = argv[0], argv[1], int(argv[2]), argv[3:]
    if side == OURS:
        use_peer(False)  # deepagents is not imported into our side's count
    agent = overhead._agents()[OURS if side == OURS else THEIRS]
    _runs(agent, [overhead.DELEGATE, overhead.BASELINE] * warmup, mode)
    gc.collect()
    gc.disable()
    for job in jobs:
        kind, n = job.split(":")
        pid = _counted_child(agent, kind, int(n), mode)
        print(kind, n, pid, flush=True)


if __name__ == "__main__":
    main(sys.argv[1:])
