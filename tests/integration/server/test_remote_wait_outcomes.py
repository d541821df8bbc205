"""What ``wait_for_background`` reads of remote tasks is what the parent's next turn reports, read once.

A wait has no ledger to write: the parent's next turn must still report what
the wait saw (a task the wait ended at its ``timeout_s`` ends ``error``,
"timed out", its run cancelled on the server, exactly as when a turn's poll
ends it), without reading the task from the server again.
"""

from __future__ import annotations

import re

from helpers.background import ledger, notices, remote_parent
from helpers.fault_servers import FaultProxy
from helpers.graphs import user

from subagents import wait_for_background


def wait_past_the_deadline_then_a_turn(url: str, job: str, graph_id: str = "scripted_worker") -> None:
    """A task of ``job`` (that works longer than its ``timeout_s=2``) waited for past its deadline; the
    parent's next turn reports it ``error``, "timed out", its run cancelled on the server (which it is)."""
    from langgraph_sdk import get_sync_client

    agent, middleware, config = remote_parent(url, [job], graph_id, timeout_s=2)
    try:
        records = ledger(agent.invoke(user("PARENT go"), config))
        assert [r["status"] in ("pending", "running") for r in records.values()] == [True]
        assert wait_for_background(records, timeout_s=60, tasks=middleware.tasks, every_s=0.2) is True
        out = agent.invoke(user("PARENT next"), config)
    finally:
        middleware.tasks.runtime.close()
    record = next(iter(ledger(out).values()))
    assert record["status"] == "error", record
    assert record["error"].startswith("timed out: not finished within timeout_s=2 s")
    assert record["error"].endswith("its run was cancelled on the server")
    assert any(f"{record['id']} (remote-worker): error. timed out" in n and "cancelled on the server" in n
               for n in notices(out)), notices(out)
    run = get_sync_client(url=url, api_key=None).runs.get(record["thread_id"], record["run_id"])
    assert run["status"] == "interrupted"  # cancelled on the server, as the error says


def test_a_deadline_reached_during_the_wait_ends_the_task_timed_out_as_a_turn_would(langgraph_server):
    wait_past_the_deadline_then_a_turn(langgraph_server, "slow job")


def test_a_task_the_wait_saw_finish_is_not_read_again_by_the_next_turn(langgraph_server):
    proxy = FaultProxy(langgraph_server)
    try:
        agent, middleware, config = remote_parent(proxy.url, ["quick job 1", "quick job 2", "quick job 3"])
        records = ledger(agent.invoke(user("PARENT go"), config))
        assert wait_for_background(records, timeout_s=60, tasks=middleware.tasks, every_s=0.2) is True
        sent = len(proxy.lines)
        out = agent.invoke(user("PARENT next"), config)
        assert {r["status"] for r in ledger(out).values()} == {"completed"}
        assert all(r["result"] for r in ledger(out).values())
        assert proxy.lines[sent:] == [], "the next turn read again what the wait had read"
        joins = [line for line in proxy.lines if re.match(rb"GET /threads/[^/]+/runs/[^/]+/join", line)]
        assert len(joins) == len(set(joins)), joins  # no run joined twice
        middleware.tasks.runtime.close()
    finally:
        proxy.close()
