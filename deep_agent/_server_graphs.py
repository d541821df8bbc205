"""Graphs ``langgraph.json`` serves: ``graph``, the example deep agent Studio shows, and offline subagents. The
subagents run on :class:`~deep_agent.ScriptedChatModel` (the remote background tests run against them), built as
every local one is. ``scripted_worker`` answers ``Done: <instruction>`` (``fail``: its model fails; ``slow``: a
one-second tool call a turn until ``Wrap up``); ``scripted_approver`` asks for approval before its ``publish`` runs;
``scripted_delegator``: ``DELEGATE <instruction>`` starts ``scripted_worker`` in the background on this same server (a
remote spec without a url)."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import Any

from langchain.agents import create_agent
from langchain_core.messages import BaseMessage, HumanMessage, ToolMessage
from langchain_core.tools import tool

from deep_agent._demo import build_demo_agent, demo_model
from deep_agent._model_choice import NoModelConfigured, choose_model
from deep_agent._testing import ScriptedChatModel, tool_call
from middleware import BackgroundSubagentMiddleware
from subagents import SubagentRegistry, SubagentSpec
from subagents._settings import DelegationSettings

SLOW_TURNS = 120


@tool
async def pause(seconds: float) -> str:
    """Wait, standing in for slow work."""
    await asyncio.sleep(seconds)
    return f"waited {seconds:g}s"


@tool
def publish(target: str) -> str:
    """Publish the work to ``target``."""
    return f"published to {target}"


def _last_human(messages: Sequence[BaseMessage]) -> str:
    return next((m.text for m in reversed(messages) if isinstance(m, HumanMessage)), "")


def _outcome(messages: Sequence[BaseMessage]) -> str:
    return "Outcome: " + next((m.text for m in reversed(messages) if isinstance(m, ToolMessage)), "")


def _build(spec: SubagentSpec, model: Any, tools: list[Any]) -> Any:
    # Built the one way every child is (a registry with no parent: no floor to add).
    return SubagentRegistry([spec]).graph(spec.name, parent_model=model, parent_tools=tools)


scripted_worker = _build(
    SubagentSpec(name="scripted_worker", description="Answers 'Done: <instruction>'; slow or failing on request.",
                 system_prompt="You work on one task and report the result.", max_turns=SLOW_TURNS + 5,
                 condenser=False),
    ScriptedChatModel(rules=[("Wrap up", ["Wrapped up as asked."]),
                             ("fail", [RuntimeError("the worker's model failed on purpose")]),
                             ("slow", [{"tool_calls": [tool_call("pause", seconds=1)]}] * SLOW_TURNS)],
                      default=lambda messages: f"Done: {_last_human(messages)}"),
    [pause],
)

scripted_approver = _build(
    SubagentSpec(name="scripted_approver", description="Publishes, after a human approves the publish call.",
                 system_prompt="You publish work once it is approved.", interrupt_on={"publish": True},
                 condenser=False),
    ScriptedChatModel(responses=[{"tool_calls": [tool_call("publish", target="production")]}, _outcome],
                      default=_outcome),
    [publish],
)


def _delegate(messages: Sequence[BaseMessage]) -> dict[str, Any]:
    instruction = _last_human(messages).replace("DELEGATE", "", 1).strip()
    return {"tool_calls": [tool_call("start_async_task", description=instruction, subagent_type="same-server-worker")]}


scripted_delegator = create_agent(
    ScriptedChatModel(rules=[("DELEGATE", [_delegate, "Started it on this server."])], default="Noted."),
    middleware=[BackgroundSubagentMiddleware(
        [{"name": "same-server-worker", "description": "scripted_worker, on the server this parent runs on.",
          "graph_id": "scripted_worker"}], settings=DelegationSettings.of(general_purpose=False))],
)


try:  # the Studio graph runs on choose_model's model, else the demo's
    _studio_model = choose_model(None)
except NoModelConfigured:
    _studio_model = demo_model()
graph = build_demo_agent(_studio_model)
