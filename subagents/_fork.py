"""Forked context: a child that starts from the parent's conversation, not the bare task.

A spec with ``context="fork"`` (agent files: ``context: fork``) gives its
child the parent's messages up to, not including, the assistant message
that holds the pending ``task`` call, then the task description as a new
human message. Everything else about the boundary holds: excluded and
private keys never cross, the parent's system prompt is not in its
messages (system messages in the history are dropped too), the child
cannot delegate, and only its final answer comes back.

A fork pays for the history it inherits on every one of its model calls;
the record of a forked delegation reports that history's approximate size
as ``inherited_tokens``.

Example::

    from subagents import SubagentSpec

    reviewer = SubagentSpec(
        name="reviewer",
        description="Reviews what we just discussed.",
        system_prompt="Review the plan in the conversation so far.",
        context="fork",
    )
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Literal

from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, SystemMessage
from langchain_core.messages.utils import count_tokens_approximately

ContextMode = Literal["isolated", "fork"]
"""``isolated`` (the default): the child sees only the task; ``fork``: the conversation too."""


def fork_history(messages: Sequence[Any], tool_call_id: str | None) -> list[BaseMessage]:
    """The parent's conversation as a fork inherits it.

    Everything before the assistant message holding ``tool_call_id`` (the
    call in flight and any sibling calls made with it are never shown); when
    no message holds it, a trailing assistant message with unanswered tool
    calls is dropped instead. System messages are dropped. Each message is a
    shallow copy, so nothing the child's reducers do touches the parent's.
    """
    history = [m for m in messages if isinstance(m, BaseMessage)]
    cut = _holding(history, tool_call_id)
    if cut is None and history and isinstance(history[-1], AIMessage) and history[-1].tool_calls:
        cut = len(history) - 1
    if cut is not None:
        history = history[:cut]
    return [m.model_copy() for m in history if not isinstance(m, SystemMessage)]


def _holding(history: Sequence[BaseMessage], tool_call_id: str | None) -> int | None:
    if not tool_call_id:
        return None
    for index in range(len(history) - 1, -1, -1):
        message = history[index]
        if isinstance(message, AIMessage) and any(c.get("id") == tool_call_id for c in message.tool_calls):
            return index
    return None


def forked_input(
    parent_state: Mapping[str, Any],
    description: str,
    blocked: frozenset[str],
    tool_call_id: str | None,
) -> tuple[dict[str, Any], int]:
    """The child's initial state for a fork, and the approximate tokens it inherits.

    Shared keys cross exactly as for an isolated child (by reference, minus
    ``blocked``); only ``messages`` differs.
    """
    history = fork_history(parent_state.get("messages") or (), tool_call_id)
    state = {k: v for k, v in parent_state.items() if k not in blocked}
    state["messages"] = [*history, HumanMessage(content=description)]
    return state, count_tokens_approximately(history) if history else 0
