"""A task's owner is gone only when that is provable: same host and no such process (or a reused pid)."""

from __future__ import annotations

import os
import subprocess
import sys

from subagents import BackgroundRuntime
from subagents.background_owner import Owner, owner_state, process_start


def test_this_runtime_is_self_and_another_open_one_is_alive_until_closed():
    with BackgroundRuntime() as mine, BackgroundRuntime() as other:
        alive = lambda rid: BackgroundRuntime.find(rid) is not None  # noqa: E731
        assert owner_state(mine.owner.name, me=mine.owner, runtime_alive=alive) == "self"
        assert owner_state(other.owner.name, me=mine.owner, runtime_alive=alive) == "alive"
        other.close()
        assert owner_state(other.owner.name, me=mine.owner, runtime_alive=alive) == "gone"


def test_a_live_process_is_alive_and_a_dead_one_is_gone():
    child = subprocess.Popen([sys.executable, "-c", "import sys; sys.stdin.read()"], stdin=subprocess.PIPE)
    try:
        start = process_start(child.pid)
        name = Owner(host=Owner.current("x").host, pid=child.pid, start=start, runtime="r").name
        assert owner_state(name) == "alive"
    finally:
        child.kill()
        child.wait()
        child.stdin.close()
    assert owner_state(name) == "gone"


def test_a_reused_pid_is_not_the_owner():
    # This very pid, but a process that started at another time: not the owner.
    me = Owner.current("r")
    reused = Owner(host=me.host, pid=os.getpid() if me.start != "?" else 1, start=me.start + "0", runtime="r")
    assert owner_state(reused.name) == "gone"


def test_another_host_cannot_be_told_and_unreadable_owners_are_gone():
    assert owner_state(Owner(host="elsewhere", pid=1, start="x-1", runtime="r").name) == "unknown"
    for name in (None, "", "3f2a9c0d1e", "local:h:notapid:s:r", "remote:h:1:s:r", 42):
        assert owner_state(name) == "gone"
        assert Owner.parse(name) is None


def test_owner_names_round_trip_even_for_odd_hostnames():
    owner = Owner(host="my_host", pid=123, start="abc-77", runtime="r1")
    assert Owner.parse(owner.name) == owner
    assert ":" not in Owner.current("r").host
