"""A scripted chat model that treats ``tool_choice`` and ``response_format`` as an OpenAI-compatible server does."""

from __future__ import annotations

import json
from typing import Any

from langchain_core.messages import AIMessage
from langchain_core.outputs import ChatGeneration, ChatResult
from langchain_core.utils.function_calling import convert_to_openai_tool
from pydantic import Field

from deep_agent._testing import ScriptedChatModel


class ServerLikeModel(ScriptedChatModel):
    """A scripted parent that behaves like an OpenAI-compatible server.

    ``honours_tool_choice``: a named or required ``tool_choice`` yields a
    ``task`` call (else it is ignored, as llama.cpp's server does). A
    ``response_format`` yields ``json_reply`` as text. Everything else follows
    the script. Every request's settings are kept in ``settings``.
    """

    honours_tool_choice: bool = False
    json_reply: Any = Field(default_factory=lambda: {"subagent_type": "beta", "description": "forced work"})
    settings: list[dict[str, Any]] = Field(default_factory=list)

    def bind_tools(self, tools: Any, **kwargs: Any) -> Any:
        choice = kwargs.pop("tool_choice", None)
        return self.bind(tools=[convert_to_openai_tool(t) for t in tools], tool_choice=choice, **kwargs)

    def _server_reply(self, messages: list[Any], kwargs: dict[str, Any]) -> ChatResult | None:
        self.settings.append({"tool_choice": kwargs.get("tool_choice"),
                              "response_format": kwargs.get("response_format"),
                              "tools": [t["function"]["name"] for t in kwargs.get("tools") or ()],
                              "schemas": [t["function"]["parameters"] for t in kwargs.get("tools") or ()]})
        if kwargs.get("response_format"):
            reply = self.json_reply
            if isinstance(reply, BaseException):
                raise reply
            text = reply if isinstance(reply, str) else json.dumps(reply)
            return ChatResult(generations=[ChatGeneration(message=AIMessage(text, usage_metadata={
                "input_tokens": 10, "output_tokens": 5, "total_tokens": 15}))])
        if self.honours_tool_choice and kwargs.get("tool_choice") not in (None, "auto", "none"):
            call = {"name": "task", "args": {"description": "chosen", "subagent_type": "alpha"}, "id": "call_tc"}
            return ChatResult(generations=[ChatGeneration(message=AIMessage("", tool_calls=[call]))])
        return None

    def _generate(self, messages: list[Any], stop: Any = None, run_manager: Any = None, **kwargs: Any) -> ChatResult:
        return self._server_reply(messages, kwargs) or super()._generate(messages, stop, run_manager, **kwargs)

    async def _agenerate(self, messages: list[Any], stop: Any = None, run_manager: Any = None,
                         **kwargs: Any) -> ChatResult:
        return self._server_reply(messages, kwargs) or await super()._agenerate(messages, stop, run_manager,
                                                                                **kwargs)
