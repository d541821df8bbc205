"""Turning a :class:`SubagentSpec` into a child graph: :func:`langchain.agents.create_agent` under the spec's name.

Fields map onto LangChain's own middleware (approvals, ``condenser``); one of these classes in the spec's own
``middleware`` wins (``create_agent`` refuses two). ``max_turns`` is the runner's meter's, without two extra graph
steps per turn.
"""

from __future__ import annotations

import copy
import dataclasses
import functools
import hashlib
import json
import logging
import re
import sys
import time
import warnings
from collections.abc import Callable, Generator, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from langchain.agents import create_agent
from langchain.agents.middleware import (
    AgentMiddleware,
    AgentState,
    HumanInTheLoopMiddleware,
    ModelRequest,
    ModelRetryMiddleware,
    PIIMiddleware,
    SummarizationMiddleware,
)
from langchain.agents.structured_output import (
    AutoStrategy,
    MultipleStructuredOutputsError,
    ProviderStrategy,
    StructuredOutputValidationError,
    ToolStrategy,
)
from langchain_core.language_models import BaseChatModel
from langchain_core.messages import BaseMessage, HumanMessage, ToolMessage
from langgraph.runtime import Runtime
from pydantic import RootModel, ValidationError, model_validator

from subagents._boundary import (
    FORBIDDEN_TOOL_NAMES,
    HeldModelCalls,
    OneLevelGuard,
    OneLevelToolGuard,
    OneLevelToolRefusal,
    child_state_schema,
    child_tools,
    is_delegating_middleware,
    strip_agents_block,
    tool_name,
)
from subagents._errors import McpServerError, OutputSchemaError, OutputSchemaViolation, SpecError, TaskTimeout
from subagents._metering import WrapUp
from subagents._plans import ModelCallPlan
from subagents._roles import overrides, policy_of
from subagents._settings import Definitions, UnknownToolPolicy
from subagents._spec import AnySpec, CompiledSubagent, SubagentSpec
from subagents._truncation import RetryTruncated
from subagents.definitions._condenser import condenser_middleware
from subagents.definitions._models import lookup_model, resolve_model
from subagents.definitions._permissions import approval_rules, policy_beside
from subagents.definitions._skills import SkillCatalog, available_skills_block, skills_for

if TYPE_CHECKING:
    from subagents.definitions._mcp import McpToolset

@dataclasses.dataclass(frozen=True)
class BuildOptions:
    """What the caller offers every child it builds, beyond each spec (all optional).

    Attributes:
        definitions: the :class:`~subagents.Definitions` settings children are built under (``permission_mode`` is
            a floor, as the parent's ``HumanInTheLoopMiddleware`` is).
        skills: the skills a spec's ``skills`` may name (the delegating middleware pass ``definitions.skills()``).
        excluded_keys: keys the delegating middleware keeps to the parent; never in a child's state schema.
        own_model: applied to every model a child is built with (its own and its condenser's; background children's
            use their loop's clients).
        join_model_calls: applied to a child's finished middleware list (background children join neighbouring
            model-call wraps).
    """

    definitions: Definitions = Definitions()
    skills: SkillCatalog = dataclasses.field(default_factory=SkillCatalog)
    excluded_keys: frozenset[str] = frozenset()
    own_model: Callable[[Any], Any] | None = None
    join_model_calls: Callable[[list[Any]], list[Any]] | None = None


def check_spec(spec: AnySpec, options: BuildOptions) -> None:
    """Fail now, not at first delegation, if ``spec``'s model or skills cannot resolve (nothing is built)."""
    if isinstance(spec, CompiledSubagent):
        return
    defs = options.definitions
    lookup_model(spec.model, agent=spec.name, profiles=defs.model_profiles, unknown_model=defs.unknown_model)
    skills_for(spec.skills, options.skills, agent=spec.name)
    condenser_model = spec.condenser.get("model") if spec.condenser else None
    if condenser_model is not None:
        lookup_model(condenser_model, agent=spec.name, profiles=defs.model_profiles, unknown_model=defs.unknown_model)


# -- A child inheriting the parent's model inherits how it is called (``ChildPolicy(inherited="model")``); every
# child gets ``inherited="every"`` (the data policy). A spec's ``retries`` retries transient errors, with backoff.

_TRANSIENT_STATUS = frozenset({408, 409, 425, 429})
_TRANSIENT_NAMES = ("RateLimit", "Timeout", "Overloaded", "ServiceUnavailable",
                    "InternalServerError", "APIConnectionError", "ConnectError")

