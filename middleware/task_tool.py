"""The ``task`` tool's type: a call whose arguments do not validate answers with a record.

LangGraph's tool node answers a call whose arguments fail the tool's schema
with an error ``ToolMessage`` (``Error invoking tool 'task' with kwargs ...
Please fix the error and try again.``), so the model can retry. A delegation
must also leave a ledger record (``stop_reason="invalid_call"``), which only
a state update carries. :class:`RecordedTool` turns that validation error
into the same message plus the record, inside the tool itself: a
``wrap_tool_call`` hook would do it too, but LangChain runs every such hook
(in a LangSmith span) around every tool call of the parent, not just
``task``'s. A ``task`` call another middleware answers without calling the
tool (a human's rejection, a tool-call limit, a policy) gets that
middleware's answer and no record: no delegation was attempted.

Example::

    tool = RecordedTool.from_function(func=task, coroutine=atask, name="task", args_schema=TaskToolInput,
                                      infer_schema=False)
    tool.invoke({"name": "task", "args": {}, "id": "call_1", "type": "tool_call"})  # a Command
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Annotated, Any, cast
from xml.sax.saxutils import escape

from langchain.agents.middleware import ModelRequest
from langchain_core.messages import SystemMessage, ToolMessage
from langchain_core.runnables import RunnableConfig
from langchain_core.tools import StructuredTool
from langgraph.prebuilt.tool_node import ToolInvocationError
from langgraph.types import Command
from pydantic import BaseModel, Field, ValidationError, WithJsonSchema, create_model, model_validator
from pydantic_core import ErrorDetails

from middleware.state import LEDGER_KEY, invalid_call_record, ledger_entry
from subagents import SubagentSpec
from subagents.errors import safe_text

# ----------------------------------------------------------------------------
# The words the parent and the general-purpose child are given.
# ----------------------------------------------------------------------------



GENERAL_PURPOSE_NAME = "general-purpose"

GENERAL_PURPOSE_DESCRIPTION = (
    "General-purpose agent for researching complex questions, searching for "
    "information and carrying out multi-step tasks. It has the same tools as you."
)

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
    """The ``<available_agents>`` block: one ``- name: description`` line per agent.

    Descriptions are folded onto one line and ``<``/``>``/``&`` escaped, so no
    description can end the block early; the format costs a few characters
    per agent, which matters with large registries.
    """
    rows = [f"- {escape(name)}: {escape(' '.join(description.split()))}" for name, description in agents]
    if not rows:
        return ""
    return "<available_agents>\n" + "\n".join(rows) + "\n</available_agents>"


def with_text_appended(system: SystemMessage | str | None, text: str) -> SystemMessage:
    """``system`` with ``text`` after it, keeping every content block the caller gave.

    A plain-text system message stays plain text (some OpenAI-compatible
    servers take only strings); one made of content blocks keeps them, with
    their provider fields such as Anthropic's ``cache_control``, and gains a
    text block at the end, as LangChain's own ``TodoListMiddleware`` does.
    """
    if system is None or system == "":
        return SystemMessage(content=text)
    if isinstance(system, str):
        return SystemMessage(content=f"{system}\n\n{text}")
    if isinstance(system.content, str):
        return system.model_copy(update={"content": f"{system.content}\n\n{text}" if system.content else text})
    blocks: list[str | dict[str, Any]] = [*system.content, {"type": "text", "text": f"\n\n{text}"}]
    return system.model_copy(update={"content": blocks})


def with_prompt_block(request: ModelRequest, block: str) -> ModelRequest:
    """The model request with ``block`` appended to its system message (see :func:`with_text_appended`)."""
    if not block:
        return request
    return request.override(system_message=with_text_appended(request.system_message, block))


def with_general_purpose(specs: list[Any], enabled: bool, *, taken: Iterable[str] = ()) -> list[Any]:
    """``specs`` with the ``general-purpose`` subagent first, unless off or a spec (or ``taken``) has its name."""
    if not enabled or GENERAL_PURPOSE_NAME in {*taken, *(s.name for s in specs)}:
        return specs
    general = SubagentSpec(name=GENERAL_PURPOSE_NAME, description=GENERAL_PURPOSE_DESCRIPTION,
                           system_prompt=GENERAL_PURPOSE_PROMPT)
    return [general, *specs]


# ----------------------------------------------------------------------------
# The ``task`` tool's argument schema.
#
# Models sometimes put the real instructions under an invented key (``prompt``,
# ``instructions``) and leave a label in ``description``. Such calls are
# rejected, so the model is told to retry instead of a child running on the
# label alone.
# ----------------------------------------------------------------------------



# The tool node validates the arguments after injecting these, so
# `extra="forbid"` cannot be used.
_INJECTED_ARGS = frozenset({"runtime"})


class TaskToolInput(BaseModel):
    """Arguments of the ``task`` tool."""

    description: str = Field(
        description=(
            "The complete task for the subagent: every instruction, the context it needs, "
            "and the form of the answer to return. The subagent sees nothing else."
        )
    )
    subagent_type: str = Field(
        description="The name of the subagent to use, from <available_agents>."
    )

    @model_validator(mode="before")
    @classmethod
    def _reject_unknown_keys(cls, data: Any) -> Any:
        if isinstance(data, dict):
            unknown = sorted(set(map(str, data)) - set(cls.model_fields) - _INJECTED_ARGS)
            if unknown:
                raise ValidationError.from_exception_data(
                    cls.__name__,
                    [
                        {
                            "type": "value_error",
                            "loc": (key,),
                            "input": data[key],
                            "ctx": {
                                "error": ValueError(
                                    f"unexpected argument {key!r}; put all instructions "
                                    "for the subagent in `description`"
                                )
                            },
                        }
                        for key in unknown
                    ],
                )
        return data


# ----------------------------------------------------------------------------
# The ``task`` tool's argument schema for a given list of subagents.
#
# ``subagent_type`` is advertised as an ``enum`` of the agent names in the
# tool's JSON schema, so providers that constrain generation to the schema
# (llama.cpp's grammars, OpenAI's strict mode) can only produce a valid name.
# Validation still accepts any string: a provider that ignores enums gets the
# registry's readable "unknown subagent" error, which lists the valid names,
# instead of a bare validation error.
#
# Past :data:`ENUM_LIMIT` names the tool schema carries no enum (and the
# tool description no list of names): a registry that large is listed once,
# in the system prompt's ``<available_agents>`` block, so the parent does not
# pay for every name three times on every call (providers also cap enum
# sizes in strict schemas). The forced-delegation schema keeps its enum.
#
# Example::
#
#     schema = task_args_schema(["general-purpose", "researcher"])
#     schema.model_json_schema()["properties"]["subagent_type"]["enum"]
#     # ['general-purpose', 'researcher']
# ----------------------------------------------------------------------------



SUBAGENT_TYPE_DESCRIPTION = "The name of the subagent to use, from <available_agents>."

ENUM_LIMIT = 100
"""Most agent names the ``task`` tool's schema lists as an enum; past it, none."""


