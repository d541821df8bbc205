"""``deep-agent agents list|validate``: agent files, their resolved fields and their problems."""

from __future__ import annotations

import argparse
import dataclasses
import json
import sys
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from deep_agent.cli._errors import UsageError
from deep_agent.cli._terminal import preview, printable
from subagents import DEFAULT_MAX_TURNS, BuildOptions, Definitions, SpecError, SubagentSpec, check_spec
from subagents.definitions import (
    Definition,
    Discovery,
    SkillCatalog,
    check_mcp_servers,
    describe_condenser,
    describe_model,
    discover_skills,
)
from subagents.definitions._agent_files import discover_agents

# Claude Code's model aliases run on the run's model unless --model-profiles maps them (one notice line).
CLAUDE_ALIASES: tuple[str, ...] = ("sonnet", "opus", "haiku")
INHERIT = "inherit"


@dataclasses.dataclass
class ModelPlan:
    """The profiles to build with, the one-line notice, and the files whose model cannot resolve."""

    profiles: dict[str, Any]
    notice: str | None
    problems: dict[str, str]  # agent name -> the error for its model name


def read_mapping(path: Path, flag: str, expected: str) -> dict[Any, Any]:
    """A YAML or JSON file named by ``flag`` that must hold a mapping (``expected`` says of what)."""
    import yaml

    try:
        data = yaml.safe_load(path.read_text(encoding="utf-8-sig"))
    except OSError as exc:
        raise UsageError(f"{flag} {path}: cannot be read ({exc.strerror or exc})") from None
    except yaml.YAMLError as exc:
        raise UsageError(f"{flag} {path}: invalid YAML or JSON: {exc}") from None
    if not isinstance(data, dict):
        raise UsageError(f"{flag} {path}: expected {expected}")
    return data


def read_profiles(path: Path | None) -> dict[str, Any]:
    """The ``--model-profiles`` file: a mapping of name to model (YAML or JSON)."""
    return {} if path is None else read_mapping(path, "--model-profiles", "a mapping of profile name to model")


def plan_models(specs: Iterable[Any], profiles: Mapping[str, Any], *, unknown_model: str) -> ModelPlan:
    """Map every model name the specs use to a profile; collect notices and problems."""
    chosen: dict[str, Any] = dict(profiles)
    fallbacks: dict[str, list[str]] = {}
    problems: dict[str, str] = {}
    for spec in specs:
        values = (getattr(spec, "model", None), (getattr(spec, "condenser", None) or {}).get("model"))
        for name in (value.strip() for value in values if isinstance(value, str)):
            if name in profiles or name == INHERIT or ":" in name:
                continue
            if name in CLAUDE_ALIASES or unknown_model == INHERIT:
                chosen[name] = INHERIT
                fallbacks.setdefault(name, []).append(spec.name)
            else:
                problems[spec.name] = (f"field 'model' {name!r} is not 'inherit', 'provider:model' or a known "
                                       f"profile; pass --model-profiles FILE (with a line `{name}: provider:model`)"
                                       " or --unknown-model inherit")
    named = [f"{name} ({', '.join(sorted(set(agents)))})" for name, agents in sorted(fallbacks.items())]
    listed, many = f"{', '.join(named[:-1])} and {named[-1]}" if len(named) > 1 else "".join(named), len(named) > 1
    notice = (f"model{'s' if many else ''} {listed} {'run' if many else 'runs'} on the run's model; map a name to "
              "another model with --model-profiles FILE") if named else None
    return ModelPlan(profiles=chosen, notice=notice, problems=problems)


def agents_list(args: argparse.Namespace) -> int:
    report, problems, options, plan = scan(args)
    rows = [_describe_agent(d, report, options) for d in report.definitions.values() if d.path not in problems]
    if args.format == "json":
        print(json.dumps(rows, indent=2, default=str))
    else:
        for row in rows:
            print(printable(f"{row['name']}  ({row['source']})"))
            for key, value in row.items():
                if key not in ("name", "source") and value not in (None, [], {}):
                    shown = ", ".join(map(str, value)) if isinstance(value, list) else value
                    print(f"  {key}: {printable(shown)}")
        if not rows and not problems:
            print("no agent files found", file=sys.stderr)
    if plan.notice:
        print(f"note: {printable(plan.notice)}", file=sys.stderr)
    for _, message in report.notes:
        print(f"warning: {printable(message)}", file=sys.stderr)
    for message in problems.values():
        print(f"error: {printable(message)}", file=sys.stderr)
    return 1 if problems else 0


