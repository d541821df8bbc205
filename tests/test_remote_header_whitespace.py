"""A remote header or key that begins or ends with a space or tab is refused naming it, not sent.

The HTTP/1.1 client refuses such a value as a protocol error (an
``httpx.TransportError``), which the runner would read as the server being
unreachable.
"""

from __future__ import annotations

import asyncio

import httpx
import pytest

from fault_servers import RecordingServer
from middleware import BackgroundSubagentMiddleware
from subagents import SpecError
from subagents.background._remote import RemoteSubagentSpec, RemoteTaskRunner
from subagents.background._remote_clients import RemoteClientPool
from subagents.background._remote_spec import RemoteConfigError

VALUES = ["secret ", " secret", "\tsecret", "secret\t"]


def worker(**extra: object) -> dict[str, object]:
    return {"name": "remote-worker", "description": "d", "graph_id": "g", "url": "http://127.0.0.1:1", **extra}


@pytest.mark.parametrize("value", VALUES)
def test_the_http_client_cannot_send_it(value) -> None:
    with pytest.raises(httpx.LocalProtocolError):
        server = RecordingServer()
        try:
            httpx.get(server.url, headers={"x-team": value})
        finally:
            server.close()


@pytest.mark.parametrize("value", VALUES)
@pytest.mark.parametrize("field", ["headers", "api_key"])
def test_it_is_refused_when_the_spec_is_made(field, value) -> None:
    fields = {"headers": {"X-Team": value}} if field == "headers" else {"api_key": value}
    with pytest.raises(SpecError, match="must not begin or end with a space or tab"):
        BackgroundSubagentMiddleware([worker(**fields)])


def test_a_key_in_the_environment_is_refused_at_the_start_naming_the_variable(monkeypatch) -> None:
    monkeypatch.setenv("TEAM_SERVER_KEY", "secret ")
    server = RecordingServer()
    try:
        spec = RemoteSubagentSpec(name="named", description="d", graph_id="g", url=server.url,
                                  api_key_env="TEAM_SERVER_KEY")
        runner = RemoteTaskRunner([spec], pool=RemoteClientPool())
        with pytest.raises(RemoteConfigError, match=r"the key in 'TEAM_SERVER_KEY' must not begin or end"):
            asyncio.run(runner.start("t-named", "named", "job", parent_thread_id="p", tool_call_id="c"))
        assert server.requests == []
    finally:
        server.close()


def test_inner_spaces_and_tabs_are_still_sent() -> None:
    spec = RemoteSubagentSpec(name="r", description="d", graph_id="g", url="http://127.0.0.1:1",
                              headers={"X-Team": "blue\tteam one"})
    assert spec.request_headers()["X-Team"] == "blue\tteam one"
