"""The ``task`` tool: what the model sees (schema, description, ``<available_agents>`` block, one
``ToolMessage`` per call), and what one call writes into the parent's state (ledgers, usage, write-backs)."""

from __future__ import annotations

import collections
import threading
import typing
import uuid
from collections.abc import Awaitable, Callable, Collection, Generator, Iterable, Mapping, Sequence
from typing import Annotated, Any, ClassVar, NotRequired, cast
from xml.sax.saxutils import escape

from langchain.agents.middleware import AgentState, ModelCallResult
from langchain.agents.middleware.types import ExtendedModelResponse, ModelResponse, ResponseT
from langchain.tools import ToolRuntime
from langchain_core.messages import AIMessage, HumanMessage, RemoveMessage, ToolCall, ToolMessage
from langchain_core.runnables import RunnableConfig
from langchain_core.tools import StructuredTool
from langgraph.constants import CONF, CONFIG_KEY_CHECKPOINTER
from langgraph.graph.message import REMOVE_ALL_MESSAGES
from langgraph.prebuilt.tool_node import ToolInvocationError
from langgraph.types import Command
from pydantic import BaseModel, Field, ValidationError, WithJsonSchema, create_model, field_validator, model_validator
from pydantic_core import ErrorDetails

from subagents import AnySpec, SpecError, SubagentSpec, TaskOutcome
from subagents._boundary import DELEGATION_TOOL_TAG, annotations_of, graph_namespace, parent_channels, write_back
from subagents._errors import is_real_cancellation, safe_text
from subagents._ledger import LedgerChannel, merge_records
from subagents._outcome import add_usage, refused_record, shows_something
from subagents._registry import DYNAMIC_SUBAGENTS_KEY

PREVIEW_CHARS = 200  # the longest description and result a ledger record keeps
ERROR_PREVIEW_CHARS = 1000  # the longest error (errors are rarer and worth more words)


def clip(text: str, limit: int) -> str:
    """``text`` when it fits in ``limit`` characters, else its start and ``…`` (``limit`` in all)."""
    return text if len(text) <= limit else text[: max(0, limit - 1)] + "…"


def ledger_entry(record: Mapping[str, object]) -> dict[str, object]:
    """The compact record the ledger keeps: long texts become previews with their full lengths."""
    entry = dict(record)
    for key, limit in (("description", PREVIEW_CHARS), ("result", PREVIEW_CHARS), ("error", ERROR_PREVIEW_CHARS)):
        text, length_key = entry.get(key), f"{key}_chars"
        if not isinstance(text, str):
            entry.setdefault(length_key, None)
        elif not (isinstance(entry.get(length_key), int) and len(text) <= limit):
            entry[length_key] = len(text)  # a record already compact keeps the full length it recorded
            entry[key] = clip(text, limit)
    return entry


# -- The parent state the delegation middlewares own: the ledgers (task id -> compact record, in a LedgerChannel)
# and ``subagent_usage``. A reducer returns a new dict: LangGraph hands one object to copies and stream consumers.

LEDGER_KEY = "subagent_tasks"
ASYNC_LEDGER_KEY = "async_tasks"
USAGE_KEY = "subagent_usage"
TASK_TOOL_NAME = "task"

EXCLUDED_STATE_KEYS: frozenset[str] = frozenset(
    {"messages", "todos", "structured_response", "jump_to", "skills_metadata",
     LEDGER_KEY, ASYNC_LEDGER_KEY, USAGE_KEY, DYNAMIC_SUBAGENTS_KEY}
)
"""Keys that never cross the boundary, whichever way: each belongs to one agent."""


class SubagentLedgerState(AgentState):
    """Parent state with the ledger of synchronous delegations and their usage rollup."""

    subagent_tasks: NotRequired[Annotated[dict[str, dict[str, Any]], LedgerChannel(dict, merge_records)]]
    subagent_usage: NotRequired[Annotated[dict[str, Any], add_usage]]


