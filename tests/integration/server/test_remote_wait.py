"""Waiting for remote tasks: ``wait_for_background`` returns on time whatever the server does.

The wait polls on the runtime's loop, every await bounded by its deadline.
These tests try to break that: a deadline shorter than the run (with a poll
interval longer than the deadline, too), a server that hangs mid-wait, one
that hangs and comes back, one killed mid-wait. Each wait must return on
time, ``False`` if it did not settle, and never raise.
"""

from __future__ import annotations

import threading
import time
from typing import Any

from langchain.agents import create_agent
from langgraph.checkpoint.memory import InMemorySaver

from helpers.background import ledger, returns, start
from helpers.graphs import user
from deep_agent._testing import ScriptedChatModel
from helpers.fault_servers import FaultProxy
from middleware import BackgroundSubagentMiddleware
from subagents import wait_for_background
from subagents.background._remote import RemoteClientPool
from subagents.background._remote import ServerHealth
from subagents._settings import DelegationSettings


def worker(url: str, **extra: Any) -> dict[str, Any]:
    return {"name": "remote-worker", "description": "Works on a LangGraph Server.",
            "graph_id": "scripted_worker", "url": url, **extra}


def started(url: str, jobs: list[str], **extra: Any) -> tuple[BackgroundSubagentMiddleware, dict[str, Any]]:
    """A middleware (quick circuit backoff) whose one parent turn started ``jobs`` at ``url``, and its ledger."""
    middleware = BackgroundSubagentMiddleware([worker(url, **extra)], settings=DelegationSettings.of(
        general_purpose=False,
    ))
    middleware.tasks.remote.client_pool = RemoteClientPool(ServerHealth(base_s=0.3, max_s=1.0))
    model = ScriptedChatModel(rules=[("PARENT go", [start(*[(j, "remote-worker") for j in jobs]), "ok"])],
                              default="ok")
    agent = create_agent(model, middleware=[middleware], checkpointer=InMemorySaver())
    out = agent.invoke(user("PARENT go"), {"configurable": {"thread_id": f"wait-{time.monotonic_ns()}"}})
    records = ledger(out)
    assert len(records) == len(jobs), out["messages"]
    return middleware, records


def timed_wait(records: dict[str, Any], middleware: BackgroundSubagentMiddleware, timeout_s: float,
               every_s: float = 0.05) -> tuple[bool, float]:
    """Whether the wait settled, and how long it took; a wait that never returns fails the test (a hang guard, no
    budget: what a stretched deadline would wait for, an hour's poll or request, lies far past it)."""
    began = time.monotonic()
    settled = returns(lambda: wait_for_background(records, timeout_s=timeout_s, tasks=middleware.tasks,
                                                  every_s=every_s))
    return settled, time.monotonic() - began


def statuses(middleware: BackgroundSubagentMiddleware, records: dict[str, Any]) -> set[str]:
    return {middleware.tasks.runtime.run(middleware.tasks.check(r))[0]["status"] for r in records.values()}


def cancel_all(url: str, records: dict[str, Any]) -> None:
    from langgraph_sdk import get_sync_client

    client = get_sync_client(url=url, api_key=None)
    for record in records.values():
        try:
            client.runs.cancel(record["thread_id"], record["run_id"])
        except Exception:  # noqa: BLE001 - it may have ended already
            pass


def test_quick_tasks_settle_and_their_outcome_is_read(langgraph_server):
    middleware, records = started(langgraph_server, ["quick job 1", "quick job 2", "quick job 3"])
    settled, _ = timed_wait(records, middleware, timeout_s=60)
    assert settled
    assert statuses(middleware, records) == {"completed"}


def test_the_end_of_a_run_cuts_a_long_poll_interval_short(langgraph_server):
    middleware, records = started(langgraph_server, ["quick job a", "quick job b"])
    # Polling every 30 s alone would sleep to the 20 s deadline; the server's word that a run ended does not wait.
    settled, _ = timed_wait(records, middleware, timeout_s=20, every_s=30.0)
    assert settled  # before the 20 s deadline, so not at the first 30 s tick
    assert statuses(middleware, records) == {"completed"}


def test_a_server_that_refuses_joins_is_polled_and_not_asked_again(langgraph_server):
    proxy = FaultProxy(langgraph_server)
    proxy.refuse = b"/join "
    try:
        middleware, records = started(proxy.url, ["quick job r1", "quick job r2", "quick job r3"])
        settled, _ = timed_wait(records, middleware, timeout_s=60)
        assert settled
        assert statuses(middleware, records) == {"completed"}
        assert proxy.refused <= 1  # the first refusal leaves the rest of the wait to the timer
    finally:
        proxy.close()


def test_a_deadline_shorter_than_the_run_returns_false_on_time(langgraph_server):
    middleware, records = started(langgraph_server, ["slow job x", "slow job y"])
    try:
        for every_s in (0.05, 3600.0):  # a poll interval longer than the deadline does not stretch it
            settled, took = timed_wait(records, middleware, timeout_s=0.8, every_s=every_s)
            # A stretched deadline lasts the hour's poll (the guard) or the slow runs (then they settled).
            assert settled is False and took >= 0.7, f"every_s={every_s}: {settled} after {took:.2f} s"
        assert statuses(middleware, records) <= {"pending", "running"}
    finally:
        cancel_all(langgraph_server, records)


def test_a_server_that_hangs_mid_wait_returns_false_on_time(langgraph_server):
    proxy = FaultProxy(langgraph_server)
    # Each status request may take an hour: the wait's own 1.5 s deadline must win.
    middleware, records = started(proxy.url, ["slow job h"], request_timeout_s=3600)
    try:
        proxy.hang()
        settled, took = timed_wait(records, middleware, timeout_s=1.5)
        assert settled is False and took >= 1.4, f"settled={settled} after {took:.2f} s"
    finally:
        proxy.close()
        cancel_all(langgraph_server, records)


def test_a_server_that_hangs_and_comes_back_lets_the_wait_settle(langgraph_server):
    proxy = FaultProxy(langgraph_server)
    middleware, records = started(proxy.url, ["quick job back"], request_timeout_s=1)
    proxy.hang()
    revive = threading.Timer(1.5, proxy.up)
    revive.start()
    try:
        settled, _ = timed_wait(records, middleware, timeout_s=60)
        assert settled
        assert statuses(middleware, records) == {"completed"}
    finally:
        revive.join()
        proxy.close()


def test_a_server_killed_during_the_wait_returns_false_on_time(own_langgraph_server):
    server = own_langgraph_server
    middleware, records = started(server.url, ["slow job k1", "slow job k2"], request_timeout_s=1)
    killer = threading.Timer(0.5, server.kill)
    killer.start()
    try:
        settled, took = timed_wait(records, middleware, timeout_s=2.5)
        assert settled is False and took >= 2.4, f"settled={settled} after {took:.2f} s"
    finally:
        killer.join()
        server.start()
