"""A parent killed while it starts remote tasks, and the count of what its server then holds.

The first parent is a separate process (SQLite checkpointer) whose step
starts :data:`TASKS` remote tasks next to a ``die`` tool that kills the
process (``os._exit``, no cleanup: as SIGKILL) as soon as a few of them
exist on the server. The test then resumes that step (``invoke(None)``) or
sends a new message from a second parent on the same file, and reads the
server: how many threads and runs each task has there.

Example::

    crash(db, thread_id, url, graph_id="child")             # the first process dies mid-start
    out = agent_on(db, url, harmless_die, "child").invoke(None, {"configurable": {"thread_id": thread_id}})
    figures = count(out, url, thread_id)                    # {"started": 10, "started_twice": 0, ...}
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections import Counter
from typing import Any

from langchain.agents import create_agent
from langchain_core.tools import tool

from deep_agent._testing import ScriptedChatModel, tool_call
from helpers import REPO
from middleware import BackgroundSubagentMiddleware
from subagents._settings import DelegationSettings

TASKS = 10
DIE_AFTER = 3
LIVE = ("pending", "running")


def specs(url: str, graph_id: str) -> list[dict[str, Any]]:
    return [{"name": "remote-worker", "description": "Works on a LangGraph Server.",
             "graph_id": graph_id, "url": url}]


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


def agent_on(db: str, url: str, die: Any, graph_id: str, *, notify: bool = False) -> Any:
    import sqlite3

    from langgraph.checkpoint.sqlite import SqliteSaver

    jobs = [tool_call("start_async_task", description=f"slow job {i}", subagent_type="remote-worker")
            for i in range(TASKS)]
    model = ScriptedChatModel(
        rules=[("PARENT start", [{"tool_calls": [*jobs, tool_call("die", expect=DIE_AFTER)]}, "started"])],
        default="ok",
    )
    saver = SqliteSaver(sqlite3.connect(db, check_same_thread=False))
    middleware = BackgroundSubagentMiddleware(specs(url, graph_id), settings=DelegationSettings.of(
        general_purpose=False, notify=notify,
    ))
    return create_agent(model, tools=[die], middleware=[middleware], checkpointer=saver)


def crashing_parent(db: str, thread_id: str, url: str, graph_id: str) -> None:
    """The first parent process: dies in the middle of its step of starts."""
    from helpers.graphs import user

    @tool
    def die(expect: int) -> str:
        """Kill this process once ``expect`` tasks exist on the server."""
        deadline = time.monotonic() + 20
        while len(server_threads(url, thread_id)) < expect and time.monotonic() < deadline:
            time.sleep(0.01)
        os._exit(3)

    agent_on(db, url, die, graph_id).invoke(user("PARENT start"), {"configurable": {"thread_id": thread_id}})


@tool("die")
def harmless_die(expect: int) -> str:
    """In the surviving process: harmless."""
    return "still here"


def crash(db: str, thread_id: str, url: str, graph_id: str) -> None:
    """Run :func:`crashing_parent` in a process of its own; return once the server holds all it will."""
    tests = REPO / "tests"
    path = os.pathsep.join(p for p in (str(REPO), str(tests), os.environ.get("PYTHONPATH")) if p)
    done = subprocess.run([sys.executable, "-m", "helpers.killed_parent", db, thread_id, url, graph_id],
                          env={**os.environ, "PYTHONPATH": path}, cwd=REPO, capture_output=True, text=True,
                          timeout=120)
    assert done.returncode == 3, done.stderr[-3000:]
    settled_threads(url, thread_id)


def start_calls(state: dict[str, Any]) -> list[str]:
    return [c["id"] for m in state["messages"] for c in getattr(m, "tool_calls", None) or ()
            if c["name"] == "start_async_task"]


def count(state: dict[str, Any], url: str, parent_thread_id: str) -> dict[str, int]:
    """What the server and the ledger say of each start call.

    ``started``: tasks with a thread on the server; ``started_twice``: tasks
    with more than one thread, or a thread with more than one run;
    ``recorded``: start calls with a ledger record; ``reported_lost``: records
    ``lost`` (said so); ``lost_silently``: start calls with no record, or a
    thread on the server in no record.
    """
    from langgraph_sdk import get_sync_client

    client = get_sync_client(url=url, api_key=None)
    threads = server_threads(url, parent_thread_id)
    per_task = Counter(t["metadata"]["subagent_task_id"] for t in threads)
    runs = {t["thread_id"]: len(client.runs.list(t["thread_id"])) for t in threads}
    records = dict(state.get("async_tasks") or {})
    recorded_calls = {r["tool_call_id"] for r in records.values()}
    recorded_threads = {r["thread_id"] for r in records.values()}
    return {
        "calls": len(start_calls(state)),
        "started": len(per_task),
        "started_twice": sum(n > 1 for n in per_task.values()) + sum(n > 1 for n in runs.values()),
        "recorded": sum(c in recorded_calls for c in start_calls(state)),
        "reported_lost": sum(r["status"] == "lost" for r in records.values()),
        "lost_silently": (sum(c not in recorded_calls for c in start_calls(state))
                          + sum(t["thread_id"] not in recorded_threads for t in threads)),
    }


def stop_all(url: str, threads: list[dict[str, Any]]) -> None:
    from langgraph_sdk import get_sync_client

    client = get_sync_client(url=url, api_key=None)
    for thread in threads:
        for run in client.runs.list(thread["thread_id"]):
            if run["status"] in LIVE:
                client.runs.cancel(thread["thread_id"], run["run_id"])


if __name__ == "__main__":
    crashing_parent(*sys.argv[1:5])