RETRY_INITIAL_DELAY_S = 1.0
"""The first backoff delay of a spec's ``retries`` (doubled each retry, at most 30 s)."""


def is_transient(exc: BaseException) -> bool:
    """Whether a model error is worth retrying: ``ModelError.is_retryable``, else its HTTP status, else its type."""
    from langchain_core.exceptions import ModelError

    if isinstance(exc, ModelError):
        return bool(exc.is_retryable)
    status = next((code for holder in (exc, getattr(exc, "response", None))
                   if isinstance(code := getattr(holder, "status_code", None), int)), None)
    if status is not None:
        return status in _TRANSIENT_STATUS or 500 <= status < 600
    if isinstance(exc, (TimeoutError, ConnectionError)):
        return True
    return any(part in cls.__name__ for cls in type(exc).__mro__ for part in _TRANSIENT_NAMES)


# -- A per-call output schema: the ``task`` tool's ``output_schema`` argument, else the run's config key (anything
# ``response_format`` accepts), over the spec's own. The child answers through ``ToolStrategy``; an invalid answer
# is sent back OUTPUT_SCHEMA_RETRIES times, then the task fails. Each (subagent, schema) graph is built once.

SUBAGENT_RESPONSE_FORMAT_CONFIG_KEY = "__deepagents_subagent_response_format"
"""``configurable`` key for a per-invocation response format (deepagents' spelling)."""

OUTPUT_SCHEMA_RETRIES = 2  # invalid structured answers sent back to the child before its task fails
MAX_SCHEMA_CHARS = 20_000  # the largest output_schema accepted, as JSON
_MAX_VIOLATION_CHARS = 300
_RETRY_PREFIX = "Your answer does not match the required output schema: "
_RETRY_SUFFIX = "\nCall the output tool again with arguments that match the schema."
_TOOL_NAME = re.compile(r"[^A-Za-z0-9_-]+")


@dataclasses.dataclass(frozen=True)
class CallFormat:
    """A per-call response format: what the child is built with, a cache key, a label, extra middleware."""

    response_format: Any
    key: tuple[str, Any]
    label: str
    middleware: tuple[Any, ...] = ()


def requested_format(output_schema: Any, parent_config: Mapping[str, Any]) -> Any:
    """The format one call asks for: its ``output_schema``, else the config key, else ``None``. A schema the
    model wrote may use only :data:`LINEAR_KEYWORDS`: a regex or ``$ref`` could hold the interpreter for minutes."""
    if output_schema is not None:
        if (keyword := _costly_keyword(output_schema)) is not None:
            raise OutputSchemaError(
                f"output_schema: {_clip(repr(keyword))} is not accepted in a schema written in the call (checking an "
                "answer could run for minutes past any timeout); "
                + ("describe the format in a 'description' instead" if "pattern" in keyword
                   else "write each definition out where it is used" if "ref" in keyword.lower()
                   else "check with " + ", ".join(sorted(LINEAR_KEYWORDS))))
        return output_schema
    configurable = parent_config.get("configurable") if isinstance(parent_config, Mapping) else None
    return configurable.get(SUBAGENT_RESPONSE_FORMAT_CONFIG_KEY) if isinstance(configurable, Mapping) else None


def call_format(requested: Any, *, retries: int = OUTPUT_SCHEMA_RETRIES) -> CallFormat:
    """Turn a requested format into a :class:`CallFormat`, or raise :class:`OutputSchemaError`."""
    if isinstance(requested, AutoStrategy):
        # LangChain's "choose for me": a tool call here, as for a bare schema, so retries stay counted.
        requested = requested.schema
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
    raise OutputSchemaError("output_schema: expected a JSON Schema object, a pydantic model, a dataclass, a TypedDict, "
                            f"a ToolStrategy, ProviderStrategy or AutoStrategy, got {type(requested).__name__}")


