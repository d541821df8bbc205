"""A parent killed while it starts remote tasks: nothing starts twice, nothing is left unrecorded.

The first parent is a separate process (SQLite checkpointer) whose step
starts ten remote tasks next to a ``die`` tool that kills the process as
soon as a few of them exist on the server (``helpers/killed_parent.py``).
The test then either resumes that step or sends a new message, and reads
the server: one thread per task, every one of them in the ledger.
"""

from __future__ import annotations

import time
from collections import Counter

import pytest
from helpers.background import ledger
from helpers.graphs import user
from helpers.killed_parent import TASKS, agent_on, crash, harmless_die, server_threads, start_calls, stop_all


@pytest.mark.parametrize("then", ["resume", "new message"])
def test_a_parent_killed_mid_start_starts_nothing_twice_and_records_everything(then, langgraph_server, tmp_path):
    db, thread_id = str(tmp_path / "parent.db"), f"orphans-{time.monotonic_ns()}"
    crash(db, thread_id, langgraph_server, "scripted_worker")
    config = {"configurable": {"thread_id": thread_id}}
    agent = agent_on(db, langgraph_server, harmless_die, "scripted_worker")
    out = agent.invoke(None if then == "resume" else user("PARENT news"), config)

    threads = server_threads(langgraph_server, thread_id)
    try:
        per_task = Counter(t["metadata"]["subagent_task_id"] for t in threads)
        assert per_task and set(per_task.values()) == {1}, per_task
        records = ledger(out)
        assert set(per_task) <= set(records), "every task on the server is in the ledger"
        assert {r["thread_id"] for r in records.values()} >= {t["thread_id"] for t in threads}
        assert len(records) == TASKS, "every start has a record: on the server, or lost"
        assert {r["tool_call_id"] for r in records.values()} == set(start_calls(out))
        if then == "resume":
            assert len(per_task) == TASKS
        else:  # a start that never reached the server is reported lost, never dropped
            on_server = {t["thread_id"] for t in threads}
            assert all(r["status"] == "lost" for r in records.values() if r["thread_id"] not in on_server)
    finally:
        stop_all(langgraph_server, threads)
