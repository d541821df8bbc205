"""A step of remote starts: each start is told on the run's stream as it lands, and the model call
right after the step polls none of them (the next turn does)."""

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


@pytest.mark.parametrize("mode", ["stream", "astream"])
def test_each_start_of_a_turn_tells_the_runs_stream_as_it_lands(server, mode):
    import asyncio

    from middleware._background import STARTED_EVENT

    agent, middleware, config = remote_parent(server.url, [f"job {i}" for i in range(12)])
    try:
        if mode == "stream":
            events = list(agent.stream(user("PARENT go"), config, stream_mode="custom"))
        else:
            async def collect() -> list:
                return [e async for e in agent.astream(user("PARENT go"), config, stream_mode="custom")]

            events = asyncio.run(collect())
        started = [e[STARTED_EVENT] for e in events if isinstance(e, dict) and STARTED_EVENT in e]
        records = ledger(agent.get_state(config).values)
        assert sorted(s["id"] for s in started) == sorted(records), started  # one event per task, each once
        assert all(s["agent_type"] == "remote-worker" and s["status"] == "pending" and s["tool_call_id"]
                   for s in started)
    finally:
        middleware.tasks.runtime.close()