def _json_schema_format(schema: dict[str, Any], retries: int) -> CallFormat:
    import jsonschema

    try:
        text = json.dumps(schema, sort_keys=True)
    except (TypeError, ValueError) as exc:
        raise OutputSchemaError(f"output_schema: not JSON ({exc})") from None
    if len(text) > MAX_SCHEMA_CHARS:
        raise OutputSchemaError(f"output_schema: {len(text)} characters as JSON; at most {MAX_SCHEMA_CHARS} "
                                "are accepted")
    if schema.get("type", "object") != "object":  # tool arguments are always an object
        raise OutputSchemaError('output_schema: must describe a JSON object (top-level "type": "object"), '
                                f"got type {_clip(repr(schema.get('type')))}")
    remote = _non_local_ref(schema)
    if remote is not None:
        raise OutputSchemaError(f"output_schema: only local $ref values (starting '#') are supported, "
                                f"got {_clip(repr(remote))}")
    validator_class = jsonschema.validators.validator_for(schema)
    try:
        validator_class.check_schema(schema)
    except jsonschema.SchemaError as exc:
        where = "/".join(str(p) for p in exc.path) or "(top level)"
        raise OutputSchemaError(f"output_schema is not a valid JSON Schema at {where}: {_clip(exc.message)}") from None
    name = _TOOL_NAME.sub("_", str(schema.get("title") or "")).strip("_")[:64] or "structured_output"
    if name in FORBIDDEN_TOOL_NAMES:
        name = f"{name}_output"  # a child never holds a tool by that name
    model = _schema_model(name, copy.deepcopy(schema), validator_class(schema))
    strategy = ToolStrategy(model, handle_errors=_retry_message)
    key = ("json", hashlib.sha256(text.encode()).hexdigest())
    return CallFormat(strategy, key, name, (OutputRetryLimit(frozenset({name}), retries, name),))


LINEAR_KEYWORDS = frozenset({
    "type", "enum", "const", "format", "minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum", "multipleOf",
    "minLength", "maxLength", "items", "prefixItems", "additionalItems", "contains", "minItems", "maxItems",
    "properties", "additionalProperties", "required", "propertyNames", "minProperties", "maxProperties",
    "dependentRequired", "dependentSchemas", "dependencies", "allOf", "anyOf", "oneOf", "not", "if",
})
"""The checking keywords a schema the model writes may use: each linear in the answer's size. Not ``pattern``
(backtracking), ``$ref`` (exponential nesting), ``unevaluated*`` (branches checked again), ``uniqueItems``."""
_SUBSCHEMAS = {"items", "additionalItems", "additionalProperties", "contains", "not", "if", "then", "else",
               "propertyNames", "allOf", "anyOf", "oneOf", "prefixItems"}  # a subschema or a list of them
_NAMED_SUBSCHEMAS = {"properties", "dependentSchemas", "dependencies"}  # names (data, not keywords) -> subschemas


@functools.cache
def _checked_keywords() -> frozenset[str]:
    """Every keyword jsonschema checks, in any draft a schema's ``$schema`` may choose."""
    import jsonschema  # as where answers are checked: imported on first use

    drafts = (jsonschema.Draft3Validator, jsonschema.Draft4Validator, jsonschema.Draft6Validator,
              jsonschema.Draft7Validator, jsonschema.Draft201909Validator, jsonschema.Draft202012Validator)
    return frozenset().union(*(draft.VALIDATORS for draft in drafts))


def _costly_keyword(node: Any) -> str | None:
    """The first JSON Schema keyword a validator checks that :data:`LINEAR_KEYWORDS` lacks (a property name isn't)."""
    pending = [node]
    while pending:
        schema = pending.pop()
        if not isinstance(schema, Mapping):
            continue  # true, false, or what the meta-schema check refuses
        for key, value in schema.items():
            if key in _checked_keywords() and key not in LINEAR_KEYWORDS:
                return str(key)
            if key in _SUBSCHEMAS:
                pending.extend(value if isinstance(value, list) else [value])
            elif key in _NAMED_SUBSCHEMAS and isinstance(value, Mapping):
                pending.extend(value.values())
    return None


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
    return None if error is None else _clip(f"{error.json_path}: {error.message}")


def _retry_message(exc: Exception) -> str:
    return f"{_RETRY_PREFIX}{describe_violation(exc)}{_RETRY_SUFFIX}"


def describe_violation(exc: BaseException) -> str:
    """A short reason a structured answer was refused, from LangChain's exception."""
    if isinstance(exc, MultipleStructuredOutputsError):
        return "called the output tool more than once in one reply; call it exactly once"
    source = getattr(exc, "source", None) if isinstance(exc, StructuredOutputValidationError) else exc
    for _ in range(8):  # the cause chain, bounded
        if isinstance(source, ValidationError):
            reasons = []
            for error in source.errors()[:3]:
                inner = (error.get("ctx") or {}).get("error")
                where = ".".join(str(p) for p in error.get("loc", ())) or "(top level)"
                reasons.append(str(inner) if isinstance(inner, ValueError) and error.get("type") == "value_error"
                               else f"{where}: {error.get('msg', 'invalid')}")
            return _clip("; ".join(reasons))
        source = getattr(source, "__cause__", None)
    return _clip(str(exc))


