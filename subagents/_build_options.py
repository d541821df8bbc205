"""What the caller decides for every child it builds, beyond each spec.

Specs say what one subagent wants; :class:`BuildOptions` says what the
caller offers them all: the model profiles names resolve through, the
skills they may choose from, which tools are risky, and the parent's own
permission policy (inherited by a spec that sets none).

Example::

    options = BuildOptions(
        model_profiles={"sonnet": "anthropic:claude-sonnet-4-5"},
        risky_tools={"write_file", "shell"},
        permission_mode="confirm_risky",
        skills=load_skill_dirs(["skills"]),
    )
    check_spec(spec, options)   # raises SpecError if its model or skills cannot resolve
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Mapping
from typing import Any

from subagents._spec import AnySpec, CompiledSubagent, SpecError
from subagents.definitions._mcp_config import normalize_mcp_config
from subagents.definitions._models import ModelProfile, UnknownModelPolicy, check_profiles, lookup_model
from subagents.definitions._permissions import PermissionMode, normalize_permission_mode
from subagents.definitions._skills import SkillCatalog
from subagents.definitions._spec_skills import skills_for


@dataclasses.dataclass(frozen=True)
class BuildOptions:
    """Caller-wide settings for building children (all optional).

    Attributes:
        model_profiles: profile name -> model (see :mod:`subagents.definitions._models`).
        unknown_model: ``"error"`` (default) or ``"inherit"`` for a model
            name that is no profile, ``inherit`` or ``provider:model``.
        risky_tools: names of the tools ``confirm_risky`` pauses on.
        permission_mode: the parent's policy, for specs that set none.
        skills: the skills a spec's ``skills`` may name.
        mcp_servers: MCP servers (name -> config, see :mod:`subagents.definitions._mcp_config`)
            that a spec's ``mcp_config`` may name without defining, as
            Claude Code's list form does (``mcpServers: [github]``).
        interrupt_on: the parent's per-tool approval rules (deepagents'
            ``interrupt_on``), for specs that set none.
        excluded_keys: keys the delegating middleware keeps to the parent
            (ledgers, todos, ...); never in a child's state schema.
        state_schemas: the parent's state schemas; a declarative child gets
            their keys, minus the excluded and private ones.
    """

    model_profiles: Mapping[str, ModelProfile] = dataclasses.field(default_factory=dict)
    unknown_model: UnknownModelPolicy = "error"
    risky_tools: frozenset[str] = frozenset()
    permission_mode: PermissionMode | None = None
    skills: SkillCatalog = dataclasses.field(default_factory=SkillCatalog)
    mcp_servers: Mapping[str, Mapping[str, Any]] = dataclasses.field(default_factory=dict)
    interrupt_on: Mapping[str, Any] | None = None
    state_schemas: tuple[Any, ...] = ()
    excluded_keys: frozenset[str] = frozenset()

    def __post_init__(self) -> None:
        try:
            servers = normalize_mcp_config(dict(self.mcp_servers)) or {}
        except (TypeError, ValueError) as exc:
            raise SpecError(f"mcp_servers: {exc}") from None
        undefined = [name for name, config in servers.items() if not config]
        if undefined:
            raise SpecError(f"mcp_servers: server '{undefined[0]}' has no config; expected 'command' or 'url'")
        object.__setattr__(self, "mcp_servers", servers)
        object.__setattr__(self, "model_profiles", check_profiles(self.model_profiles))
        if self.unknown_model not in ("error", "inherit"):
            raise SpecError(
                f"unknown_model: expected 'error' or 'inherit', got {self.unknown_model!r}"
            )
        risky: Any = self.risky_tools
        if isinstance(risky, str) or not isinstance(risky, Iterable):
            raise SpecError(f"risky_tools: expected a set of tool names, got {risky!r}")
        object.__setattr__(self, "risky_tools", frozenset(risky))
        try:
            mode = normalize_permission_mode(self.permission_mode)
        except ValueError as exc:
            raise SpecError(f"permission_mode: {exc}") from None
        object.__setattr__(self, "permission_mode", mode)
        if self.interrupt_on is not None and not isinstance(self.interrupt_on, Mapping):
            raise SpecError(f"interrupt_on: expected a mapping of tool name to rule, got {self.interrupt_on!r}")
        object.__setattr__(self, "state_schemas", tuple(s for s in self.state_schemas if s is not None))
        if not isinstance(self.skills, SkillCatalog):
            object.__setattr__(self, "skills", SkillCatalog(self.skills))


def check_spec(spec: AnySpec, options: BuildOptions) -> None:
    """Fail now, not at first delegation, if ``spec``'s model or skills cannot resolve.

    Nothing is built: a profile is looked up, not instantiated.
    """
    if isinstance(spec, CompiledSubagent):
        return
    lookup_model(
        spec.model,
        agent=spec.name,
        profiles=options.model_profiles,
        unknown_model=options.unknown_model,
    )
    skills_for(spec.skills, options.skills, agent=spec.name)
    condenser_model = spec.condenser.get("model") if spec.condenser else None
    if condenser_model is not None:
        lookup_model(
            condenser_model,
            agent=spec.name,
            profiles=options.model_profiles,
            unknown_model=options.unknown_model,
        )