def check_ledger_fields(state_schema: object, argument: str) -> None:
    """Refuse a ``state_schema`` declaring a ledger key with another channel (its annotation would win, and a
    plain reducer reads a ledger stored as deltas wrong)."""
    try:
        hints = typing.get_type_hints(state_schema, include_extras=True) if state_schema is not None else {}
    except Exception:  # a schema we cannot read is create_agent's to judge
        return
    for key in (LEDGER_KEY, ASYNC_LEDGER_KEY):
        if key in hints and not any(isinstance(m, LedgerChannel) for m in annotations_of(hints[key])):
            raise SpecError(
                f"{argument}: field {key!r} is the delegation ledger; leave it out (the middleware declares "
                f"it) or annotate it with subagents.LedgerChannel, e.g. "
                f"Annotated[dict[str, dict], LedgerChannel(dict, merge_records)]"
            )


def tool_message(agent_type: str, tool_call_id: str | None, *, answer: str | None,
                 error: str | None, tool_name: str = TASK_TOOL_NAME) -> ToolMessage:
    """The one message the parent sees: the answer, or ``Subagent '<name>' failed: <reason>``."""
    failed = error is not None
    return ToolMessage(content=f"Subagent '{agent_type}' failed: {error}" if failed else (answer or ""),
                       tool_call_id=tool_call_id or "", name=tool_name, status="error" if failed else "success")


def answered_response(response: ModelCallResult[ResponseT], tool_names: Collection[str], ledger_key: str,
                      as_record: Callable[[dict[str, object]], dict[str, object]] = dict) -> ModelCallResult[ResponseT]:
    """A model response with its invalid calls to ``tool_names`` (left there, the loop would end silently) made
    regular calls answered at once by an error ``ToolMessage``, so the model can retry; records under ``ledger_key``."""
    if not isinstance(response, ModelResponse) or not response.result or not isinstance(response.result[0], AIMessage):
        return response
    result, message, structured = response.result, response.result[0], response.structured_response
    if not message.tool_calls and not message.invalid_tool_calls:  # an answer, most calls: nothing to check
        return response
    bad = [c for c in (message.invalid_tool_calls or []) if c.get("name") in tool_names]
    seen: set[str | None] = set()
    renamed = set()  # calls to tool_names with no id, or with one an earlier call of the message has
    for index, call in enumerate(message.tool_calls):
        if call.get("name") in tool_names and (not call.get("id") or call.get("id") in seen):
            renamed.add(index)
        seen.add(call.get("id"))
    if renamed:
        # Some servers send no call id, or number ids per message and repeat them: the tool node needs
        # one per call to answer it, and a call must be told from its siblings (caps, write-backs).
        message = message.model_copy(update={"tool_calls": [
            {**c, "id": f"call_{uuid.uuid4().hex[:16]}"} if i in renamed else c
            for i, c in enumerate(message.tool_calls)]})
    if not bad:
        return ModelResponse(result=[message, *result[1:]], structured_response=structured) if renamed else response
    kept = [c for c in message.invalid_tool_calls if c not in bad]
    calls, answers, ledger = list(message.tool_calls), [], {}
    taken = {c.get("id") for c in calls} | {c.get("id") for c in kept}
    for invalid in bad:
        # Its answer must answer it alone: an id a valid call shares would answer (and drop) that call too.
        call_id = invalid.get("id")
        if not call_id or call_id in taken:
            call_id = f"call_invalid_{uuid.uuid4().hex[:12]}"
        taken.add(call_id)
        name = str(invalid.get("name"))
        reason = (f"the arguments of this '{name}' call could not be read "
                  f"({safe_text(invalid.get('error') or 'not valid JSON', 300)}); "
                  f"call it again with valid JSON arguments. Received: {safe_text(invalid.get('args'), 300)}")
        calls.append({"name": name, "args": {}, "id": call_id, "type": "tool_call"})
        answers.append(ToolMessage(content=f"Invalid call: {reason}", tool_call_id=call_id, name=name, status="error"))
        record = invalid_call_record(name, call_id, reason)
        ledger[record["id"]] = as_record(record)
    fixed = message.model_copy(update={"tool_calls": calls, "invalid_tool_calls": kept})
    return ExtendedModelResponse(model_response=ModelResponse(result=[fixed, *answers, *result[1:]],
                                                              structured_response=structured),
                                 command=Command(update={ledger_key: ledger}))


