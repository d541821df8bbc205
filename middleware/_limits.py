"""What a turn's tool calls must and may be, each rule reading the turn since the last user message (forced
delegation and its mechanisms: docs/local-models.md)."""

from __future__ import annotations

import json
import threading
import urllib.error
import urllib.request
import uuid
import warnings
from collections.abc import Generator, Mapping, Sequence
from typing import Any, Literal, cast
from urllib.parse import urlsplit, urlunsplit

from langchain.agents.middleware import AgentMiddleware, AgentState, ModelRequest, ModelResponse
from langchain.agents.middleware.types import ModelCallResult, ResponseT, hook_config
from langchain_core.messages import AIMessage, AnyMessage, HumanMessage, ToolCall, ToolMessage
from langchain_core.messages.ai import UsageMetadata
from langchain_core.utils.function_calling import convert_to_openai_tool
from langgraph.runtime import Runtime
from langgraph.typing import ContextT
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from middleware._task_tool import TASK_TOOL_DESCRIPTION, TASK_TOOL_NAME, task_call_json_schema
from subagents import TaskCall, TaskOutcome
from subagents._boundary import with_prompt_block
from subagents._errors import InvalidArgumentType, SpecError, StopReason, ToolCallsUnsupported
from subagents._metering import token_count
from subagents._outcome import refused_record, task_id_for
from subagents._plans import ModelCallPlan
from subagents._settings import Limits

START_TOOL_NAME = "start_async_task"  # a background start: a delegation, counted as task's calls are
RETRY_TOOL_NAME = "retry_async_task"  # a background task run again: a delegation too
FOLLOW_UP_TOOL_NAME = "update_async_task"  # counted, refused past the cap when it would start a run, never withdrawn

# A background notice is a marked HumanMessage (any provider takes one), no user turn: it resets no cap, forces no task.

NOTICE_MARKER = "subagents_notice"  # The additional_kwargs key marking a message as a background notice.


def notice_message(text: str) -> HumanMessage:
    """A background notice: a ``HumanMessage`` the limits know is not the user's."""
    return HumanMessage(content=text, additional_kwargs={NOTICE_MARKER: True})


def is_notice(message: object) -> bool:
    """Whether ``message`` is a background notice rather than a user message."""
    extra = getattr(message, "additional_kwargs", None)
    return isinstance(extra, Mapping) and extra.get(NOTICE_MARKER) is True


class DelegationLimit:
    """Counts the parent's delegations (``task`` calls, background starts) since the last user message: past
    ``max_delegations`` each is refused with an error and the tools are withdrawn for the run. Its default and check
    are :class:`~subagents.Limits`' ``max_delegations`` (with no cap there, the middleware builds none)."""

    starting = frozenset({TASK_TOOL_NAME, START_TOOL_NAME, RETRY_TOOL_NAME})  # start a child run: withdrawn
    tool_names = starting | {FOLLOW_UP_TOOL_NAME}

    def __init__(self, max_delegations: int) -> None:
        self.max_delegations: int = Limits(max_delegations=max_delegations).max_delegations  # type: ignore[assignment]

    def calls_this_run(self, messages: Sequence[AnyMessage]) -> list[str]:
        """Ids of the delegation calls made since the last human message, in order."""
        return [str(c.get("id")) for m in current_turn(messages) if getattr(m, "type", None) == "ai"
                for c in getattr(m, "tool_calls", ()) or () if c.get("name") in self.tool_names]

    def exhausted(self, messages: Sequence[AnyMessage]) -> bool:
        """True once the run has made ``max_delegations`` calls."""
        return len(self.calls_this_run(messages)) >= self.max_delegations

    def withdrawn_when_exhausted(self, request: ModelRequest[ContextT]) -> ModelRequest[ContextT]:
        """The model request, without the delegation tool once the run is out of delegations."""
        return request.override(tools=[t for t in request.tools if getattr(t, "name", None) not in self.starting]) \
            if self.exhausted(request.messages) else request

    def refusal(self, messages: Sequence[AnyMessage], tool_call_id: str | None) -> str | None:
        """Why this call may not delegate, or ``None`` if it may."""
        ids = self.calls_this_run(messages)
        # The last call of that id: a provider that numbers calls per message repeats ids from turn to turn.
        position = len(ids) - 1 - ids[::-1].index(str(tool_call_id)) if str(tool_call_id) in ids else len(ids)
        if position < self.max_delegations:
            return None
        return (f"delegation limit reached (max_delegations={self.max_delegations} per run); "
                "do not delegate again (task, start_async_task, retry_async_task, a follow-up): finish now and "
                "answer with what you have")


