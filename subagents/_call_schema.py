"""A typed result for one call: a per-call output schema for a built subagent.

Two ways in, one implementation:

* the ``task`` tool's optional ``output_schema`` argument (a JSON Schema
  object, offered when the middleware has ``structured_results=True``);
* the per-invocation config key deepagents uses,
  :data:`SUBAGENT_RESPONSE_FORMAT_CONFIG_KEY`, whose value is anything
  ``create_agent``'s ``response_format`` accepts (a JSON Schema dict, a
  pydantic model, a dataclass, a ``TypedDict``, a ``ToolStrategy`` ...) and
  applies to every ``task`` call of that run.

The argument wins over the config key; either wins over the spec's own
``response_format`` for that call only (a spec keeps its own otherwise).
The child answers through LangChain's structured output (``ToolStrategy``:
the schema is offered as a tool named after its ``title``); a JSON Schema is
validated with ``jsonschema``. An invalid answer is sent back for
:data:`OUTPUT_SCHEMA_RETRIES` more attempts, then the task fails with
:class:`OutputSchemaViolation`, naming the schema and the violation. A
compiled subagent's graph is fixed, so a per-call schema for one is refused.

The graph for each (subagent, schema) pair is built once and cached, keyed
by a hash of the schema, in a bounded cache per registry.

Example::

    agent.invoke(
        {"messages": [{"role": "user", "content": "Judge the plan"}]},
        {"configurable": {SUBAGENT_RESPONSE_FORMAT_CONFIG_KEY: Verdict}},
    )
"""

from __future__ import annotations

import copy
import dataclasses
import hashlib
import json
import re
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Any

from langchain.agents.middleware import AgentMiddleware, AgentState, ModelRequest, ModelResponse
from langchain.agents.structured_output import (
    MultipleStructuredOutputsError,
    ProviderStrategy,
    StructuredOutputValidationError,
    ToolStrategy,
)
from langchain_core.messages import BaseMessage, HumanMessage, ToolMessage
from langgraph.runtime import Runtime
from pydantic import RootModel, ValidationError, model_validator

from subagents._errors import SpecError
from subagents._one_level import FORBIDDEN_TOOL_NAMES

SUBAGENT_RESPONSE_FORMAT_CONFIG_KEY = "__deepagents_subagent_response_format"
"""``configurable`` key for a per-invocation response format (deepagents' spelling)."""

OUTPUT_SCHEMA_RETRIES = 2
"""Invalid structured answers sent back to the child before its task fails."""

MAX_SCHEMA_CHARS = 20_000
"""The largest ``output_schema`` accepted, as JSON."""

_MAX_VIOLATION_CHARS = 300
_RETRY_PREFIX = "Your answer does not match the required output schema: "
_RETRY_SUFFIX = "\nCall the output tool again with arguments that match the schema."
_TOOL_NAME = re.compile(r"[^A-Za-z0-9_-]+")


class OutputSchemaError(SpecError):
    """A per-call output schema or response format cannot be used; the message says why."""


class OutputSchemaViolation(Exception):
    """The child did not answer in the requested shape after its retries."""

    def __init__(self, schema_name: str, attempts: int, violation: str) -> None:
        self.schema_name = schema_name
        self.attempts = attempts
        self.violation = violation
        super().__init__(
            f"its answer did not match output schema {schema_name!r} after {attempts} "
            f"attempt{'s' if attempts != 1 else ''}: {violation}"
        )


@dataclasses.dataclass(frozen=True)
class CallFormat:
    """A per-call response format, ready to build a child with.

    Attributes:
        response_format: what the child is built with.
        key: a hashable cache key (a schema hash, or the object's identity).
        label: the schema's name, for records and errors.
        middleware: what the child gets besides (the retry limit), if anything.
    """

    response_format: Any
    key: tuple[str, Any]
    label: str
    middleware: tuple[Any, ...] = ()


def requested_format(output_schema: Any, parent_config: Mapping[str, Any]) -> Any:
    """The format one call asks for: its ``output_schema``, else the config key, else ``None``."""
    if output_schema is not None:
        return output_schema
    configurable = parent_config.get("configurable") if isinstance(parent_config, Mapping) else None
    if not isinstance(configurable, Mapping):
        return None
    return configurable.get(SUBAGENT_RESPONSE_FORMAT_CONFIG_KEY)


