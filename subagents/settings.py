"""Delegation settings: four typed groups, passed whole from layer to layer.

``create_deep_agent`` takes flat keyword arguments; they are grouped here
once (:meth:`DelegationSettings.from_arguments`) and every layer below
(the middlewares, the background tasks, the runner) takes the groups whole
instead of relaying each argument:

* :class:`Limits` -- how much delegation may do (concurrency, caps, budget).
* :class:`Observability` -- where transcripts go and what tokens cost.
* :class:`BackgroundSettings` -- the background-task tools, if any.
* :class:`Definitions` -- where subagents, skills and models come from, and
  the approval policy children inherit.

Every model is frozen; a bad value raises :class:`~subagents.errors.SpecError`
naming the keyword argument.

Example::

    settings = DelegationSettings.from_arguments(
        "create_deep_agent",
        {"max_concurrent_tasks": 4, "sessions_dir": "runs", "max_background_tasks": 2},
    )
    settings.limits.max_concurrent_tasks      # 4
    settings.background.max_tasks             # 2 (given as max_background_tasks)
    SubAgentMiddleware(specs, settings=settings)
"""

from __future__ import annotations

import enum
import os
from collections.abc import Collection, Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any, Literal, Protocol

from langgraph.store.base import BaseStore
from pydantic import BaseModel, ConfigDict, Field, SkipValidation, ValidationError, field_validator

from subagents.builder import BuildOptions
from subagents.definitions.files import DirLevels
from subagents.definitions.models import ModelProfiles, UnknownModelPolicy
from subagents.definitions.permissions import PermissionMode, normalize_permission_mode
from subagents.definitions.skills import SkillCatalog
from subagents.errors import InvalidArgumentType, SpecError
from subagents.metering import Budget, PriceTable, WrapUpSetting
from subagents.outcome import DEFAULT_SHORT_ANSWER_THRESHOLD
from subagents.truncation import RetryTruncatedSetting

DEFAULT_MAX_DELEGATIONS = 50
"""Delegations (``task`` calls, background starts) allowed per run unless ``max_delegations`` says otherwise."""

DEFAULT_MAX_BACKGROUND_TASKS = 8
"""Background tasks running at once unless ``max_background_tasks`` says otherwise."""


class Unset(enum.Enum):
    """The type of :data:`UNSET`: a keyword argument the caller did not give."""

    UNSET = "UNSET"

    def __repr__(self) -> str:
        return "UNSET"


UNSET = Unset.UNSET
"""A keyword argument left out: its value comes from ``settings=`` (or the default).

The middlewares take every setting as an explicit keyword argument whose
default is ``UNSET``, so ``None`` can still mean "no limit" when given.
"""


def given(**arguments: Any) -> dict[str, Any]:
    """The keyword arguments a caller gave: every one that is not :data:`UNSET`."""
    return {name: value for name, value in arguments.items() if value is not UNSET}


class RuntimeHandle(Protocol):
    """What settings need of a background runtime: nothing but to hold it and hand it on.

    Typed by a protocol so that settings never import the runtime (the runtime
    imports the runner, which reads settings); the background middleware checks
    that what it is handed is a :class:`~subagents.BackgroundRuntime`.
    """

    def close(self) -> None: ...


class _Settings(BaseModel):
    # Strict: "8" or True is no count. Objects the caller owns (a store, a
    # runtime, a price table) pass as they are: fields typed SkipValidation
    # are checked by the code that uses them, with its own messages naming
    # the argument.
    model_config = ConfigDict(frozen=True, extra="forbid", arbitrary_types_allowed=True,
                              populate_by_name=True, strict=True)

    @classmethod
    def argument_names(cls) -> dict[str, str]:
        """Keyword argument name -> field name (an alias, when the field has one)."""
        return {(f.alias or name): name for name, f in cls.model_fields.items()}


