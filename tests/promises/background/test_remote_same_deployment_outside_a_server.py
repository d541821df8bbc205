"""A remote spec without a url outside a LangGraph Server: a clear error naming the spec, nothing sent anywhere."""

from __future__ import annotations

import asyncio
import sys

import pytest

from subagents import RemoteSubagentSpec
from subagents.background._remote import SERVER_MODULE, RemoteClientPool, RemoteTaskRunner
from subagents._errors import RemoteConfigError


def test_a_spec_without_url_outside_a_server_fails_its_start_naming_the_spec():
    assert SERVER_MODULE not in sys.modules, "this test process runs no LangGraph Server"
    spec = RemoteSubagentSpec(name="same-server-worker", description="d", graph_id="scripted_worker")
    assert spec.url is None and "same deployment" in spec.server
    runner = RemoteTaskRunner([spec], pool=RemoteClientPool())
    with pytest.raises(RemoteConfigError, match="'same-server-worker' has no url.*give the spec the url"):
        asyncio.run(runner.start("t1", "same-server-worker", "job", parent_thread_id="p", tool_call_id="c"))


def test_url_credentials_without_a_url_are_refused():
    with pytest.raises(ValueError, match="url_credentials need a url"):
        RemoteSubagentSpec(name="w", description="d", graph_id="g", url_credentials="user:pw")
