"""A busy machine, made on purpose: processes spinning on every core while a block runs.

Each process ends itself after ``longest_s`` whatever happens to the test
(a killed test run leaves no spinner behind for long), and the block kills
them all as it ends.

Example::

    with cpu_hog():
        ...  # every core has two spinning processes besides this one

A long block can run on one core (:func:`on_one_core`): the spinners then hog that core, as busy for the
block as every core would be, and the test run's other workers keep the rest of the machine.
"""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
from collections.abc import Iterator

SPIN = "import sys, time\nend = time.monotonic() + float(sys.argv[1])\nwhile time.monotonic() < end:\n    pass\n"


def cores() -> int:
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1


@contextlib.contextmanager
def on_one_core() -> Iterator[None]:
    """Every thread of this process on one of its cores for the block, with what they start meanwhile (a
    :func:`cpu_hog` inside counts that one core); back on all of them after it."""
    before = os.sched_getaffinity(0)
    threads = os.listdir("/proc/self/task")
    for thread in threads:
        with contextlib.suppress(ProcessLookupError):  # a thread that has ended since
            os.sched_setaffinity(int(thread), {min(before)})
    try:
        yield
    finally:
        for thread in os.listdir("/proc/self/task"):
            with contextlib.suppress(ProcessLookupError):
                os.sched_setaffinity(int(thread), before)


@contextlib.contextmanager
def cpu_hog(per_core: int = 2, longest_s: float = 240.0) -> Iterator[list[subprocess.Popen[bytes]]]:
    """``per_core`` processes spinning on each core for the length of the block (at most ``longest_s``)."""
    spinners = [subprocess.Popen([sys.executable, "-c", SPIN, str(longest_s)], stdin=subprocess.DEVNULL)
                for _ in range(per_core * cores())]
    try:
        yield spinners
    finally:
        for spinner in spinners:
            spinner.kill()
        for spinner in spinners:
            spinner.wait()
