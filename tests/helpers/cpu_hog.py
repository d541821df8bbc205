"""A busy machine, made on purpose: processes spinning on every core while a block runs.

Each process ends itself after ``longest_s`` whatever happens to the test
(a killed test run leaves no spinner behind for long), and the block kills
them all as it ends.

Example::

    with cpu_hog():
        ...  # every core has two spinning processes besides this one
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
