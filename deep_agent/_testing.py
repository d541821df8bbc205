"""A scripted chat model for offline runs: tests, the demo, and your own tests (docs/testing.md)."""

from __future__ import annotations

import asyncio
import hashlib
import json
import time
from collections.abc import Callable, Sequence
from typing import Any

from langchain_core.callbacks import AsyncCallbackManagerForLLMRun, CallbackManagerForLLMRun
from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, SystemMessage
from langchain_core.messages.ai import UsageMetadata
from langchain_core.outputs import ChatGeneration, ChatResult
from langchain_core.utils.function_calling import convert_to_openai_tool
from pydantic import Field, PrivateAttr

from subagents._errors import InvalidArgumentType, SubagentsError
from subagents._outcome import CONTINUATION_PROMPT

Reply = Any
Rule = tuple[str | Callable[[str], bool], Sequence[Reply]]


def tool_call(name: str, /, **args: Any) -> dict[str, Any]:
    """One tool call for a scripted reply: ``{"tool_calls": [tool_call("search", q="x")]}``."""
    return {"name": name, "args": args}


class ScriptExhausted(SubagentsError, RuntimeError):
    """The script has no reply for this turn."""


class ScriptedChatModel(BaseChatModel):
    """A deterministic chat model with tool calling, latency and usage metadata. Replies are chosen from the
    conversation, never from call order, so parallel children sharing one model stay deterministic: a turn's reply is
    ``script[k]``, ``k`` the AI messages since the last human message, the script the first of ``rules`` whose pattern
    occurs in it (else ``responses``). An unmatched continuation request repeats the previous answer. A reply is a
    string, an ``AIMessage``, a dict with ``content`` and/or ``tool_calls`` (:func:`tool_call`), an exception to
    raise, or a callable taking the messages and returning one of those."""

    responses: list[Reply] = Field(default_factory=list)
    rules: list[Rule] = Field(default_factory=list)
    default: Reply = None
    """Reply for any turn past the end of its script (``None``: raise ``ScriptExhausted``)."""
    latency_s: float = 0.0
    model_name: str = "scripted"

    _calls: list[dict[str, Any]] = PrivateAttr(default_factory=list)

    @property
    def _llm_type(self) -> str:
        return "scripted-chat-model"

    @property
    def calls(self) -> list[dict[str, Any]]:
        """Every request seen: ``{"messages", "system", "tools"}`` (tool names)."""
        return self._calls

    def bind_tools(self, tools: Sequence[Any], *, tool_choice: Any = None, parallel_tool_calls: Any = None,
                   **kwargs: Any) -> Any:
        return self.bind(tools=[convert_to_openai_tool(t) for t in tools], **kwargs)

    def _reply_for(self, messages: list[BaseMessage]) -> Reply:
        last_human = max((i for i, m in enumerate(messages) if isinstance(m, HumanMessage)), default=0)
        prompt = messages[last_human].text if messages else ""
        turn = sum(isinstance(m, AIMessage) for m in messages[last_human:])
        chosen = (replies for pattern, replies in self.rules
                  if (pattern(prompt) if callable(pattern) else pattern in prompt))
        script: Sequence[Reply] = next(chosen, self.responses)
        if script is self.responses and prompt == CONTINUATION_PROMPT:
            return next((m.text for m in reversed(messages) if isinstance(m, AIMessage) and m.text), "")
        if turn >= len(script) and self.default is None:
            raise ScriptExhausted(f"scripted model has no reply for turn {turn} of prompt {prompt[:60]!r}")
        reply = script[turn] if turn < len(script) else self.default
        return reply(messages) if callable(reply) and not isinstance(reply, type) else reply

    def _respond(self, messages: list[BaseMessage], tools: Any) -> ChatResult:
        self._calls.append({"messages": list(messages),
                            "system": "\n".join(m.text for m in messages if isinstance(m, SystemMessage)),
                            "tools": [t["function"]["name"] for t in tools or ()]})
        reply = self._reply_for(messages)
        if isinstance(reply, BaseException) or (isinstance(reply, type) and issubclass(reply, BaseException)):
            raise reply
        message = _to_message(reply, messages)
        message.usage_metadata = _usage(messages, message)
        # A scripted AIMessage's own metadata (a ``finish_reason``, say) is kept; the model name is added.
        message.response_metadata = {"model_name": self.model_name, **message.response_metadata}
        return ChatResult(generations=[ChatGeneration(message=message)])

    def _generate(self, messages: list[BaseMessage], stop: list[str] | None = None,
                  run_manager: CallbackManagerForLLMRun | None = None, **kwargs: Any) -> ChatResult:
        if self.latency_s:
            time.sleep(self.latency_s)
        return self._respond(messages, kwargs.get("tools"))

    async def _agenerate(self, messages: list[BaseMessage], stop: list[str] | None = None,
                         run_manager: AsyncCallbackManagerForLLMRun | None = None, **kwargs: Any) -> ChatResult:
        if self.latency_s:
            await asyncio.sleep(self.latency_s)
        return self._respond(messages, kwargs.get("tools"))


def _to_message(reply: Reply, messages: list[BaseMessage]) -> AIMessage:
    if isinstance(reply, AIMessage):
        return reply.model_copy()
    if isinstance(reply, str):
        return AIMessage(content=reply)
    if isinstance(reply, dict):
        seed = hashlib.sha1("".join(m.text for m in messages[:2]).encode()).hexdigest()[:6]
        turn = sum(isinstance(m, AIMessage) for m in messages)
        calls = [{"name": c["name"], "args": c.get("args", {}), "id": c.get("id") or f"call_{seed}_{turn}_{i}",
                  "type": "tool_call"} for i, c in enumerate(reply.get("tool_calls", ()))]
        return AIMessage(content=reply.get("content", ""), tool_calls=calls)
    raise InvalidArgumentType(f"unsupported scripted reply: {reply!r}")


def _usage(messages: list[BaseMessage], reply: AIMessage) -> UsageMetadata:
    # A stable stand-in for tokenisation: about four characters a token.
    input_tokens = sum(len(m.text) for m in messages) // 4 + 1
    output_tokens = (len(reply.text) + len(json.dumps(reply.tool_calls))) // 4 + 1
    return UsageMetadata(input_tokens=input_tokens, output_tokens=output_tokens,
                         total_tokens=input_tokens + output_tokens)
