"""The background tools' functions carry evaluated hints: LangChain reads them on every call."""

from __future__ import annotations

import asyncio
import typing

from helpers.graphs import user
from langchain.agents import create_agent
from langchain.tools import ToolRuntime
from langchain_core.tools.base import _get_type_hints
from langgraph.checkpoint.memory import InMemorySaver

from deep_agent._testing import ScriptedChatModel, tool_call
from middleware import BackgroundSubagentMiddleware
from subagents.background import wait_for_background
from subagents._settings import DelegationSettings


def _middleware() -> BackgroundSubagentMiddleware:
    spec = {"name": "worker", "description": "w", "model": ScriptedChatModel(responses=["done"])}
    return BackgroundSubagentMiddleware([spec], settings=DelegationSettings.of(general_purpose=False, notify=False))


def test_every_face_of_every_tool_has_its_hints_evaluated_once_when_built() -> None:
    middleware = _middleware()
    try:
        for tool in middleware.tools:
            for face in (tool.func, tool.coroutine):
                hints = face.__annotations__
                # Before: strings ("ToolRuntime", "Command[Any]"), evaluated again at each call.
                assert not any(isinstance(hint, str) for hint in hints.values()), (tool.name, hints)
                assert hints["runtime"] is ToolRuntime
                assert _get_type_hints(face) == typing.get_type_hints(face)
    finally:
        middleware.close()


def test_a_start_still_gets_its_runtime_injected_on_both_paths() -> None:
    for path in ("invoke", "ainvoke"):
        middleware = _middleware()
        parent = ScriptedChatModel(responses=[
            {"tool_calls": [tool_call("start_async_task", description="job", subagent_type="worker")]}, "ok"])
        agent = create_agent(parent, middleware=[middleware], checkpointer=InMemorySaver())
        config = {"configurable": {"thread_id": path}}
        try:
            state = (agent.invoke(user("go"), config) if path == "invoke"
                     else asyncio.run(agent.ainvoke(user("go"), config)))
            assert wait_for_background(state["async_tasks"], timeout_s=30)
            (record,) = state["async_tasks"].values()
            assert record["description"] == "job" and record["status"] in ("pending", "running", "completed")
            assert state["messages"][2].type == "tool" and state["messages"][2].text.startswith("Started")
        finally:
            middleware.close()
