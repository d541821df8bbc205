"""Who runs a local background task, and whether that owner is provably gone.

A local task lives in one process, inside one :class:`BackgroundRuntime
<subagents.background._runtime.BackgroundRuntime>`. Its ledger record names
that owner as ``"local:<host>:<pid>:<start>:<runtime>"``, where ``start`` is
the process's start time (with the machine's boot id on Linux), so a pid the
system reused for another process is not mistaken for the owner.

Another process reading the same thread (a restart, or a second live
process on one SQLite file) decides from that name alone:

=============================================  ===========
this runtime                                   ``self``
this process, a runtime still open             ``alive``
this process, a runtime that is closed         ``gone``
this host, that pid started at that time       ``alive``
this host, no such process (or pid reused)     ``gone``
another host                                   ``unknown`` (see below)
a name this module cannot read (old records)   ``gone``
=============================================  ===========

Only ``gone`` lets a task be reported ``lost`` (and retried); an ``alive``
or ``unknown`` owner keeps the task as its record last stood. An owner on
another host is ``gone`` once the lease it renews in the outcome file has
lapsed (see :mod:`subagents.background._outcomes`).

Example::

    me = Owner.current("r1")
    owner_state(me.name, runtime_alive=lambda rid: rid == "r1")   # 'alive'
"""

from __future__ import annotations

import dataclasses
import functools
import os
import socket
from collections.abc import Callable
from typing import Literal

OwnerState = Literal["self", "alive", "gone", "unknown"]

_PREFIX = "local"


@dataclasses.dataclass(frozen=True)
class Owner:
    """One runtime in one process on one host."""

    host: str
    pid: int
    start: str
    runtime: str

    @property
    def name(self) -> str:
        """The owner as the ledger stores it."""
        return f"{_PREFIX}:{self.host}:{self.pid}:{self.start}:{self.runtime}"

    @property
    def process(self) -> str:
        """Host and pid, in words, for messages."""
        return f"process {self.pid} on {self.host}"

    @classmethod
    def current(cls, runtime: str) -> Owner:
        """This process, as the owner of ``runtime``'s tasks."""
        return cls(host=_host(), pid=os.getpid(), start=process_start(os.getpid()) or "?", runtime=runtime)

    @classmethod
    def parse(cls, name: object) -> Owner | None:
        """The owner a ledger ``owner`` field names, or ``None`` if it names none this module wrote."""
        if not isinstance(name, str):
            return None
        parts = name.split(":")
        # ASCII digits only ("²".isdigit() is true), and a pid the OS could have.
        if (len(parts) != 5 or parts[0] != _PREFIX or not (parts[2].isascii() and parts[2].isdigit())
                or len(parts[2]) > 10 or int(parts[2]) > _MAX_PID):
            return None
        return cls(host=parts[1], pid=int(parts[2]), start=parts[3], runtime=parts[4])


_MAX_PID = 2**31 - 1


def owner_state(name: object, *, me: Owner | None = None,
                runtime_alive: Callable[[str], bool] = lambda _rid: False) -> OwnerState:
    """Whether the owner a record names is this runtime, alive, provably gone, or cannot be told."""
    owner = Owner.parse(name)
    if owner is None:
        return "gone"
    if me is not None and owner == me:
        return "self"
    if owner.host != _host():
        return "unknown"
    if owner.pid == os.getpid() and owner.start == (process_start(owner.pid) or "?"):
        return "alive" if runtime_alive(owner.runtime) else "gone"
    return "alive" if _process_alive(owner.pid, owner.start) else "gone"


def process_start(pid: int) -> str | None:
    """When process ``pid`` started (boot id and clock ticks on Linux), or ``None`` if there is no such process."""
    if not os.path.isdir("/proc/self"):  # no procfs: only whether the pid exists can be told
        return "?" if _pid_exists(pid) else None
    try:
        with open(f"/proc/{pid}/stat", "rb") as handle:
            stat = handle.read().decode("ascii", "replace")
    except FileNotFoundError:
        return None
    except OSError:
        return "?" if _pid_exists(pid) else None
    # The command name (field 2) is in parentheses and may hold spaces: split after it.
    fields = stat.rsplit(")", 1)[-1].split()
    ticks = fields[19] if len(fields) > 19 else "?"
    return f"{_boot_id()}-{ticks}"


def _process_alive(pid: int, start: str) -> bool:
    started = process_start(pid)
    if started is None:
        return False
    if start == "?" or started == "?" or "?" in start.split("-", 1)[0]:
        return True  # cannot compare start times here: a live pid counts as the owner
    return started == start


def _pid_exists(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:  # it exists, and belongs to someone else
        return True
    return True


@functools.cache
def _boot_id() -> str:
    try:
        with open("/proc/sys/kernel/random/boot_id", encoding="ascii") as handle:
            return handle.read().strip().replace("-", "")[:12] or "?"
    except OSError:
        return "?"


def _host() -> str:
    return socket.gethostname().replace(":", "_") or "localhost"