def refused_outcome(call: TaskCall, reason: str, stop_reason: StopReason = "refused") -> TaskOutcome:
    """The outcome of a delegation refused before it started: a record and an error."""
    configurable = call.parent_config.get("configurable") or {}
    task_id = task_id_for(configurable.get("thread_id"), configurable.get("checkpoint_ns", ""), call.tool_call_id)
    return TaskOutcome(refused_record(task_id, call.subagent_type, call.tool_call_id, call.description, reason,
                                      stop_reason), error=reason)


Mechanism = Literal["auto", "tool_choice", "required", "response_format"]
FORCED_CALL_PROMPT = ("Delegate now: reply only with the JSON arguments of one `task` call: `subagent_type`, the "
                      "agent best suited to the task, and `description`, the whole task for it in your own words.")
"""The block a forced ``response_format`` call adds to the prompt (no placeholder a model could copy)."""

VERBATIM_CALL_PROMPT = ("Delegate now: reply only with the JSON arguments of one `task` call: `subagent_type`, the "
                        "agent best suited to the user's request. The agent receives the request as the user wrote it.")


class ForceDelegation(BaseModel):
    """How the first model call of each turn is made to delegate (docs/local-models.md): to ``agent`` (``None``:
    any), by ``mechanism``; ``description_max_chars`` bounds the forced call's description, ``"verbatim"`` gives the
    child the user's last message (the model only picks the agent)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    agent: str | None = None
    mechanism: Mechanism = "auto"
    description_max_chars: int | None = Field(default=None, ge=1)
    description: Literal["model", "verbatim"] = "model"


ForceSetting = bool | str | ForceDelegation | Mapping[str, object] | None


def coerce_force_delegation(value: ForceSetting) -> ForceDelegation | None:
    """``True``: any agent; a string: that agent; a dict or :class:`ForceDelegation`; falsy: off."""
    if value is None or value is False:
        return None
    if value is True or isinstance(value, str):
        return ForceDelegation(agent=None if value is True else value)
    if isinstance(value, ForceDelegation):
        return value
    if isinstance(value, Mapping):
        try:
            return ForceDelegation(**value)
        except ValidationError as exc:
            fields = ", ".join(".".join(map(str, e["loc"])) or "?" for e in exc.errors())
            raise SpecError(f"force_delegation: invalid field(s) {fields}: {exc.errors()[0]['msg']}") from None
    raise InvalidArgumentType(
        f"force_delegation: expected a bool, an agent name or ForceDelegation, got {type(value).__name__}")


class ForcedDelegation:
    """Applies a :class:`ForceDelegation` to the parent's model calls (``names``: the agents ``task`` reaches)."""

    def __init__(self, setting: ForceDelegation, names: Sequence[str]) -> None:
        if setting.agent is not None and setting.agent not in names:
            raise SpecError(f"force_delegation: unknown subagent {setting.agent!r}; "
                            f"available: {', '.join(names) or 'none'}")
        self.setting = setting
        self.allowed = [setting.agent] if setting.agent is not None else list(names)
        self.detected: Mechanism | None = None  # What auto found works, once it has found out.

    def applies(self, request: ModelRequest[ContextT]) -> bool:
        """The first call of the turn, with ``task`` offered (not withdrawn by a limit)."""
        offered = any(getattr(t, "name", None) == TASK_TOOL_NAME for t in request.tools)
        return offered and is_first_call_of_turn(request.messages)

    def plan(self, request: ModelRequest[ContextT]
             ) -> Generator[Any, ModelResponse[ResponseT], ModelCallResult[ResponseT]]:
        """The parent's model call, forced where it :meth:`applies` (a plan for :mod:`subagents._plans`; a step that
        is a function is work to do off the event loop)."""
        if not self.applies(request):
            return (yield request)
        # In ``auto`` mode, a server that says it parses no tool calls gets ``response_format`` at once.
        if self.setting.mechanism == "auto" and self.detected is None:
            if (yield from probed(request.model)) is False:
                self.detected = "response_format"
        mechanism = self.detected or self.setting.mechanism
        wasted: ModelCallResult[ResponseT] | None = None
        response: ModelCallResult[ResponseT] | None
        if mechanism != "response_format":
            choice = "required" if mechanism == "required" else TASK_TOOL_NAME
            try:
                tool = {"name": TASK_TOOL_NAME, "description": TASK_TOOL_DESCRIPTION, "parameters": self._schema()}
                response = yield request.override(tools=[{"type": "function", "function": tool}], tool_choice=choice)
            except Exception:
                if mechanism != "auto":
                    raise
                response = None  # a server that rejects tool_choice: try response_format
            if response is not None and (mechanism != "auto" or _task_calls(response)):  # None: auto's rejected call
                if mechanism == "auto":
                    self.detected = "tool_choice"
                return self._described(response, request)
            self.detected = "response_format"
            wasted = response
        prompt = VERBATIM_CALL_PROMPT if self.setting.description == "verbatim" else FORCED_CALL_PROMPT
        response = yield from ask_json(request, prompt, TASK_TOOL_NAME, self._schema())
        return with_usage_of(self._described(as_task_call(response), request), wasted)

    def _described(self, response: ModelCallResult[ResponseT], request: ModelRequest[ContextT]
                   ) -> ModelCallResult[ResponseT]:
        """With ``description="verbatim"``, the ``task`` calls carry the user's last message as their description."""
        if self.setting.description != "verbatim":
            return response
        text = next((m.text for m in reversed(request.messages)
                     if getattr(m, "type", None) == "human" and not is_notice(m)), "")
        message = last_ai(response)
        for call in message.tool_calls if message is not None else ():
            if call.get("name") == TASK_TOOL_NAME:
                call["args"] = {**call.get("args", {}), "description": text}
        return response

    def _schema(self) -> dict[str, Any]:
        schema = task_call_json_schema(self.allowed, description_max_chars=self.setting.description_max_chars)
        if self.setting.description == "verbatim":
            schema["properties"].pop("description", None)
            schema["required"] = [k for k in schema["required"] if k != "description"]
        return schema


