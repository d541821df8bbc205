"""Children and calls that behave oddly, shared by the promises they attack."""

from __future__ import annotations

from typing import Any

from deep_agent._testing import ScriptedChatModel, tool_call


class Boom(BaseException):
    """Not cancellation (pytest's Failed, gevent's Timeout, trio's Cancelled ...)."""


def _delegating(*calls: tuple[str, str], rules: list[Any] = ()) -> ScriptedChatModel:
    return ScriptedChatModel(
        rules=list(rules),
        responses=[{"tool_calls": [tool_call("task", description=d, subagent_type=t) for d, t in calls]},
                   "parent carried on"])


def _create(name: str, call_id: str | None, prompt: str = "Answer.") -> dict[str, Any]:
    return {"name": "create_subagent", "id": call_id, "type": "tool_call",
            "args": {"name": name, "description": f"{name} agent", "system_prompt": prompt}}
