"""The parent's PII policy reaches every child: its model calls and its tool results.

deepagents' children do not get the parent's ``PIIMiddleware``; here a
child, whether it inherits the parent's model or has its own, is redacted as
the parent is.
"""

from __future__ import annotations

import pytest
from langchain.agents.middleware import PIIMiddleware
from langchain_core.tools import tool

from deep_agent import create_deep_agent
from deep_agent._testing import ScriptedChatModel, tool_call
from helpers.graphs import user

EMAIL, LOOKED_UP = "bob@example.com", "carol@example.com"


@tool
def lookup(name: str) -> str:
    """Look a person's address up."""
    return f"{name}: {LOOKED_UP}"


def _texts(call: dict) -> str:
    return "\n".join(str(m.content) for m in call["messages"])


@pytest.mark.parametrize("own_model", [False, True])
def test_parent_pii_middleware_redacts_the_childs_model_input_and_tool_results(own_model, run):
    child_script = [{"tool_calls": [tool_call("lookup", name="carol")]}, "found her"]
    child_model = ScriptedChatModel(responses=child_script) if own_model else None
    parent = ScriptedChatModel(
        rules=[] if own_model else [("write to", child_script)],
        responses=[{"tool_calls": [tool_call("task", description=f"write to {EMAIL}", subagent_type="helper")]},
                   "done"],
    )
    spec = {"name": "helper", "description": "helps", "system_prompt": "Help.", "tools": [lookup]}
    if child_model is not None:
        spec["model"] = child_model
    agent = create_deep_agent(parent, subagents=[spec], middleware=[
        PIIMiddleware("email", strategy="redact", apply_to_input=True, apply_to_tool_results=True)])
    run(agent, user("go"))
    calls = [c for c in (child_model or parent).calls if "Help." in _texts(c)]
    assert len(calls) == 2, calls
    for call in calls:
        assert EMAIL not in _texts(call) and "[REDACTED_EMAIL]" in _texts(call)
    assert LOOKED_UP not in _texts(calls[1])  # the tool result, redacted before the child's model saw it