def agents_validate(args: argparse.Namespace) -> int:
    from deep_agent.tools._catalog import tools_not_provided

    report, problems, _, plan = scan(args)
    notes: dict[Path, list[str]] = {}
    for path, message in report.notes:
        notes.setdefault(path, []).append(message)
    for found in report.loaded:  # valid, but `run` would leave these tools out: said, never a failure
        for tool in tools_not_provided([found.value]):
            notes.setdefault(found.path, []).append(
                f"{found.path}: tool '{tool}' is not one deep-agent run has (no built-in or MCP server of the "
                f"file provides it); the agent runs without it")
    for path in report.scanned:
        print(f"FAIL {printable(problems[path])}" if path in problems else f"ok   {printable(path)}")
        for message in notes.get(path, []):
            print(f"warn {printable(message)}")
    for path, message in problems.items():
        if path not in report.scanned:
            print(f"FAIL {printable(message)}")
    if plan.notice:
        print(f"note {printable(plan.notice)}")
    valid = len(report.scanned) - sum(p in report.scanned for p in problems)
    print(f"{len(report.scanned)} agent file(s): {valid} valid, {len(problems)} problem(s)")
    return 1 if problems else 0


def require_dirs(dirs: list[str] | list[Path] | None, flag: str) -> None:
    """A folder named on the command line must exist (exit 2 otherwise)."""
    for entry in dirs or ():
        if not Path(entry).expanduser().is_dir():
            raise UsageError(f"{flag} {entry}: no such directory")


def scan(args: argparse.Namespace) -> tuple[Discovery[SubagentSpec], dict[Path, str], BuildOptions, ModelPlan]:
    """Discover agents and skills, then check each agent against profiles and skills."""
    require_dirs(args.dirs, "DIR")
    require_dirs(args.skills_dirs, "--skills-dir")
    require_dirs([args.project_dir] if args.project_dir is not None else None, "--project-dir")
    profiles = read_profiles(args.model_profiles)
    report = discover_agents(args.dirs or None, project_dir=args.project_dir)
    plan = plan_models(report.values, profiles, unknown_model=args.unknown_model)
    try:
        skills = discover_skills(args.skills_dirs, project_dir=args.project_dir)
        options = BuildOptions(Definitions(model_profiles=plan.profiles, unknown_model=args.unknown_model),
                               SkillCatalog(skills.values))
    except SpecError as exc:
        raise UsageError(str(exc)) from None
    problems = {p.path: p.message for p in [*skills.problems, *report.problems]}
    found_problems, notes = agent_problems(report.loaded, plan, options)
    problems |= {path: message for path, message in found_problems.items() if path not in problems}
    report.notes.extend(notes)
    return report, problems, options, plan


def agent_problems(definitions: Iterable[Definition[Any]], plan: ModelPlan, options: BuildOptions | None, *,
                   check_servers: bool = True) -> tuple[dict[Path, str], list[tuple[Path, str]]]:
    """Every problem of the loaded agent files at once (file -> one line naming it), and their notes (``options``
    ``None``: only the models; ``check_servers=False``: an unusable MCP server is left to fail its own task)."""
    problems: dict[Path, str] = {}
    notes: list[tuple[Path, str]] = []
    for found in definitions:
        if found.value.name in plan.problems:
            problems.setdefault(found.path, f"{found.path}: {plan.problems[found.value.name]}")
            continue
        if options is None:
            continue
        try:
            check_spec(found.value, options)
        except SpecError as exc:
            problems.setdefault(found.path, f"{found.path}: {exc}")
        if not check_servers:
            continue
        mcp_problems, mcp_notes = check_mcp_servers(found.value.mcp_config)
        if mcp_problems:
            problems.setdefault(found.path, f"{found.path}: field 'mcp_config': {mcp_problems[0]}")
        notes.extend((found.path, f"{found.path}: {note}") for note in mcp_notes)
    return problems, notes


def _describe_agent(found: Definition[SubagentSpec], report: Discovery[SubagentSpec],
                    options: BuildOptions) -> dict[str, Any]:
    spec, definitions = found.value, options.definitions
    shadowed = [str(lost.path) for lost, winner in report.shadowed if winner is found]
    return {
        "name": spec.name,
        "source": str(found.path),
        "description": spec.description,
        "model": describe_model(spec.model, agent=spec.name, profiles=definitions.model_profiles,
                                unknown_model=definitions.unknown_model).replace(" -> inherit", " -> the run's model"),
        "tools": "inherit (the parent's)" if spec.tools is None else [str(t) for t in spec.tools],
        "disallowed_tools": list(spec.disallowed_tools),
        "skills": list(spec.skills),
        "max_turns": spec.max_turns or f"default ({DEFAULT_MAX_TURNS})",
        "timeout_s": spec.timeout_s,
        "max_budget_per_run": spec.max_budget_per_run,
        "short_answer_threshold": (spec.short_answer_threshold if spec.short_answer_threshold is not None
                                   else "the run's (--short-answer-threshold, default 0: off)"),
        "permission_mode": spec.permission_mode or "inherit (the parent's policy)",
        "condenser": describe_condenser(spec.condenser),
        "mcp_servers": [f"{name} (" + ("defined by the caller" if not config else "stdio" if "command" in config
                                       else str(config.get("transport") or config.get("type") or "http")) + ")"
                        for name, config in (spec.mcp_config or {}).items()],
        "hooks": list(spec.hooks or {}),
        "color": spec.color,
        "metadata": preview(dict(spec.metadata)),  # free-form, and aliases can repeat it: cut to size
        "overrides": shadowed,
    }