class Limits(_Settings):
    """How much delegation may do.

    Attributes:
        max_concurrent_tasks: ``task`` children running at once (``None``: no cap).
        max_delegations: delegations allowed per run, ``task`` calls and background starts (``None``: no cap).
        max_dynamic_subagents: subagents ``create_subagent`` may define per thread.
        short_answer_threshold: an answer shorter than this gets one request
            for a complete report (0: off).
        budget: a :class:`~subagents.Budget` shared by the parent and every child.
        wrap_up: for specs that set none, the last model call a limit allows
            is a wrap-up with no tools, so the task ends with the child's own
            answer: ``True`` (the default, starting it when 0.15 of
            ``timeout_s`` is left), or that share; ``False``: each limit ends a task with an error
            (see :class:`subagents.metering.WrapUp`).
    """

    max_concurrent_tasks: int | None = None
    max_delegations: int | None = DEFAULT_MAX_DELEGATIONS
    max_dynamic_subagents: int = 8
    short_answer_threshold: int = DEFAULT_SHORT_ANSWER_THRESHOLD
    budget: Budget | None = None
    wrap_up: WrapUpSetting = True

    @field_validator("short_answer_threshold")
    @classmethod
    def _not_negative(cls, value: int) -> int:
        if value < 0:
            raise SpecError(f"must be >= 0 (got {value})")
        return value


class Observability(_Settings):
    """Where transcripts go and what tokens cost.

    Attributes:
        sessions_dir: write each child's transcript as JSONL under this folder.
        transcript_store: ``True`` to keep transcripts in the graph's
            ``BaseStore``, or a store to use.
        prices: model name -> USD per million (input, output) tokens.
    """

    sessions_dir: str | Path | None = None
    transcript_store: SkipValidation[BaseStore | bool | None] = None
    prices: SkipValidation[PriceTable | None] = None  # checked by subagents.metering.check_prices

    @field_validator("sessions_dir", mode="before")
    @classmethod
    def _path(cls, value: Any) -> Any:
        return Path(os.fspath(value)) if isinstance(value, os.PathLike) else value


class BackgroundSettings(_Settings):
    """The background-task tools (``start_async_task`` ...), if any.

    Attributes:
        enabled (``background``): give the root the background tools.
        subagents (``background_subagents``): more specs for background use
            only (remote ones, say); giving any turns the tools on.
        max_tasks (``max_background_tasks``): background tasks running at once.
        runtime (``background_runtime``): the
            :class:`~subagents.BackgroundRuntime` they run on (default: a new one).
    """

    enabled: bool = Field(False, alias="background")
    subagents: SkipValidation[tuple[Any, ...]] = Field((), alias="background_subagents")
    max_tasks: int | None = Field(DEFAULT_MAX_BACKGROUND_TASKS, alias="max_background_tasks")
    runtime: SkipValidation[RuntimeHandle | None] = Field(None, alias="background_runtime")

    @field_validator("subagents", mode="before")
    @classmethod
    def _as_tuple(cls, value: Any) -> tuple[Any, ...]:
        if isinstance(value, (str, Mapping)) or not isinstance(value, Iterable):
            raise SpecError(f"expected a list of subagent specs, got {type(value).__name__}")
        return tuple(value)

    @property
    def wanted(self) -> bool:
        """Whether the root gets the background tools."""
        return self.enabled or bool(self.subagents)


class Definitions(_Settings):
    """Where subagents, skills and models come from, and the policy children inherit.

    Attributes:
        agents_dirs, skills_dirs: agent-file and skill directories, in
            precedence order (see :func:`subagents.load_agent_dirs`).
        model_profiles: profile name -> model, for specs' ``model`` names.
        unknown_model: ``"inherit"`` lets an unresolvable model name fall back.
        permission_mode, risky_tools, interrupt_on: the parent's approval policy.
        mcp_servers: MCP servers specs may name without defining.
        unknown_tools: what a spec naming a tool the parent lacks gets.
        general_purpose: add the ``general-purpose`` subagent.
        retry_truncated: for specs that set none, ask once more for a reply
            cut at the token limit (see :mod:`subagents.truncation`).
    """

    agents_dirs: SkipValidation[DirLevels | None] = None  # checked by the loaders
    skills_dirs: SkipValidation[DirLevels | None] = None
    model_profiles: SkipValidation[ModelProfiles | None] = None  # checked by BuildOptions
    unknown_model: UnknownModelPolicy = "error"
    permission_mode: PermissionMode | None = None
    risky_tools: frozenset[str] = frozenset()
    mcp_servers: SkipValidation[Mapping[str, Mapping[str, Any]] | None] = None
    interrupt_on: SkipValidation[Mapping[str, Any] | None] = None
    unknown_tools: Literal["error", "warn", "ignore"] = "warn"
    general_purpose: bool = True
    retry_truncated: RetryTruncatedSetting = False

    @field_validator("permission_mode", mode="before")
    @classmethod
    def _mode(cls, value: Any) -> PermissionMode | None:
        return normalize_permission_mode(value)

    @field_validator("risky_tools", mode="before")
    @classmethod
    def _names(cls, value: Any) -> frozenset[str]:
        if isinstance(value, str) or not isinstance(value, Iterable):
            raise SpecError(f"expected a set of tool names, got {value!r}")
        return frozenset(value)

    def skills(self) -> SkillCatalog:
        """The skills found in ``skills_dirs`` (none when it is ``None``)."""
        from subagents.definitions.skills import load_skill_dirs

        return load_skill_dirs(self.skills_dirs) if self.skills_dirs is not None else SkillCatalog()

    def build_options(self, skills: SkillCatalog, state_schemas: Sequence[Any] = ()) -> BuildOptions:
        """The :class:`~subagents.BuildOptions` every child is built with."""
        return BuildOptions(
            model_profiles=dict(self.model_profiles or {}),
            unknown_model=self.unknown_model,
            risky_tools=self.risky_tools,
            permission_mode=self.permission_mode,
            skills=skills,
            mcp_servers=dict(self.mcp_servers or {}),
            interrupt_on=self.interrupt_on,
            state_schemas=tuple(state_schemas),
            retry_truncated=self.retry_truncated,
        )


