"""A remote spec's ``webhook`` (deepagents' ``AsyncSubAgent.webhook``) goes with every run it starts."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator

import pytest
from helpers.fault_servers import RecordingServer

from deep_agent import AsyncSubAgentMiddleware
from subagents import RemoteSubagentSpec, SpecError
from subagents.background._remote import RemoteTaskRunner


@pytest.fixture
def server() -> Iterator[RecordingServer]:
    recorder = RecordingServer()
    yield recorder
    recorder.close()


async def start(runner: RemoteTaskRunner) -> None:
    try:
        await runner.start("task-1", "far", "job", parent_thread_id="parent", tool_call_id="call-1")
    finally:
        await runner.pool.aclose()


def run_bodies(server: RecordingServer) -> list[dict[str, object]]:
    return [r["body"] for r in server.requests if r["method"] == "POST" and r["path"].endswith("/runs")]


def test_the_webhook_is_sent_with_the_run(server):
    spec = RemoteSubagentSpec(name="far", description="d", url=server.url, graph_id="g",
                              webhook="https://hooks.example.com/done/")
    asyncio.run(start(RemoteTaskRunner([spec])))
    (body,) = run_bodies(server)
    assert body["webhook"] == "https://hooks.example.com/done/"


def test_without_a_webhook_none_is_sent(server):
    spec = RemoteSubagentSpec(name="far", description="d", url=server.url, graph_id="g")
    asyncio.run(start(RemoteTaskRunner([spec])))
    (body,) = run_bodies(server)
    assert "webhook" not in body


def test_deepagents_spelling_is_accepted_and_a_bad_url_is_an_error_naming_the_field():
    spec = {"name": "far", "description": "d", "graph_id": "g", "url": "http://127.0.0.1:9"}
    AsyncSubAgentMiddleware(async_subagents=[{**spec, "webhook": "http://127.0.0.1:9/hook"}])
    with pytest.raises(SpecError, match="webhook"):
        AsyncSubAgentMiddleware(async_subagents=[{**spec, "webhook": "ftp://nowhere"}])
