"""Faults on the aegra pair (two API instances, one Postgres, one Redis): nothing lost silently, started twice or empty.

Each test breaks one thing while remote tasks run, then reads every task to
its end through the pair and counts, per task: started, completed (with its
real answer), reported (``error``/``lost``/``cancelled``, saying why),
started twice (a second thread or a second run of one task on the server),
lost silently (still live at the deadline, or on the server and in no
ledger) and completed empty. The faults:

* instance A SIGKILLed while its runs work (read through B);
* Postgres crashed and restarted while the runs work;
* every request answered 502 for 10 s by a proxy in front of the pair;
* a plain round-robin balancer in front of the pair with one instance dead;
* the parent process killed in the middle of its step of starts, then
  resumed with ``invoke(None)``, or continued with a new user message.

The pair is the session's (``helpers.aegra.aegra_served_pair``, on the
session's Postgres, the one the test restarts), with short worker leases
(``helpers.aegra.QUICK_RECOVERY``) so a killed instance's runs are taken up in
seconds. docs/production.md holds the figures.
"""

from __future__ import annotations

import asyncio
import time
from collections import Counter
from typing import Any

import pytest
from helpers.aegra import AegraInstance
from helpers.fault_servers import FaultProxy
from helpers.graphs import user
from helpers.killed_parent import agent_on, count, crash, harmless_die, server_threads, start_calls, stop_all
from helpers.postgres import PostgresServer

from subagents.background._remote import RemoteSubagentSpec, RemoteTaskRunner
from subagents._errors import ServerUnavailable


LIVE = ("pending", "running")
SETTLE_S = 45  # a killed instance's runs come back after a 12 s lease and a 3 s reaper; margin for a loaded machine
TASKS = 6

Pair = tuple[PostgresServer, AegraInstance, AegraInstance]


@pytest.fixture
def pair(postgres_server: PostgresServer, aegra_served_pair: tuple[AegraInstance, AegraInstance]) -> Pair:
    """The session's pair (``helpers.aegra``) and its Postgres: each test leaves both running (an instance it
    kills is started again), and reads the tasks of a parent of its own."""
    return postgres_server, *aegra_served_pair


def _spec(url: str, name: str = "child", **extra: Any) -> RemoteSubagentSpec:
    return RemoteSubagentSpec(name=name, description="The aegra child.", graph_id="child", url=url, **extra)


def _record(task_id: str, description: str, fields: dict[str, Any]) -> dict[str, Any]:
    return {"id": task_id, "agent_type": "child", "runner": "remote", "description": description, **fields}


async def _start(url: str, parent: str, n: int) -> list[dict[str, Any]]:
    runner = RemoteTaskRunner([_spec(url)])
    try:
        started = await asyncio.gather(*(
            runner.start(f"{parent}-{i}", "child", f"question {parent} {i}", parent_thread_id=parent,
                         tool_call_id=f"call-{parent}-{i}") for i in range(n)))
    finally:
        await runner.pool.aclose()
    return [_record(f"{parent}-{i}", f"question {parent} {i}", fields) for i, fields in enumerate(started)]


async def _settle(url: str, records: list[dict[str, Any]], *, until: float | None = None,
                  runner: RemoteTaskRunner | None = None) -> list[dict[str, Any]]:
    """Poll the live ``records`` through ``url`` (as a parent's turns do) until none is live or ``until``."""
    own = runner is None
    runner = runner or RemoteTaskRunner([_spec(url)])
    until = until or time.monotonic() + SETTLE_S
    try:
        while any(r["status"] in LIVE for r in records) and time.monotonic() < until:
            found = await runner.refresh_many([r for r in records if r["status"] in LIVE])
            for record in records:
                record.update(found.get(record["id"], ({}, None))[0])
            await asyncio.sleep(0.5)
    finally:
        if own:
            await runner.pool.aclose()
    return records