def task_args_schema(names: Sequence[str], base: type[TaskToolInput] = TaskToolInput, *,
                     enum_limit: int | None = ENUM_LIMIT) -> type[TaskToolInput]:
    """``base`` (a :class:`TaskToolInput`) with ``subagent_type`` listing ``names`` as its enum.

    With no names, or more than ``enum_limit`` (``None``: no limit), ``base``
    itself (any string).
    """
    names = list(dict.fromkeys(str(n) for n in names))
    if not names or (enum_limit is not None and len(names) > enum_limit):
        return base
    enum_type: Any = Annotated[str, WithJsonSchema({"type": "string", "enum": names})]
    return create_model(
        base.__name__,
        __base__=base,
        __doc__=base.__doc__,
        # The enum lives in the annotation so that LangChain's copy of the
        # schema for the model (``tool_call_schema``) keeps it.
        subagent_type=(enum_type, Field(description=SUBAGENT_TYPE_DESCRIPTION)),
    )


def task_call_json_schema(names: Sequence[str], *, description_max_chars: int | None = None) -> dict[str, Any]:
    """The JSON schema of one ``task`` call's arguments, closed to other keys.

    ``subagent_type`` comes first; ``description_max_chars`` bounds the
    description (``maxLength``).

    Used as a ``response_format`` when a server constrains output to a
    schema but ignores ``tool_choice``.
    """
    schema = task_args_schema(names, enum_limit=None).model_json_schema()
    found = {
        key: {k: v for k, v in value.items() if k != "title"}
        for key, value in schema.get("properties", {}).items()
    }
    # The agent first: a reply cut short by a token limit then loses only
    # the end of the description, which can be closed and used.
    properties = {key: found[key] for key in sorted(found, key=lambda k: k != "subagent_type")}
    if description_max_chars is not None and "description" in properties:
        properties["description"]["maxLength"] = description_max_chars
    return {
        "type": "object",
        "properties": properties,
        "required": list(properties),
        "additionalProperties": False,
    }


