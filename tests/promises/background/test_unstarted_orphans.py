"""A task whose thread reached the server but whose run never started is recorded ``lost``, never lost silently.

Before: orphan adoption (after a parent crashed mid-start and the next
process went on with a new message) took only threads that had a run; a
thread created just before the crash was on the server and in no ledger.
"""

from __future__ import annotations

import asyncio
from typing import Any

from helpers.fault_servers import RecordingServer

from subagents.background.remote import (
    TASK_ID_METADATA_KEY,
    RemoteClientPool,
    RemoteSubagentSpec,
    RemoteTaskRunner,
    _adopt_into,
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