def ask_json(request: ModelRequest[ContextT], prompt: str, name: str, schema: dict[str, Any]
             ) -> Generator[ModelRequest[ContextT], ModelResponse[ResponseT], ModelCallResult[ResponseT]]:
    """A call of ``request`` with ``prompt`` added, asking for a JSON object matching ``schema`` instead of a tool
    call; a reply cut at the token limit is used."""
    response_format = {"type": "json_schema", "json_schema": {"name": name, "schema": schema, "strict": True}}
    try:
        return (yield with_prompt_block(request, prompt).override(
            tools=[], tool_choice=None, response_format=None,
            model_settings={**request.model_settings, "response_format": response_format}))
    except Exception as exc:
        if (cut := truncated_reply(exc)) is None:
            raise
        return cut


def current_turn(messages: Sequence[AnyMessage]) -> list[AnyMessage]:
    """The messages since the last user message (a background notice is not one), oldest first."""
    turn: list[AnyMessage] = []
    for message in reversed(messages):
        if getattr(message, "type", None) == "human" and not is_notice(message):
            break
        turn.append(message)
    turn.reverse()
    return turn


def is_first_call_of_turn(messages: Sequence[AnyMessage]) -> bool:
    """No AI message since the last user message (a background notice is not one)."""
    return not any(getattr(m, "type", None) == "ai" for m in current_turn(messages))


