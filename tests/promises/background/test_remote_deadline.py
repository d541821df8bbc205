"""A remote spec's ``timeout_s`` bounds the whole task: a run the server never finishes ends, cancelled there."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterator
from typing import Any

import pytest

from helpers.fault_servers import RecordingServer
from subagents import RemoteSubagentSpec
from subagents.background._remote import RemoteClientPool, RemoteTaskRunner, ServerHealth


@pytest.fixture
def server() -> Iterator[RecordingServer]:
    recorder = RecordingServer()  # its runs stay "running" forever
    yield recorder
    recorder.close()


async def start_and_poll(runner: RemoteTaskRunner, seconds: float) -> tuple[dict[str, Any], list[str]]:
    try:
        record = {"id": "t1", "agent_type": "far", "runner": "remote",
                  **await runner.start("t1", "far", "job", parent_thread_id="p", tool_call_id="c1")}
        seen = []
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline:
            fields, _ = (await runner.refresh_many([record]))["t1"]
            record.update(fields)
            seen.append(record["status"])
            if record["status"] not in ("pending", "running"):
                break
            await asyncio.sleep(0.1)
        return record, seen
    finally:
        await runner.pool.aclose()


def runner_for(server: RecordingServer, **timeouts: float) -> RemoteTaskRunner:
    spec = RemoteSubagentSpec(name="far", description="d", url=server.url, graph_id="g", **timeouts)
    return RemoteTaskRunner([spec], pool=RemoteClientPool(ServerHealth()))


def test_a_run_the_server_never_finishes_ends_at_timeout_s_and_is_cancelled_there(server):
    record, seen = asyncio.run(start_and_poll(runner_for(server, timeout_s=1.0), seconds=30))
    assert seen[0] == "running", "the deadline is the task's, not the first poll's"
    assert record["status"] == "error" and record["error"].startswith("timed out")
    assert "timeout_s=1 s" in record["error"] and "cancelled on the server" in record["error"]
    cancels = [r["path"].split("?")[0] for r in server.requests if "/cancel" in r["path"]]
    assert cancels == [f"/threads/{record['thread_id']}/runs/{record['run_id']}/cancel"]


def test_without_timeout_s_a_remote_task_has_no_deadline_and_requests_have_their_own(server):
    spec = RemoteSubagentSpec(name="far", description="d", url=server.url, graph_id="g", request_timeout_s=2)
    assert spec.timeout_s is None and spec.request_timeout_s == 2
    record, _ = asyncio.run(start_and_poll(runner_for(server), seconds=1.5))
    assert record["status"] == "running"
    assert not [r for r in server.requests if "/cancel" in r["path"]]


def test_timeout_s_is_checked_like_a_local_specs():
    with pytest.raises(ValueError, match="timeout_s"):
        RemoteSubagentSpec(name="far", description="d", url="http://h", graph_id="g", timeout_s=float("nan"))