def invalid_call_record(tool_name: str, tool_call_id: str, reason: str,
                        agent_type: str | None = None) -> dict[str, object]:
    """The ledger record of a delegation call that never ran because its arguments were wrong."""
    # A fresh id, never the call id's alone (models reuse those).
    return refused_record(uuid.uuid4().hex, agent_type or "(unknown)", tool_call_id, f"(invalid {tool_name} call)",
                          reason, "invalid_call")


def as_background_record(record: dict[str, object]) -> dict[str, object]:
    """A refused background-tool call's record (:func:`refused_record`), in the ``async_tasks`` ledger's shape."""
    return {
        "id": record["id"], "agent_type": record["agent_type"], "runner": "local", "status": "error",
        "stop_reason": record["stop_reason"], "description": record["description"], "transcript": record["transcript"],
        "tool_call_id": record["tool_call_id"], "created_at": record["started_at"],
        "updated_at": record["finished_at"], "finished_at": record["finished_at"],
        "error": record["error"], "announced": True, "attempt": 1,
    }


# -- Calls a stopped run left open (providers reject such a history; a delegation would have no record): each
# middleware answers its own on the next turn, after the message that made each (``add_messages`` cannot insert).

LOST_REASON = ("lost: the run stopped (it was interrupted, or its process ended) before this call "
               "was answered, and nothing of its result was kept. Call it again if it is still needed.")


def open_calls(messages: Sequence[Any]) -> list[ToolCall]:
    """Unanswered tool calls of the last assistant message before the user's last message(s) (one turn's cost)."""
    index = len(messages) - 1
    while index >= 0 and not isinstance(messages[index], HumanMessage):
        index -= 1
    while index >= 0 and isinstance(messages[index], HumanMessage):  # the new turn may bring several
        index -= 1
    answered: set[str] = set()
    while index >= 0 and isinstance(messages[index], ToolMessage):
        answered.add(messages[index].tool_call_id)
        index -= 1
    if index < 0 or not isinstance(messages[index], AIMessage):
        return []
    # A call without an id cannot be answered (a tool result names its call): providers reject it either way.
    return [c for c in messages[index].tool_calls if c.get("id") and c.get("id") not in answered]


def lost_answer(call: Mapping[str, object], text: str = LOST_REASON) -> ToolMessage:
    """The answer of a call the run never finished: an error result saying so."""
    return ToolMessage(content=text, tool_call_id=str(call.get("id") or ""), name=str(call.get("name") or ""),
                       status="error")


def with_answers(messages: Sequence[Any], answers: Mapping[str, ToolMessage]) -> list[Any]:
    """The update that puts each answer right after the answers its assistant message already has."""
    out: list[Any] = [RemoveMessage(id=REMOVE_ALL_MESSAGES)]
    pending: list[ToolMessage] = []
    for message in messages:
        if pending and not isinstance(message, ToolMessage):
            out.extend(pending)
            pending = []
        out.append(message)
        if isinstance(message, AIMessage):
            pending = [answers[str(c["id"])] for c in message.tool_calls if c.get("id") in answers]
    out.extend(pending)
    return out


_GROUPS_KEPT = 256

StoredWrites = Sequence[tuple[str, str, object]]  # the step's pending writes: (task id, channel, value)


