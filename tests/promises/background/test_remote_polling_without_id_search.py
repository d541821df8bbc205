"""A server without batched thread search by ids (aegra) is polled in batches too: by metadata, per parent.

Before: aegra answers ``threads.search(ids=..., select=...)`` with 422, and
every poll fell back to reading each live task on its own (its run, its
thread, and its state once it ended: two or three requests per task per
poll, 400 for 200 running tasks), after asking the refused search again.
Now the refusal is remembered per server, one metadata search per parent
finds the busy threads, and only the tasks whose threads ended are read.

Each ended task is read by one join of its run, as raw ``langgraph_sdk``
reads an answer (before: its run and its state, two requests: 400 reads
for 200 tasks, where raw sends 200 joins). Only a join that
does not hold a finished answer (an error, an interrupt, a cancelled run's
empty or partial values) is read further, by its run and state, so those
still read as error, waiting for approval and cancelled.
"""

from __future__ import annotations

import asyncio
from typing import Any

from helpers.fault_servers import RecordingServer

from subagents import RemoteSubagentSpec
from subagents.background._remote import RemoteClientPool, RemoteTaskRunner

BUSY = [f"busy-{i}" for i in range(15)]
ENDED = [f"ended-{i}" for i in range(5)]
FAILED, WAITING, CANCELLED, CUT = "failed", "waiting", "cancelled", "cut"
"""Ended threads whose join holds no finished answer: an error, an interrupt, a cancelled run (aegra's
empty output) and one cancelled after a model call that asked for a tool."""
ASK = {"action_requests": [{"name": "publish", "args": {}, "description": "Publish?"}],
       "review_configs": [{"action_name": "publish", "allowed_decisions": ["approve", "reject"]}]}
HALF = {"messages": [{"type": "human", "content": "go"},
                     {"type": "ai", "content": "let me look", "tool_calls": [{"id": "c1", "name": "look", "args": {}}]}]}
JOINS: dict[str, Any] = {
    FAILED: {"__error__": {"error": "ValueError", "message": "the child broke"}},
    WAITING: {"messages": [{"type": "human", "content": "go"}], "__interrupt__": [{"value": ASK, "id": "i1"}]},
    CANCELLED: {},
    CUT: HALF,
}
RUNS = {FAILED: "error", WAITING: "interrupted", CANCELLED: "interrupted", CUT: "interrupted"}


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
            rows += [{"thread_id": t, "status": "error" if t == FAILED else "interrupted",
                      "metadata": {"parent_thread_id": "parent"}} for t in JOINS]
            wanted = body.get("metadata") or {}
            return [r for r in rows if all(r["metadata"].get(k) == v for k, v in wanted.items())
                    and body.get("status") in (None, r["status"])]
        thread = bare.split("/")[2] if bare.count("/") >= 2 else ""
        answered = {"messages": [{"type": "human", "content": "go"},
                                 {"type": "ai", "content": f"answer of {thread}",
                                  "usage_metadata": {"input_tokens": 5, "output_tokens": 2}}]}
        if method == "GET" and bare.endswith("/join"):
            return JOINS.get(thread, answered)
        if method == "GET" and "/runs/" in bare:
            status = "running" if thread in BUSY else RUNS.get(thread, "success")
            return {"run_id": bare.rsplit("/", 1)[-1], "status": status}
        if method == "GET" and bare.endswith("/state"):
            if thread == WAITING:
                return {"values": JOINS[WAITING], "next": ["ask"], "tasks": [{"interrupts": [{"value": ASK,
                                                                                               "id": "i1"}]}]}
            return {"values": HALF if thread == CUT else answered, "next": [], "tasks": []}
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
                else "join" if bare.endswith("/join") else "run" if "/runs/" in bare else "state" if bare.endswith("/state") else f"{r['method']} thread")
        seen[kind] = seen.get(kind, 0) + 1
    return seen


def test_busy_tasks_cost_one_search_and_ended_ones_one_join() -> None:
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
                polls.append((await runner.refresh_many(records), counts(server.requests)))
            return polls

        (first, first_requests), (second, second_requests) = asyncio.run(twice())
    finally:
        server.close()
    for result in (first, second):
        assert all(result[f"task-{t}"] == ({}, None) for t in BUSY)  # still running: nothing to change
        for t in ENDED:
            fields, note = result[f"task-{t}"]
            assert note is None and fields["status"] == "completed" and fields["result"] == f"answer of {t}"
            assert (fields["model_calls"], fields["input_tokens"], fields["output_tokens"]) == (1, 5, 2)
        assert result["task-older"][0]["result"] == "answer of older"
    # The refused search is asked once per server, then remembered; an ended task costs its join alone,
    # and only the older record's thread is read with its run, thread and state.
    assert first_requests == {"ids search": 1, "metadata search": 1, "join": 5, "run": 1, "state": 1,
                              "GET thread": 1}
    assert second_requests == {"metadata search": 1, "join": 5, "run": 1, "state": 1, "GET thread": 1}


def test_a_join_without_a_finished_answer_is_read_from_the_run_and_state() -> None:
    server = NoIdSearch()
    try:
        runner = RemoteTaskRunner([RemoteSubagentSpec(name="worker", description="d", graph_id="g",
                                                      url=server.url)], pool=RemoteClientPool())
        result = asyncio.run(runner.refresh_many([record(t) for t in JOINS]))
        requests = counts(server.requests)
    finally:
        server.close()
    failed, waiting, cancelled, cut = (result[f"task-{t}"][0] for t in (FAILED, WAITING, CANCELLED, CUT))
    assert failed["status"] == "error" and failed["error"] == "ValueError: the child broke"
    assert waiting["status"] == "waiting_for_approval" and waiting["approval_request"]
    assert cancelled["status"] == "cancelled" and not cancelled.get("result")
    assert cut["status"] == "cancelled" and not cut.get("result")  # "let me look" is no answer
    assert requests == {"ids search": 1, "metadata search": 1, "join": 4, "run": 4, "state": 4}
