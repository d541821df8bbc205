"""Delegation settings: one typed object, passed whole from layer to layer. Every option not a keyword of
deepagents' ``create_deep_agent`` (or ``settings``, ``background``, ``hooks``) lives here once, in frozen groups; a bad
value raises :class:`~subagents.SpecError` naming the field."""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Annotated, Any, Literal, Protocol, cast

from langgraph.store.base import BaseStore
from pydantic import BaseModel, ConfigDict, Field, PrivateAttr, SkipValidation, ValidationError, field_validator
from pydantic.functional_validators import BeforeValidator

from subagents._errors import InvalidArgumentType, SpecError
from subagents._metering import Budget, PriceTable, WrapUpSetting
from subagents._truncation import RetryTruncatedSetting
from subagents.definitions._files import DirLevels
from subagents.definitions._models import ModelProfiles, UnknownModelPolicy, check_profiles
from subagents.definitions._permissions import PermissionMode, normalize_permission_mode
from subagents.definitions._skills import SkillCatalog

UnknownToolPolicy = Literal["error", "warn", "ignore"]
DEFAULT_MAX_ROOT_TURNS = 200  # far above a working run, far below the recursion limit
DEFAULT_NOTICE_TOTAL_CHARS = 12_000


class RuntimeHandle(Protocol):
    """A background runtime, held and handed on (a protocol: the runtime imports what reads settings)."""

    def close(self) -> None: ...


class _Settings(BaseModel):
    # Strict: "8" or True is no count. SkipValidation fields (objects the caller owns): checked here or where used.
    model_config = ConfigDict(frozen=True, extra="forbid", arbitrary_types_allowed=True, strict=True)

    def __init__(self, **fields: Any) -> None:
        try:
            super().__init__(**fields)
        except ValidationError as exc:  # the library's one error type, naming the field
            error = exc.errors()[0]
            # A union's member names (``sessions_dir.str``) are pydantic's, not a field's: the field is named alone.
            name = ".".join(str(p) for p in error["loc"] if str(p) in _GROUP_OF or str(p) in _GROUPS) or "settings"
            cause = (error.get("ctx") or {}).get("error")
            raise SpecError(f"{name}: {cause if isinstance(cause, ValueError) else error['msg']}") from None


class Limits(_Settings):
    """How much delegation may do.

    Attributes:
        max_concurrent_tasks: ``task`` children running at once, across the agent's runs; more wait (``None``: no cap).
        max_delegations: ``task`` calls and background starts per run (since the last user message); more are
            refused (``None``: no cap).
        max_root_turns: the root's own model calls per ``invoke`` or resume; past it the run ends with a message
            naming the limit (``None``: no cap).
        max_dynamic_subagents: subagents ``create_subagent`` may define per thread.
        short_answer_threshold: a child answer shorter than this gets one request for a complete report (0: off).
        budget: a :class:`~subagents.Budget` covering the parent's own model calls and every child's.
        wrap_up: for specs that set none, the last model call a limit allows is a wrap-up with no tools: ``True``
            (0.15 of ``timeout_s`` left), that share, or ``False`` (an error; see :class:`subagents._metering.WrapUp`).
        force_delegation: the first model call of each turn must call ``task``: ``True`` (any agent), an agent name,
            or a :class:`middleware.ForceDelegation` choosing the mechanism.
    """

    max_concurrent_tasks: int | None = Field(default=None, ge=1)
    max_delegations: int | None = Field(default=50, ge=1)
    max_root_turns: int | None = Field(default=DEFAULT_MAX_ROOT_TURNS, ge=1)
    max_dynamic_subagents: int = Field(default=8, ge=1)
    short_answer_threshold: int = 0  # opt-in
    budget: Budget | None = None
    wrap_up: WrapUpSetting = True
    force_delegation: SkipValidation[Any] = None  # checked by middleware._limits.coerce_force_delegation

    @field_validator("short_answer_threshold")
    @classmethod
    def _not_negative(cls, value: int) -> int:
        if value < 0:
            raise SpecError(f"must be >= 0 (got {value})")
        return value