class SiblingWrites:
    """Per model message, per tool call: the deltas its ``task`` calls have written back so far. Each write is tried
    on top of its siblings' (never its own earlier one: a replayed step), so no combination can fail the step; with
    a checkpointer, siblings' are read from the step's pending writes too (a step resumed in another process)."""

    def __init__(self) -> None:
        self._groups: collections.OrderedDict[str, dict[str, dict[str, Any]]] = collections.OrderedDict()
        self._lock = threading.Lock()

    def stored(self, runtime: ToolRuntime, outcome: TaskOutcome) -> Generator[Any, Any, StoredWrites]:
        """The step's pending writes, if this outcome has changes to try against siblings': a plan whose one step
        reads the checkpoint this step runs from (a function, its async twin, its argument)."""
        if not outcome.changes:
            return ()
        saver = ((runtime.config or {}).get(CONF) or {}).get(CONFIG_KEY_CHECKPOINTER)
        info = runtime.execution_info
        if saver is None or info is None or not _group_of(runtime.state, runtime.tool_call_id)[1]:
            return ()
        where = {CONF: {"thread_id": info.thread_id, "checkpoint_id": info.checkpoint_id,
                        "checkpoint_ns": graph_namespace(info.checkpoint_ns, info.task_id)}}
        try:
            writes = getattr((yield saver.get_tuple, saver.aget_tuple, where), "pending_writes", None) or ()
            return tuple(w for w in writes if isinstance(w, tuple) and len(w) == 3)  # others are not siblings'
        except BaseException as exc:  # noqa: BLE001 - unreadable: the siblings known in this process still count
            if is_real_cancellation(exc):
                raise
            return ()

    def apply(self, runtime: ToolRuntime, outcome: TaskOutcome,
              stored: StoredWrites = ()) -> tuple[dict[str, Any], dict[str, str]]:
        """``(update, skipped)`` for this outcome; never raises (bar real cancellation)."""
        try:
            call_id = str(runtime.tool_call_id)
            group, parallel = _group_of(runtime.state, runtime.tool_call_id)
            config = runtime.config or {}
            checkpointed = (config.get(CONF) or {}).get(CONFIG_KEY_CHECKPOINTER) is not None
            with self._lock:
                earlier: dict[str, list[object]] = {}
                known = self._groups.get(group, {}) if group else {}
                for other, writes in known.items():
                    if other != call_id:
                        for key, value in writes.items():
                            earlier.setdefault(key, []).append(value)
                own_task = runtime.execution_info.task_id if runtime.execution_info else None
                for key, value in _unseen(stored, {call_id, *known}, own_task, outcome.changes):
                    earlier.setdefault(key, []).append(value)
                update, skipped = write_back(outcome.changes, outcome.inputs, parent_channels(config),
                                             parallel=parallel, earlier=earlier, checkpointed=checkpointed)
                if group and parallel:
                    self._groups.setdefault(group, {})[call_id] = dict(update)
                    self._groups.move_to_end(group)
                    while len(self._groups) > _GROUPS_KEPT:
                        self._groups.popitem(last=False)
            return update, skipped
        except BaseException as exc:  # noqa: BLE001 - the parent's step must not fail over a write-back
            if is_real_cancellation(exc):
                raise
            why = f"could not be written back ({type(exc).__name__})"
            return {}, {safe_text(key, 200): why for key in list(outcome.changes)[:100]}


def _unseen(stored: StoredWrites, counted: set[str], own_task: str | None,
            keys: Mapping[str, object]) -> list[tuple[str, object]]:
    """``(key, value)`` that sibling tasks stored for ``keys``, but not those of calls already ``counted``."""
    calls: dict[str, str | None] = {}
    for task, channel, value in stored:
        if channel == "messages":
            for message in value if isinstance(value, list) else [value]:
                if isinstance(message, ToolMessage):
                    calls[task] = message.tool_call_id
    return [(channel, value) for task, channel, value in stored
            if channel in keys and task != own_task and calls.get(task) not in counted]


def _group_of(state: Mapping[str, Any], tool_call_id: str | None) -> tuple[str | None, bool]:
    """The model message that made this call (its id, or its call ids), and whether it made others."""
    for message in reversed(state.get("messages") or ()):
        if isinstance(message, AIMessage) and any(c.get("id") == tool_call_id for c in message.tool_calls):
            group = message.id or "|".join(str(c.get("id")) for c in message.tool_calls)
            return group, len(message.tool_calls) > 1
    return None, True  # unknown: assume siblings, the safe side


