"""A remote start that never got its run is recorded ``lost``, never lost silently.

Before: orphan adoption (after a parent crashed mid-start and the next
process went on with a new message) took only threads that had a run; a
thread created just before the crash was on the server and in no ledger,
and a start that never reached the server at all had no record anywhere
(its call answered, its task in no ledger and no notice).
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from helpers.background import ledger
from helpers.fault_servers import RecordingServer
from helpers.stopped_start import stop_then_carry_on
from langchain_core.messages import AIMessage

from subagents.background._remote import (
    TASK_ID_METADATA_KEY,
    OrphanSearch,
    RemoteClientPool,
    RemoteSubagentSpec,
    RemoteTaskRunner,
    _adopt_into,
    adopt_orphans,
)


class RunlessThreads(RecordingServer):
    """A server holding one task thread of parent ``p`` with no run on it."""

    def reply_to(self, method: str, path: str, body: Any, headers: dict[str, str]) -> Any:
        if path.startswith("/threads/search"):
            return [{"thread_id": "th-1", "metadata": {
                "parent_thread_id": "p", "tool_call_id": "call_1", "agent_type": "worker",
                TASK_ID_METADATA_KEY: "task-1", "attempt": 1}}]
        if method == "GET" and "/runs" in path:
            return []
        return super().reply_to(method, path, body, headers)


def test_a_thread_without_a_run_is_adopted_as_lost_and_can_be_retried():
    server = RunlessThreads()
    try:
        spec = RemoteSubagentSpec(name="worker", description="w", graph_id="g", url=server.url)
        runner = RemoteTaskRunner([spec], pool=RemoteClientPool())
        records: dict[str, dict[str, Any]] = {}
        asyncio.run(_adopt_into(records, runner, "p", {"call_1": ("worker", "the job")}))
    finally:
        server.close()
    record = records["task-1"]
    assert record["status"] == "lost" and record["thread_id"] == "th-1" and record["tool_call_id"] == "call_1"
    assert "retry_async_task" in record["error"]


@pytest.mark.parametrize("mode", ["sync", "async"])
def test_a_start_left_open_that_never_reached_its_server_is_recorded_lost_and_reported(mode):
    """The server holds no thread of the start (its search answers none): the task is ``lost``, and said so."""
    server = RecordingServer()
    try:
        out, _middleware = stop_then_carry_on(mode, server.url, thread_id=f"never-reached-{mode}")
    finally:
        server.close()
    start = next(c for m in out["messages"] if isinstance(m, AIMessage) for c in m.tool_calls
                 if c["name"] == "start_async_task")
    (record,) = ledger(out).values()
    assert record["tool_call_id"] == start["id"] and record["status"] == "lost"
    assert record["thread_id"] is None and "retry_async_task" in record["error"]
    assert server.url in record["error"]
    notices = [m.text for m in out["messages"] if m.type == "human" and record["id"] in m.text]
    assert notices and "lost" in notices[0]


def test_a_start_whose_server_could_not_be_asked_is_looked_for_again_and_not_declared_lost():
    server = RecordingServer()
    server.fail_with = 502
    try:
        spec = RemoteSubagentSpec(name="worker", description="w", graph_id="g", url=server.url)
        runner = RemoteTaskRunner([spec], pool=RemoteClientPool())
        search = OrphanSearch({"worker"}, "start_async_task")
        messages = [AIMessage("", tool_calls=[{"name": "start_async_task", "id": "call_1",
                                               "args": {"subagent_type": "worker", "description": "the job"}}])]
        parent, missing = search.due(messages, {}, "p")
        records = asyncio.run(adopt_orphans(runner, parent, missing, left_open={"call_1"}, search=search))
        assert records == {}, "a server that did not answer says nothing of what it holds"
        assert search.due(messages, {}, "p") == ("p", missing), "asked again on the next turn"
        server.fail_with = None
        runner = RemoteTaskRunner([spec], pool=RemoteClientPool())  # a new loop: a pool of its own
        records = asyncio.run(adopt_orphans(runner, parent, missing, left_open={"call_1"}, search=search))
    finally:
        server.close()
    (record,) = records.values()
    assert record["status"] == "lost" and record["tool_call_id"] == "call_1"
    assert search.due(messages, {}, "p") is None, "asked and answered: not looked for again"


class NoSelect(RecordingServer):
    """A server that refuses ``select`` on a thread search (422, as aegra does) and holds one running task."""

    def reply_to(self, method: str, path: str, body: Any, headers: dict[str, str]) -> Any:
        if path.startswith("/threads/search"):
            if (body or {}).get("select") is not None:
                return None  # answered 422 by fail_on
            return [{"thread_id": "th-1", "status": "busy", "metadata": {
                "parent_thread_id": "p", "tool_call_id": "call_1", "agent_type": "worker",
                TASK_ID_METADATA_KEY: "task-1", "attempt": 1}}]
        if method == "GET" and path.split("?")[0].endswith("/runs"):
            return [{"run_id": "run-1", "status": "running"}]
        return super().reply_to(method, path, body, headers)

    def status_for(self, method: str, path: str, body: Any) -> int:
        return 422 if path.startswith("/threads/search") and (body or {}).get("select") is not None else 200


def test_orphans_are_found_on_a_server_that_refuses_select_on_thread_search():
    server = NoSelect()
    try:
        spec = RemoteSubagentSpec(name="worker", description="w", graph_id="g", url=server.url)
        runner = RemoteTaskRunner([spec], pool=RemoteClientPool())
        records = asyncio.run(adopt_orphans(runner, "p", {"call_1": ("worker", "the job")}, left_open={"call_1"}))
    finally:
        server.close()
    assert records["task-1"]["status"] == "running" and records["task-1"]["run_id"] == "run-1"
    assert len(records) == 1, "found: not also recorded lost"