def _clip(text: str) -> str:
    return text if len(text) <= _MAX_VIOLATION_CHARS else text[: _MAX_VIOLATION_CHARS - 3] + "..."


class OutputRetryLimit(ModelCallPlan, AgentMiddleware):
    """Fails the child once it answered in the wrong shape ``retries + 1`` times, or in plain text."""

    def __init__(self, tool_names: frozenset[str], retries: int, label: str) -> None:
        super().__init__()
        self.tool_names = tool_names
        self.retries = retries
        self.label = label

    def model_plan(self, request: ModelRequest[Any]) -> Generator[ModelRequest[Any], Any, Any]:
        response = yield request
        failed = [m for m in getattr(response, "result", ()) or () if self._is_retry(m)]
        if not failed or getattr(response, "structured_response", None) is not None:
            return response
        attempts = self._earlier_failures(request.messages) + 1
        if attempts > self.retries:
            violation = str(failed[-1].content).removeprefix(_RETRY_PREFIX).removesuffix(_RETRY_SUFFIX)
            raise OutputSchemaViolation(self.label, attempts, violation)
        return response

    def _is_retry(self, message: BaseMessage) -> bool:
        return isinstance(message, ToolMessage) and message.name in self.tool_names

    def _earlier_failures(self, messages: Sequence[BaseMessage]) -> int:
        start = max((i for i, m in enumerate(messages) if isinstance(m, HumanMessage)), default=0)
        return sum(self._is_retry(m) for m in messages[start:])

    def after_agent(self, state: AgentState[Any], runtime: Runtime[Any]) -> None:
        if state.get("structured_response") is not None:
            return None
        attempts = self._earlier_failures(state.get("messages") or ()) + 1
        raise OutputSchemaViolation(self.label, attempts,
                                    f"answered in plain text instead of calling its output tool {self.label!r}")


log = logging.getLogger(__name__)

def _report_unknown_tool(agent: str, name: str, available: list[str], policy: UnknownToolPolicy,
                         *, where: str = "the parent does not have") -> None:
    message = (f"subagent {agent!r}: field 'tools' names {name!r}, which {where} "
               f"(available: {', '.join(available) or 'none'})")
    if policy == "error":
        raise SpecError(message)
    if policy == "warn":  # at the caller's first frame outside this library: the line that built the child
        frame, level = sys._getframe(), 1
        while frame.f_back is not None and frame.f_globals.get("__name__", "").partition(".")[0] in (
                "subagents", "middleware", "deep_agent"):
            frame, level = frame.f_back, level + 1
        warnings.warn(message, stacklevel=level)


