"""Dynamic subagents: specialists a parent defines at run time, under the same rules.

A definition is a JSON-ready dict kept in the parent's state under
:data:`DYNAMIC_SUBAGENTS_KEY` (so a checkpointer persists it and a resumed
thread still has it). :func:`check_definition` holds every rule:

* the name is a slug that shadows no declared subagent and no earlier
  definition, and the number of definitions stays under the cap;
* ``tools`` only narrows the parent's tools: every name must be one of
  them, and never a delegation, todo or memory tool (``None`` inherits the
  parent's tools, minus those, like any child);
* ``max_turns`` only tightens the default (1 to :data:`DEFAULT_MAX_TURNS`);
* description and prompt are non-blank and bounded, since every definition
  is listed in each later parent prompt.

A definition is checked again whenever it is used, so a definition that
reached the state some other way (an input, a state edit) gets no more
than a created one.

Example::

    definition = check_definition(
        {"name": "sql-expert", "description": "Writes SQL.", "system_prompt": "You write SQL.",
         "tools": ["run_query"], "max_turns": 6},
        declared=("general-purpose",), existing={}, parent_tools=["run_query", "search"], cap=8,
    )
    spec = spec_from_definition(definition)
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Collection, Mapping
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError

DYNAMIC_SUBAGENTS_KEY = "dynamic_subagents"
"""Parent state key the delegation middleware keeps run-time definitions under."""

# Below the key on purpose: modules these import read DYNAMIC_SUBAGENTS_KEY while this one loads.
from subagents._errors import SpecError  # noqa: E402
from subagents._one_level import FORBIDDEN_TOOL_NAMES  # noqa: E402
from subagents._spec import DEFAULT_MAX_TURNS, NAME_PATTERN, SubagentSpec  # noqa: E402

DEFAULT_MAX_DYNAMIC_SUBAGENTS = 8
MAX_NAME_CHARS = 64
MAX_DESCRIPTION_CHARS = 1_000
MAX_PROMPT_CHARS = 20_000


class DynamicSubagentError(SpecError):
    """A ``create_subagent`` request breaks a rule; the message names the argument."""


class DynamicDefinition(BaseModel):
    """What ``create_subagent`` accepts (and what is kept in state, plus provenance)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    name: str
    description: str
    system_prompt: str
    tools: list[str] | None = None
    max_turns: int | None = Field(default=None, strict=True)


def merge_definitions(
    left: dict[str, dict[str, Any]] | None, right: dict[str, dict[str, Any]] | None
) -> dict[str, dict[str, Any]]:
    """Reducer: new names are added; an existing definition is never replaced."""
    if not left:
        return dict(right or {})
    if not right:
        return left
    return {**right, **left}


def check_definition(
    request: Mapping[str, Any],
    *,
    declared: Collection[str],
    existing: Mapping[str, Any],
    parent_tools: Collection[str],
    cap: int,
) -> DynamicDefinition:
    """The definition ``request`` describes, or :class:`DynamicSubagentError` saying which rule it breaks."""
    try:
        definition = DynamicDefinition.model_validate(dict(request))
    except ValidationError as exc:
        first = exc.errors()[0]
        field = ".".join(str(p) for p in first["loc"]) or "arguments"
        raise DynamicSubagentError(f"{field}: {first['msg']}") from None
    name = definition.name
    if not NAME_PATTERN.fullmatch(name) or len(name) > MAX_NAME_CHARS:
        raise DynamicSubagentError(
            f"name: must be a slug of letters, digits, '-' and '_' (at most {MAX_NAME_CHARS}), "
            f"got {name[:80]!r}"
        )
    if name in declared:
        raise DynamicSubagentError(
            f"name: {name!r} is a declared subagent and cannot be shadowed; choose another name"
        )
    if name in existing:
        raise DynamicSubagentError(
            f"name: a subagent named {name!r} was already created; delegate to it, or choose another name"
        )
    if len(existing) >= cap:
        raise DynamicSubagentError(
            f"the limit of {cap} created subagents is reached ({', '.join(sorted(existing))}); "
            "delegate to one of them instead"
        )
    _check_text("description", definition.description, MAX_DESCRIPTION_CHARS)
    _check_text("system_prompt", definition.system_prompt, MAX_PROMPT_CHARS)
    _check_tools(definition.tools, parent_tools)
    if definition.max_turns is not None and not 1 <= definition.max_turns <= DEFAULT_MAX_TURNS:
        raise DynamicSubagentError(
            f"max_turns: can only tighten the default limit: between 1 and {DEFAULT_MAX_TURNS}, "
            f"got {definition.max_turns}"
        )
    return definition


def _check_text(field: str, value: str, limit: int) -> None:
    if not value.strip():
        raise DynamicSubagentError(f"{field}: must not be empty")
    if len(value) > limit:
        raise DynamicSubagentError(f"{field}: {len(value)} characters; at most {limit} are accepted")


def _check_tools(tools: list[str] | None, parent_tools: Collection[str]) -> None:
    if tools is None:
        return
    for name in tools:
        if name in FORBIDDEN_TOOL_NAMES:
            raise DynamicSubagentError(
                f"tools: {name!r} is a delegation, todo or memory tool; a subagent never holds one"
            )
        if name not in parent_tools:
            available = ", ".join(sorted(parent_tools)) or "none"
            raise DynamicSubagentError(
                f"tools: {name[:80]!r} is not one of your tools, and a subagent's tools can only "
                f"narrow yours (available: {available})"
            )


def spec_from_definition(definition: DynamicDefinition | Mapping[str, Any]) -> SubagentSpec:
    """The :class:`SubagentSpec` a (checked) definition builds into."""
    if not isinstance(definition, DynamicDefinition):
        fields = {k: definition.get(k) for k in DynamicDefinition.model_fields if k in definition}
        definition = DynamicDefinition.model_validate(fields)
    return SubagentSpec(
        name=definition.name,
        description=definition.description,
        system_prompt=definition.system_prompt,
        tools=None if definition.tools is None else tuple(definition.tools),
        max_turns=definition.max_turns,
        metadata={"dynamic": True},
    )


def definition_key(definition: Mapping[str, Any]) -> str:
    """A hash of what a definition builds (not when or by which call it was made)."""
    fields = {k: definition.get(k) for k in DynamicDefinition.model_fields}
    return hashlib.sha256(json.dumps(fields, sort_keys=True, default=str).encode()).hexdigest()