GENERAL_PURPOSE_NAME = "general-purpose"

GENERAL_PURPOSE_DESCRIPTION = ("General-purpose agent for researching complex questions, searching for "
                               "information and carrying out multi-step tasks. It has the same tools as you.")

GENERAL_PURPOSE_PROMPT = """You are a subagent working on one task handed to you by another agent.

Complete the task with the tools you have. You cannot delegate: do the work yourself.
The caller sees only your final message, not your intermediate steps or tool results,
so make your final message a complete, self-contained answer to the task."""

TASK_TOOL_DESCRIPTION = """Delegate a task to a subagent that works in a fresh, isolated context.

The subagent sees only `description`, never this conversation: put every instruction,
all the context it needs and the form of the answer you want in `description`.
It returns one final answer. Choose `subagent_type` from the agents listed in
<available_agents> in your instructions. Independent tasks can run in parallel:
call this tool several times in one message."""

DELEGATION_INSTRUCTIONS = """You can delegate work to the subagents below with the `task` tool.
Each works in its own clean context and returns only its final answer."""


def available_agents_block(agents: Iterable[tuple[str, str]]) -> str:
    """The ``<available_agents>`` block, one line per agent, escaped: no description can end the block early."""
    rows = [f"- {escape(name)}: {escape(' '.join(description.split()))}" for name, description in agents]
    return "" if not rows else "<available_agents>\n" + "\n".join(rows) + "\n</available_agents>"


def with_general_purpose(specs: list[AnySpec], enabled: bool, *, taken: Iterable[str] = (),
                         middleware: Sequence[Any] = ()) -> list[AnySpec]:
    """``specs`` with ``general-purpose`` first (under ``middleware``), unless off or its name is taken."""
    if not enabled or GENERAL_PURPOSE_NAME in {*taken, *(s.name for s in specs)}:
        return specs
    general = SubagentSpec(name=GENERAL_PURPOSE_NAME, description=GENERAL_PURPOSE_DESCRIPTION,
                           system_prompt=GENERAL_PURPOSE_PROMPT, middleware=middleware)
    return [general, *specs]


# The tool node validates arguments after injecting these (so no `extra="forbid"`); never shown to the model.
_INJECTED = frozenset({"runtime"})
SUBAGENT_TYPE_DESCRIPTION = "The name of the subagent to use, from <available_agents>."


class ClosedArguments(BaseModel):
    """A delegation tool's arguments: an invented key is refused, with ``unknown_hint`` saying what to do instead."""

    unknown_hint: ClassVar[str] = "give only the arguments the tool lists"

    @model_validator(mode="before")
    @classmethod
    def _reject_unknown_keys(cls, data: Any) -> Any:
        if isinstance(data, dict):
            unknown = sorted(set(map(str, data)) - set(cls.model_fields) - _INJECTED)
            if unknown:
                raise ValidationError.from_exception_data(cls.__name__, [
                    {"type": "value_error", "loc": (key,), "input": data[key],
                     "ctx": {"error": ValueError(f"unexpected argument {key!r}; {cls.unknown_hint}")}}
                    for key in unknown])
        return data


class TaskToolInput(ClosedArguments):
    """Arguments of the ``task`` tool; an invented key (``prompt``) is refused, so a child never runs on a label."""

    unknown_hint = "put all instructions for the subagent in `description`"
    description: str = Field(description="The complete task for the subagent: every instruction, the context it "
                             "needs, and the form of the answer to return. The subagent sees nothing else.")
    subagent_type: str = Field(description=SUBAGENT_TYPE_DESCRIPTION)

    @field_validator("description")
    @classmethod
    def _not_blank(cls, value: str) -> str:
        # A child started on nothing would answer something: an invalid call, so the model retries. Invisible
        # characters (a zero-width space, a byte-order mark, a NUL, a variation selector) are nothing too.
        if not shows_something(value):
            raise ValueError("`description` is empty; write the complete task for the subagent in it")
        return value


ENUM_LIMIT = 25  # the most agent names the task tool's schema lists as an enum (name_enum=True); past it, none


