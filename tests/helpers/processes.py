"""Whether a process is still there, read from ``/proc``, for tests that check nothing is left running."""

from __future__ import annotations

import contextlib
import os
import time
from pathlib import Path


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


def forked_exit_code(pid: int, seconds: float) -> int | None:
    """A forked child's exit code, or ``None`` (and the child killed) if it has not ended within ``seconds``: a
    hang guard, never a time the child must keep."""
    import os
    import signal

    deadline = time.monotonic() + seconds
    while (done := os.waitpid(pid, os.WNOHANG))[0] == 0 and time.monotonic() < deadline:
        time.sleep(0.05)
    if done[0] == 0:
        os.kill(pid, signal.SIGKILL)
        os.waitpid(pid, 0)
        return None
    return os.waitstatus_to_exitcode(done[1])


def working_in(folder: Path) -> list[bytes]:
    """The command lines of the live processes whose current folder is ``folder`` (a sandboxed one's too: the
    folder it binds is the same)."""
    here = folder.stat()
    found = []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        with contextlib.suppress(OSError):  # gone, or a zombie (no folder)
            cwd = os.stat(f"/proc/{pid}/cwd")
            if (cwd.st_dev, cwd.st_ino) == (here.st_dev, here.st_ino):
                found.append(Path(f"/proc/{pid}/cmdline").read_bytes())
    return found


def until_nothing_works_in(folder: Path, seconds: float = 60) -> None:
    """Wait until no process works in ``folder`` (at most ``seconds``, a hang's bound): a job that outlived what
    started it has then done what it was to do, so a test sees its marks instead of sleeping past them."""
    stop = time.monotonic() + seconds
    while working_in(folder) and time.monotonic() < stop:
        time.sleep(0.05)