def build_subagent(spec: SubagentSpec, *, parent_model: Any, parent_tools: Sequence[Any],
                   options: BuildOptions | None = None, inherited_middleware: Sequence[AgentMiddleware] = ()) -> Any:
    """Compile one spec into a child graph (once per spec, on first use). ``inherited_middleware``, the
    parent's, is the floor: its approvals and ``PIIMiddleware`` always, its model-level ones if the model is too."""
    options = options or BuildOptions()
    defs = options.definitions
    own = options.own_model or (lambda resolved: resolved)

    def resolved_for(name: Any) -> Any:
        return resolve_model(name, parent_model, agent=spec.name, profiles=defs.model_profiles,
                             unknown_model=defs.unknown_model)

    # A model object is used as given; only a name (or "inherit") goes through the profiles.
    resolved = spec.model if isinstance(spec.model, BaseChatModel) else resolved_for(spec.model)
    inherits_model = resolved is parent_model
    model = own(resolved)
    mcp: McpToolset | None = None

    def own_tools() -> list[Any]:
        # Listed after the parent's tools are chosen: a spec refused for an unknown tool name starts no MCP server.
        nonlocal mcp
        if spec.mcp_config:  # its servers (names resolved through the caller's), their tools listed once
            from subagents.definitions._mcp import LIST_TIMEOUT_S, McpToolset

            servers = {name: config or defs.mcp_servers.get(name, {}) for name, config in spec.mcp_config.items()}
            started = time.monotonic()
            try:
                mcp = McpToolset.connect(spec.name, servers, timeout=min(spec.timeout_s or LIST_TIMEOUT_S,
                                                                         LIST_TIMEOUT_S))
            except ValueError as exc:
                raise SpecError(f"subagent {spec.name!r}: field 'mcp_config': {exc}") from None
            except McpServerError as exc:  # listed on the task's own time: what ran it out is its timeout_s
                if spec.timeout_s is not None and time.monotonic() - started >= spec.timeout_s:
                    raise TaskTimeout(f"timed out after {spec.timeout_s:g}s: {exc}", timeout_s=spec.timeout_s) from None
                raise
        if mcp is None and not any(isinstance(n, str) and n.startswith("mcp__") for n in spec.tools or ()):
            return []  # no MCP anywhere: the MCP client code is not even loaded
        from subagents.definitions._mcp import select_mcp_tools, unmatched_mcp_names

        listed = mcp.tools if mcp is not None else []
        parents = {tool_name(t) for t in parent_tools}  # a parent's own tool may be named mcp__ too
        for name in [n for n in unmatched_mcp_names(listed, spec.tools) if n not in parents]:  # never a tool short
            _report_unknown_tool(spec.name, name, sorted(t.name for t in listed), defs.unknown_tools,
                                 where="no MCP server in its mcp_config lists")
        return list(select_mcp_tools(listed, spec.tools, spec.disallowed_tools))

    tools = child_tools(spec.tools, spec.disallowed_tools, parent_tools,
                        # A name in ``tools`` the parent lacks is reported (an MCP tool's is its servers' business).
                        on_unknown=lambda name, available: None if name.startswith("mcp__") else
                        _report_unknown_tool(spec.name, name, available, defs.unknown_tools)) + own_tools()

    middleware = _child_middleware(spec, options, tools, model, lambda name: own(resolved_for(name)),
                                   inherited_middleware, inherits_model=inherits_model)
    # A tools node too for a structured response (else a plain-text answer loops back to the model) and for a
    # middleware that wraps tool calls (it may serve tools it adds itself).
    has_tools = (bool(tools) or spec.response_format is not None
                 or any(getattr(mw, "tools", None) or overrides(mw, "wrap_tool_call")
                        or overrides(mw, "awrap_tool_call") for mw in middleware))
    # Its calls outlive a cancelled child, keeping its place and charged; a fallback model swapped in too.
    swapped_in = [m for mw in middleware if isinstance(ms := getattr(mw, "models", None), (list, tuple)) for m in ms]
    if runs_on_a_thread(model) or any(runs_on_a_thread(m) for m in swapped_in):
        middleware.append(HeldModelCalls())
    guard = guard_for(middleware, has_tools=has_tools)  # the tool guard exactly when it has tools
    if guard is not None:
        middleware.append(guard)  # innermost: it sees the request every other middleware changed
    # Outermost: no middleware runs a forbidden call first, nor offers a tool on the wrap-up call. A child that
    # can never be offered a tool has nothing to wrap up.
    if has_tools:
        middleware[:0] = [OneLevelToolRefusal(), WrapUp()]
    skills = available_skills_block(skills_for(spec.skills, options.skills, agent=spec.name)) if spec.skills else ""
    prompt = "\n\n".join(part for part in (strip_agents_block(spec.system_prompt), skills) if part)
    graph = create_agent(model, tools, system_prompt=prompt or None,
                         middleware=options.join_model_calls(middleware) if options.join_model_calls else middleware,
                         response_format=spec.response_format, name=spec.name,
                         state_schema=child_state_schema(tools, parent_schemas=defs.state_schemas,
                                                         excluded=options.excluded_keys))
    return graph if mcp is None else graph.with_config(callbacks=[mcp])


def runs_on_a_thread(model: Any) -> bool:
    """Whether LangChain runs ``model``'s async calls on a thread (a cancelled child's call goes on spending)."""
    if not isinstance(model, BaseChatModel):
        return False
    kind = type(model)
    return kind._agenerate is BaseChatModel._agenerate and kind._astream is BaseChatModel._astream


def guard_for(middleware: Sequence[Any], *, has_tools: bool) -> OneLevelGuard | None:
    """The guard a built child needs: with tools, the tool guard; without, the plain one only when a middleware
    that is not ``request_neutral`` could add a tool back (a guard with nothing to guard costs a span per call)."""
    if has_tools:
        return OneLevelToolGuard()
    return OneLevelGuard() if any(not policy_of(mw).request_neutral for mw in middleware) else None


