"""The ``deep-agent`` command line.

Each subcommand is one function taking the parsed arguments and returning
an exit code; ``build_parser`` wires them up, one ``add_*_command`` per
command, so new commands slot in beside ``agents``.

Example::

    deep-agent run "Compare A and B" --model openai:gpt-4.1-mini
    deep-agent demo                              # offline, scripted
    deep-agent tasks                             # the last thread's ledger
    deep-agent transcript 3fa2                   # one task's messages
    deep-agent agents list                       # project, then user agent dirs
    deep-agent agents validate team/agents --model-profiles profiles.yaml
    deep-agent agents list --format json

Exit codes: 0 on success (for ``agents``: every file valid), 1 on an error
(printed as one line; ``--debug`` shows the traceback) or an invalid agent
file, 2 for bad command-line arguments.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any, TextIO

import yaml

from subagents import (
    DEFAULT_MAX_TURNS,
    BuildOptions,
    Definition,
    Discovery,
    SpecError,
    SubagentSpec,
    check_spec,
    describe_model,
    discover_agents,
    discover_skills,
)
from deep_agent.cli_inspect import add_inspect_commands
from deep_agent.cli_run import add_run_command
from subagents.condenser import describe_condenser
from subagents.mcp_config import check_mcp_servers
from subagents.skills import SkillCatalog


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="deep-agent", description="Governed subagent delegation for LangGraph."
    )
    parser.add_argument("--debug", action="store_true", help="show tracebacks instead of one-line errors")
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    add_run_command(commands)
    add_inspect_commands(commands)
    add_agents_command(commands)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        return int(args.handler(args))
    except KeyboardInterrupt:
        print("deep-agent: interrupted", file=sys.stderr)
        return 130
    except Exception as exc:  # noqa: BLE001 - one readable line unless --debug
        if args.debug:
            raise
        print(f"deep-agent: error: {exc}", file=sys.stderr)
        return 1


# -- deep-agent agents list|validate ------------------------------------------


def add_agents_command(commands: Any) -> None:
    agents = commands.add_parser(
        "agents",
        help="list or validate agent files",
        description="Find agent files (markdown with YAML frontmatter) and check them.",
    )
    actions = agents.add_subparsers(dest="action", required=True, metavar="ACTION")
    listing = actions.add_parser("list", help="print each agent with its resolved fields")
    listing.add_argument("--format", choices=("text", "json"), default="text")
    listing.set_defaults(handler=agents_list)
    validate = actions.add_parser("validate", help="check every agent file; exit 1 if any is invalid")
    validate.set_defaults(handler=agents_validate)
    for sub in (listing, validate):
        sub.add_argument(
            "dirs", nargs="*", metavar="DIR",
            help="agent directories in precedence order (default: .agents/agents and "
            ".claude/agents under the project, then under your home)",
        )
        sub.add_argument("--project-dir", type=Path, default=None, help="default: the current directory")
        sub.add_argument(
            "--skills-dir", action="append", dest="skills_dirs", metavar="DIR",
            help="skill directory (repeatable; default: the standard project and user ones)",
        )
        sub.add_argument(
            "--model-profiles", type=Path, metavar="FILE",
            help="YAML or JSON mapping of profile name to 'provider:model' (or init arguments)",
        )
        sub.add_argument(
            "--unknown-model", choices=("error", "inherit"), default="error",
            help="an unresolvable model name: an error (default), or the parent's model",
        )


def agents_list(args: argparse.Namespace) -> int:
    report, problems, options = _scan(args)
    if report is None:
        return 2
    rows = [
        _describe_agent(d, report, options)
        for d in report.definitions.values()
        if d.path not in problems
    ]
    if args.format == "json":
        print(json.dumps(rows, indent=2, default=str))
    else:
        for row in rows:
            print(f"{row['name']}  ({row['source']})")
            for key, value in row.items():
                if key not in ("name", "source") and value not in (None, [], {}):
                    print(f"  {key}: {', '.join(value) if isinstance(value, list) else value}")
        if not rows and not problems:
            print("no agent files found", file=sys.stderr)
    for _, message in report.notes:
        print(f"warning: {message}", file=sys.stderr)
    for message in problems.values():
        print(f"error: {message}", file=sys.stderr)
    return 1 if problems else 0


def agents_validate(args: argparse.Namespace) -> int:
    report, problems, _ = _scan(args)
    if report is None:
        return 2
    notes: dict[Path, list[str]] = {}
    for path, message in report.notes:
        notes.setdefault(path, []).append(message)
    for path in report.scanned:
        print(f"FAIL {problems[path]}" if path in problems else f"ok   {path}")
        for message in notes.get(path, []):
            print(f"warn {message}")
    for path, message in problems.items():
        if path not in report.scanned:
            print(f"FAIL {message}")
    valid = len(report.scanned) - sum(p in report.scanned for p in problems)
    print(f"{len(report.scanned)} agent file(s): {valid} valid, {len(problems)} problem(s)")
    return 1 if problems else 0


def _scan(
    args: argparse.Namespace,
) -> tuple[Discovery[SubagentSpec] | None, dict[Path, str], BuildOptions]:
    """Discover agents and skills, then check each agent against profiles and skills."""
    try:
        profiles = _read_profiles(args.model_profiles) if args.model_profiles else {}
        skills = discover_skills(args.skills_dirs, project_dir=args.project_dir)
        options = BuildOptions(
            model_profiles=profiles,
            unknown_model=args.unknown_model,
            skills=SkillCatalog(skills.values),
        )
    except SpecError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return None, {}, BuildOptions()
    report = discover_agents(args.dirs or None, project_dir=args.project_dir)
    problems = {p.path: p.message for p in [*skills.problems, *report.problems]}
    for found in report.loaded:
        try:
            check_spec(found.value, options)
        except SpecError as exc:
            problems.setdefault(found.path, f"{found.path}: {exc}")
        mcp_problems, mcp_notes = check_mcp_servers(found.value.mcp_config)
        if mcp_problems:
            problems.setdefault(found.path, f"{found.path}: field 'mcp_config': {mcp_problems[0]}")
        report.notes.extend((found.path, f"{found.path}: {note}") for note in mcp_notes)
    return report, problems, options


def _read_profiles(path: Path) -> dict[str, Any]:
    try:
        data = yaml.safe_load(path.read_text(encoding="utf-8-sig"))
    except OSError as exc:
        raise SpecError(f"--model-profiles {path}: cannot be read ({exc.strerror or exc})") from None
    except yaml.YAMLError as exc:
        raise SpecError(f"--model-profiles {path}: invalid YAML or JSON: {exc}") from None
    if not isinstance(data, dict):
        raise SpecError(f"--model-profiles {path}: expected a mapping of profile name to model")
    return data


def _transport(config: Any) -> str:
    if not config:
        return "defined by the caller"
    if "command" in config:
        return "stdio"
    return str(config.get("transport") or config.get("type") or "http")


def _describe_agent(
    found: Definition[SubagentSpec], report: Discovery[SubagentSpec], options: BuildOptions
) -> dict[str, Any]:
    spec = found.value
    shadowed = [str(lost.path) for lost, winner in report.shadowed if winner is found]
    return {
        "name": spec.name,
        "source": str(found.path),
        "description": spec.description,
        "model": describe_model(
            spec.model, agent=spec.name, profiles=options.model_profiles,
            unknown_model=options.unknown_model,
        ),
        "tools": "inherit (the parent's)" if spec.tools is None else [str(t) for t in spec.tools],
        "disallowed_tools": list(spec.disallowed_tools),
        "skills": list(spec.skills),
        "max_turns": spec.max_turns or f"default ({DEFAULT_MAX_TURNS})",
        "timeout_s": spec.timeout_s,
        "max_budget_per_run": spec.max_budget_per_run,
        "permission_mode": spec.permission_mode or "inherit (the parent's policy)",
        "condenser": describe_condenser(spec.condenser),
        "mcp_servers": [f"{name} ({_transport(config)})" for name, config in (spec.mcp_config or {}).items()],
        "hooks": list(spec.hooks or {}),
        "color": spec.color,
        "metadata": dict(spec.metadata),
        "overrides": shadowed,
    }


if __name__ == "__main__":
    raise SystemExit(main())
