"""Background tasks on aegra: two API instances on one Postgres and one Redis.

aegra is a self-hosted server of the LangGraph API (see ``helpers/aegra.py``
for how the pair is started). Tasks started through instance A are polled
through instance B, as a load balancer in front of both would do, and must
finish with their real answers. The faults (an instance killed, Postgres
restarted, a failing gateway, a parent killed mid-start) are in
``test_aegra_faults.py``.

The test prints its figures: tasks started, completed, reported (error or
lost), still live at the deadline (lost silently), completed empty.
"""

from __future__ import annotations

import asyncio
import time
from typing import Any

import pytest
from helpers.aegra import AegraInstance
from langgraph_sdk import get_client

from subagents.background._remote import RemoteSubagentSpec, RemoteTaskRunner

LIVE = ("pending", "running")
SETTLE_DEADLINE_S = 120  # generous: a loaded machine


@pytest.fixture
def pair(aegra_served_pair: tuple[AegraInstance, AegraInstance]) -> tuple[AegraInstance, AegraInstance]:
    """The session's pair (``helpers.aegra``), shared with ``test_remote_same_deployment_on_aegra.py``."""
    return aegra_served_pair


def _spec(url: str) -> RemoteSubagentSpec:
    return RemoteSubagentSpec(name="child", description="The aegra child.", graph_id="child", url=url)


async def _start(url: str, prefix: str, n: int) -> list[dict[str, Any]]:
    runner = RemoteTaskRunner([_spec(url)])
    records = []
    for i in range(n):
        task_id = f"{prefix}-{i}"
        fields = await runner.start(task_id, "child", f"question {prefix} {i}", parent_thread_id=f"parent-{prefix}",
                                    tool_call_id=f"call-{task_id}")
        records.append({"id": task_id, "agent_type": "child", "runner": "remote",
                        "description": f"question {prefix} {i}", **fields})
    await runner.pool.aclose()
    return records


async def _settle(url: str, records: list[dict[str, Any]], between: float = 0.5) -> list[dict[str, Any]]:
    """Poll ``records`` through ``url`` until none is live or the deadline passes."""
    runner = RemoteTaskRunner([_spec(url)])
    deadline = time.monotonic() + SETTLE_DEADLINE_S
    try:
        while any(r["status"] in LIVE for r in records) and time.monotonic() < deadline:
            found = await runner.refresh_many([r for r in records if r["status"] in LIVE])
            for record in records:
                fields, _note = found.get(record["id"], ({}, None))
                record.update(fields)
            await asyncio.sleep(between)
    finally:
        await runner.pool.aclose()
    return records


def _figures(records: list[dict[str, Any]]) -> dict[str, int]:
    completed = [r for r in records if r["status"] == "completed"]
    return {"started": len(records), "completed": len(completed),
            "reported": sum(r["status"] in ("error", "lost", "cancelled") and bool(r.get("error") or
                                                                                     r["status"] == "cancelled")
                            for r in records),
            "lost_silently": sum(r["status"] in LIVE for r in records),
            "empty": sum(not (r.get("result") or "").strip() for r in completed)}


def test_tasks_started_on_one_instance_finish_with_their_answers_read_through_the_other(pair):
    a, b = pair
    records = asyncio.run(_start(a.url, "ab", 10))
    settled = asyncio.run(_settle(b.url, records))
    figures = _figures(settled)
    print(f"aegra pair, started on A, polled on B: {figures}")
    assert figures == {"started": 10, "completed": 10, "reported": 0, "lost_silently": 0, "empty": 0}
    for record in settled:
        assert record["result"] == f"answer to: {record['description']}"


async def _until(runner: RemoteTaskRunner, record: dict[str, Any], statuses: tuple[str, ...]) -> dict[str, Any]:
    """Poll ``record`` until its status leaves ``statuses`` (or the deadline passes)."""
    deadline = time.monotonic() + SETTLE_DEADLINE_S
    while record["status"] in statuses and time.monotonic() < deadline:
        fields, _note = (await runner.refresh_many([record])).get(record["id"], ({}, None))
        record.update(fields)
        await asyncio.sleep(0.3)
    return record


def test_a_child_that_asks_for_approval_waits_for_it_and_finishes_once_answered(pair):
    """aegra ends a run that stopped on an interrupt ``interrupted``: it read as a cancelled task."""
    a, b = pair

    async def go() -> tuple[dict[str, Any], dict[str, Any]]:
        spec = RemoteSubagentSpec(name="approver", description="Asks first.", graph_id="approver", url=a.url)
        runner = RemoteTaskRunner([spec])
        try:
            fields = await runner.start("ap-0", "approver", "the news", parent_thread_id="parent-ap",
                                        tool_call_id="call-ap-0")
            record = {"id": "ap-0", "agent_type": "approver", "runner": "remote", "description": "the news",
                      **fields}
            waiting = dict(await _until(runner, record, LIVE))
            answered, _what = await runner.steer(record, "approve")
            record.update(answered)
            return waiting, await _until(runner, record, LIVE)
        finally:
            await runner.pool.aclose()

    waiting, done = asyncio.run(go())
    assert waiting["status"] == "waiting_for_approval", waiting.get("error")
    assert waiting["approval_request"][0]["value"]["action_requests"][0]["name"] == "publish"
    assert done["status"] == "completed" and "approve" in done["result"], done


def test_a_failed_and_a_cancelled_task_read_as_such_through_the_join(pair):
    """An ended task is read by one join of its run; aegra's join of a failed run is an ``__error__`` and
    that of a cancelled run ``{}``: both read further, by the run, never as an empty ``completed``."""
    a, b = pair

    async def go() -> list[dict[str, Any]]:
        records: list[dict[str, Any]] = []
        runner = RemoteTaskRunner([_spec(a.url)])
        try:
            for i, description in enumerate(["fail on purpose", "long job to cancel"]):
                fields = await runner.start(f"fc-{i}", "child", description, parent_thread_id="parent-fc",
                                            tool_call_id=f"call-fc-{i}")
                records.append({"id": f"fc-{i}", "agent_type": "child", "runner": "remote",
                                "description": description, **fields})
            long = records[1]
            await _until(runner, long, ("pending",))  # its run has begun
            await get_client(url=a.url, api_key=None).runs.cancel(long["thread_id"], long["run_id"])
        finally:
            await runner.pool.aclose()
        return await _settle(b.url, records)

    failed, cancelled = asyncio.run(go())
    print(f"aegra pair, failed and cancelled: {failed['status']} {failed.get('error')!r}, {cancelled['status']}")
    assert failed["status"] == "error" and "the child failed on purpose" in failed["error"], failed
    assert cancelled["status"] == "cancelled" and not cancelled.get("result"), cancelled


def test_a_deadline_reached_during_the_wait_ends_the_task_timed_out_as_a_turn_would(pair):
    from test_remote_wait_outcomes import wait_past_the_deadline_then_a_turn

    wait_past_the_deadline_then_a_turn(pair[1].url, "long job", graph_id="child")  # the child works for minutes