_GROUPS: dict[str, type[_Settings]] = {
    "limits": Limits, "observability": Observability, "background": BackgroundSettings,
    "definitions": Definitions,
}


class DelegationSettings(_Settings):
    """All four groups; each layer reads the ones it needs.

    Example::

        settings = DelegationSettings(limits=Limits(max_concurrent_tasks=2))
        settings.observability.sessions_dir     # None: the defaults elsewhere
    """

    limits: Limits = Limits()
    observability: Observability = Observability()
    background: BackgroundSettings = BackgroundSettings()
    definitions: Definitions = Definitions()

    @classmethod
    def from_arguments(
        cls,
        where: str,
        arguments: Mapping[str, Any],
        *,
        base: DelegationSettings | None = None,
        accepted: Collection[str] | None = None,
        aliases: Mapping[str, str] | None = None,
    ) -> DelegationSettings:
        """``base`` (default: the defaults) with flat keyword ``arguments`` applied.

        ``where`` names the caller in errors; ``accepted`` limits which
        argument names it takes (others raise :class:`InvalidArgumentType`, a ``TypeError``); ``aliases`` maps
        a caller's own name for an argument to the flat one
        (``{"runtime": "background_runtime"}``).
        A bad value raises :class:`SpecError` naming the argument.
        """
        aliases = aliases or {}
        flat = {aliases.get(k, k): v for k, v in arguments.items()}
        spoken = {v: k for k, v in aliases.items()}  # the argument name the caller used
        updates: dict[str, dict[str, Any]] = {}
        unknown: dict[str, Any] = {}
        for name, value in flat.items():
            group = _group_of(name) if accepted is None or name in accepted else None
            if group is None:
                unknown[spoken.get(name, name)] = value
            else:
                updates.setdefault(group, {})[name] = value
        if unknown:  # never a silent accept of an argument that would be ignored
            wrong = "; ".join(f"unexpected keyword argument {name!r}" for name in unknown)
            raise InvalidArgumentType(f"{where}(): {wrong} (see docs/migrating.md)")
        base = base or cls()
        groups: dict[str, Any] = {}
        for group, values in updates.items():
            current = getattr(base, group)
            # Field by field, not model_dump(): that would turn a chat model in a mapping into a dict.
            merged = {arg: getattr(current, field) for arg, field in type(current).argument_names().items()}
            merged.update(values)
            try:
                groups[group] = type(current).model_validate(merged)
            except ValidationError as exc:
                raise SpecError(_first_error(exc, spoken)) from None
        return base.model_copy(update=groups) if groups else base

    @classmethod
    def argument_names(cls) -> dict[str, str]:
        """Every flat keyword argument name -> its group."""
        return {name: group for group, model in _GROUPS.items() for name in model.argument_names()}


def _group_of(name: str) -> str | None:
    for group, model in _GROUPS.items():
        if name in model.argument_names():
            return group
    return None


def _first_error(exc: ValidationError, spoken: Mapping[str, str]) -> str:
    error = exc.errors()[0]
    name = str(error["loc"][0]) if error["loc"] else "settings"
    cause = (error.get("ctx") or {}).get("error")
    message = str(cause) if isinstance(cause, ValueError) else error["msg"]
    return f"{spoken.get(name, name)}: {message}"