def last_ai(response: ModelCallResult[ResponseT]) -> AIMessage | None:
    """The last AI message of a model response (or the response itself when it is one)."""
    messages = response.result if isinstance(response, ModelResponse) else [response]
    return next((m for m in reversed(messages) if isinstance(m, AIMessage)), None)


def _task_calls(response: ModelCallResult[ResponseT]) -> list[ToolCall]:
    message = last_ai(response)
    return [c for c in (message.tool_calls if message else []) if c.get("name") == TASK_TOOL_NAME]


def as_task_call(response: ModelCallResult[ResponseT]) -> ModelCallResult[ResponseT]:
    """The response with its JSON reply made a ``task`` call; unchanged if it calls ``task`` or is no such JSON."""
    message = last_ai(response)
    if message is None or _task_calls(response):
        return response
    args = closed_json(message.text)
    if not (isinstance(args, dict) and isinstance(args.get("description", ""), str)
            and isinstance(args.get("subagent_type"), str)):
        return response
    call: ToolCall = {"name": TASK_TOOL_NAME, "id": f"call_{uuid.uuid4().hex[:24]}", "type": "tool_call",
                      "args": {"description": args.get("description", ""), "subagent_type": args["subagent_type"]}}
    return _calling(response, message, call)


def _calling(response: ModelCallResult[ResponseT], message: AIMessage, call: ToolCall) -> ModelCallResult[ResponseT]:
    """``response`` with its reply ``message`` replaced by one that makes ``call`` (id, usage and metadata kept)."""
    converted = AIMessage(content="", tool_calls=[call], id=message.id, name=message.name,
                          usage_metadata=message.usage_metadata, response_metadata=dict(message.response_metadata))
    if not isinstance(response, ModelResponse):
        return converted
    return ModelResponse(result=[converted if m is message else m for m in response.result],
                         structured_response=response.structured_response)


def with_usage_of(response: ModelCallResult[ResponseT], wasted: ModelCallResult[ResponseT] | None
                  ) -> ModelCallResult[ResponseT]:
    """``response`` with the billed token usage of a ``wasted`` call (whose reply ``auto`` dropped) added."""
    kept, dropped = last_ai(response), last_ai(wasted) if wasted is not None else None
    spent = getattr(dropped, "usage_metadata", None)
    if kept is None or not spent:
        return response
    mine = dict(kept.usage_metadata or {})
    for key in ("input_tokens", "output_tokens", "total_tokens"):
        mine[key] = token_count(mine.get(key, 0)) + token_count(spent.get(key, 0))
    kept.usage_metadata = cast("UsageMetadata", mine)
    return response


def closed_json(text: str) -> object:
    """``text`` as JSON, closing a string and object left open by a token limit."""
    for suffix in ("", "}", '"}'):
        try:
            return json.loads(text + suffix)
        except ValueError:
            continue
    return None


def truncated_reply(exc: BaseException) -> AIMessage | None:
    """The partial reply on OpenAI's ``LengthFinishReasonError`` (its ``completion``), or ``None``."""
    completion = getattr(exc, "completion", None)
    try:
        text = completion.choices[0].message.content  # type: ignore[union-attr]
        usage = completion.usage  # type: ignore[union-attr]
    except (AttributeError, IndexError, TypeError):
        return None
    if not isinstance(text, str):
        return None
    message = AIMessage(content=text, response_metadata={"finish_reason": "length",
                                                         "model_name": getattr(completion, "model", None)})
    if usage is not None:
        message.usage_metadata = {"input_tokens": token_count(getattr(usage, "prompt_tokens", 0)),
                                  "output_tokens": token_count(getattr(usage, "completion_tokens", 0)),
                                  "total_tokens": token_count(getattr(usage, "total_tokens", 0))}
    return message


