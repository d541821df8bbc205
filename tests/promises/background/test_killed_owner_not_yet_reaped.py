"""A process killed while it ran background tasks is gone, even before its parent reaps it.

A killed process stays in the process table as a zombie until its parent
waits for it (a supervisor, a launcher holding a ``Popen``, a container whose
first process reaps nothing): its ``/proc/<pid>/stat`` is still there, with
the same start time. Read as alive, its tasks stayed ``running`` for every
later process on the thread, for as long as nobody reaped it.
"""

from __future__ import annotations

import dataclasses
import os
import signal
import subprocess
import sys
import time

import pytest

from subagents.background._runtime import Owner, owner_state, process_start

pytestmark = pytest.mark.skipif(not os.path.isdir("/proc/self"), reason="needs procfs (Linux)")


def _state(pid: int) -> str:
    with open(f"/proc/{pid}/stat", "rb") as handle:
        return handle.read().decode("ascii", "replace").rsplit(")", 1)[-1].split()[0]


def test_a_killed_owner_its_parent_has_not_reaped_is_gone() -> None:
    proc = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)"])
    try:
        start = process_start(proc.pid)
        assert start is not None
        owner = dataclasses.replace(Owner.current("r1"), pid=proc.pid, start=start)
        assert owner_state(owner.name) == "alive"

        os.kill(proc.pid, signal.SIGKILL)  # no wait(): it stays a zombie of this process
        deadline = time.monotonic() + 30
        while _state(proc.pid) != "Z":
            assert time.monotonic() < deadline, "the killed process never became a zombie"
            time.sleep(0.05)

        assert owner_state(owner.name) == "gone"
        assert process_start(proc.pid) is None
    finally:
        proc.kill()
        proc.wait()
