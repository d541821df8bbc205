"""A remote header or key that begins or ends with a space or tab is refused naming it, not sent.

The HTTP/1.1 client refuses such a value as a protocol error (an
``httpx.TransportError``), which the runner would read as the server being
unreachable. (A key in the environment is checked at the start: see
``test_remote_faults``.)
"""

from __future__ import annotations

import httpx
import pytest

from helpers.fault_servers import RecordingServer
from middleware import BackgroundSubagentMiddleware
from subagents import SpecError

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

