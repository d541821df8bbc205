"""Forced tool use: the first model call of a run must call one of the agent's tools, by JSON schema.

Small local models rarely call a tool on their own, and a llama.cpp server
whose chat template renders no tools drops them silently (see
:mod:`middleware.server_caps`). :class:`ForceToolUse` makes the first model
call of each run (for a child: its only turn) ask for a JSON object that
matches one tool's arguments (``response_format`` of type ``json_schema``,
which llama.cpp turns into a grammar), and turns the reply into that tool
call. Later calls are free, so the model answers from the tool's result.

Opt in per agent: put it in a spec's ``middleware`` (or an agent's own)::

    {"name": "librarian", "description": "Looks facts up by key.", "tools": [lookup],
     "middleware": [ForceToolUse()]}

Measured on SmolLM2-135M (``bench/README.md``, "Small local models"): a
child's first call used its tool in 0 of 12 tasks without it.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Any

from langchain.agents.middleware import AgentMiddleware, ModelRequest, ModelResponse
from langchain.agents.middleware.types import hook_config
from langchain_core.messages import AIMessage, ToolMessage
from langchain_core.utils.function_calling import convert_to_openai_tool

from middleware.limits import closed_json, current_turn, is_first_call_of_turn, last_ai, truncated_reply
from middleware.task_tool import with_prompt_block

TOOL_KEY = "tool"
ARGUMENTS_KEY = "arguments"


class ForceToolUse(AgentMiddleware[Any, Any]):
    """The first model call of each turn calls one of ``tools`` (all offered tools by default).

    Args:
        tools: names of the tools the forced call may use (``None``: every tool
            offered on that call).
        answer_with_result: end the turn on the forced call's tool result,
            without another model call: the result is the agent's answer
            (a small model often restates a tool's result wrongly; for a
            child, the parent gets the result itself).

    Example::

        child = create_agent(model, [lookup], middleware=[ForceToolUse()])
        terse = create_agent(model, [lookup], middleware=[ForceToolUse(answer_with_result=True)])
    """

    def __init__(self, tools: Sequence[str] | None = None, *, answer_with_result: bool = False) -> None:
        super().__init__()
        # Not ``self.tools``: that attribute is the tools a middleware adds to the agent.
        self.only = list(tools) if tools is not None else None
        self.answer_with_result = answer_with_result

    @hook_config(can_jump_to=["end"])
    def before_model(self, state: Any, runtime: Any) -> dict[str, Any] | None:
        if not self.answer_with_result or not _answered_forced_call(state.get("messages") or ()):
            return None
        return {"jump_to": "end"}

    def wrap_model_call(self, request: ModelRequest, handler: Callable[[ModelRequest], ModelResponse]) -> Any:
        forced = self._forced(request)
        if forced is None:
            return handler(request)
        try:
            return forced.finish(handler(forced.request))
        except Exception as exc:
            return forced.recover(exc)

    async def awrap_model_call(self, request: ModelRequest,
                               handler: Callable[[ModelRequest], Awaitable[ModelResponse]]) -> Any:
        forced = self._forced(request)
        if forced is None:
            return await handler(request)
        try:
            return forced.finish(await handler(forced.request))
        except Exception as exc:
            return forced.recover(exc)

    def _forced(self, request: ModelRequest) -> _ForcedCall | None:
        if not is_first_call_of_turn(request.messages):
            return None
        specs = [convert_to_openai_tool(t)["function"] for t in request.tools]
        chosen = [s for s in specs if self.only is None or s["name"] in self.only]
        return _ForcedCall(request, chosen) if chosen else None


class _ForcedCall:
    """One forced call: the request that asks for a tool's arguments, and the reply made a tool call."""

    def __init__(self, request: ModelRequest, specs: list[dict[str, Any]]) -> None:
        self.specs = {s["name"]: s for s in specs}
        schema = forced_tool_schema(specs)
        listing = "; ".join(f"`{s['name']}`: {s.get('description') or ''}".strip() for s in specs)
        what = (f"the JSON arguments of `{specs[0]['name']}`" if len(specs) == 1
                else f'a JSON object naming the tool ("{TOOL_KEY}") and its "{ARGUMENTS_KEY}"')
        prompt = f"Use a tool now. Tools: {listing}. Reply only with {what}, taken from the task."
        response_format = {"type": "json_schema", "json_schema": {"name": "tool_call", "schema": schema,
                                                                   "strict": True}}
        self.request = with_prompt_block(request, prompt).override(
            tools=[], tool_choice=None, response_format=None,
            model_settings={**request.model_settings, "response_format": response_format},
        )

    def finish(self, response: Any) -> Any:
        message = last_ai(response)
        if message is None or message.tool_calls:
            return response
        call = self._call(closed_json(message.text))
        if call is None:
            return response
        converted = AIMessage(content="", tool_calls=[call], id=message.id, name=message.name,
                              usage_metadata=message.usage_metadata,
                              response_metadata=dict(message.response_metadata))
        if not isinstance(response, ModelResponse):
            return converted
        return ModelResponse(result=[converted if m is message else m for m in response.result],
                             structured_response=response.structured_response)

    def recover(self, exc: Exception) -> Any:
        cut_short = truncated_reply(exc)  # a schema-constrained reply cut at the token limit: close and use it
        if cut_short is None:
            raise exc
        return self.finish(cut_short)

    def _call(self, reply: Any) -> dict[str, Any] | None:
        if not isinstance(reply, Mapping):
            return None
        name: Any = next(iter(self.specs))
        args: Any = reply
        if len(self.specs) > 1:
            name, args = reply.get(TOOL_KEY), reply.get(ARGUMENTS_KEY)
            if name not in self.specs or not isinstance(args, Mapping):
                return None
        return {"name": name, "args": dict(args), "id": f"call_{uuid.uuid4().hex[:24]}", "type": "tool_call"}


def _answered_forced_call(messages: Sequence[Any]) -> bool:
    """Whether the turn so far is one model call (the forced one) and the results of its tool calls."""
    turn = current_turn(messages)
    ais = [m for m in turn if isinstance(m, AIMessage)]
    return (len(ais) == 1 and turn[0] is ais[0] and bool(ais[0].tool_calls) and len(turn) > 1
            and all(isinstance(m, ToolMessage) for m in turn[1:]))


def forced_tool_schema(specs: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """The JSON schema of one call of one of ``specs`` (OpenAI function specs).

    One tool: its arguments' schema itself (the smallest thing a small model
    can fill in). Several: ``{"tool": <name>, "arguments": {...}}``, one
    ``anyOf`` branch per tool.

    Example::

        >>> forced_tool_schema([{"name": "lookup", "parameters": {"type": "object",
        ...     "properties": {"key": {"type": "string"}}, "required": ["key"]}}])["required"]
        ['key']
    """
    def arguments(spec: Mapping[str, Any]) -> dict[str, Any]:
        params = dict(spec.get("parameters") or {"type": "object", "properties": {}})
        params.setdefault("required", list((params.get("properties") or {}).keys()))
        params.setdefault("additionalProperties", False)
        copied: dict[str, Any] = json.loads(json.dumps(params))  # a copy the caller may change
        return copied

    if len(specs) == 1:
        return arguments(specs[0])
    return {"anyOf": [{"type": "object", "properties": {TOOL_KEY: {"type": "string", "enum": [s["name"]]},
                                                         ARGUMENTS_KEY: arguments(s)},
                       "required": [TOOL_KEY, ARGUMENTS_KEY], "additionalProperties": False} for s in specs]}
