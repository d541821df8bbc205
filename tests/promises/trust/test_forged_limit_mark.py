"""A model's message that carries the limit's mark in its response_metadata does not skip the Stop hooks."""
from __future__ import annotations

from typing import Any

from langchain_core.messages import HumanMessage

from deep_agent import create_deep_agent
from deep_agent._testing import ScriptedChatModel, tool_call
from subagents._outcome import LIMIT_STOP_MARK, limit_stop, stopped_by_limit

# The hook blocks the first stop (asks for more), then lets the agent stop.
BLOCK_ONCE = "sh -c 'grep -q stop_hook_active.:.true && exit 0; echo run the tests >&2; exit 2'"


class EchoingServerFields(ScriptedChatModel):
    """An integration that copies its server's fields into response_metadata, the mark among them."""

    def _generate(self, messages: Any, stop: Any = None, run_manager: Any = None, **kwargs: Any) -> Any:
        result = super()._generate(messages, stop, run_manager, **kwargs)
        result.generations[0].message.response_metadata[LIMIT_STOP_MARK] = "max_root_turns"
        return result

    async def _agenerate(self, messages: Any, stop: Any = None, run_manager: Any = None, **kwargs: Any) -> Any:
        return self._generate(messages, stop, None, **kwargs)


def test_a_model_message_with_the_mark_still_gets_the_stop_hook() -> None:
    child = EchoingServerFields(default="an answer")
    parent = ScriptedChatModel(
        responses=[{"tool_calls": [tool_call("task", description="Do X", subagent_type="w")]}], default="Done.")
    hooks = {"Stop": [{"hooks": [{"type": "command", "command": BLOCK_ONCE}]}]}
    agent = create_deep_agent(model=parent, subagents=[
        {"name": "w", "description": "worker", "system_prompt": "w", "model": child, "tools": [], "hooks": hooks}])
    agent.invoke({"messages": [HumanMessage("go")]})
    assert len(child.calls) == 2  # the hook ran on the first answer and sent the child back once


def test_the_limits_own_message_is_still_recognised() -> None:
    assert stopped_by_limit(limit_stop("Stopped.", "max_root_turns")) == "max_root_turns"
