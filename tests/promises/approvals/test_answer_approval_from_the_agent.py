"""An application answers a background approval from the agent create_deep_agent built: its thread is enough."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from typing import Any

import pytest
from langchain_core.tools import tool
from langgraph.checkpoint.memory import InMemorySaver

from helpers.background import NOTICE, start, wait_for
from helpers.graphs import user
from deep_agent import aanswer_approval, answer_approval, create_deep_agent
from deep_agent._testing import ScriptedChatModel, tool_call
from subagents import BackgroundRuntime
from subagents.background import known_task
from subagents._errors import TaskStateError
from subagents._settings import DelegationSettings

published: list[str] = []


@tool
def publish(target: str) -> str:
    """Publish."""
    published.append(target)
    return f"published to {target}"


@pytest.fixture
def agent() -> Iterator[Any]:
    published.clear()
    model = ScriptedChatModel(rules=[
        (NOTICE, ["noted"]),
        ("publish the report", [{"tool_calls": [tool_call("publish", target="prod")]},
                                lambda messages: f"child saw: {messages[-1].content}"]),
        ("PARENT start", [start(("publish the report", "publisher")), "started"]),
    ], default="ok")
    publisher = {"name": "publisher", "description": "Publishes.", "system_prompt": "Publish.",
                 "tools": [publish], "interrupt_on": {"publish": True}}
    with BackgroundRuntime() as runtime:
        yield create_deep_agent(model, subagents=[publisher], background=True,
                                checkpointer=InMemorySaver(), settings=DelegationSettings.of(
                                    background_runtime=runtime,
                                ))


def _waiting(run: Any, agent: Any, config: dict[str, Any]) -> str:
    (task_id,) = run(agent, user("PARENT start"), config)["async_tasks"]
    wait_for(lambda: (known_task(task_id) or {}).fields["status"] == "waiting_for_approval")  # type: ignore[union-attr]
    return str(task_id)


def _from_async_code(*args: Any) -> dict[str, Any]:
    return asyncio.run(aanswer_approval(*args))


@pytest.mark.parametrize("answer", [answer_approval, _from_async_code])
def test_an_approval_answered_from_the_agent_runs_the_call(run, agent, answer):
    config = {"configurable": {"thread_id": "approve"}}
    task_id = _waiting(run, agent, config)
    assert published == []
    record = answer(agent, config, task_id, "approve")
    assert record["status"] in ("pending", "running", "completed") and record["approval_request"] is None
    wait_for(lambda: known_task(task_id).fields["status"] == "completed")  # type: ignore[union-attr]
    assert published == ["prod"]
    record = run(agent, user("PARENT next"), config)["async_tasks"][task_id]
    assert record["status"] == "completed" and record["result"] == "child saw: published to prod"


def test_a_rejection_reaches_the_child_and_the_call_never_runs(run, agent):
    config = {"configurable": {"thread_id": "reject"}}
    task_id = _waiting(run, agent, config)
    answer_approval(agent, config, task_id, "reject", reason="not on a Sunday")
    wait_for(lambda: known_task(task_id).fields["status"] == "completed")  # type: ignore[union-attr]
    assert published == []
    assert "not on a Sunday" in known_task(task_id).fields["result"]  # type: ignore[union-attr]


def test_a_task_the_thread_does_not_hold_or_that_does_not_wait_is_refused(run, agent):
    config = {"configurable": {"thread_id": "refused"}}
    with pytest.raises(TaskStateError, match="no background task 'nope'"):
        answer_approval(agent, config, "nope", "approve")
    task_id = _waiting(run, agent, config)
    answer_approval(agent, config, task_id, "approve")
    wait_for(lambda: known_task(task_id).fields["status"] == "completed")  # type: ignore[union-attr]
    with pytest.raises(TaskStateError, match="not waiting_for_approval"):
        answer_approval(agent, {"configurable": {"thread_id": "refused"}}, task_id, "approve")
    assert published == ["prod"]