class Observability(_Settings):
    """Where transcripts go and what tokens cost.

    Attributes:
        sessions_dir: write each child's transcript to ``<sessions_dir>/<thread_id>/subagents/agent-<task_id>.jsonl``.
        transcript_store: ``True`` to keep transcripts in the graph's ``BaseStore``, or a store to use.
        prices: model name -> USD per million (input, output) tokens, for the cost in each record.
    """

    sessions_dir: Annotated[str | Path | None, BeforeValidator(
        lambda value: Path(os.fspath(value)) if isinstance(value, os.PathLike) else value)] = None
    transcript_store: SkipValidation[BaseStore | bool | None] = None
    prices: SkipValidation[PriceTable | None] = None  # checked by subagents._metering.check_prices


class BackgroundSettings(_Settings):
    """The background-task tools (``start_async_task`` ...), if any.

    Attributes:
        background_subagents: more specs for background use only (remote ones, say); any gives
            ``create_deep_agent``'s root the background tools.
        max_background_tasks: local background tasks running at once; more wait as ``pending`` (``None``: no cap).
        background_runtime: the :class:`~subagents.BackgroundRuntime` they run on (default: one the middleware owns).
        notify: announce finished tasks before each parent model call.
        notice_result_chars, notice_total_chars: how much of each result a notice quotes, and of all (the rest
            are counted and pointed to ``check_async_task``).
    """

    background_subagents: SkipValidation[tuple[Any, ...]] = ()
    max_background_tasks: int | None = Field(default=8, ge=1)
    background_runtime: SkipValidation[RuntimeHandle | None] = None
    notify: bool = True
    notice_result_chars: int = Field(default=2000, ge=0)
    notice_total_chars: int = Field(default=DEFAULT_NOTICE_TOTAL_CHARS, ge=0)

    @field_validator("background_subagents", mode="before")
    @classmethod
    def _as_tuple(cls, value: Any) -> tuple[Any, ...]:
        if isinstance(value, (str, Mapping)) or not isinstance(value, Iterable):
            raise SpecError(f"expected a list of subagent specs, got {type(value).__name__}")
        return tuple(value)


class Definitions(_Settings):
    """Where subagents, skills and models come from, how ``task`` offers them, and the policy children inherit.

    Attributes:
        agents_dirs: agent-file directories in precedence order (see :func:`subagents.load_agent_dirs`); ``None``: none.
        skills_dirs: skill directories, likewise; the root's prompt lists every skill, a child's those its spec names.
        model_profiles: profile name -> model, for specs' ``model`` names.
        unknown_model: ``"inherit"``: an unresolvable model name falls back to the parent's model, not an error.
        permission_mode: the approval policy of every child whose spec sets none, a floor under one that sets its
            own, and of ``create_deep_agent``'s root's own tools (docs/approvals.md; ``None``: none unless a spec asks).
        risky_tools: tool names that ``confirm_risky`` pauses on.
        mcp_servers: MCP servers (name -> ``{command, args, env}`` or ``{url, headers}``) specs may name undefined.
        state_schemas: the parent's state schemas; a declarative child gets their keys but excluded and private ones.
        unknown_tools: what a spec naming a tool the parent lacks gets.
        general_purpose: add the ``general-purpose`` subagent unless a spec of that name replaces it.
        retry_truncated: for specs that set none, ask once more for a reply cut at the token limit
            (:mod:`subagents._truncation`).
        dynamic_subagents: add the ``create_subagent`` tool (:mod:`middleware._dynamic`).
        structured_results: ``task`` accepts an optional ``output_schema``.
        name_enum: also list the agent names as an ``enum`` in the ``task`` schema, for a server that constrains
            calls to it (each name costs tokens per call).
    """

    agents_dirs: SkipValidation[DirLevels | None] = None  # checked by the loaders
    skills_dirs: SkipValidation[DirLevels | None] = None
    model_profiles: Annotated[SkipValidation[ModelProfiles], BeforeValidator(check_profiles)] = {}
    unknown_model: UnknownModelPolicy = "error"
    permission_mode: Annotated[PermissionMode | None, BeforeValidator(normalize_permission_mode)] = None
    risky_tools: frozenset[str] = frozenset()
    mcp_servers: SkipValidation[Mapping[str, Mapping[str, Any]]] = {}
    state_schemas: Annotated[SkipValidation[tuple[Any, ...]],
                             BeforeValidator(lambda found: tuple(s for s in found if s is not None))] = ()
    unknown_tools: UnknownToolPolicy = "warn"
    general_purpose: bool = True
    retry_truncated: RetryTruncatedSetting = False
    dynamic_subagents: bool = False
    structured_results: bool = False
    name_enum: bool = False
    _skills: SkillCatalog | None = PrivateAttr(None)

    @field_validator("risky_tools", mode="before")
    @classmethod
    def _names(cls, value: Any) -> frozenset[str]:
        if isinstance(value, str) or not isinstance(value, Iterable):
            raise SpecError(f"expected a set of tool names, got {value!r}")
        return frozenset(value)

    @field_validator("mcp_servers", mode="before")
    @classmethod
    def _servers(cls, value: Any) -> dict[str, dict[str, Any]]:
        if not value:  # with none, the MCP client code is not even loaded
            return {}
        from subagents.definitions._mcp import normalize_mcp_config

        servers = normalize_mcp_config(value) or {}
        if undefined := [name for name, config in servers.items() if not config]:
            raise SpecError(f"server '{undefined[0]}' has no config; expected 'command' or 'url'")
        return servers

    def skills(self) -> SkillCatalog:
        """The skills found in ``skills_dirs`` (none when it is ``None``), read once."""
        from subagents.definitions._skills import load_skill_dirs

        if self._skills is None:  # read once: the root's prompt and each middleware's children share it
            self._skills = load_skill_dirs(self.skills_dirs) if self.skills_dirs is not None else SkillCatalog()
        return self._skills


