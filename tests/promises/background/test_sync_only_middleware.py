"""A background child whose middleware wraps calls in sync code only fails with an error that says why.

A background child always runs with ``ainvoke`` on the background loop,
under an ``invoke`` parent too, while the same child run as a ``task`` of
that parent runs sync. A middleware with only ``wrap_model_call`` (or only
``wrap_tool_call``) worked there and failed here with LangChain's error
about an async context, which named neither the middleware nor the reason.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from langchain.agents import create_agent
from langchain.agents.middleware import AgentMiddleware
from langchain_core.messages import HumanMessage
from langchain_core.tools import tool
from langgraph.checkpoint.memory import InMemorySaver

from deep_agent._testing import ScriptedChatModel, tool_call
from middleware import BackgroundSubagentMiddleware
from subagents import wait_for_background
from subagents.background._local import known_task


class SyncModelWrap(AgentMiddleware):
    def wrap_model_call(self, request: Any, handler: Callable[[Any], Any]) -> Any:
        return handler(request)


class SyncToolWrap(AgentMiddleware):
    def wrap_tool_call(self, request: Any, handler: Callable[[Any], Any]) -> Any:
        return handler(request)


@tool
def lookup(q: str) -> str:
    """Look something up."""
    return "found"


@pytest.mark.parametrize(("middleware", "wrap"), [(SyncModelWrap(), "awrap_model_call"),
                                                  (SyncToolWrap(), "awrap_tool_call")])
def test_the_task_error_names_the_middleware_and_the_missing_async_wrap(middleware: Any, wrap: str) -> None:
    parent = ScriptedChatModel(
        rules=[("go", [{"tool_calls": [tool_call("start_async_task", description="do X",
                                                 subagent_type="worker")]}, "started"])],
        default="ok")
    child = ScriptedChatModel(rules=[("do X", [{"tool_calls": [tool_call("lookup", q="x")]}, "done"])])
    spec = {"name": "worker", "description": "Works.", "system_prompt": "Work.", "tools": ["lookup"],
            "model": child, "middleware": [middleware]}
    mw = BackgroundSubagentMiddleware([spec], model=parent, tools=[lookup])
    agent = create_agent(parent, tools=[lookup], middleware=[mw], checkpointer=InMemorySaver())
    try:
        out = agent.invoke({"messages": [HumanMessage("go")]}, {"configurable": {"thread_id": "t1"}})
        assert wait_for_background(out["async_tasks"], 30)
        task = known_task(next(iter(out["async_tasks"])))
        assert task is not None
        assert task.fields["status"] == "error"
        error = task.fields["error"]
        assert type(middleware).__name__ in error and wrap in error and "background" in error
    finally:
        mw.close()