# -- Forced tool use, by JSON schema: small local models rarely call a tool on their own (SmolLM2-135M: 0 of 12
# tasks), and llama.cpp drops tools its template cannot render. Later calls are free: the model answers from it.

TOOL_KEY = "tool"
ARGUMENTS_KEY = "arguments"


class ForceToolUse(ModelCallPlan, AgentMiddleware[AgentState[ResponseT], ContextT, ResponseT]):
    """The first model call of each turn calls one of ``tools`` (``None``: any offered); ``answer_with_result`` ends
    the turn on its result, without another model call (a small model often restates it wrongly)."""

    def __init__(self, tools: Sequence[str] | None = None, *, answer_with_result: bool = False) -> None:
        super().__init__()
        # Not ``self.tools``: that attribute is the tools a middleware adds to the agent.
        self.only = list(tools) if tools is not None else None
        self.answer_with_result = answer_with_result

    @hook_config(can_jump_to=["end"])
    def before_model(self, state: AgentState[ResponseT], runtime: Runtime[ContextT]) -> dict[str, object] | None:
        if not self.answer_with_result:
            return None
        # The turn so far is one model call (the forced one) and the results of its tool calls.
        turn = current_turn(state.get("messages") or ())
        ais = [m for m in turn if isinstance(m, AIMessage)]
        answered = len(ais) == 1 and turn[0] is ais[0] and bool(ais[0].tool_calls) and len(turn) > 1 \
            and all(isinstance(m, ToolMessage) for m in turn[1:])
        return {"jump_to": "end"} if answered else None

    def model_plan(self, request: ModelRequest[ContextT]
                   ) -> Generator[ModelRequest[ContextT], ModelResponse[ResponseT], ModelCallResult[ResponseT]]:
        first = is_first_call_of_turn(request.messages)
        specs = [convert_to_openai_tool(t)["function"] for t in request.tools] if first else []
        if not (specs := [s for s in specs if self.only is None or s["name"] in self.only]):
            return (yield request)
        listing = "; ".join(f"`{s['name']}`: {s.get('description') or ''}".strip() for s in specs)
        what = (f"the JSON arguments of `{specs[0]['name']}`" if len(specs) == 1
                else f'a JSON object naming the tool ("{TOOL_KEY}") and its "{ARGUMENTS_KEY}"')
        prompt = f"Use a tool now. Tools: {listing}. Reply only with {what}, taken from the task."
        response = yield from ask_json(request, prompt, "tool_call", forced_tool_schema(specs))
        message = last_ai(response)
        if message is None or message.tool_calls:
            return response
        if not isinstance(reply := closed_json(message.text), Mapping):
            return response
        name, args = (reply.get(TOOL_KEY), reply.get(ARGUMENTS_KEY)) if len(specs) > 1 else (specs[0]["name"], reply)
        if not isinstance(name, str) or name not in {s["name"] for s in specs} or not isinstance(args, Mapping):
            return response
        return _calling(response, message, {"name": name, "args": dict(args), "id": f"call_{uuid.uuid4().hex[:24]}",
                                            "type": "tool_call"})


