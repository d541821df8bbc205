"""A real model cut short by its max_turns answers on its wrap-up call: SmolLM2-135M on llama.cpp's server.

The child is made to call its tool on every call it is offered one (a small
model left free may answer at once, and nothing would loop), so only the
wrap-up, which offers none, lets it answer. The assertions are about
structure: the record, and a non-empty answer that is the model's own.
"""

from __future__ import annotations

from typing import Any

import pytest
from helpers.graphs import parent_script, records, tool_messages, user
from langchain_core.tools import tool

from deep_agent import create_deep_agent
from deep_agent._testing import ScriptedChatModel
import middleware._limits
from middleware._limits import ForceToolUse
from subagents._settings import DelegationSettings

pytestmark = pytest.mark.realmodel


@tool
def lookup(topic: str) -> str:
    """Look up one fact about a topic."""
    return f"{topic} has a long history."


@pytest.mark.parametrize("mode", ["invoke", "ainvoke"])
def test_smollm2_looping_under_max_turns_ends_with_an_answer_of_its_own(local_model, mode, monkeypatch):  # noqa: F811
    import asyncio

    # Every model call that offers a tool is forced to use one, not only a turn's first: a child that loops.
    monkeypatch.setattr(middleware._limits, "is_first_call_of_turn", lambda messages: True)

    import httpx

    parent = ScriptedChatModel(responses=parent_script(("Tell me about tea.", "researcher")))
    # A client of this test's own on ainvoke: the shared default one would stay bound to this test's event loop.
    own = {"http_async_client": httpx.AsyncClient()} if mode == "ainvoke" else {}
    child = {"name": "researcher", "description": "Looks things up.", "system_prompt": "Look things up.",
             "model": local_model.chat_model(max_tokens=32, **own), "tools": [lookup], "max_turns": 3,
             "middleware": [ForceToolUse()]}
    agent = create_deep_agent(parent, subagents=[child], settings=DelegationSettings.of(
        general_purpose=False, short_answer_threshold=0,
    ))
    state = agent.invoke(user("go")) if mode == "invoke" else asyncio.run(agent.ainvoke(user("go")))
    [record] = records(state)
    assert (record["status"], record["stop_reason"], record["partial"], record["model_calls"]) == (
        "completed", "max_turns", True, 3), record
    answer = record["result"]
    assert answer.strip()  # the run ended on the model's own reply (no tool result ends it: none ran last)
    [message] = tool_messages(state)
    assert message.status == "success" and message.text.endswith(answer)
    assert message.text.startswith("[Cut short by its limit on its model calls (max_turns=3)")
