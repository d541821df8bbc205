"""On ``langgraph dev``, the join path a server without search by ids takes reads every ending right.

aegra has no thread search by ids, so its tasks are polled by one metadata
search per parent and each ended task is read by one join of its run (see
``tests/promises/background/test_remote_polling_without_id_search.py``).
``langgraph dev`` serves the search by ids, so here the runner is told it
does not, and the same path runs against this server's join: its body is
the thread's values for a finished run, ``__error__`` for a failed one,
``__interrupt__`` for one that waits, and the values so far for a cancelled
one. The aegra side is in ``test_aegra_pair.py``.
"""

from __future__ import annotations

import asyncio
import time
from typing import Any

from langgraph_sdk import get_client

from subagents.background._remote import RemoteClientPool, RemoteSubagentSpec, RemoteTaskRunner

LIVE = ("pending", "running")
DEADLINE_S = 120  # generous: a loaded machine


def _runner(url: str) -> RemoteTaskRunner:
    specs = [RemoteSubagentSpec(name="worker", description="d", graph_id="scripted_worker", url=url),
             RemoteSubagentSpec(name="approver", description="d", graph_id="scripted_approver", url=url)]
    runner = RemoteTaskRunner(specs, pool=RemoteClientPool())
    runner.pool.without_id_search.add(specs[0].server)  # as aegra answers: polled by metadata, read by join
    return runner


async def _settle(runner: RemoteTaskRunner, records: list[dict[str, Any]], *,
                  until: tuple[str, ...] = LIVE) -> None:
    deadline = time.monotonic() + DEADLINE_S
    while any(r["status"] in until for r in records) and time.monotonic() < deadline:
        found = await runner.refresh_many([r for r in records if r["status"] in until])
        for record in records:
            record.update(found.get(record["id"], ({}, None))[0])
        await asyncio.sleep(0.2)


def test_answers_errors_approvals_and_cancellations_read_through_the_join_on_langgraph_dev(langgraph_server):
    async def go() -> list[dict[str, Any]]:
        runner = _runner(langgraph_server)
        sdk = get_client(url=langgraph_server, api_key=None)
        records = []
        try:
            for i, (agent, description) in enumerate([("worker", "summarise the notes"), ("worker", "please fail"),
                                                      ("approver", "the news"), ("worker", "slow job")]):
                fields = await runner.start(f"join-{i}", agent, description, parent_thread_id="parent-join",
                                            tool_call_id=f"call-join-{i}")
                records.append({"id": f"join-{i}", "agent_type": agent, "runner": "remote",
                                "parent_thread_id": "parent-join", **fields})
            slow = records[3]
            await _settle(runner, [slow], until=("pending",))  # its run has begun
            await sdk.runs.cancel(slow["thread_id"], slow["run_id"], wait=True)  # by someone else: not our cancel
            await _settle(runner, records)
            return records
        finally:
            await runner.pool.aclose()

    done, failed, waiting, cancelled = asyncio.run(go())
    assert done["status"] == "completed" and done["result"] == "Done: summarise the notes", done
    assert done["model_calls"] >= 1
    assert failed["status"] == "error" and failed["error"] == "RuntimeError: the worker's model failed on purpose"
    assert waiting["status"] == "waiting_for_approval", waiting
    assert waiting["approval_request"], waiting
    assert cancelled["status"] == "cancelled" and not cancelled.get("result"), cancelled