# ----------------------------------------------------------------------------
# The ``task`` tool's arguments with a per-call ``output_schema`` (``structured_results=True``).
#
# ``task`` stays ``(description, subagent_type)`` by default. With
# ``SubAgentMiddleware(structured_results=True)`` it also accepts an optional
# ``output_schema``, a JSON Schema object the child's answer must match for
# that call only (see :mod:`subagents.builder`).
#
# Example::
#
#     task(description="Rate the plan", subagent_type="reviewer",
#          output_schema={"type": "object", "title": "Rating",
#                         "properties": {"score": {"type": "integer"}}, "required": ["score"]})
# ----------------------------------------------------------------------------



class TaskToolInputWithSchema(TaskToolInput):
    """Arguments of the ``task`` tool, with a per-call output schema."""

    output_schema: dict[str, Any] | None = Field(
        default=None,
        description=(
            "Optional. A JSON Schema object (\"type\": \"object\") the subagent's answer must "
            "match, for this call only; you receive the answer as JSON. Omit for a text answer."
        ),
    )


STRUCTURED_TASK_TOOL_DESCRIPTION = (
    TASK_TOOL_DESCRIPTION
    + "\nTo get a typed answer, pass `output_schema` (a JSON Schema object); the answer comes back "
    "as JSON matching it, or as an error naming what did not match."
)


def task_tool_arguments(structured_results: bool) -> tuple[type[TaskToolInput], str]:
    """The ``task`` tool's argument schema and description."""
    if structured_results:
        return TaskToolInputWithSchema, STRUCTURED_TASK_TOOL_DESCRIPTION
    return TaskToolInput, TASK_TOOL_DESCRIPTION


# ----------------------------------------------------------------------------
# The ``task`` tool's description: ours, or the caller's template.
#
# By default the description names the available subagent types (names
# only: the full listing with descriptions is in the system prompt's
# ``<available_agents>`` block and is not paid for twice); past
# :data:`~middleware.task_tool.ENUM_LIMIT` agents it names none, and
# the block is the one listing. A caller's
# ``task_description`` replaces it; an ``{available_agents}`` placeholder in
# it becomes the full listing, one ``- name: description`` line per agent, as
# in deepagents. Other braces are left as written.
#
# Example::
#
#     task_tool_description("Delegate.\n{available_agents}", [("researcher", "Finds facts.")])
#     # 'Delegate.\n- researcher: Finds facts.'
# ----------------------------------------------------------------------------



PLACEHOLDER = "{available_agents}"


def task_tool_description(template: str | None, agents: Iterable[tuple[str, str]]) -> str:
    """The description for ``agents`` (``(name, description)`` pairs)."""
    agents = list(agents)
    if template is None:
        if len(agents) > ENUM_LIMIT:
            return TASK_TOOL_DESCRIPTION
        names = ", ".join(name for name, _ in agents)
        return f"{TASK_TOOL_DESCRIPTION}\n\nAvailable subagent types: {names}."
    if not isinstance(template, str) or not template.strip():
        raise ValueError(f"task_description: expected non-empty text, got {template!r}")
    listing = "\n".join(f"- {name}: {description}" for name, description in agents)
    return template.replace(PLACEHOLDER, listing)


