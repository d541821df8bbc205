"""A child paused for approval keeps what it spent whoever resumes it: another agent object on the same
checkpointer (a new process, another server worker) continues its counts, as the one that paused it would."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from helpers.graphs import call, checkpointer, records, user
from langchain_core.tools import tool
from langgraph.types import Command

from deep_agent import create_deep_agent
from deep_agent.testing import ScriptedChatModel, tool_call
from subagents.settings import DelegationSettings


@tool
def lookup(q: str) -> str:
    """Look something up (needs approval)."""
    return "a fact"


@pytest.mark.parametrize("kind", ["memory", "sqlite"])
@pytest.mark.parametrize("mode", ["sync", "async"])
def test_caps_and_the_record_hold_when_a_new_agent_object_resumes_each_pause(kind, mode, tmp_path):
    # Each resume by a new agent object started max_turns and max_tokens from zero: a child that never stops
    # asking made a call per resume, and its record counted only the last segment's calls.
    # Its replies name a deployment, not the model they were sent to: what the checkpoint says of a call's
    # model is no price, and an unpriced recovered call was charged $0.
    child = ScriptedChatModel(default={"tool_calls": [tool_call("lookup", q="t")],
                                       "response_metadata": {"model_name": "my-deployment"}})

    def build(saver: Any, spec: dict[str, Any]) -> Any:
        parent = ScriptedChatModel(responses=[{"tool_calls": [tool_call("task", description="dig", subagent_type="r")]}],
                                   default="done")
        specs = [{"name": "r", "description": "r", "model": child, "tools": ["lookup"], "wrap_up": False,
                  "interrupt_on": {"lookup": True}, **spec}]
        return create_deep_agent(parent, [lookup], subagents=specs, checkpointer=saver,
                                 settings=DelegationSettings.of(prices={"scripted": (1000.0, 1000.0)}))

    async def go(spec: dict[str, Any], thread: str) -> dict[str, Any]:
        config = {"configurable": {"thread_id": thread}}
        async with checkpointer(kind, mode, tmp_path) as saver:
            out = await call(mode, build(saver, spec), user("go"), config)
            for _ in range(12):
                if "__interrupt__" not in out:
                    break
                out = await call(mode, build(saver, spec), Command(resume={"decisions": [{"type": "approve"}]}), config)
        assert "__interrupt__" not in out
        (record,) = records(out)
        return record

    record = asyncio.run(go({"max_turns": 3}, "turns"))
    assert (record["stop_reason"], record["model_calls"], len(child.calls)) == ("max_turns", 3, 3)
    child.calls.clear()
    record = asyncio.run(go({"max_turns": 50, "max_tokens": 250}, "tokens"))
    assert record["stop_reason"] == "budget" and record["model_calls"] == len(child.calls) < 12
    child.calls.clear()
    record = asyncio.run(go({"max_turns": 50, "max_budget_per_run": 0.5}, "dollars"))
    assert record["stop_reason"] == "budget" and record["model_calls"] == len(child.calls) < 12