def call_format(requested: Any, *, retries: int = OUTPUT_SCHEMA_RETRIES) -> CallFormat:
    """Turn a requested format into a :class:`CallFormat`, or raise :class:`OutputSchemaError`."""
    if isinstance(requested, Mapping):
        return _json_schema_format(dict(requested), retries)
    if isinstance(requested, (ToolStrategy, ProviderStrategy)):
        # The caller chose its own strategy and error handling: used as given.
        label = getattr(getattr(requested, "schema", None), "__name__", type(requested).__name__)
        return CallFormat(requested, ("object", id(requested)), str(label))
    if isinstance(requested, type):
        name = requested.__name__
        limit = OutputRetryLimit(frozenset({name}), retries, name)
        try:
            strategy: ToolStrategy[Any] = ToolStrategy(requested, handle_errors=_retry_message)
        except Exception as exc:  # noqa: BLE001 - an unsupported type is the caller's input error
            raise OutputSchemaError(f"response format {name!r}: {exc}") from None
        return CallFormat(strategy, ("type", requested), name, (limit,))
    raise OutputSchemaError(
        "output_schema: expected a JSON Schema object, a pydantic model, a dataclass, a TypedDict "
        f"or a ToolStrategy, got {type(requested).__name__}"
    )


def _json_schema_format(schema: dict[str, Any], retries: int) -> CallFormat:
    import jsonschema

    try:
        text = json.dumps(schema, sort_keys=True)
    except (TypeError, ValueError) as exc:
        raise OutputSchemaError(f"output_schema: not JSON ({exc})") from None
    if len(text) > MAX_SCHEMA_CHARS:
        raise OutputSchemaError(
            f"output_schema: {len(text)} characters as JSON; at most {MAX_SCHEMA_CHARS} are accepted"
        )
    if schema.get("type", "object") != "object":  # tool arguments are always an object
        raise OutputSchemaError(
            'output_schema: must describe a JSON object (top-level "type": "object"), '
            f"got type {_clip(repr(schema.get('type')))}"
        )
    remote = _non_local_ref(schema)
    if remote is not None:
        raise OutputSchemaError(
            f"output_schema: only local $ref values (starting '#') are supported, got {_clip(repr(remote))}"
        )
    validator_class = jsonschema.validators.validator_for(schema)
    try:
        validator_class.check_schema(schema)
    except jsonschema.SchemaError as exc:
        where = "/".join(str(p) for p in exc.path) or "(top level)"
        raise OutputSchemaError(
            f"output_schema is not a valid JSON Schema at {where}: {_clip(exc.message)}"
        ) from None
    name = _TOOL_NAME.sub("_", str(schema.get("title") or "")).strip("_")[:64] or "structured_output"
    if name in FORBIDDEN_TOOL_NAMES:
        name = f"{name}_output"  # a child never holds a tool by that name
    model = _schema_model(name, copy.deepcopy(schema), validator_class(schema))
    strategy = ToolStrategy(model, handle_errors=_retry_message)
    key = ("json", hashlib.sha256(text.encode()).hexdigest())
    return CallFormat(strategy, key, name, (OutputRetryLimit(frozenset({name}), retries, name),))


def _non_local_ref(node: Any) -> Any:
    """The first ``$ref`` that does not point inside the schema itself (nothing is ever fetched)."""
    pending = [node]
    while pending:
        item = pending.pop()
        if isinstance(item, dict):
            ref = item.get("$ref")
            if ref is not None and not (isinstance(ref, str) and ref.startswith("#")):
                return ref
            pending.extend(item.values())
        elif isinstance(item, list):
            pending.extend(item)
    return None


def _schema_model(name: str, schema: dict[str, Any], validator: Any) -> type[RootModel[Any]]:
    """A pydantic type that shows ``schema`` to the model and validates with ``jsonschema``."""

    class Output(RootModel[dict[str, Any]]):
        @model_validator(mode="before")
        @classmethod
        def _matches_schema(cls, value: Any) -> Any:
            violation = first_violation(validator, value)
            if violation is not None:
                raise ValueError(violation)
            return value

        @classmethod
        def model_json_schema(cls, *args: Any, **kwargs: Any) -> dict[str, Any]:
            return copy.deepcopy(schema)

    Output.__name__ = Output.__qualname__ = name
    Output.__doc__ = str(schema.get("description") or f"Return your final answer as {name}.")
    return Output


