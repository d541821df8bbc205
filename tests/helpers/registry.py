"""A parent key whose reducer refuses repeated keys, and a tool that writes it: write-back attacks share them."""

from __future__ import annotations

from typing import Annotated, NotRequired

from langchain.agents.middleware import AgentMiddleware, AgentState
from langchain.tools import ToolRuntime
from langchain_core.messages import ToolMessage
from langchain_core.tools import tool
from langgraph.types import Command


def merge_without_overlap(left: dict | None, right: dict) -> dict:
    """A reducer that refuses to overwrite: a common pattern for ids that must be unique."""
    merged = dict(left or {})
    for key in right:
        if key in merged:
            raise ValueError(f"duplicate key {key!r}")
    merged.update(right)
    return merged


class UniqueState(AgentState):
    registry: NotRequired[Annotated[dict, merge_without_overlap]]


class UniqueStateMiddleware(AgentMiddleware):
    state_schema = UniqueState


@tool
def register(key: str, runtime: ToolRuntime) -> Command:
    """Register a key in the shared registry."""
    return Command(update={"registry": {key: runtime.tool_call_id},
                           "messages": [ToolMessage("registered", tool_call_id=runtime.tool_call_id)]})
