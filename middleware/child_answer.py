"""The child's answer as the root's final answer, when a turn made exactly one delegation.

A small root model that delegated well often garbles the answer it was
handed (it rewrites, truncates or ignores it). :class:`ReturnChildAnswer`
ends the turn on the child's answer instead of a second root model call,
when the turn's only model call made exactly one ``task`` call and that
task succeeded. Anything else (parallel delegations, a failed task, a turn
that also called other tools) goes to the model as usual.

Example::

    agent = create_deep_agent(model, subagents=[librarian], middleware=[ReturnChildAnswer()])
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from langchain.agents.middleware import AgentMiddleware
from langchain.agents.middleware.types import hook_config
from langchain_core.messages import AIMessage, ToolMessage

from middleware.limits import current_turn
from middleware.task_tool import TASK_TOOL_NAME


class ReturnChildAnswer(AgentMiddleware[Any, Any]):
    """Ends a turn of one successful delegation on the child's answer, without another root model call.

    Args:
        tool_names: the delegation tools whose answer may end the turn
            (``task`` by default).
    """

    def __init__(self, tool_names: Sequence[str] = (TASK_TOOL_NAME,)) -> None:
        super().__init__()
        self.tool_names = frozenset(tool_names)

    @hook_config(can_jump_to=["end"])
    def before_model(self, state: Any, runtime: Any) -> dict[str, Any] | None:
        answer = single_delegation_answer(state.get("messages") or (), self.tool_names)
        if answer is None:
            return None
        return {"messages": [AIMessage(content=answer)], "jump_to": "end"}


def single_delegation_answer(messages: Sequence[Any], tool_names: frozenset[str]) -> str | None:
    """The answer of the turn's one delegation, if the turn so far is exactly: one call of it, its success."""
    turn = current_turn(messages)
    if len(turn) != 2 or not isinstance(turn[0], AIMessage) or not isinstance(turn[1], ToolMessage):
        return None
    calls = turn[0].tool_calls
    reply = turn[1]
    if len(calls) != 1 or calls[0].get("name") not in tool_names or reply.tool_call_id != calls[0].get("id"):
        return None
    if reply.status == "error" or not (reply.text or "").strip():
        return None
    return reply.text