def first_violation(validator: Any, value: Any) -> str | None:
    """The most relevant way ``value`` breaks the schema (path and reason), or ``None``."""
    import jsonschema

    try:
        error = jsonschema.exceptions.best_match(validator.iter_errors(value))
    except RecursionError:
        return "output_schema cannot be checked: its $ref references loop without end"
    if error is None:
        return None
    return _clip(f"{error.json_path}: {error.message}")


def _retry_message(exc: Exception) -> str:
    return f"{_RETRY_PREFIX}{describe_violation(exc)}{_RETRY_SUFFIX}"


def describe_violation(exc: BaseException) -> str:
    """A short reason a structured answer was refused, from LangChain's exception."""
    if isinstance(exc, MultipleStructuredOutputsError):
        return "called the output tool more than once in one reply; call it exactly once"
    source: BaseException | None = getattr(exc, "source", None) if isinstance(
        exc, StructuredOutputValidationError
    ) else exc
    seen = 0
    while source is not None and seen < 8:
        if isinstance(source, ValidationError):
            return _clip("; ".join(_pydantic_reason(e) for e in source.errors()[:3]))
        source = source.__cause__
        seen += 1
    return _clip(str(exc))


def _pydantic_reason(error: Mapping[str, Any]) -> str:
    inner = (error.get("ctx") or {}).get("error")
    if isinstance(inner, ValueError) and error.get("type") == "value_error":
        return str(inner)
    where = ".".join(str(p) for p in error.get("loc", ())) or "(top level)"
    return f"{where}: {error.get('msg', 'invalid')}"


def _clip(text: str) -> str:
    return text if len(text) <= _MAX_VIOLATION_CHARS else text[: _MAX_VIOLATION_CHARS - 3] + "..."


class OutputRetryLimit(AgentMiddleware):
    """Fails the child once it has answered in the wrong shape ``retries + 1`` times.

    Counts LangChain's retry messages for the output tool since the task
    began; when one more invalid answer would be retried past the limit,
    raises :class:`OutputSchemaViolation` instead. A child that ends with
    plain text and no structured answer (a model that ignores the forced
    tool choice) fails the same way.
    """

    def __init__(self, tool_names: frozenset[str], retries: int, label: str) -> None:
        super().__init__()
        self.tool_names = tool_names
        self.retries = retries
        self.label = label

    def _check(self, request: ModelRequest, response: ModelResponse) -> None:
        if getattr(response, "structured_response", None) is not None:
            return
        failed = [m for m in getattr(response, "result", ()) or () if self._is_retry(m)]
        if not failed:
            return
        attempts = self._earlier_failures(request.messages) + 1
        if attempts > self.retries:
            text = str(failed[-1].content)
            violation = text.removeprefix(_RETRY_PREFIX).removesuffix(_RETRY_SUFFIX)
            raise OutputSchemaViolation(self.label, attempts, violation)

    def _is_retry(self, message: BaseMessage) -> bool:
        return isinstance(message, ToolMessage) and message.name in self.tool_names

    def _earlier_failures(self, messages: Sequence[BaseMessage]) -> int:
        start = 0
        for index, message in enumerate(messages):
            if isinstance(message, HumanMessage):
                start = index
        return sum(self._is_retry(m) for m in messages[start:])

    def after_agent(self, state: AgentState, runtime: Runtime) -> None:
        if state.get("structured_response") is not None:
            return None
        attempts = self._earlier_failures(state.get("messages") or ()) + 1
        raise OutputSchemaViolation(
            self.label, attempts, f"answered in plain text instead of calling its output tool {self.label!r}"
        )

    async def aafter_agent(self, state: AgentState, runtime: Runtime) -> None:
        return self.after_agent(state, runtime)

    def wrap_model_call(
        self, request: ModelRequest, handler: Callable[[ModelRequest], ModelResponse]
    ) -> ModelResponse:
        response = handler(request)
        self._check(request, response)
        return response

    async def awrap_model_call(
        self, request: ModelRequest, handler: Callable[[ModelRequest], Awaitable[ModelResponse]]
    ) -> ModelResponse:
        response = await handler(request)
        self._check(request, response)
        return response
