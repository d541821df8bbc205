"""The model call right after a step of remote starts polls none of them; the next turn does."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from helpers.background import ledger, remote_parent
from helpers.fault_servers import RecordingServer
from helpers.graphs import user


@pytest.fixture
def server() -> Iterator[RecordingServer]:
    recorder = RecordingServer()  # every thread busy, every run running
    yield recorder
    recorder.close()


def test_a_step_of_starts_is_not_polled_by_the_model_call_after_it_and_is_by_the_next_turn(server):
    agent, middleware, config = remote_parent(server.url, [f"job {i}" for i in range(20)])
    try:
        out = agent.invoke(user("PARENT go"), config)
        assert len(ledger(out)) == 20
        paths = [r["path"].split("?")[0] for r in server.requests]
        assert len(paths) == 40 and all(p == "/threads" or p.endswith("/runs") for p in paths), paths  # starts only
        sent = len(server.requests)
        out = agent.invoke(user("PARENT next"), config)
        assert len(server.requests) > sent, "the next turn polls them"
        assert {r["status"] for r in ledger(out).values()} == {"running"}  # their threads are busy: begun
    finally:
        middleware.tasks.runtime.close()