def task_args_schema(names: Sequence[str], base: type[TaskToolInput] = TaskToolInput, *,
                     enum_limit: int | None = ENUM_LIMIT) -> type[TaskToolInput]:
    """``base`` with ``subagent_type`` listing ``names`` as a JSON-schema enum (validation accepts any string);
    with no names, or more than ``enum_limit`` (``None``: no limit; providers cap enums), ``base`` itself."""
    names = list(dict.fromkeys(str(n) for n in names))
    if not names or (enum_limit is not None and len(names) > enum_limit):
        return base
    enum_type: Any = Annotated[str, WithJsonSchema({"type": "string", "enum": names})]
    # The enum lives in the annotation, so that LangChain's copy of the schema (``tool_call_schema``) keeps it.
    return create_model(base.__name__, __base__=base, __doc__=base.__doc__,
                        subagent_type=(enum_type, Field(description=SUBAGENT_TYPE_DESCRIPTION)))


def task_call_json_schema(names: Sequence[str], *, description_max_chars: int | None = None) -> dict[str, Any]:
    """One ``task`` call's arguments as a closed JSON schema, ``subagent_type`` first: a ``response_format``."""
    schema = task_args_schema(names, enum_limit=None).model_json_schema()
    found = {key: {k: v for k, v in value.items() if k != "title"} for key, value in schema["properties"].items()}
    # The agent first: a reply cut at a token limit then loses only the end of the description.
    properties = {key: found[key] for key in sorted(found, key=lambda k: k != "subagent_type")}
    if "description" in properties:
        if description_max_chars is not None:
            properties["description"]["maxLength"] = description_max_chars
        properties["description"]["minLength"] = 1  # a grammar built from it cannot write an empty task
    return {"type": "object", "properties": properties, "required": list(properties), "additionalProperties": False}


class TaskToolInputWithSchema(TaskToolInput):
    """Arguments of the ``task`` tool, with a per-call output schema (``structured_results=True``)."""

    output_schema: dict[str, Any] | None = Field(default=None, description=(
        "Optional. A JSON Schema object (\"type\": \"object\") the subagent's answer must "
        "match, for this call only; you receive the answer as JSON. Omit for a text answer."))


STRUCTURED_TASK_TOOL_DESCRIPTION = (TASK_TOOL_DESCRIPTION + "\nTo get a typed answer, pass `output_schema` (a JSON "
                                    "Schema object); the answer comes back as JSON matching it, or as an error "
                                    "naming what did not match.")


def task_tool_description(template: str | None, agents: Iterable[tuple[str, str]]) -> str:
    """Ours (naming no agent), or ``template`` with ``{available_agents}`` made one ``- name: description`` a line."""
    if template is None:
        return TASK_TOOL_DESCRIPTION
    if not isinstance(template, str) or not template.strip():
        raise SpecError(f"task_description: expected non-empty text, got {template!r}")
    listing = "\n".join(f"- {name}: {description}" for name, description in agents)
    return template.replace("{available_agents}", listing)


try:
    from langgraph.errors import is_invalid_resume
except ImportError:  # a langgraph without `interrupt(response_schema=...)` raises no such error
    def is_invalid_resume(error: BaseException) -> bool:
        return False

MAX_ARGUMENT_DEPTH = 200  # deeper arguments are refused before LangChain reads them (its str() of them recurses)


