"""A server that is down, or answered for by a gateway, costs a bounded number of requests per turn."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator

import pytest
from helpers.fault_servers import RecordingServer

from subagents import RemoteSubagentSpec
from subagents.background._remote import FAILURES_TO_OPEN, RemoteClientPool, RemoteTaskRunner, ServerHealth

LIVE = 200


@pytest.fixture
def server() -> Iterator[RecordingServer]:
    recorder = RecordingServer()
    yield recorder
    recorder.close()


def live_records(count: int) -> list[dict[str, object]]:
    return [{"id": f"t{i}", "agent_type": "far", "runner": "remote", "status": "running",
             "thread_id": f"thread-{i}", "run_id": f"run-{i}", "note": None} for i in range(count)]


async def turns(runner: RemoteTaskRunner, records: list[dict[str, object]], server: RecordingServer, count: int
                ) -> tuple[list[int], dict[str, tuple[dict[str, object], str | None]]]:
    """The requests each of ``count`` turns sent, and the last turn's results."""
    sent: list[int] = []
    try:
        for _ in range(count):
            before = len(server.requests)
            results = await runner.refresh_many(records)
            sent.append(len(server.requests) - before)
        return sent, results
    finally:
        await runner.pool.aclose()


async def two_turns(runner: RemoteTaskRunner, records: list[dict[str, object]], server: RecordingServer
                    ) -> tuple[int, int, dict[str, tuple[dict[str, object], str | None]]]:
    (first, second), results = await turns(runner, records, server, 2)
    return first, second, results


@pytest.mark.parametrize("status", [500, 502, 503, 504])
def test_gateway_errors_open_the_circuit_so_a_turn_sends_a_bounded_number_of_requests(server, status):
    server.fail_with = status
    spec = RemoteSubagentSpec(name="far", description="d", url=server.url, graph_id="g")
    runner = RemoteTaskRunner([spec], pool=RemoteClientPool(ServerHealth(base_s=60)))
    sent, results = asyncio.run(turns(runner, live_records(LIVE), server, FAILURES_TO_OPEN + 1))
    # Each turn's one status search tells the server is down; no per-task reads follow (they were 2 per task).
    assert all(n <= 2 for n in sent), f"{sent} requests for {LIVE} live tasks on a server answering {status}"
    # FAILURES_TO_OPEN failures in a row, no answer between: the server is down, and the circuit opens.
    assert sent[-1] == 0, "the circuit is open: the next turn waits for its probe time"
    notes = {note for _, note in results.values()}
    assert len(notes) == 1 and f"HTTP {status}" in str(notes.pop())
    assert runner.pool.health.retry_in(server.url) > 30


def test_failures_between_answers_leave_the_circuit_closed_and_a_run_of_them_opens_it():
    clock = [100.0]
    health = ServerHealth(base_s=2, max_s=120, clock=lambda: clock[0])
    for _ in range(10):  # a round-robin balancer with one dead instance: every other request fails
        health.failed("http://h", "HTTP 502", sent_at=clock[0])
        health.answered("http://h")
    for _ in range(FAILURES_TO_OPEN * 3):  # concurrent requests: several fail in a row, just after an answer
        health.failed("http://h", "HTTP 502", sent_at=clock[0])
    assert health.retry_in("http://h") == 0
    clock[0] += 2.5  # no answer for base_s: the failures in a row say the server is down
    health.failed("http://h", "HTTP 502", sent_at=clock[0])
    assert health.retry_in("http://h") == 2 and "HTTP 502" in str(health.note("http://h"))


def test_a_client_error_is_an_answer_and_keeps_the_circuit_closed(server):
    server.fail_with = 404
    spec = RemoteSubagentSpec(name="far", description="d", url=server.url, graph_id="g")
    runner = RemoteTaskRunner([spec], pool=RemoteClientPool(ServerHealth(base_s=60)))
    asyncio.run(two_turns(runner, live_records(3), server))
    assert runner.pool.health.retry_in(server.url) == 0


async def starts(runner: RemoteTaskRunner, first: int, count: int) -> list[object]:
    return await asyncio.gather(*(runner.start(f"task-{i}", "far", f"job {i}", parent_thread_id="parent",
                                               tool_call_id=f"call-{i}") for i in range(first, first + count)),
                                return_exceptions=True)


async def burst_then_recovery(runner: RemoteTaskRunner, server: RecordingServer
                              ) -> tuple[list[object], float, list[object]]:
    try:
        server.fail_with = 502
        during = await starts(runner, 0, 10)
        backoff = runner.pool.health.retry_in(server.url)
        server.fail_with = None
        deadline = asyncio.get_running_loop().time() + 30
        while runner.pool.health.retry_in(server.url) > 0 and asyncio.get_running_loop().time() < deadline:
            await asyncio.sleep(0.05)
        after = await starts(runner, 10, 5)
        return during, backoff, after
    finally:
        await runner.pool.aclose()


def test_concurrent_failures_in_one_outage_are_one_backoff_step_and_recovery_is_at_the_first_probe(server):
    spec = RemoteSubagentSpec(name="far", description="d", url=server.url, graph_id="g")
    runner = RemoteTaskRunner([spec], pool=RemoteClientPool(ServerHealth(base_s=0.5, max_s=120)))
    during, backoff, after = asyncio.run(burst_then_recovery(runner, server))
    assert all(isinstance(e, ConnectionError) for e in during), during
    # Ten starts failing together are one step (base_s), not ten (which reached max_s).
    assert backoff <= 0.5
    assert all(isinstance(r, dict) and r["status"] == "pending" for r in after), after


def test_a_probe_failing_again_doubles_the_backoff():
    clock = [100.0]
    health = ServerHealth(base_s=2, max_s=120, clock=lambda: clock[0])
    for _ in range(FAILURES_TO_OPEN):
        health.failed("http://h", "down", sent_at=100.0)
    health.failed("http://h", "down", sent_at=99.0)  # in flight when it opened: same step
    assert health.retry_in("http://h") == 2
    clock[0] = 102.0
    health.failed("http://h", "down", sent_at=102.0)  # the probe
    assert health.retry_in("http://h") == 4
