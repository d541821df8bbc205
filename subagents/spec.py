"""What a subagent is: its declarative spec, or a graph the caller compiled.

Both are pydantic models; a plain ``dict`` with the same keys is accepted
wherever a spec is (see :func:`coerce_spec`).

Example::

    from subagents import SubagentSpec

    researcher = SubagentSpec(
        name="researcher",
        description="Finds facts and cites sources.",
        system_prompt="You research. Reply with a short cited summary.",
        tools=["web_search"],
        max_turns=8,
        timeout_s=120,
    )
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Annotated, Any

from langchain_core.language_models import BaseChatModel
from langchain_core.tools import BaseTool
from pydantic import AfterValidator, BaseModel, ConfigDict, Field, ValidationError, field_validator

NAME_PATTERN = re.compile(r"^[A-Za-z0-9_-]+$")

DEFAULT_MAX_TURNS = 25
"""Model calls a child may make when its spec sets no ``max_turns``."""


def _check_name(value: str) -> str:
    if not isinstance(value, str) or not NAME_PATTERN.match(value):
        raise ValueError(
            f"name must be a slug of letters, digits, '-' and '_' (got {value!r})"
        )
    return value


Slug = Annotated[str, AfterValidator(_check_name)]


class SubagentSpec(BaseModel):
    """A subagent built by :func:`langchain.agents.create_agent` on first use.

    Fields left ``None`` inherit from the parent: ``tools`` (the parent's
    tools, minus every delegation tool) and ``model`` (also ``"inherit"``).
    ``max_turns`` caps model calls (default :data:`DEFAULT_MAX_TURNS`);
    ``recursion_limit`` defaults to the parent run's own limit; ``timeout_s``
    bounds wall time on both ``invoke`` and ``ainvoke``.
    """

    model_config = ConfigDict(arbitrary_types_allowed=True, extra="forbid", frozen=True)

    name: Slug
    description: str
    system_prompt: str = ""
    tools: Sequence[str | BaseTool] | None = None
    disallowed_tools: Sequence[str] = ()
    model: str | BaseChatModel | None = None
    max_turns: int | None = Field(default=None, gt=0)
    timeout_s: float | None = Field(default=None, gt=0)
    recursion_limit: int | None = Field(default=None, gt=0)
    response_format: Any = None
    middleware: Sequence[Any] = ()
    interrupt_on: Mapping[str, Any] | None = None
    metadata: Mapping[str, Any] = Field(default_factory=dict)

    @field_validator("description")
    @classmethod
    def _description_not_blank(cls, value: str) -> str:
        if not value.strip():
            raise ValueError("description must not be empty: the parent picks agents by it")
        return value

    @field_validator("tools", "disallowed_tools", mode="before")
    @classmethod
    def _no_bare_string(cls, value: Any) -> Any:
        # A bare string would be iterated letter by letter.
        if isinstance(value, str):
            raise ValueError("expected a list of tool names or tools, not one string")
        return value

    @field_validator("middleware")
    @classmethod
    def _middleware_are_agent_middleware(cls, value: Sequence[Any]) -> Sequence[Any]:
        from langchain.agents.middleware import AgentMiddleware

        for item in value:
            if not isinstance(item, AgentMiddleware):
                raise ValueError(f"expected AgentMiddleware instances, got {type(item).__name__}")
        return tuple(value)


class CompiledSubagent(BaseModel):
    """A subagent the caller built: any LangGraph graph whose state has ``messages``.

    The graph is used as given: its own tools, model and limits apply. The
    runner still isolates its input, bounds it with ``timeout_s`` and
    ``recursion_limit``, refuses nested delegation and records it.
    """

    model_config = ConfigDict(arbitrary_types_allowed=True, extra="forbid", frozen=True)

    name: Slug
    description: str
    runnable: Any
    timeout_s: float | None = Field(default=None, gt=0)
    recursion_limit: int | None = Field(default=None, gt=0)
    metadata: Mapping[str, Any] = Field(default_factory=dict)

    @field_validator("runnable")
    @classmethod
    def _runnable_invokable(cls, value: Any) -> Any:
        if not (hasattr(value, "invoke") and hasattr(value, "ainvoke")):
            raise ValueError("runnable must be a LangGraph graph (with invoke and ainvoke)")
        return value


AnySpec = SubagentSpec | CompiledSubagent


class SpecError(ValueError):
    """A subagent definition is invalid; the message names the agent and field."""


def _describe(errors: ValidationError, label: str) -> str:
    parts = []
    for err in errors.errors():
        field = ".".join(str(p) for p in err["loc"]) or "<spec>"
        msg = err["msg"].removeprefix("Value error, ")
        if err["type"] == "extra_forbidden":
            msg = "unknown field"
        parts.append(f"field '{field}': {msg}")
    return f"{label}: " + "; ".join(parts)


def coerce_spec(value: AnySpec | Mapping[str, Any], *, source: str | None = None) -> AnySpec:
    """Return a validated spec from a spec or a plain dict.

    A dict with a ``runnable`` key becomes a :class:`CompiledSubagent`,
    any other dict a :class:`SubagentSpec`. Errors raise :class:`SpecError`
    naming the agent (or ``source``) and each bad field.
    """
    if isinstance(value, (SubagentSpec, CompiledSubagent)):
        return value
    if not isinstance(value, Mapping):
        raise SpecError(
            f"{source or 'subagent'}: expected a SubagentSpec, CompiledSubagent or dict, "
            f"got {type(value).__name__}"
        )
    label = source or f"subagent {value.get('name', '<unnamed>')!r}"
    cls = CompiledSubagent if "runnable" in value else SubagentSpec
    try:
        return cls.model_validate(dict(value))
    except ValidationError as exc:
        raise SpecError(_describe(exc, label)) from None


def coerce_specs(values: Sequence[AnySpec | Mapping[str, Any]]) -> list[AnySpec]:
    """Validate many specs and reject duplicate names."""
    specs = [coerce_spec(v) for v in values]
    seen: set[str] = set()
    for spec in specs:
        if spec.name in seen:
            raise SpecError(f"duplicate subagent name {spec.name!r}: each name must be unique")
        seen.add(spec.name)
    return specs
