"""Shared pieces of the deepagents compatibility tests."""

from __future__ import annotations

from typing import Any

from langchain_core.messages import HumanMessage

from deep_agent._testing import ScriptedChatModel, tool_call

# Long enough that no library asks the child for a fuller report.
ANSWER = "Findings: " + "the search shows the answer in detail, with sources. " * 5


def internet_search(query: str, max_results: int = 5) -> str:
    """Run a web search."""
    return f"results for {query}"


def delete_file(path: str) -> str:
    """Delete a file."""
    return f"deleted {path}"


def delegating(*calls: tuple[str, str], final: str = "parent done") -> list[Any]:
    return [
        {"tool_calls": [tool_call("task", description=d, subagent_type=t) for d, t in calls]},
        final,
    ]


def tool_texts(out: dict[str, Any]) -> list[str]:
    return [m.text for m in out["messages"] if m.type == "tool"]


def child_calls(model: ScriptedChatModel, prompt: str) -> list[dict[str, Any]]:
    return [
        c for c in model.calls
        if any(isinstance(m, HumanMessage) and prompt in m.text for m in c["messages"])
    ]


def task_tool_description(agent: Any) -> str:
    return agent.nodes["tools"].bound.tools_by_name["task"].description
