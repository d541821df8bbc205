"""A server without batched thread search by ids (aegra) is polled in batches too: by metadata, per parent.

Before: aegra answers ``threads.search(ids=..., select=...)`` with 422, and
every poll fell back to reading each live task on its own (its run, its
thread, and its state once it ended: two or three requests per task per
poll, 400 for 200 running tasks), after asking the refused search again.
Now the refusal is remembered per server, one metadata search per parent
finds the busy threads, and only the tasks whose threads ended are read,
each with its run and its state at once.
"""

from __future__ import annotations

import asyncio
from typing import Any

from helpers.fault_servers import RecordingServer

from subagents import RemoteSubagentSpec
from subagents.background.remote import RemoteClientPool, RemoteTaskRunner, poll

BUSY = [f"busy-{i}" for i in range(15)]
ENDED = [f"ended-{i}" for i in range(5)]


class NoIdSearch(RecordingServer):
    """aegra's answers: a search with ``select`` is refused, thread objects carry no values."""

    def status_for(self, method: str, path: str, body: Any) -> int:
        return 422 if path == "/threads/search" and (body or {}).get("select") is not None else 200

    def reply_to(self, method: str, path: str, body: Any, headers: dict[str, str]) -> Any:
        bare = path.split("?")[0]
        if bare == "/threads/search":
            body = body or {}
            if body.get("select") is not None:
                return {"detail": "select projection is not supported"}
            rows = [{"thread_id": t, "status": "busy", "metadata": {"parent_thread_id": "parent"}} for t in BUSY]
            rows += [{"thread_id": t, "status": "idle", "metadata": {"parent_thread_id": "parent"}} for t in ENDED]
            wanted = body.get("metadata") or {}
            return [r for r in rows if all(r["metadata"].get(k) == v for k, v in wanted.items())
                    and body.get("status") in (None, r["status"])]
        thread = bare.split("/")[2] if bare.count("/") >= 2 else ""
        if method == "GET" and "/runs/" in bare:
            return {"run_id": bare.rsplit("/", 1)[-1], "status": "running" if thread in BUSY else "success"}
        if method == "GET" and bare.endswith("/state"):
            return {"values": {"messages": [{"type": "ai", "content": f"answer of {thread}"}]}, "next": [],
                    "tasks": []}
        if method == "GET" and bare == f"/threads/{thread}":
            return {"thread_id": thread, "status": "busy" if thread in BUSY else "idle", "metadata": {}}
        return super().reply_to(method, path, body, headers)


def record(thread: str, *, parent: str | None = "parent") -> dict[str, Any]:
    return {"id": f"task-{thread}", "agent_type": "worker", "runner": "remote", "status": "running",
            "thread_id": thread, "run_id": f"run-{thread}", "parent_thread_id": parent}


def counts(requests: list[dict[str, Any]]) -> dict[str, int]:
    seen: dict[str, int] = {}
    for r in requests:
        bare = r["path"].split("?")[0]
        kind = ("ids search" if bare == "/threads/search" and (r["body"] or {}).get("ids") is not None
                else "metadata search" if bare == "/threads/search"
                else "run" if "/runs/" in bare else "state" if bare.endswith("/state") else f"{r['method']} thread")
        seen[kind] = seen.get(kind, 0) + 1
    return seen


def test_busy_tasks_cost_one_search_and_ended_ones_their_run_and_state() -> None:
    server = NoIdSearch()
    try:
        runner = RemoteTaskRunner([RemoteSubagentSpec(name="worker", description="d", graph_id="g",
                                                      url=server.url)], pool=RemoteClientPool())
        # A record written before records kept their parent is read on its own, as before.
        records = [record(t) for t in BUSY + ENDED] + [record("older", parent=None)]

        async def twice() -> list[tuple[dict[str, Any], dict[str, int]]]:  # one loop: the pool's clients are its
            polls = []
            for _ in range(2):
                server.requests.clear()
                polls.append((await poll(runner, records), counts(server.requests)))
            return polls

        (first, first_requests), (second, second_requests) = asyncio.run(twice())
    finally:
        server.close()
    for result in (first, second):
        assert all(result[f"task-{t}"] == ({}, None) for t in BUSY)  # still running: nothing to change
        for t in ENDED:
            fields, note = result[f"task-{t}"]
            assert note is None and fields["status"] == "completed" and fields["result"] == f"answer of {t}"
        assert result["task-older"][0]["result"] == "answer of older"
    # The refused search is asked once per server, then remembered; only the older record's thread is read.
    assert first_requests == {"ids search": 1, "metadata search": 1, "run": 6, "state": 6, "GET thread": 1}
    assert second_requests == {"metadata search": 1, "run": 6, "state": 6, "GET thread": 1}