try:
    from langgraph.errors import is_invalid_resume
except ImportError:  # a langgraph without `interrupt(response_schema=...)` raises no such error
    def is_invalid_resume(error: BaseException) -> bool:
        return False

MAX_ARGUMENT_DEPTH = 200
"""Arguments nested deeper than this are refused before LangChain reads them (its ``str()`` of them recurses)."""

_INJECTED = frozenset({"runtime"})
"""Arguments the tool node adds to the model's: never shown back to the model as its own."""


class RecordedTool(StructuredTool):
    """A ``StructuredTool`` whose tool calls with invalid arguments return an error result and a record."""

    def invoke(self, input: Any, config: RunnableConfig | None = None, **kwargs: Any) -> Any:
        if (refused := self._too_deep(input)) is not None:
            return refused
        try:
            return super().invoke(input, config, **kwargs)
        except ValidationError as exc:
            return self._invalid(input, exc)

    async def ainvoke(self, input: Any, config: RunnableConfig | None = None, **kwargs: Any) -> Any:
        if (refused := self._too_deep(input)) is not None:
            return refused
        try:
            return await super().ainvoke(input, config, **kwargs)
        except ValidationError as exc:
            return self._invalid(input, exc)

    def _too_deep(self, call: Any) -> Command | None:
        """The answer to a model's call whose arguments nest deeper than :data:`MAX_ARGUMENT_DEPTH`, if it is one."""
        if not (isinstance(call, dict) and call.get("type") == "tool_call" and call.get("id")):
            return None
        if _depth_at_most(call.get("args"), MAX_ARGUMENT_DEPTH):
            return None
        reason = (f"Error invoking tool '{self.name}': its arguments are nested more than {MAX_ARGUMENT_DEPTH} "
                  "levels deep. Call it again with plain arguments.")
        message = ToolMessage(content=reason, tool_call_id=call["id"], name=self.name, status="error")
        record = invalid_call_record(self.name, call["id"], reason)
        return Command(update={LEDGER_KEY: {record["id"]: ledger_entry(record)}, "messages": [message]})

    def _invalid(self, call: Any, exc: ValidationError) -> Command:
        """The tool node's own answer to these arguments, with this call's ledger record."""
        if is_invalid_resume(exc) or not (isinstance(call, dict) and call.get("type") == "tool_call"
                                          and call.get("id")):
            raise exc  # not bad arguments from a model's tool call: the caller's to handle
        try:
            return self._answered(call, exc)
        except Exception:  # noqa: BLE001 - the failure path must not fail: the tool node answers it, unrecorded
            raise exc from None

    def _answered(self, call: dict[str, Any], exc: ValidationError) -> Command:
        raw = call.get("args")
        args = {k: v for k, v in raw.items() if k not in _INJECTED} if isinstance(raw, dict) else {}
        errors = [cast(ErrorDetails, {**e, "input": _without_injected(e.get("input"))}) for e in exc.errors()
                  if not (e.get("loc") and e["loc"][0] in _INJECTED)]
        message = ToolMessage(content=ToolInvocationError(self.name, exc, args, errors).message,
                              tool_call_id=call["id"], name=self.name, status="error")
        agent = args.get("subagent_type") if isinstance(args.get("subagent_type"), str) else None
        record = invalid_call_record(self.name, call["id"], safe_text(message.content), agent)
        return Command(update={LEDGER_KEY: {record["id"]: ledger_entry(record)}, "messages": [message]})


def _depth_at_most(value: Any, limit: int) -> bool:
    """Whether ``value``'s dicts and lists nest at most ``limit`` deep (iterative: no recursion to exhaust)."""
    stack = [(value, 1)]
    while stack:
        item, depth = stack.pop()
        if isinstance(item, dict):
            children: Any = item.values()
        elif isinstance(item, (list, tuple)):
            children = item
        else:
            continue
        if depth > limit:
            return False
        stack.extend((child, depth + 1) for child in children)
    return True


def _without_injected(value: Any) -> Any:
    return {k: v for k, v in value.items() if k not in _INJECTED} if isinstance(value, dict) else value