def _child_middleware(spec: SubagentSpec, options: BuildOptions, tools: Sequence[Any], model: Any,
                      model_for: Callable[[Any], Any], inherited: Sequence[Any], *, inherits_model: bool) -> list[Any]:
    """Retries, the parent's model-level and policy ones (the child's own of one name wins, but the parent's data
    policy always holds beside it), then the spec's (never a delegating one), approvals, condenser, hooks."""
    for mw in filter(is_delegating_middleware, spec.middleware):
        log.warning("subagent %r: dropped delegating middleware %s", spec.name, mw.name)
    middleware = [mw for mw in spec.middleware if not is_delegating_middleware(mw)]
    defs = options.definitions

    def missing(cls: type) -> bool:
        return not any(isinstance(mw, cls) for mw in middleware)

    mode = spec.permission_mode if spec.permission_mode is not None else defs.permission_mode  # own, else parent's
    names = [tool_name(t) for t in tools]
    # The user's policy is a floor no spec lowers (a spec is often a file from a cloned folder): unlike deepagents,
    # a spec's interrupt_on (or approval middleware) may add gates or change how a gated tool is reviewed, never
    # un-gate one. One middleware asks: create_agent refuses two.
    floor = approval_rules(defs.permission_mode, names, risky_tools=defs.risky_tools) if defs.permission_mode else {}
    for mw in inherited:  # every approval the parent's HumanInTheLoopMiddleware asks for is a floor too
        if isinstance(mw, HumanInTheLoopMiddleware):
            floor.update({n: rule for n, rule in (mw.interrupt_on or {}).items() if rule and n in names})
    own = approval_rules(mode, names, risky_tools=defs.risky_tools,
                         interrupt_on=spec.interrupt_on) if mode is not None or spec.interrupt_on else {}
    theirs = [mw for mw in middleware if type(mw) is HumanInTheLoopMiddleware]  # a subclass is kept as it is
    for mw in theirs:
        own.update({n: rule for n, rule in mw.interrupt_on.items() if rule})
    # A rule that is the floor's own (inherited, as general-purpose inherits the parent's) keeps its `when`; another
    # for a tool the parent gates loses it (a `when` could skip the question).
    rules = {**floor, **{n: {k: v for k, v in rule.items() if k != "when"}
                         if isinstance(rule, Mapping) and n in floor and rule != floor[n] else rule
                         for n, rule in own.items()}}
    if rules:
        settings = {key: getattr(theirs[-1], key) for key in ("description_prefix", "edit_notice", "interrupt_mode")
                    if theirs and hasattr(theirs[-1], key)}
        at = middleware.index(theirs[0]) if theirs else len(middleware)
        middleware = [mw for mw in middleware if not any(mw is t for t in theirs)]
        middleware.insert(at, HumanInTheLoopMiddleware(interrupt_on=rules, **settings))
    if missing(SummarizationMiddleware):
        try:
            condenser = condenser_middleware(spec.condenser, model, resolve_summarizer=model_for)
        except ValueError as exc:  # e.g. a fraction trigger on a model with no known window
            raise SpecError(f"subagent {spec.name!r}: field 'condenser': {exc}") from exc
        if condenser is not None:
            middleware.append(condenser)
    if spec.hooks:
        from subagents.definitions._hooks import HookMiddleware

        middleware.append(HookMiddleware(spec.hooks, agent_type=spec.name))
    retry = spec.retry_truncated if spec.retry_truncated is not None else defs.retry_truncated
    if retry is not False and missing(RetryTruncated):  # innermost: it sees the model's own reply
        middleware.append(RetryTruncated(retry))
    taken = {getattr(mw, "name", None) for mw in middleware}
    first: list[Any] = []
    if spec.retries and ModelRetryMiddleware.__name__ not in taken:
        taken.add(ModelRetryMiddleware.__name__)
        first.append(ModelRetryMiddleware(max_retries=spec.retries, retry_on=is_transient, on_failure="error",
                                          initial_delay=RETRY_INITIAL_DELAY_S, max_delay=30.0))
    for mw in inherited:
        # The parent's data policy holds for every child; how it calls its model, only for those sharing it.
        if isinstance(mw, PIIMiddleware) and mw.name in taken:
            mw = policy_beside(mw)
        inherited_by = policy_of(mw).inherited
        if (inherited_by == "every" or (inherits_model and inherited_by == "model")) and mw.name not in taken:
            taken.add(mw.name)
            first.append(mw)
    return [*first, *middleware]
