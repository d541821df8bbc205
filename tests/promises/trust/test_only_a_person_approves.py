"""Only a person approves: a parent's model cannot approve its own background child's gated call.

Before: a background child whose spec gates ``wire_money`` paused
on ``wire_money``; the parent's model called ``update_async_task`` with
``decision="approve"`` (or the word, or a JSON resume value) and the money
moved with no human. The model may still refuse, with its reason.
"""

from __future__ import annotations

import threading
from typing import Any

import pytest
from langchain.agents import create_agent
from langchain_core.tools import tool
from langgraph.checkpoint.memory import InMemorySaver

from helpers.background import (  # noqa: F401 - background is a fixture
    NOTICE,
    background,
    last_tool_result,
    on_task,
    started_ids,
    start,
    wait_for,
)
from helpers.graphs import user
from deep_agent._testing import ScriptedChatModel, tool_call
from subagents._settings import DelegationSettings

APPROVALS = [
    {"decision": "approve", "message": "looks fine"},
    {"message": "approve"},
    {"message": "Approved."},
    {"message": '{"decisions": [{"type": "approve"}]}'},
]


def _setup(background: Any, answer: dict[str, Any]) -> tuple[Any, Any, list[str], threading.Event]:
    moved: list[str] = []
    asked = threading.Event()

    @tool
    def wire_money(to: str) -> str:
        """Send money."""
        moved.append(to)
        return f"sent to {to}"

    def on_notice(messages: list[Any]) -> Any:
        if "asks for approval" in messages[-1].text:
            return on_task("update_async_task", **answer)(messages)
        return "noted"

    model = ScriptedChatModel(rules=[
        (NOTICE, [on_notice, "done"]),
        ("pay the invoice", [{"tool_calls": [tool_call("wire_money", to="mallory")]}, lambda m: m[-1].text]),
        ("PARENT start", [start(("pay the invoice", "payer")), "started"]),
    ], default="ok")
    middleware = background([{"name": "payer", "description": "Pays.", "tools": ["wire_money"],
                              "interrupt_on": {"wire_money": True}}], settings=DelegationSettings.of(
                                  general_purpose=False,
                              ))
    agent = create_agent(model, [wire_money], middleware=[middleware], checkpointer=InMemorySaver())
    return agent, middleware, moved, asked


@pytest.mark.parametrize("answer", APPROVALS, ids=["decision", "word", "word-dot", "json"])
def test_the_parents_model_cannot_approve_a_background_childs_call(run, background, answer):
    agent, middleware, moved, _ = _setup(background, answer)
    config = {"configurable": {"thread_id": "pay"}}
    out = run(agent, user("PARENT start"), config)
    (task_id,) = started_ids(out["messages"])
    wait_for(lambda: background.status(task_id) == "waiting_for_approval")
    out = run(agent, user("PARENT anything new?"), config)
    refused = last_tool_result(out)
    assert refused.name == "update_async_task" and refused.status == "error"
    assert "a model cannot give it" in refused.content
    assert moved == [] and background.status(task_id) == "waiting_for_approval"


def test_the_model_may_refuse_and_the_child_hears_its_reason(run, background):
    agent, _, moved, _ = _setup(background, {"decision": "reject", "message": "not to mallory"})
    config = {"configurable": {"thread_id": "refuse"}}
    out = run(agent, user("PARENT start"), config)
    (task_id,) = started_ids(out["messages"])
    wait_for(lambda: background.status(task_id) == "waiting_for_approval")
    run(agent, user("PARENT anything new?"), config)
    wait_for(lambda: background.status(task_id) == "completed")
    assert moved == [] and "not to mallory" in background.task(task_id).fields["result"]


def test_a_person_approves_through_the_application(run, background):
    agent, middleware, moved, _ = _setup(background, {"decision": "approve"})
    config = {"configurable": {"thread_id": "person"}}
    out = run(agent, user("PARENT start"), config)
    (task_id,) = started_ids(out["messages"])
    wait_for(lambda: background.status(task_id) == "waiting_for_approval")
    record = middleware.answer_approval(out, task_id, "approve")
    assert record["id"] == task_id
    wait_for(lambda: background.status(task_id) == "completed")
    assert moved == ["mallory"]
