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
        skills=["cite-sources"],
        permission_mode="confirm_risky",
        condenser={"trigger": ("tokens", 50_000)},
    )

Agent files (markdown with YAML frontmatter) load into the same model; see
:mod:`subagents.definitions._agent_file`.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Annotated, Any

from langchain_core.language_models import BaseChatModel
from langchain_core.tools import BaseTool
from pydantic import (
    AfterValidator,
    BaseModel,
    ConfigDict,
    Field,
    ValidationError,
    field_validator,
    model_validator,
)

from subagents._compiled_runnable import own_recursion_limit
from subagents._errors import SpecError, brief
from subagents._fork import ContextMode
from subagents._spec_dicts import translate_deepagents_fields
from subagents._spec_tools import normalize_tools
from subagents.definitions._condenser import CondenserSetting, normalize_condenser
from subagents.definitions._hook_config import normalize_hooks
from subagents.definitions._mcp_config import normalize_mcp_config
from subagents.definitions._models import check_model_name
from subagents.definitions._permissions import PermissionMode, normalize_permission_mode
from subagents.definitions._spec_skills import check_skill_entry

NAME_PATTERN = re.compile(r"[A-Za-z0-9_-]+(?:\.[A-Za-z0-9_-]+)*")
"""Letters, digits, ``-``, ``_`` and single inner dots (``powershell-5.1-expert``):
never a leading dot, ``..``, a slash or a separator, so a name is safe as a path part.
Check it with ``fullmatch``: ``match`` with ``$`` would also accept a trailing newline."""
MAX_NAME_LENGTH = 128

DEFAULT_MAX_TURNS = 25
"""Model calls a child may make when its spec sets no ``max_turns``."""

MAX_TIMEOUT_S = 1_000_000.0
"""The largest ``timeout_s`` accepted (about 11 days): finite, and within what threads can wait."""


def _check_name(value: str) -> str:
    if not isinstance(value, str) or len(value) > MAX_NAME_LENGTH or not NAME_PATTERN.fullmatch(value):
        raise ValueError(
            "name must be letters, digits, '-', '_' and single inner dots, at most "
            f"{MAX_NAME_LENGTH} characters (got {brief(value)})"
        )
    return value


Slug = Annotated[str, AfterValidator(_check_name)]
SkillEntry = Annotated[str, AfterValidator(check_skill_entry)]