class RootGraph(_Settings):
    """How :func:`deep_agent.create_deep_agent` builds the root's graph.

    Attributes:
        interrupt_before, interrupt_after: node names to pause before or after, as ``create_agent`` takes them.
        deepagents_stack: build the root with deepagents' ``create_deep_agent`` (``None``: when installed); ``False``:
            this library's own stack (deepagents' ``backend``, ``skills``, ``memory``, ``permissions`` then fail).
    """

    interrupt_before: SkipValidation[list[str] | None] = None
    interrupt_after: SkipValidation[list[str] | None] = None
    deepagents_stack: bool | None = None


class DelegationSettings(_Settings):
    """Every group; each layer reads the ones it needs. Build it by group, or flat with :meth:`of`.

    Example::

        settings = DelegationSettings(limits=Limits(max_concurrent_tasks=2))
        settings == DelegationSettings.of(max_concurrent_tasks=2)    # True
        BackgroundSubagentMiddleware(specs, settings=settings.updated(max_background_tasks=2))
    """

    limits: Limits = Limits()
    observability: Observability = Observability()
    background: BackgroundSettings = BackgroundSettings()
    definitions: Definitions = Definitions()
    root: RootGraph = RootGraph()

    @classmethod
    def of(cls, **fields: Any) -> DelegationSettings:
        """The defaults with ``fields`` (any group's, by name): ``DelegationSettings.of(max_concurrent_tasks=4)``."""
        return cls().updated(**fields)

    def updated(self, **fields: Any) -> DelegationSettings:
        """A copy with ``fields`` (any group's, by name) replaced, validated (an unknown name raises
        :class:`~subagents.InvalidArgumentType`, a bad value :class:`~subagents.SpecError`)."""
        groups: dict[str, dict[str, Any]] = {}
        for name, value in fields.items():
            if name not in _GROUP_OF:
                raise InvalidArgumentType(f"DelegationSettings: no setting {name!r} (see docs/migrating.md)")
            groups.setdefault(_GROUP_OF[name], {})[name] = value
        # Field by field, not model_dump(): that would turn a chat model in a mapping into a dict.
        return self.model_copy(update={
            group: type(current := getattr(self, group))(**{**dict(current), **values})
            for group, values in groups.items()})


_GROUPS = frozenset(DelegationSettings.model_fields)
_GROUP_OF: dict[str, str] = {  # each field's name -> its group, read off the models: the one map `of` uses
    name: group for group, info in DelegationSettings.model_fields.items()
    for name in cast("type[_Settings]", info.annotation).model_fields
}
