"""Agent files: one subagent per markdown file, YAML frontmatter for the fields, the body for the prompt."""

from __future__ import annotations

import os
import re
import warnings
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from subagents._errors import AgentFileError, DefinitionFileWarning, brief
from subagents._spec import NAME_PATTERN, SubagentSpec
from subagents.definitions._files import (
    AGENT_DIRS,
    DirLevels,
    Discovery,
    MissingDirPolicy,
    PathLike,
    read_frontmatter,
    scan_levels,
)

# Claude Code's format, with the my-pi-agent/OpenHands fields too: every spelling of a field is accepted (two
# spellings of one field is an error); unknown fields are kept in the spec's ``metadata``, with a warning.

# The spec fields an agent file may set, named one by one: a file is data, so a field added to the spec (code, a
# callback) is never read from one until it is listed here.
_FIELDS = ("name", "description", "tools", "disallowed_tools", "model", "skills", "color", "max_turns",
           "max_budget_per_run", "max_tokens", "short_answer_threshold", "retry_truncated", "wrap_up", "timeout_s",
           "recursion_limit", "permission_mode", "mcp_config", "condenser", "hooks", "interrupt_on", "metadata",
           "context")
_ALIASES = {"max_turns": ("max_iteration_per_run",), "mcp_config": ("mcp_servers", "mcpServers")}

FIELD_SPELLINGS: Mapping[str, tuple[str, ...]] = {
    field: tuple(dict.fromkeys((field, re.sub(r"_(\w)", lambda m: m[1].upper(), field), *_ALIASES.get(field, ()))))
    for field in _FIELDS}
"""Each spec field an agent file may set, and every spelling accepted for it (its own, camelCase, old aliases)."""

DEPRECATED_SPELLINGS: Mapping[str, str] = {"mcp_servers": "mcp_config", "mcpServers": "mcp_config"}

_LIST_FIELDS = ("tools", "disallowed_tools", "skills")
# Commas inside parentheses belong to one entry: ``Bash(git add, git commit)``.
_LIST_SPLIT = re.compile(r",(?![^()]*\))")

_EXPECTED: Mapping[str, str] = {
    "int_type": "an integer", "float_type": "a number", "string_type": "a string", "bool_type": "true or false",
    "dict_type": "a mapping", "mapping_type": "a mapping", "list_type": "a list", "tuple_type": "a list",
    "greater_than": "a number greater than {gt}", "literal_error": "one of {expected}"}
_FIELD_EXPECTED: Mapping[str, str] = {
    "max_turns": "a positive integer (model calls)",
    "recursion_limit": "a positive integer (graph steps)",
    "timeout_s": "a positive number of seconds",
    "max_budget_per_run": "a positive number (US dollars)",
    "max_tokens": "a positive integer (tokens)",
    "short_answer_threshold": "a non-negative integer (characters; 0: off)",
    "retry_truncated": "true, false, brief or more_tokens",
    "wrap_up": "true, false, or the share of timeout_s left that starts the wrap-up (above 0, below 1)",
}
_SEVERAL_TYPES = ("retry_truncated", "wrap_up")  # of several types: their own expectation, not the first type's
_NUMBER_ERRORS = ("int_type", "float_type", "greater_than", "greater_than_equal")


def load_agent_file(path: str | os.PathLike[str]) -> SubagentSpec:
    """Load one agent file; problems raise :class:`AgentFileError`, oddities warn."""
    spec, notes = parse_agent_file(path)
    for note in notes:
        warnings.warn(DefinitionFileWarning(note), stacklevel=2)
    return spec