def forced_tool_schema(specs: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """The JSON schema of one call of one of ``specs`` (OpenAI function specs): one tool's arguments'
    schema itself, or ``{"tool": <name>, "arguments": {...}}`` with an ``anyOf`` branch per tool."""
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


class ReturnChildAnswer(AgentMiddleware[AgentState[ResponseT], ContextT, ResponseT]):
    """Ends a turn of one successful call of ``tool_names`` on the child's answer, without another root model call
    (which a small root model often uses to garble it). Anything else goes to the model as usual."""

    def __init__(self, tool_names: Sequence[str] = (TASK_TOOL_NAME,)) -> None:
        super().__init__()
        self.tool_names = frozenset(tool_names)

    @hook_config(can_jump_to=["end"])
    def before_model(self, state: AgentState[ResponseT], runtime: Runtime[ContextT]) -> dict[str, object] | None:
        # The turn so far is exactly one call of a delegation tool and its success.
        turn = current_turn(state.get("messages") or ())
        if len(turn) != 2 or not isinstance(turn[0], AIMessage) or not isinstance(turn[1], ToolMessage):
            return None
        calls, reply = turn[0].tool_calls, turn[1]
        if len(calls) != 1 or calls[0].get("name") not in self.tool_names or reply.tool_call_id != calls[0].get("id"):
            return None
        ok = reply.status != "error" and (reply.text or "").strip()
        return {"messages": [AIMessage(content=reply.text)], "jump_to": "end"} if ok else None


# -- What an OpenAI-compatible server can do with tools, read once per server: llama.cpp's, with a template that
# renders no tools (SmolLM2's, Gemma 3's), drops ``tools`` silently and says so on ``GET /props``
# (``chat_template_caps.supports_tool_calls``): forced delegation goes to ``response_format``, unforced is warned.
PROBE_TIMEOUT_S = 2.0  # How long the one request to /props may take (a server that does not answer is asked no more).

_known: dict[str, bool | None] = {}
_warned: set[str] = set()
_lock = threading.Lock()
_DIRECT = urllib.request.build_opener(urllib.request.ProxyHandler({}))


def base_url_of(model: object) -> str | None:
    """The base url of an OpenAI-compatible chat model (``ChatOpenAI``'s public ``openai_api_base``), if any."""
    url = getattr(model, "openai_api_base", None)
    return url if isinstance(url, str) and url.startswith(("http://", "https://")) else None


def tool_calls_supported(model: object) -> bool | None:
    """Whether the model's server parses tool calls (``None``: unknown); asked once per base url, and only on
    loopback: a hosted API is never sent an odd request."""
    if (url := base_url_of(model)) is None:
        return None
    if url not in _known:  # not under a lock: two threads asking at once get the same answer
        _known[url] = _probe(url)
    return _known[url]


def probed(model: object) -> Generator[Any, Any, bool | None]:
    """:func:`tool_calls_supported` as a plan: a server's first use asks it over HTTP, in a step off the event loop."""
    if (url := base_url_of(model)) is not None and url not in _known:
        yield lambda: tool_calls_supported(model)
    return tool_calls_supported(model)


def warn_if_no_tool_calls(model: object) -> None:
    """Warn :class:`~subagents.ToolCallsUnsupported` once per base url if its server parses no tool call."""
    if tool_calls_supported(model) is not False:  # asked once: the answer is cached
        return
    url = str(base_url_of(model))
    with _lock:
        if url in _warned:
            return
        _warned.add(url)
    warnings.warn(ToolCallsUnsupported(url), stacklevel=3)


def _probe(url: str) -> bool | None:
    parts = urlsplit(url)
    if parts.hostname not in ("127.0.0.1", "localhost", "::1"):
        return None
    path = parts.path.rstrip("/")
    root = path[: -len("/v1")] if path.endswith("/v1") else path
    try:
        with _DIRECT.open(urlunsplit((parts.scheme, parts.netloc, root + "/props", "", "")),
                          timeout=PROBE_TIMEOUT_S) as answer:
            props = json.loads(answer.read(1 << 20))
    except (OSError, ValueError, urllib.error.URLError):
        return None
    caps = props.get("chat_template_caps") if isinstance(props, dict) else None
    if not isinstance(caps, dict) or not isinstance(caps.get("supports_tool_calls"), bool):
        return None
    return bool(caps["supports_tool_calls"] and caps.get("supports_tools", True))
