"""A task's owner is gone only when that is provable: same host and no such process (or a reused pid)."""

from __future__ import annotations

import pytest

import os
import subprocess
import sys

from helpers.background import wait_for
from subagents import BackgroundRuntime
from subagents.background._runtime import Owner, owner_state, process_start


def test_this_runtime_is_self_and_another_open_one_is_alive_until_closed():
    with BackgroundRuntime() as mine, BackgroundRuntime() as other:
        alive = lambda rid: BackgroundRuntime.find(rid) is not None  # noqa: E731
        assert owner_state(mine.owner.name, me=mine.owner, runtime_alive=alive) == "self"
        assert owner_state(other.owner.name, me=mine.owner, runtime_alive=alive) == "alive"
        other.close()
        assert owner_state(other.owner.name, me=mine.owner, runtime_alive=alive) == "gone"


@pytest.mark.server  # starts a Python process of its own
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


def test_an_owner_on_another_host_is_gone_once_its_lease_has_lapsed(tmp_path):
    import sqlite3
    import time

    from subagents import BackgroundTasks, SubagentRegistry
    from subagents.background._runtime import LEASE_S, SqliteOutcomes

    db = tmp_path / "parent.db"
    sqlite3.connect(db).close()
    owner = Owner(host="another-host", pid=4242, start="b-1", runtime="r").name
    record = {"id": "t1", "agent_type": "general-purpose", "runner": "local", "status": "running",
              "description": "job", "created_at": 0.0, "owner": owner, "outcome_db": str(db),
              "attempt": 1, "turns": 1}
    leases = SqliteOutcomes(str(db))
    with BackgroundRuntime() as runtime:
        tasks = BackgroundTasks(SubagentRegistry([]), runtime=runtime)
        assert runtime.run(tasks.refresh({"t1": record})) == {}  # no lease: cannot tell, left as it is
        leases.renew(owner, ["t1"], time.time())
        assert runtime.run(tasks.refresh({"t1": record})) == {}  # a fresh lease: alive
        assert tasks.local.elsewhere(record) == "process 4242 on another-host"
        leases.renew(owner, ["t1"], time.time() - LEASE_S - 1)
        assert runtime.run(tasks.refresh({"t1": record}))["t1"]["status"] == "lost"
        assert tasks.local.elsewhere(record) is None
    leases.close()


def test_a_running_task_renews_its_lease_in_the_checkpoint_file(tmp_path, monkeypatch):
    import sqlite3

    from subagents import BackgroundTasks, SubagentRegistry, TaskCall, coerce_spec
    from subagents.background._runtime import SqliteOutcomes
    from deep_agent._testing import ScriptedChatModel
    from langgraph.checkpoint.sqlite import SqliteSaver

    db = tmp_path / "parent.db"
    saver = SqliteSaver(sqlite3.connect(db, check_same_thread=False))
    slow = ScriptedChatModel(default="done", latency_s=30)
    registry = SubagentRegistry([coerce_spec({"name": "w", "description": "d", "model": slow})])
    call = TaskCall(subagent_type="w", description="job", parent_state={}, tool_call_id="c1",
                    parent_config={"configurable": {"thread_id": "t", "__pregel_checkpointer": saver}})
    monkeypatch.setattr("subagents.background._runtime.LEASE_RENEW_S", 0.05)
    store = SqliteOutcomes(str(db))
    with BackgroundRuntime() as runtime:
        tasks = BackgroundTasks(registry, runtime=runtime)
        record = runtime.run(tasks.start(call, {}))
        assert record["outcome_db"] == str(db)
        owner, first = store.lease(record["id"])
        assert owner == runtime.owner.name == record["owner"]
        wait_for(lambda: store.lease(record["id"])[1] > first)  # renewed while it runs
    # Closed: the task is stored as lost, so no process needs its lease to tell.
    assert store.load(record["id"])["status"] == "lost" and store.lease(record["id"]) is None
    store.close()
