"""What the parent reports of remote tasks is what their runs did, whichever requests fail on the way.

Behind a plain round-robin balancer with one dead instance (every other
request answered 502), a server briefly down at a task's deadline, a gateway
answering 502 to everything, and a start that failed: each answer the server
holds is read, each outcome the parent cannot know is said to be unknown,
and one call is reported once.
"""

from __future__ import annotations

import socket
import time
from typing import Any

from helpers.background import ledger, notices, remote_parent
from helpers.fault_servers import FaultProxy
from helpers.graphs import user
from langgraph_sdk import get_sync_client

from subagents import wait_for_background
from subagents.background._remote import SEQUENTIAL_FAILURES_TO_OPEN, RemoteClientPool, ServerHealth

LIVE = ("pending", "running")


def dead_port() -> int:
    """A loopback port nothing listens on: a balancer's dead instance."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def ended_on_the_server(url: str, records: dict[str, Any]) -> None:
    client = get_sync_client(url=url, api_key=None)
    for record in records.values():
        client.runs.join(record["thread_id"], record["run_id"])


def past_deadline(records: dict[str, Any], seconds: float) -> None:
    time.sleep(max(0.0, max(r["started_at"] for r in records.values()) + seconds - time.time()))


def turns_until_settled(agent: Any, config: dict[str, Any], turns: int, pause_s: float = 0.0) -> dict[str, Any]:
    for _ in range(turns):
        out = agent.invoke(user("PARENT next"), config)
        if not any(r["status"] in LIVE for r in ledger(out).values()):
            break
        time.sleep(pause_s)
    return out


def test_a_balancer_with_a_dead_instance_still_reads_every_answer_past_the_deadline(langgraph_server):
    proxy = FaultProxy(langgraph_server, langgraph_server)
    agent, middleware, config = remote_parent(proxy.url, ["quick job 1", "quick job 2"], timeout_s=2)
    try:
        records = ledger(agent.invoke(user("PARENT go"), config))
        ended_on_the_server(langgraph_server, records)
        past_deadline(records, 2.5)
        proxy.upstreams[1] = ("127.0.0.1", dead_port())  # instance B dies
        out = turns_until_settled(agent, config, 6)
    finally:
        middleware.tasks.runtime.close()
        proxy.close()
    assert {r["status"] for r in ledger(out).values()} == {"completed"}, ledger(out)
    assert sorted(r["result"] for r in ledger(out).values()) == ["Done: quick job 1", "Done: quick job 2"]
    assert proxy.bad_gateways > 0  # the dead instance was asked, and failed


def down_at_the_deadline(url: str, proxy: FaultProxy, max_s: float) -> tuple[Any, Any, dict[str, Any]]:
    """A quick task (``timeout_s=2``) that succeeded, its server down from then until past its deadline."""
    agent, middleware, config = remote_parent(proxy.url, ["quick job"], timeout_s=2)
    middleware.tasks.remote.client_pool = RemoteClientPool(ServerHealth(base_s=0.3, max_s=max_s))
    records = ledger(agent.invoke(user("PARENT go"), config))
    ended_on_the_server(url, records)
    proxy.down()
    past_deadline(records, 2.5)
    return agent, middleware, config


def test_a_run_that_succeeded_read_only_after_an_outage_at_its_deadline_is_completed(langgraph_server):
    proxy = FaultProxy(langgraph_server)
    agent, middleware, config = down_at_the_deadline(langgraph_server, proxy, max_s=60)
    try:
        for _ in range(4):  # turns while down, until its circuit is open
            during = next(iter(ledger(agent.invoke(user("PARENT next"), config)).values()))
            time.sleep(0.4)
        proxy.up()
        out = turns_until_settled(agent, config, 60, pause_s=0.3)
    finally:
        middleware.tasks.runtime.close()
        proxy.close()
    assert during["status"] in LIVE and during["note"].startswith("unreachable"), during
    record = next(iter(ledger(out).values()))
    assert (record["status"], record["result"]) == ("completed", "Done: quick job"), record


def test_a_server_unreachable_long_past_the_deadline_ends_the_task_saying_its_outcome_is_unknown(langgraph_server):
    proxy = FaultProxy(langgraph_server)
    agent, middleware, config = down_at_the_deadline(langgraph_server, proxy, max_s=0.5)
    try:
        time.sleep(0.5)  # the circuit's longest backoff window, past the deadline
        out = turns_until_settled(agent, config, 10, pause_s=0.3)
    finally:
        middleware.tasks.runtime.close()
        proxy.close()
    record = next(iter(ledger(out).values()))
    assert record["status"] == "error" and record["error"].startswith("unreachable at its deadline"), record
    assert record["error"].endswith("its run's outcome is unknown") and "cancelled" not in record["error"]


def test_a_gateway_answering_only_502_opens_the_circuit_on_a_fast_run_of_failures_and_a_wait_respects_it(
        langgraph_server):
    proxy = FaultProxy(langgraph_server)
    agent, middleware, config = remote_parent(proxy.url, ["slow job"])
    middleware.tasks.remote.client_pool = RemoteClientPool(ServerHealth(base_s=60))
    try:
        records = ledger(agent.invoke(user("PARENT go"), config))
        records = ledger(agent.invoke(user("PARENT next"), config))  # the server answered just now
        proxy.bad_gateway()
        assert wait_for_background(records, timeout_s=1, tasks=middleware.tasks, every_s=0.005) is False
        storm = proxy.bad_gateways
        assert wait_for_background(records, timeout_s=0.5, tasks=middleware.tasks, every_s=0.005) is False
    finally:
        middleware.tasks.runtime.close()
        proxy.close()
        for record in records.values():
            get_sync_client(url=langgraph_server, api_key=None).runs.cancel(record["thread_id"], record["run_id"])
    assert storm <= SEQUENTIAL_FAILURES_TO_OPEN + 1, storm  # the run of failures, and one join
    assert proxy.bad_gateways == storm  # the circuit is open: the next wait sends nothing, not even a join


def test_a_start_the_model_was_told_failed_is_not_reported_again_as_lost(langgraph_server):
    # The start's thread is created on the live instance, its next request lands on the dead one.
    proxy = FaultProxy(f"http://127.0.0.1:{dead_port()}", langgraph_server)
    agent, middleware, config = remote_parent(proxy.url, ["quick job"])
    try:
        first = agent.invoke(user("PARENT go"), config)
        proxy.upstreams[0] = proxy.upstreams[1]  # the dead instance is replaced
        agent.invoke(user("PARENT next"), config)
        out = agent.invoke(user("PARENT next"), config)
    finally:
        middleware.tasks.runtime.close()
        proxy.close()
    assert any("failed" in str(m.content) for m in first["messages"] if m.type == "tool"), first["messages"]
    # The failed start has its record (nothing lost), an error from the first turn on, never lost later.
    assert [r["status"] for r in (*ledger(first).values(), *ledger(out).values())] == ["error", "error"], ledger(out)
    assert not any("lost" in n for n in notices(out)), notices(out)
