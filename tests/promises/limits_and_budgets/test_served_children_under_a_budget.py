"""A shared budget bounds a served child as far as this process can: a spent budget starts none, a dollar
limit (the server's model has no price here) starts none, and what a served run reports is charged once."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator

import pytest

from helpers.fault_servers import RecordingServer
from subagents import Budget, DelegationSettings, RemoteSubagentSpec
from subagents.background._tasks import BackgroundTasks
from subagents._errors import DelegationRefused
from subagents._outcome import TaskCall
from subagents._registry import SubagentRegistry
from subagents._settings import Limits


@pytest.fixture
def server() -> Iterator[RecordingServer]:
    recorder = RecordingServer()
    yield recorder
    recorder.close()


def tasks_for(server: RecordingServer, budget: Budget) -> BackgroundTasks:
    spec = RemoteSubagentSpec(name="far", description="d", url=server.url, graph_id="g")
    return BackgroundTasks(SubagentRegistry([]), [spec], settings=DelegationSettings(limits=Limits(budget=budget)))


def start(tasks: BackgroundTasks) -> None:
    call = TaskCall(description="job", subagent_type="far", tool_call_id="c1",
                    parent_config={"configurable": {"thread_id": "p"}}, parent_state={})
    try:
        tasks.runtime.run(tasks.start(call, {}))
    finally:
        tasks.runtime.close()


def test_a_spent_budget_starts_no_served_child(server):
    budget = Budget(max_tokens=100)
    budget.spend(100, 0.0)
    with pytest.raises(DelegationRefused, match="no new delegations can start"):
        start(tasks_for(server, budget))
    assert server.requests == []


def test_a_dollar_budget_starts_no_served_child_whose_calls_it_cannot_price(server):
    with pytest.raises(DelegationRefused, match="max_usd cannot bound them"):
        start(tasks_for(server, Budget(max_usd=1.0, prices={"gpt-4.1-mini": (0.4, 1.6)})))
    assert server.requests == []


def test_what_a_served_run_reports_is_charged_once_as_it_ends(server):
    budget = Budget(max_tokens=10_000)
    tasks = tasks_for(server, budget)
    running = {"id": "t1", "runner": "remote", "agent_type": "far", "status": "running", "attempt": 1}
    ended = {"status": "completed", "result": "ok", "model_calls": 2, "input_tokens": 300, "output_tokens": 40}

    async def told_twice() -> None:
        await tasks.remote_end(running, dict(ended))
        await tasks.remote_end(running, dict(ended))  # a wait and the next turn's poll both see it end

    try:
        asyncio.run(told_twice())
    finally:
        tasks.runtime.close()
    assert budget.tokens == 340
