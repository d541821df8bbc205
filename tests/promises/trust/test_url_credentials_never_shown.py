"""Credentials written in a remote spec's url never reach what a model, a log or a checkpoint sees.

Before: ``http://svc:PASSWORD@host`` appeared in the error the model read
when the server could not be reached, in the checkpointed history, and in
the spec's repr. The credentials are now moved out of the url into a
secret field and sent as HTTP basic auth.
"""

from __future__ import annotations

import base64
import json
import socket
from typing import Any

import pytest
from langchain.agents import create_agent
from langgraph.checkpoint.memory import InMemorySaver

from helpers.background import NOTICE, start
from helpers.fault_servers import RecordingServer
from helpers.graphs import user
from deep_agent._testing import ScriptedChatModel
from middleware import BackgroundSubagentMiddleware
from subagents.background._remote import RemoteSubagentSpec
from subagents._settings import DelegationSettings

SECRET = "PASSWORD-7f3a"


def _spec(url: str, **extra: Any) -> dict[str, Any]:
    return {"name": "remote-worker", "description": "Works remotely.", "graph_id": "scripted_worker", "url": url,
            **extra}


def _closed_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def test_the_spec_keeps_the_password_out_of_its_url_repr_and_dumps():
    spec = RemoteSubagentSpec(**_spec(f"http://svc:{SECRET}@127.0.0.1:2024/api/"))
    assert spec.url == "http://127.0.0.1:2024/api"
    for shown in (repr(spec), str(spec), json.dumps(spec.model_dump(), default=str), spec.model_dump_json()):
        assert SECRET not in shown
    token = base64.b64encode(f"svc:{SECRET}".encode()).decode()
    assert spec.request_headers()["Authorization"] == f"Basic {token}"


def test_a_bad_url_with_credentials_is_refused_without_echoing_them():
    with pytest.raises(ValueError) as caught:
        RemoteSubagentSpec(**_spec(f"ftp://svc:{SECRET}@host"))
    assert SECRET not in str(caught.value) and "ftp://host" in str(caught.value)


@pytest.mark.parametrize("extra", [{"url_credentials": "a:b"}, {"headers": {"Authorization": "Bearer x"}}])
def test_credentials_given_two_ways_are_refused(extra):
    with pytest.raises(ValueError, match="one way only"):
        RemoteSubagentSpec(**_spec(f"http://svc:{SECRET}@127.0.0.1:2024", **extra))


def _parent(middleware: BackgroundSubagentMiddleware) -> Any:
    model = ScriptedChatModel(rules=[("PARENT start", [start(("slow job", "remote-worker")), "started"]),
                                     (NOTICE, ["noted"])], default="ok")
    return create_agent(model, middleware=[middleware], checkpointer=InMemorySaver())


def test_the_server_gets_basic_auth_and_the_state_never_holds_the_password():
    server = RecordingServer()
    try:
        host = server.url.removeprefix("http://")
        middleware = BackgroundSubagentMiddleware([_spec(f"http://svc:{SECRET}@{host}")],
        settings=DelegationSettings.of(general_purpose=False))
        try:
            out = _parent(middleware).invoke(user("PARENT start"), {"configurable": {"thread_id": "ok"}})
        finally:
            middleware.close()
        token = base64.b64encode(f"svc:{SECRET}".encode()).decode()
        assert server.requests and {r["headers"].get("authorization") for r in server.requests} == {f"Basic {token}"}
        assert SECRET not in json.dumps(out, default=str)
    finally:
        server.close()


def test_a_server_that_cannot_be_reached_is_named_without_the_password():
    middleware = BackgroundSubagentMiddleware([_spec(f"http://svc:{SECRET}@127.0.0.1:{_closed_port()}",
                                                     start_timeout_s=2)], settings=DelegationSettings.of(
                                                         general_purpose=False,
                                                     ))
    try:
        agent = _parent(middleware)
        config = {"configurable": {"thread_id": "down"}}
        out = agent.invoke(user("PARENT start"), config)
        history = list(agent.get_state_history(config))
    finally:
        middleware.close()
    tool_texts = [m.text for m in out["messages"] if m.type == "tool"]
    assert tool_texts and "127.0.0.1" in tool_texts[0]  # the error names the server...
    assert SECRET not in json.dumps(out, default=str)  # ...never its password
    assert all(SECRET not in json.dumps(s.values, default=str) for s in history)
