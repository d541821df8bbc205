"""A spec's own middleware cannot run a ``task`` call the child's model makes.

The one-level guard is the child's innermost wrap; a middleware outside it
that answers tool calls itself (as one serving tools it adds at request time
does) used to get a forbidden call first and could run it.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from langchain.agents.middleware import AgentMiddleware
from langchain_core.messages import HumanMessage, ToolMessage
from langchain_core.tools import tool

from deep_agent._testing import ScriptedChatModel, tool_call
from subagents._builder import build_subagent
from subagents._spec import SubagentSpec


@tool
def search(query: str) -> str:
    """Search."""
    return query


class AnswersEveryTask(AgentMiddleware):
    """Runs any ``task`` call itself, as a middleware serving its own tools would."""

    def wrap_tool_call(self, request: Any, handler: Callable[[Any], Any]) -> Any:
        if request.tool_call["name"] == "task":
            return ToolMessage("DELEGATED", tool_call_id=request.tool_call["id"], name="task")
        return handler(request)

    async def awrap_tool_call(self, request: Any, handler: Any) -> Any:
        if request.tool_call["name"] == "task":
            return ToolMessage("DELEGATED", tool_call_id=request.tool_call["id"], name="task")
        return await handler(request)


def _child(tools: list[str] | None = None) -> Any:
    model = ScriptedChatModel(responses=[
        {"tool_calls": [tool_call("task", description="Go deeper", subagent_type="general-purpose")]},
        "Done.",
    ])
    spec = SubagentSpec(name="worker", description="Works.", system_prompt="Work.", tools=["search"] if tools is None else tools,
                        middleware=[AnswersEveryTask()])
    return build_subagent(spec, parent_model=model, parent_tools=[search])


def _tool_answers(out: dict[str, Any]) -> list[str]:
    return [str(m.content) for m in out["messages"] if isinstance(m, ToolMessage)]


def test_a_spec_middleware_never_runs_a_task_call() -> None:
    [answer] = _tool_answers(_child().invoke({"messages": [HumanMessage("go")]}))
    assert "DELEGATED" not in answer
    assert "subagents cannot delegate" in answer


async def test_a_spec_middleware_never_runs_a_task_call_async() -> None:
    [answer] = _tool_answers(await _child().ainvoke({"messages": [HumanMessage("go")]}))
    assert "subagents cannot delegate" in answer


def test_a_child_with_no_tools_of_its_own_still_refuses_a_task_call() -> None:
    # LangChain gives it a tools node for the middleware that wraps tool calls.
    [answer] = _tool_answers(_child(tools=[]).invoke({"messages": [HumanMessage("go")]}))
    assert "subagents cannot delegate" in answer
