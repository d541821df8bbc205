"""A tool the parent gates with LangChain's ``HumanInTheLoopMiddleware`` is gated in every child that has it.

Before: the parent's own ``HumanInTheLoopMiddleware`` (in ``middleware=``)
paused the root's ``wire_money``, while a ``task`` call to
``general-purpose`` ("has the same tools as you") ran it with no approval.
"""

from __future__ import annotations

from typing import Any

import pytest
from langchain.agents import create_agent
from langchain.agents.middleware import HumanInTheLoopMiddleware
from langchain_core.tools import tool
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.types import Command

from helpers.graphs import user
from deep_agent import create_deep_agent
from deep_agent._testing import ScriptedChatModel, tool_call
from middleware import SubAgentMiddleware

MOVED: list[str] = []


@tool
def wire_money(to: str) -> str:
    """Send money."""
    MOVED.append(to)
    return f"sent to {to}"


def _model(agent: str = "general-purpose") -> ScriptedChatModel:
    return ScriptedChatModel(rules=[
        ("pay it", [{"tool_calls": [tool_call("wire_money", to="mallory")]}, "paid"]),
        ("go", [{"tool_calls": [tool_call("task", description="pay it", subagent_type=agent)]}, "done"]),
    ])


@pytest.fixture(autouse=True)
def _clean() -> None:
    MOVED.clear()


def _gate() -> HumanInTheLoopMiddleware:
    return HumanInTheLoopMiddleware(interrupt_on={"wire_money": True})


def _paused_then_approved(agent: Any) -> None:
    config = {"configurable": {"thread_id": "t"}}
    out = agent.invoke(user("go"), config)
    assert "__interrupt__" in out and MOVED == [], "the child ran the parent's gated tool unasked"
    agent.invoke(Command(resume={"decisions": [{"type": "approve"}]}), config)
    assert MOVED == ["mallory"]


def test_create_deep_agent_gates_the_general_purpose_child_with_the_parents_own_middleware():
    _paused_then_approved(create_deep_agent(_model(), [wire_money], middleware=[_gate()],
                                            checkpointer=InMemorySaver()))


def test_a_plain_create_agent_gates_it_when_the_middleware_list_is_passed_as_documented():
    gate = _gate()
    agent = create_agent(_model(), [wire_money], checkpointer=InMemorySaver(),
                         middleware=[SubAgentMiddleware([], model_middleware=[gate]), gate])
    _paused_then_approved(agent)


@pytest.mark.parametrize("own", [{"interrupt_on": {"wire_money": False}}, {"permission_mode": "bypassPermissions"}],
                         ids=["interrupt_on-false", "bypass"])
def test_a_childs_own_spec_cannot_lower_the_parents_gate(own):
    payer = {"name": "payer", "description": "Pays.", "system_prompt": "Pay.", "tools": [wire_money], **own}
    agent = create_deep_agent(_model("payer"), [wire_money], subagents=[payer], middleware=[_gate()],
                              checkpointer=InMemorySaver())
    _paused_then_approved(agent)