def parse_agent_file(path: str | os.PathLike[str]) -> tuple[SubagentSpec, list[str]]:
    """``(spec, warnings)`` for one agent file, without emitting the warnings."""
    path = Path(path)
    notes: list[str] = []
    fields, body = read_frontmatter(path, AgentFileError, notes)
    # Canonical field -> value, and canonical field -> the spelling the file used.
    by_spelling = {s: f for f, spellings in FIELD_SPELLINGS.items() for s in spellings}
    values: dict[str, Any] = {}
    written: dict[str, str] = {}
    unknown: dict[str, Any] = {}
    for key, value in fields.items():
        field = by_spelling.get(key)
        if field is None:
            unknown[key] = value
            notes.append(f"{path}: unknown field '{key}' kept in metadata, not used")
            continue
        if field in written:
            raise AgentFileError(path, f"given twice, also as '{written[field]}'; expected one spelling", field=key)
        if key in DEPRECATED_SPELLINGS:
            notes.append(f"{path}: field '{key}' is a deprecated alias; use '{DEPRECATED_SPELLINGS[key]}'")
        values[field], written[field] = value, key
    metadata = values.get("metadata", {})
    if not isinstance(metadata, Mapping):
        raise AgentFileError(path, f"expected a mapping, got {brief(metadata)}", field="metadata")
    values["metadata"] = {**metadata, **unknown}
    # Checks and conversions an agent file needs beyond the spec's own validation.
    values["source"] = str(path)
    if "name" not in values:
        values["name"], written["name"] = path.stem, "name"
        if not NAME_PATTERN.fullmatch(path.stem):
            raise AgentFileError(path, f"missing, and the file stem {brief(path.stem)} is not a valid name; expected "
                                 "letters, digits, '-', '_' and single inner dots", field="name")
    if values.get("description") is None:
        raise AgentFileError(path, "required; expected a non-empty string that tells the parent when to use this agent",
                             field=written.get("description", "description"))
    for name in _LIST_FIELDS:
        if name in values:
            values[name] = _names(values[name], name, written[name], path)
    if (model := values.get("model")) is not None and not isinstance(model, str):
        raise AgentFileError(path,
                             f"expected 'inherit', 'provider:model' or a profile name (a string), got {brief(model)}",
                             field=written["model"])
    if "condenser" not in values:
        values["condenser"] = "default"  # an agent file summarises unless it says otherwise
    elif values["condenser"] is None:
        values["condenser"] = False  # ``condenser:`` with no value reads as "none"
    if not body:
        raise AgentFileError(path, "has an empty body; expected the agent's system prompt after the closing '---'")
    values["system_prompt"] = body
    try:
        spec = SubagentSpec.model_validate(values)
    except ValidationError as exc:
        err = exc.errors()[0]
        field = str(err["loc"][0]) if err["loc"] else None
        raise AgentFileError(path, _explain(err), field=written.get(field or "", field)) from None
    if spec.mcp_config and spec.tools is not None and not any(isinstance(t, str) and t.startswith("mcp__")
                                                              for t in spec.tools):
        notes.append(f"{path}: field '{written['tools']}' admits none of the tools of its MCP servers; "
                     "add 'mcp__<server>' or 'mcp__<server>__<tool>' (globs allowed) to use them")
    return spec, notes


def _names(value: Any, field: str, key: str, path: Path) -> tuple[str, ...]:
    if value is None:
        if field == "tools":
            # Reading an empty ``tools:`` as "inherit all" would widen the child.
            raise AgentFileError(path, "is empty; expected a list or comma-separated names (omit the field to "
                                 "inherit the parent's tools, or write [] for no tools)", field=key)
        return ()
    if isinstance(value, str):
        items = [item.strip() for item in _LIST_SPLIT.split(value)]
        return tuple(item for item in items if item)
    if isinstance(value, list):
        for item in value:
            if not isinstance(item, str) or not item.strip():
                raise AgentFileError(path, f"expected every item to be a non-empty name, got {brief(item)}", field=key)
        return tuple(item.strip() for item in value)
    raise AgentFileError(path, f"expected a list or a comma-separated string of names, got {brief(value)}", field=key)


def _explain(err: Mapping[str, Any]) -> str:
    """A pydantic error as "expected ..., got ..."."""
    got = err.get("input")
    if err["type"] == "value_error":
        message = str(err["msg"]).removeprefix("Value error, ")
        return message if "got" in message else f"{message}, got {brief(got)}"
    field = str(err["loc"][0]) if err["loc"] else ""
    if (err["type"] in _NUMBER_ERRORS or field in _SEVERAL_TYPES) and field in _FIELD_EXPECTED:
        return f"expected {_FIELD_EXPECTED[field]}, got {brief(got)}"
    template = _EXPECTED.get(err["type"])
    if template is None:
        return f"{err['msg']}, got {brief(got)}"
    expected = template.format(**(err.get("ctx") or {}))
    where = "".join(f"[{p}]" for p in err["loc"][1:] if not isinstance(p, str))
    return f"expected {expected}{' for item ' + where if where else ''}, got {brief(got)}"


def discover_agents(dirs: DirLevels | None = None, *, project_dir: PathLike | None = None, home: PathLike | None = None,
                    missing: MissingDirPolicy | None = None) -> Discovery[SubagentSpec]:
    """Scan agent directories (default: project then user level; see ``scan_levels``); never raises for a file."""
    return scan_levels(dirs, AGENT_DIRS, project_dir=project_dir, home=home, files_in=lambda d: sorted(
                           p for p in d.glob("*.md") if p.is_file() and p.name.lower() != "readme.md"),  # but README
                       parse=parse_agent_file, name_of=lambda spec: spec.name, error=AgentFileError, kind="agent",
                       missing=missing)


def load_agent_dirs(dirs: DirLevels) -> list[SubagentSpec]:
    """The winning specs of ``dirs`` (see :func:`as_levels`); any problem raises."""
    report = discover_agents(dirs)
    report.raise_for_problems()
    for _, note in report.notes:
        warnings.warn(DefinitionFileWarning(note), stacklevel=2)
    return report.values