async def _settle_as_parent(url: str, records: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """:func:`_settle` with the subagent named as the parent's spec names it (``helpers.killed_parent.specs``)."""
    runner = RemoteTaskRunner([_spec(url, "remote-worker")])
    try:
        return await _settle(url, records, runner=runner)
    finally:
        await runner.pool.aclose()


def _figures(records: list[dict[str, Any]], url: str, parent: str) -> dict[str, int]:
    from langgraph_sdk import get_sync_client

    client = get_sync_client(url=url, api_key=None)
    threads = server_threads(url, parent)
    per_task = Counter(t["metadata"]["subagent_task_id"] for t in threads)
    runs = [len(client.runs.list(t["thread_id"])) for t in threads]
    known = {r["thread_id"] for r in records}
    completed = [r for r in records if r["status"] == "completed"]
    return {
        "started": len(records),
        "completed": sum(r.get("result") == f"answer to: {r['description']}" for r in completed),
        "reported": sum(r["status"] in ("error", "lost", "cancelled") and bool(r.get("error") or
                                                                                r["status"] == "cancelled")
                        for r in records),
        "started_twice": sum(n > 1 for n in per_task.values()) + sum(n > 1 for n in runs),
        "lost_silently": sum(r["status"] in LIVE for r in records) + sum(t["thread_id"] not in known
                                                                         for t in threads),
        "empty": sum(not (r.get("result") or "").strip() for r in completed),
    }


def _assert_nothing_lost(figures: dict[str, int], started: int) -> None:
    assert figures["lost_silently"] == 0 and figures["started_twice"] == 0 and figures["empty"] == 0, figures
    assert figures["completed"] + figures["reported"] == figures["started"] == started, figures


def test_an_instance_sigkilled_mid_run_loses_no_task_and_starts_none_twice(pair):
    _, a, b = pair
    records = asyncio.run(_start(a.url, "kill-a", TASKS))
    time.sleep(0.5)  # the runs are queued or running; the child takes 3 s
    a.kill()
    try:
        settled = asyncio.run(_settle(b.url, records))
        figures = _figures(settled, b.url, "kill-a")
    finally:
        a.restart()
    print(f"aegra pair, A SIGKILLed mid-run, read through B: {figures}")
    _assert_nothing_lost(figures, TASKS)


def test_postgres_restarted_mid_run_loses_no_task_and_starts_none_twice(pair):
    postgres, a, b = pair
    records = asyncio.run(_start(a.url, "pg-restart", TASKS))
    time.sleep(0.5)
    postgres.restart(down_s=3.0)
    settled = asyncio.run(_settle(b.url, records))
    figures = _figures(settled, b.url, "pg-restart")
    print(f"aegra pair, Postgres restarted mid-run (3 s down): {figures}")
    _assert_nothing_lost(figures, TASKS)


def test_every_request_answered_502_for_10_s_loses_no_task_and_starts_none_twice(pair):
    _, a, _ = pair
    proxy = FaultProxy(a.url)
    try:
        records = asyncio.run(_start(proxy.url, "bad-gateway", TASKS))

        async def outage_then_settle() -> tuple[int, list[dict[str, Any]]]:
            runner = RemoteTaskRunner([_spec(proxy.url)])
            refused = 0
            try:
                proxy.bad_gateway()
                healed_at = time.monotonic() + 10
                while time.monotonic() < healed_at:  # the parent's turns go on through the outage
                    await _settle(proxy.url, records, until=min(healed_at, time.monotonic() + 0.5), runner=runner)
                    try:
                        await runner.start("bad-gateway-new", "child", "a start in the outage",
                                           parent_thread_id="bad-gateway", tool_call_id="call-new")
                    except ServerUnavailable:
                        refused += 1  # the caller is told: the start is refused, never half made
                    await asyncio.sleep(0.5)
                proxy.up()
                return refused, await _settle(proxy.url, records, runner=runner)
            finally:
                await runner.pool.aclose()

        refused, settled = asyncio.run(outage_then_settle())
        figures = _figures(settled, a.url, "bad-gateway")
    finally:
        proxy.close()
    print(f"aegra pair, every request answered 502 for 10 s: {figures}; starts refused in the outage: {refused}; "
          f"requests answered 502: {proxy.bad_gateways}")
    _assert_nothing_lost(figures, TASKS)
    assert refused >= 1
    assert proxy.bad_gateways <= 20, "the circuit holds requests back while the gateway fails"


ROUND_ROBIN_TASKS = 30


def _wait_idle(url: str, parent: str) -> None:
    """Until no thread of ``parent`` is busy (asked of one instance directly): every run has ended."""
    from langgraph_sdk import get_sync_client

    client = get_sync_client(url=url, api_key=None)
    deadline = time.monotonic() + SETTLE_S
    while client.threads.search(metadata={"parent_thread_id": parent}, status="busy", limit=100):
        assert time.monotonic() < deadline, f"the runs of {parent} did not end within {SETTLE_S} s"
        time.sleep(0.5)


def test_a_dead_instance_behind_a_round_robin_balancer_costs_retries_never_an_unread_answer(pair):
    """Every other request the balancer sends to the dead instance is answered 502; every answer is read,
    although each task is past its deadline (timeout_s=1) by the time the parent reads it."""
    _, a, b = pair
    balancer = FaultProxy(a.url, b.url)
    try:
        records = asyncio.run(_start(balancer.url, "round-robin", ROUND_ROBIN_TASKS))
        _wait_idle(a.url, "round-robin")  # every run succeeded: what is left is reading the answers
        b.kill()

        async def read_all() -> list[dict[str, Any]]:
            runner = RemoteTaskRunner([_spec(balancer.url, timeout_s=1)])
            try:
                return await _settle(balancer.url, records, runner=runner)
            finally:
                await runner.pool.aclose()

        settled = asyncio.run(read_all())
        figures = _figures(settled, a.url, "round-robin")
    finally:
        balancer.close()
        b.restart()
    print(f"aegra pair behind a round-robin balancer, B dead: {figures}; requests answered 502: "
          f"{balancer.bad_gateways} of {balancer.bad_gateways + balancer.requests}")
    assert figures["completed"] == ROUND_ROBIN_TASKS, (figures, [(r["status"], r.get("error")) for r in settled])
    _assert_nothing_lost(figures, ROUND_ROBIN_TASKS)
    assert balancer.bad_gateways > 0, "the dead instance was asked for some of them"


@pytest.mark.parametrize("then", ["resume", "new message"])
def test_a_parent_killed_mid_start_loses_no_task_and_starts_none_twice(then, pair, tmp_path):
    _, a, _ = pair
    db, thread_id = str(tmp_path / "parent.db"), f"aegra-killed-{then.replace(' ', '-')}-{time.monotonic_ns()}"
    crash(db, thread_id, a.url, "child")
    agent = agent_on(db, a.url, harmless_die, "child")
    out = agent.invoke(None if then == "resume" else user("PARENT news"), {"configurable": {"thread_id": thread_id}})
    try:
        at_once = count(out, a.url, thread_id)
        records = [dict(r) for r in out["async_tasks"].values()]
        settled = asyncio.run(_settle_as_parent(a.url, records))
        figures = {**_figures(settled, a.url, thread_id), "reported_lost": at_once["reported_lost"],
                   "unrecorded_calls": at_once["calls"] - at_once["recorded"]}
    finally:
        stop_all(a.url, server_threads(a.url, thread_id))
    print(f"aegra pair, parent killed mid-start, then {then}: {figures}")
    assert figures["unrecorded_calls"] == 0 and len(records) == len(start_calls(out))
    _assert_nothing_lost(figures, len(records))
