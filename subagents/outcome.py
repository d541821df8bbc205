"""What a finished delegation hands back: an answer or a readable failure.

The parent always receives exactly one ``ToolMessage``: the child's last
non-empty AI text (or its structured response as JSON), or, on failure,
content beginning ``Subagent '<name>' failed:`` with ``status="error"``.
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
from collections.abc import Mapping
from typing import Any

from langchain_core.messages import AIMessage, ToolMessage
from langgraph.errors import GraphRecursionError

from subagents.budget import BudgetExceeded
from subagents.meter import MaxTurnsReached, TaskStopped


def final_answer(result: Mapping[str, Any]) -> str:
    """The child's answer: its structured response as JSON, else its last non-empty AI text."""
    if not isinstance(result, Mapping) or "messages" not in result:
        raise ValueError(
            "the child graph returned no 'messages' (a compiled subagent's state "
            "must have a 'messages' key)"
        )
    structured = result.get("structured_response")
    if structured is not None:
        if hasattr(structured, "model_dump_json"):
            return structured.model_dump_json()
        if dataclasses.is_dataclass(structured) and not isinstance(structured, type):
            return json.dumps(dataclasses.asdict(structured), default=str)
        return json.dumps(structured, default=str)
    for message in reversed(result["messages"]):
        if isinstance(message, AIMessage):
            text = (message.text or "").strip()
            if text:
                return text
    return ""


def describe_failure(
    exc: BaseException,
    *,
    max_turns: int | None = None,
    recursion_limit: int | None = None,
    timeout_s: float | None = None,
) -> str:
    """A reason the parent model can act on, never a stack trace."""
    from langchain.agents.middleware.model_call_limit import ModelCallLimitExceededError

    if isinstance(exc, MaxTurnsReached):
        max_turns = exc.max_turns
    if isinstance(exc, (ModelCallLimitExceededError, MaxTurnsReached)):
        return (
            f"hit its max_turns limit ({max_turns} model calls) before finishing. "
            "Split the task into smaller pieces, or raise max_turns."
        )
    if isinstance(exc, GraphRecursionError):
        return (
            f"hit its recursion limit ({recursion_limit} steps) before finishing. "
            "Split the task into smaller pieces, or raise recursion_limit."
        )
    if isinstance(exc, (TimeoutError, asyncio.TimeoutError)) or (
        isinstance(exc, TaskStopped) and str(exc) == "timed out"
    ):
        return f"timed out after {timeout_s:g}s. Split the task, or raise timeout_s."
    if isinstance(exc, (TaskStopped, BudgetExceeded)):
        return str(exc)
    text = str(exc).strip() or "(no message)"
    return f"{type(exc).__name__}: {text}"


def tool_message(agent_type: str, tool_call_id: str | None, *, answer: str | None, error: str | None) -> ToolMessage:
    """The one message the parent sees."""
    failed = error is not None
    return ToolMessage(
        content=f"Subagent '{agent_type}' failed: {error}" if failed else (answer or ""),
        tool_call_id=tool_call_id or "",
        name="task",
        status="error" if failed else "success",
    )