class SubagentSpec(BaseModel):
    """A subagent built by :func:`langchain.agents.create_agent` on first use.

    Fields left ``None`` inherit from the parent: ``tools`` (the parent's
    tools, minus every delegation tool), ``model`` (also ``"inherit"``; a
    name without ``provider:`` is a profile looked up in the caller's
    ``model_profiles``) and ``permission_mode`` (the parent's policy).
    ``max_turns`` caps model calls (default :data:`DEFAULT_MAX_TURNS`);
    ``recursion_limit`` defaults to the parent run's own limit; ``timeout_s``
    bounds wall time on both ``invoke`` and ``ainvoke``.

    ``skills`` names the skills listed in the child's prompt (the parent's
    are not inherited). ``condenser`` is ``False`` (the default here: none),
    ``None``/``"default"`` for default summarisation (what an agent file that
    omits the field gets), or :class:`~langchain.agents.middleware.SummarizationMiddleware`
    settings. ``max_budget_per_run`` (USD) and ``max_tokens`` cap one run
    (the runner enforces them). ``mcp_config`` gives the child the tools of
    those MCP servers (:mod:`subagents.definitions._mcp_tools`); ``hooks`` runs Claude
    Code hooks in the child (:mod:`subagents.definitions._hook_middleware`); ``color``
    is for display. ``source`` is the file a definition was loaded from.
    ``context="fork"`` starts the child from the parent's conversation
    instead of the bare task (see :mod:`subagents._fork`).
    ``short_answer_threshold`` (characters) overrides the runner's for this
    agent: an answer shorter than it gets one request for a complete report
    (``0``: never; ``None``: the runner's setting, off by default).
    """

    model_config = ConfigDict(arbitrary_types_allowed=True, extra="forbid", frozen=True)

    name: Slug
    description: str
    system_prompt: str = ""
    tools: Sequence[str | BaseTool | dict[str, Any]] | None = None
    disallowed_tools: Sequence[str] = ()
    model: str | BaseChatModel | None = None
    # Strict: a YAML ``yes`` or ``"10"`` must not silently become a limit.
    max_turns: int | None = Field(default=None, gt=0, strict=True)
    timeout_s: float | None = Field(default=None, gt=0, le=MAX_TIMEOUT_S, allow_inf_nan=False, strict=True)
    recursion_limit: int | None = Field(default=None, gt=0, strict=True)
    max_budget_per_run: float | None = Field(default=None, gt=0, allow_inf_nan=False, strict=True)
    max_tokens: int | None = Field(default=None, gt=0, strict=True)
    short_answer_threshold: int | None = Field(default=None, ge=0, strict=True)
    response_format: Any = None
    middleware: Sequence[Any] = ()
    interrupt_on: Mapping[str, Any] | None = None
    permission_mode: PermissionMode | None = None
    skills: Sequence[SkillEntry] = ()
    # Off for specs written in code (no extra graph step on the hot path);
    # an agent file that omits the field gets default summarisation.
    condenser: CondenserSetting = False
    mcp_config: Mapping[str, Mapping[str, Any]] | None = None
    hooks: Mapping[str, Any] | None = None
    color: str | None = None
    source: str | None = None
    retries: int = Field(default=0, ge=0, le=10, strict=True)
    metadata: Mapping[str, Any] = Field(default_factory=dict)
    # "fork": start from the parent's conversation (see subagents/_fork.py).
    context: ContextMode = "isolated"

    @field_validator("description")
    @classmethod
    def _description_not_blank(cls, value: str) -> str:
        if not value.strip():
            raise ValueError("description must not be empty: the parent picks agents by it")
        return value

    @field_validator("tools", mode="before")
    @classmethod
    def _tools(cls, value: Any) -> Any:
        return normalize_tools(value)

    @field_validator("disallowed_tools", "skills", mode="before")
    @classmethod
    def _no_bare_string(cls, value: Any) -> Any:
        # A bare string would be iterated letter by letter.
        if isinstance(value, str):
            raise ValueError("expected a list of names, not one string")
        return value

    @field_validator("model", mode="before")
    @classmethod
    def _model_name(cls, value: Any) -> Any:
        return check_model_name(value) if isinstance(value, str) else value

    @field_validator("permission_mode", mode="before")
    @classmethod
    def _permission_mode(cls, value: Any) -> Any:
        return normalize_permission_mode(value)

    @field_validator("condenser", mode="before")
    @classmethod
    def _condenser(cls, value: Any) -> Any:
        return normalize_condenser(value)

    @field_validator("mcp_config", mode="before")
    @classmethod
    def _mcp_config(cls, value: Any) -> Any:
        return normalize_mcp_config(value)

    @field_validator("hooks", mode="before")
    @classmethod
    def _hooks(cls, value: Any) -> Any:
        return normalize_hooks(value, "subagent")

    @field_validator("color")
    @classmethod
    def _color_not_blank(cls, value: str | None) -> str | None:
        if value is not None and not value.strip():
            raise ValueError("expected a colour name or #rrggbb, got an empty string")
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
    ``context="fork"`` gives it the parent's conversation (see
    :mod:`subagents._fork`).

    ``runnable`` may be any ``Runnable`` (a ``RemoteGraph`` too) or an object
    with only ``invoke``, which async callers run in a worker thread. Its
    registered name is stamped on each run (``lc_agent_name`` and run name).
    ``recursion_limit`` defaults to the runnable's own (from ``with_config``),
    then to the parent run's. deepagents spells this class ``CompiledSubAgent``;
    both names are exported.

    Example::

        CompiledSubagent(name="writer", description="Writes reports.",
                         runnable=create_agent(model, tools=[]).with_config(recursion_limit=40))
    """

    model_config = ConfigDict(arbitrary_types_allowed=True, extra="forbid", frozen=True)

    name: Slug
    description: str
    runnable: Any
    timeout_s: float | None = Field(default=None, gt=0, le=MAX_TIMEOUT_S, allow_inf_nan=False)
    recursion_limit: int | None = Field(default=None, gt=0)
    metadata: Mapping[str, Any] = Field(default_factory=dict)
    # "fork": start from the parent's conversation (see subagents/_fork.py).
    context: ContextMode = "isolated"

    @field_validator("runnable")
    @classmethod
    def _runnable_invokable(cls, value: Any) -> Any:
        if not callable(getattr(value, "invoke", None)):
            raise ValueError(
                "runnable must be a LangGraph graph or any Runnable (an object with invoke), "
                f"got {type(value).__name__}"
            )
        return value

    @model_validator(mode="before")
    @classmethod
    def _runnables_own_limit(cls, data: Any) -> Any:
        # A limit bound with `with_config` is the runnable's own: the parent's never overrides it.
        if isinstance(data, Mapping) and data.get("recursion_limit") is None:
            own = own_recursion_limit(data.get("runnable"))
            if own is not None:
                return {**data, "recursion_limit": own}
        return data


CompiledSubAgent = CompiledSubagent
"""deepagents' spelling of :class:`CompiledSubagent`: the same class."""

AnySpec = SubagentSpec | CompiledSubagent


def describe_validation_error(errors: ValidationError, label: str) -> str:
    """One line naming ``label`` and each bad field with what was expected."""
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
    value = translate_deepagents_fields(value, label)
    cls = CompiledSubagent if "runnable" in value else SubagentSpec
    try:
        return cls.model_validate(dict(value))
    except ValidationError as exc:
        raise SpecError(describe_validation_error(exc, label)) from None


def coerce_specs(values: Sequence[AnySpec | Mapping[str, Any]]) -> list[AnySpec]:
    """Validate many specs and reject duplicate names."""
    specs = [coerce_spec(v) for v in values]
    seen: set[str] = set()
    for spec in specs:
        if spec.name in seen:
            raise SpecError(f"duplicate subagent name {spec.name!r}: each name must be unique")
        seen.add(spec.name)
    return specs
