"""Whether a process is still there, read from ``/proc``, for tests that check nothing is left running."""

from __future__ import annotations

import time


def _alive(pid: int) -> bool:
    """A process that exists and is not a zombie (a container's init may never reap one)."""
    try:
        with open(f"/proc/{pid}/stat", encoding="utf-8") as stat:
            return stat.read().rsplit(")", 1)[1].split()[0] != "Z"
    except FileNotFoundError:
        return False


def _gone_within(pid: int, seconds: float) -> bool:
    stop = time.monotonic() + seconds
    while _alive(pid) and time.monotonic() < stop:
        time.sleep(0.05)
    return not _alive(pid)
