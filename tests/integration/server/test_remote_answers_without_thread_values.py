"""Answers are read through the thread state endpoint, which every LangGraph-API server serves.

``values`` on a thread object is optional: aegra's thread objects (in
``GET /threads/{id}`` and in ``POST /threads/search``) have none. A task on
such a server must finish with its real answer, read from
``GET /threads/{id}/state``; an answer that truly cannot be read is an error
naming the server, never an empty ``completed``.
"""

from __future__ import annotations

import asyncio
import uuid
from typing import Any

import pytest
from helpers.fault_servers import RecordingServer

from subagents.background._remote import RemoteSubagentSpec, RemoteTaskRunner

ANSWER = {"messages": [{"type": "human", "content": "go"},
                       {"type": "ai", "content": "the real answer", "usage_metadata": {"input_tokens": 4,
                                                                                       "output_tokens": 3}}]}
STATE = {"values": ANSWER, "next": [], "tasks": [], "metadata": {}}


class NoValuesServer(RecordingServer):
    """Threads end at once; their objects never carry ``values``, only their state does."""

    def __init__(self, state: Any = STATE) -> None:
        self.state = state
        self.threads: dict[str, dict[str, Any]] = {}
        super().__init__()

    def reply(self, method: str, path: str, body: Any) -> Any:
        if path.startswith("/threads/search"):
            return [self.threads[i] for i in (body or {}).get("ids") or [] if i in self.threads]
        if method == "POST" and path == "/threads":
            tid = body["thread_id"]
            self.threads[tid] = {"thread_id": tid, "status": "idle", "metadata": body.get("metadata")}
            return self.threads[tid]
        if method == "POST" and path.endswith("/runs"):
            return {"run_id": str(uuid.uuid4()), "status": "pending"}
        if method == "GET" and path.split("?")[0].endswith("/state"):
            return self.state
        if method == "GET" and "/runs/" in path:
            return {"run_id": path.rsplit("/", 1)[-1], "status": "success"}
        if method == "GET" and path.startswith("/threads/"):
            return self.threads.get(path.split("/")[2], {"thread_id": path.split("/")[2], "status": "idle"})
        return super().reply(method, path, body)


@pytest.fixture
def no_values_server():
    servers: list[NoValuesServer] = []

    def start(state: Any = STATE) -> NoValuesServer:
        servers.append(NoValuesServer(state))
        return servers[-1]

    yield start
    for server in servers:
        server.close()


def _start_and_poll(server: NoValuesServer, n: int = 3) -> dict[str, tuple[dict[str, Any], str | None]]:
    spec = RemoteSubagentSpec(name="w", description="d", graph_id="g", url=server.url)

    async def go() -> dict[str, tuple[dict[str, Any], str | None]]:
        runner = RemoteTaskRunner([spec])
        records = []
        for i in range(n):
            fields = await runner.start(f"task-{i}", "w", "do it", parent_thread_id="parent", tool_call_id=f"call-{i}")
            records.append({"id": f"task-{i}", "agent_type": "w", "runner": "remote", **fields})
        return await runner.refresh_many(records)

    return asyncio.run(go())


def test_tasks_finish_with_the_answer_read_from_the_thread_state(no_values_server):
    server = no_values_server()
    out = _start_and_poll(server)
    assert len(out) == 3
    for fields, note in out.values():
        assert note is None
        assert (fields["status"], fields["result"]) == ("completed", "the real answer")
        assert (fields["model_calls"], fields["input_tokens"], fields["output_tokens"]) == (1, 4, 3)
    assert sum(r["path"].split("?")[0].endswith("/state") for r in server.requests) == 3


@pytest.mark.parametrize("state", [{"values": None, "next": []}, {"next": []}, "not a state"])
def test_an_answer_that_cannot_be_read_is_an_error_naming_the_server(no_values_server, state):
    server = no_values_server(state)
    out = _start_and_poll(server, n=1)
    ((fields, note),) = out.values()
    assert note is None
    assert fields["status"] == "error" and fields.get("result") in (None, "")
    assert server.url in fields["error"] and "answer" in fields["error"]
