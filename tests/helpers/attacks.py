"""Children built to fail: a failure at a chosen place, raising middleware, and the checks every such run must pass."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from langchain_core.messages import ToolMessage
from langchain_core.runnables import RunnableLambda

from deep_agent._testing import tool_call
from helpers.graphs import echo  # noqa: F401 - the same echo tool, for the files importing it from here
from subagents import CompiledSubagent, TaskRecord


def _user(text: str = "go") -> dict[str, Any]:
    return {"messages": [{"role": "user", "content": text}]}


def _parallel(*calls: tuple[str, str]) -> list[Any]:
    """A parent script: one message with these (description, subagent_type) task calls, then an answer."""
    return [
        {"tool_calls": [tool_call("task", description=d, subagent_type=t) for d, t in calls]},
        "parent carried on",
    ]


def _invoke(mode: str, graph: Any, inputs: Any, config: dict[str, Any] | None = None) -> Any:
    if mode == "sync":
        return graph.invoke(inputs, config)
    return asyncio.run(graph.ainvoke(inputs, config))


def _tool_messages(state: dict[str, Any]) -> list[ToolMessage]:
    return [m for m in state["messages"] if isinstance(m, ToolMessage)]


def _records(state: dict[str, Any]) -> list[dict[str, Any]]:
    return list(state.get("subagent_tasks", {}).values())


def _assert_one_message_and_record_per_call(state: dict[str, Any], n_calls: int) -> None:
    assert state["messages"][-1].content == "parent carried on"
    assert len(_tool_messages(state)) == n_calls
    assert len(_records(state)) == n_calls
    for record in _records(state):
        TaskRecord.model_validate(record)


MODES = pytest.mark.parametrize("mode", ["sync", "async"])


def _compiled(name: str, fn: Any) -> CompiledSubagent:
    return CompiledSubagent(name=name, description=name, runnable=RunnableLambda(fn))
