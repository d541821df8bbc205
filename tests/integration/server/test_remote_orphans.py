"""A parent killed while it starts remote tasks: nothing starts twice, nothing is left unrecorded.

The first parent is a separate process (SQLite checkpointer) whose step
starts ten remote tasks next to a ``die`` tool that kills the process as
soon as a few of them exist on the server. The test then either resumes
that step or sends a new message, and reads the server: one thread per
task, every one of them in the ledger.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections import Counter
from typing import Any

import pytest
from langchain.agents import create_agent
from langchain_core.tools import tool

from helpers.background import REPO, TESTS, ledger
from helpers.graphs import user
from deep_agent.testing import ScriptedChatModel, tool_call
from middleware import BackgroundSubagentMiddleware

TASKS = 10
DIE_AFTER = 3


def specs(url: str) -> list[dict[str, Any]]:
    return [{"name": "remote-worker", "description": "Works on a LangGraph Server.",
             "graph_id": "scripted_worker", "url": url}]


def server_threads(url: str, parent_thread_id: str) -> list[dict[str, Any]]:
    from langgraph_sdk import get_sync_client

    client = get_sync_client(url=url, api_key=None)
    return client.threads.search(metadata={"parent_thread_id": parent_thread_id}, limit=1000)


def settled_threads(url: str, parent_thread_id: str, quiet_s: float = 1.0, limit_s: float = 20.0) -> int:
    """How many threads the server holds once no new one has appeared for ``quiet_s``.

    Starts the dead parent had in flight still land after it died; a restart
    takes longer than that, so the surviving parent is started only then.
    """
    deadline, seen, since = time.monotonic() + limit_s, -1, time.monotonic()
    while time.monotonic() < deadline:
        count = len(server_threads(url, parent_thread_id))
        if count != seen:
            seen, since = count, time.monotonic()
        elif time.monotonic() - since >= quiet_s:
            break
        time.sleep(0.1)
    return seen


def agent_on(db: str, url: str, die: Any) -> Any:
    import sqlite3

    from langgraph.checkpoint.sqlite import SqliteSaver

    jobs = [tool_call("start_async_task", description=f"slow job {i}", subagent_type="remote-worker")
            for i in range(TASKS)]
    model = ScriptedChatModel(
        rules=[("PARENT start", [{"tool_calls": [*jobs, tool_call("die", expect=DIE_AFTER)]}, "started"])],
        default="ok",
    )
    saver = SqliteSaver(sqlite3.connect(db, check_same_thread=False))
    middleware = BackgroundSubagentMiddleware(specs(url), general_purpose=False, notify=False)
    return create_agent(model, tools=[die], middleware=[middleware], checkpointer=saver)


def crashing_parent(db: str, thread_id: str, url: str) -> None:
    """The first parent process: dies in the middle of its step of starts."""

    @tool
    def die(expect: int) -> str:
        """Kill this process once ``expect`` tasks exist on the server."""
        deadline = time.monotonic() + 20
        while len(server_threads(url, thread_id)) < expect and time.monotonic() < deadline:
            time.sleep(0.01)
        os._exit(3)

    agent_on(db, url, die).invoke(user("PARENT start"), {"configurable": {"thread_id": thread_id}})


@tool
def die(expect: int) -> str:
    """In the surviving process: harmless."""
    return "still here"


def calls(state: dict[str, Any]) -> list[str]:
    return [c["id"] for m in state["messages"] for c in getattr(m, "tool_calls", None) or ()
            if c["name"] == "start_async_task"]


def stop_all(url: str, threads: list[dict[str, Any]]) -> None:
    from langgraph_sdk import get_sync_client

    client = get_sync_client(url=url, api_key=None)
    for thread in threads:
        for run in client.runs.list(thread["thread_id"]):
            if run["status"] in ("pending", "running"):
                client.runs.cancel(thread["thread_id"], run["run_id"])


@pytest.mark.parametrize("then", ["resume", "new message"])
def test_a_parent_killed_mid_start_starts_nothing_twice_and_records_everything(then, langgraph_server, tmp_path):
    db, thread_id = str(tmp_path / "parent.db"), f"orphans-{time.monotonic_ns()}"
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in (str(REPO), str(TESTS), os.environ.get("PYTHONPATH")) if p)}
    done = subprocess.run([sys.executable, __file__, db, thread_id, langgraph_server], env=env, cwd=REPO,
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 3, done.stderr[-3000:]
    settled_threads(langgraph_server, thread_id)
    config = {"configurable": {"thread_id": thread_id}}
    agent = agent_on(db, langgraph_server, die)
    out = agent.invoke(None if then == "resume" else user("PARENT news"), config)

    threads = server_threads(langgraph_server, thread_id)
    try:
        per_task = Counter(t["metadata"]["subagent_task_id"] for t in threads)
        assert per_task and set(per_task.values()) == {1}, per_task
        records = ledger(out)
        assert set(per_task) <= set(records), "every task on the server is in the ledger"
        assert {r["thread_id"] for r in records.values()} >= {t["thread_id"] for t in threads}
        assert len(records) == TASKS, "every start has a record: on the server, or lost"
        assert {r["tool_call_id"] for r in records.values()} == set(calls(out))
        if then == "resume":
            assert len(per_task) == TASKS
        else:  # a start that never reached the server is reported lost, never dropped
            on_server = {t["thread_id"] for t in threads}
            assert all(r["status"] == "lost" for r in records.values() if r["thread_id"] not in on_server)
    finally:
        stop_all(langgraph_server, threads)


if __name__ == "__main__":
    crashing_parent(*sys.argv[1:4])