class RecordedTool(StructuredTool):
    """A ``StructuredTool`` whose calls with invalid arguments return the tool node's error and a ledger record
    (inside the tool: LangChain runs a ``wrap_tool_call`` hook around every tool call of the parent)."""

    def invoke(self, input: Any, config: RunnableConfig | None = None, **kwargs: Any) -> Any:
        try:
            return self._too_deep(input) or super().invoke(input, config, **kwargs)
        except ValidationError as exc:
            return self._invalid(input, exc)

    async def ainvoke(self, input: Any, config: RunnableConfig | None = None, **kwargs: Any) -> Any:
        try:
            return self._too_deep(input) or await super().ainvoke(input, config, **kwargs)
        except ValidationError as exc:
            return self._invalid(input, exc)

    def _too_deep(self, call: Any) -> Command[str] | None:
        """The answer to a model's call whose arguments nest deeper than :data:`MAX_ARGUMENT_DEPTH`, if it is one."""
        level, depth = [call.get("args") if _model_call(call) else None], 1  # level by level: no recursion to exhaust
        while nested := [item for item in level if isinstance(item, (dict, list, tuple))]:
            if depth > MAX_ARGUMENT_DEPTH:
                return self._refused(call, f"Error invoking tool '{self.name}': its arguments are nested more than "
                                     f"{MAX_ARGUMENT_DEPTH} levels deep. Call it again with plain arguments.")
            level = [child for item in nested for child in (item.values() if isinstance(item, dict) else item)]
            depth += 1
        return None

    def _invalid(self, call: Any, exc: ValidationError) -> Command[str]:
        """The tool node's own answer to these arguments, with this call's ledger record."""
        if is_invalid_resume(exc) or not _model_call(call):
            raise exc  # not bad arguments from a model's tool call: the caller's to handle
        try:
            def without_injected(value: Any) -> Any:
                return {k: v for k, v in value.items() if k not in _INJECTED} if isinstance(value, dict) else value

            raw = call.get("args")
            args = without_injected(raw) if isinstance(raw, dict) else {}
            errors = [cast(ErrorDetails, {**e, "input": without_injected(e.get("input"))}) for e in exc.errors()
                      if not (e.get("loc") and e["loc"][0] in _INJECTED)]
            agent = args.get("subagent_type") if isinstance(args.get("subagent_type"), str) else None
            return self._refused(call, ToolInvocationError(self.name, exc, args, errors).message, agent)
        except Exception:  # noqa: BLE001 - the failure path must not fail: the tool node answers it, unrecorded
            raise exc from None

    def _refused(self, call: dict[str, Any], content: str, agent: str | None = None) -> Command[str]:
        message = ToolMessage(content=content, tool_call_id=call["id"], name=self.name, status="error")
        record = invalid_call_record(self.name, call["id"], safe_text(content), agent)
        return Command(update={**self._recorded(record), "messages": [message]})

    def _recorded(self, record: dict[str, object]) -> dict[str, object]:
        """The ledger update of a call that never ran: ``task``'s ledger (a background start has its own)."""
        return {LEDGER_KEY: {record["id"]: ledger_entry(record)}}


def _model_call(call: object) -> bool:
    return isinstance(call, dict) and call.get("type") == "tool_call" and bool(call.get("id"))


def delegation_tool(func: Callable[..., Any], coroutine: Callable[..., Awaitable[Any]], name: str, description: str,
                    args_schema: type[BaseModel]) -> RecordedTool:
    """A delegation tool (``task``, ``create_subagent``): a :class:`RecordedTool` tagged so no child holds it."""
    return cast(RecordedTool, RecordedTool.from_function(
        func=func, coroutine=coroutine, name=name, description=description, args_schema=args_schema,
        infer_schema=False, metadata={DELEGATION_TOOL_TAG: True}))


def outcome_command(runtime: ToolRuntime, outcome: TaskOutcome, writes: SiblingWrites,
                    stored: StoredWrites = ()) -> Command[str]:
    """The outcome as the parent's state update: write-back, record, usage, one ``ToolMessage``."""
    record, update = outcome.record, dict[str, Any]()
    if outcome.changes:
        update, skipped = writes.apply(runtime, outcome, stored)
        if skipped:
            record = {**record, "skipped_writes": skipped}
    ours = {
        LEDGER_KEY: {record["id"]: ledger_entry(record)},
        USAGE_KEY: {**{k: record.get(k, 0) for k in ("model_calls", "input_tokens", "output_tokens", "cost_usd")},
                    "tasks": 1},
        "messages": [tool_message(record["agent_type"], runtime.tool_call_id,
                                  answer=outcome.answer, error=outcome.error)],
    }
    return Command(update={**update, **ours})
