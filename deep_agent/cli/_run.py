"""``deep-agent run``, ``demo`` and ``trust``: a real agent for the agent files you have (docs/cli.md)."""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from deep_agent.cli._agents import agent_problems, plan_models, read_mapping, read_profiles, require_dirs
from deep_agent.cli._errors import UsageError
from deep_agent.cli._folder_trust import HOW_TO_TRUST, TrustRecord, config_dir, describe, fingerprint, folder_commands
from deep_agent.cli._terminal import TypedLines, printable
from deep_agent.tools._host_code import files_run_by
from subagents import Budget, BuildOptions, Definitions, SpecError, discover_agents

ROOT_PROMPT = (
    "You are a planner with a team of subagents. Break the user's request into independent "
    "pieces, delegate each to the best-suited subagent with the `task` tool (in parallel when "
    "they are independent; long work with `start_async_task`), then answer the user from what "
    "they return. You also have file and shell tools on the user's workspace for small steps."
)


@dataclasses.dataclass
class RunSetup:
    """What a run needs beyond its prompts: how to build the agent, and what to tell the user first."""

    build: Callable[[Any, Path], Any]
    notices: list[str]  # shown on every run unless --quiet
    colors: dict[str, str]
    prices: dict[str, Any] | None = None
    approve_all: bool = False
    warnings: list[str] = dataclasses.field(default_factory=list)  # skipped agent files: always shown
    folder_notes: list[str] = dataclasses.field(default_factory=list)  # shown once per change of the files
    agent_files: list[Path] = dataclasses.field(default_factory=list)


def run_command(args: argparse.Namespace) -> int:
    from rich.console import Console
    from rich.text import Text

    from deep_agent.cli._folder_trust import notes_unseen
    from deep_agent.cli._session import run_turns

    setup = prepare_run(args)
    console = Console()
    for warning in setup.warnings:
        print(f"warning: {printable(warning)}", file=sys.stderr)
    unseen = not args.quiet and notes_unseen(Path.cwd(), setup.folder_notes, setup.agent_files)
    for notice in [] if args.quiet else [*(setup.folder_notes if unseen else []), *setup.notices]:
        console.print(Text.assemble(("note:", "dim"), " ", printable(notice)), highlight=False)
    return asyncio.run(run_turns(setup, [args.prompt], args, title="deep agent", console=console))


def demo_command(args: argparse.Namespace) -> int:
    from rich.console import Console

    from deep_agent._demo import DEMO_PROMPT, FOLLOW_UP_PROMPT, build_demo_agent, demo_model
    from deep_agent.cli._session import run_turns
    from subagents._settings import DelegationSettings

    def build(checkpointer: Any, sessions: Path) -> Any:
        return build_demo_agent(demo_model(), checkpointer=checkpointer,
                                settings=DelegationSettings.of(sessions_dir=str(sessions)))

    console = Console()
    console.print("[bold]Scripted demo[/bold]: offline, on a scripted model; no real LLM is called.")
    setup = RunSetup(build=build, notices=[], colors={})
    return asyncio.run(run_turns(setup, [DEMO_PROMPT, FOLLOW_UP_PROMPT], args,
                                 title="deep agent (scripted demo)", console=console))


MISPLACED_AGENT_DIRS = {".claude/agent": ".claude/agents", ".agents/agent": ".agents/agents",
                        ".claude/Agents": ".claude/agents"}


def bash_setting(args: argparse.Namespace) -> tuple[Any, str | None]:
    """``builtin_tools(bash=...)``'s value (a sandbox, ``"unconfined"`` or ``None``) and a note, if any."""
    from deep_agent.tools._sandbox import Sandbox, SandboxUnavailable

    if getattr(args, "unsafe_bash", False):
        return "unconfined", "Bash runs unconfined (--unsafe-bash): a command can read and write anything you can"
    try:
        sandbox = Sandbox.find(network=bool(getattr(args, "allow_network", False)),
                               pass_env=tuple(getattr(args, "pass_env", None) or ()))
    except SandboxUnavailable as exc:
        raise UsageError(f"--allow-network: {exc}") from None
    if sandbox is None:
        return None, ("Bash is off: bubblewrap (bwrap) is not installed to confine it; install it "
                      "(Debian: apt install bubblewrap), or pass --unsafe-bash to run it unconfined")
    return sandbox, None


def workspace_of(args: argparse.Namespace, state: Path, runs: Sequence[Path] = ()) -> Any:
    """``--workspace`` with the run's protected set: every file the run reads to decide what runs or where keys
    go (agent, skill, trust, model profile and price files), and ``runs``: the files hooks and servers run."""
    from deep_agent.tools import Workspace
    from deep_agent.tools._protected import AGENT_FILES, Protected
    from deep_agent.tools._workspace import HomeWorkspace

    root = args.workspace if args.workspace is not None else Path.cwd()
    named = [*(getattr(args, "agents_dirs", None) or ()), *(getattr(args, "skills_dirs", None) or ())]
    # The trust record too, should the config folder lie in the workspace: it decides which hooks run.
    named += [f for f in (getattr(args, "model_profiles", None), getattr(args, "prices", None)) if f is not None]
    read_from = [Path.cwd() / Path(name).expanduser() for name in (*AGENT_FILES, *named)] + [config_dir(), *runs]
    try:
        folder = Path(root).expanduser().resolve()
        protected = Protected.of(folder, state_dir=state, agent_files=read_from)
        return Workspace(folder, protected=protected,
                         allow_home=bool(getattr(args, "allow_home_workspace", False)))
    except HomeWorkspace as exc:
        raise UsageError(f"--workspace: {exc}") from None


def prepare_run(args: argparse.Namespace) -> RunSetup:
    """Check the arguments, find and check the agent files, and choose the model."""
    from deep_agent._model_choice import choose_model
    from deep_agent.cli._store import resolve_state_dir
    from deep_agent.tools import RISKY_TOOLS, builtin_tools, tools_not_provided
    from subagents.definitions import SKILL_DIRS, default_levels

    require_dirs(args.agents_dirs, "--agents-dir")
    require_dirs([args.workspace] if args.workspace is not None else None, "--workspace")
    profiles = read_profiles(args.model_profiles)
    prices = read_prices(args.prices)
    state = resolve_state_dir(args.state_dir)  # an unwritable one fails here, in one line
    require_dirs(args.skills_dirs, "--skills-dir")
    found = discover_agents(args.agents_dirs or None, project_dir=Path.cwd())
    commands = folder_commands(found.definitions.values(), Path.cwd())
    # Protected: what every hook and server names from here (they start here), your own level's too, not only
    # the folder's (what trust hashes): a guard's script decides a call.
    workspace = workspace_of(args, state, [p for d in found.definitions.values()
                                           for p in files_run_by(d.value, Path.cwd(), outside=True)])
    levels = [[d for d in level if d.is_dir()] for level in default_levels(SKILL_DIRS, Path.cwd())]
    skills_dirs = list(args.skills_dirs or ()) or [level for level in levels if level]
    bash, bash_note = bash_setting(args)
    untrusted = set() if args.agents_dirs else untrusted_agents(
        found, args.trust_folder, confined=bash not in (None, "unconfined"), commands=commands)
    files = {d.value.name: d.path for d in found.definitions.values()}
    specs = [_tool_rules(spec, workspace, bash, files.get(spec.name, spec.name))
             for spec in found.values if spec.name not in untrusted]
    plan = plan_models(specs, _with_limits(profiles, args), unknown_model=args.unknown_model)
    skipped, warnings = bad_agent_files(found, plan, untrusted, args)
    specs = [spec for spec in specs if spec.name not in skipped]
    try:
        model = choose_model(args.model, timeout=args.timeout, max_tokens=args.max_tokens,
                             base_url=args.base_url, api_key_env=args.api_key_env, retries=args.retries)
    except ValueError as exc:  # a --model value that names no model: a bad argument (exit 2)
        raise UsageError(str(exc)) from None
    folder_notes = [plan.notice] if plan.notice else []
    # A near-miss agents folder is named: else the run just says ``unknown subagent_type``.
    folder_notes += [f"{wrong}/ is not read: agent files go in {right}/ (rename the folder)"
                     for wrong, right in MISPLACED_AGENT_DIRS.items() if not args.agents_dirs
                     and (Path.cwd() / wrong).is_dir() and not (Path.cwd() / right).is_dir()]
    if missing := tools_not_provided(specs):
        named = "; ".join(f"{tool} ({', '.join(agents)})" for tool, agents in sorted(missing.items()))
        folder_notes.append(f"no built-in tool provides {named}; those agents run without them")
    folder_notes += [message for _, message in found.notes]
    budget = Budget(max_tokens=args.budget_tokens, prices=prices) if args.budget_tokens else None

    def build(checkpointer: Any, sessions: Path) -> Any:
        from deep_agent._factory import create_deep_agent
        from subagents._settings import DelegationSettings

        settings = DelegationSettings.of(
            sessions_dir=str(sessions), model_profiles=plan.profiles, unknown_model=args.unknown_model,
            deepagents_stack=False,  # its own sandboxed file tools, not deepagents' in-state ones
            risky_tools=RISKY_TOOLS, unknown_tools="ignore", prices=prices, skills_dirs=skills_dirs,
            force_delegation=args.force_delegation, short_answer_threshold=args.short_answer_threshold or 0,
            permission_mode=args.permission_mode, budget=budget)
        return create_deep_agent(model, builtin_tools(workspace, bash=bash), subagents=specs, system_prompt=ROOT_PROMPT,
                                 checkpointer=checkpointer, background=True, settings=settings)

    colors = {spec.name: spec.color for spec in specs if isinstance(getattr(spec, "color", None), str)}
    return RunSetup(build=build, notices=[bash_note] if bash_note else [], colors=colors, prices=prices,
                    approve_all=bool(args.yes), folder_notes=folder_notes, warnings=warnings,
                    agent_files=[Path(d.path) for d in found.definitions.values()])


def bad_agent_files(found: Any, plan: Any, untrusted: set[str], args: argparse.Namespace) -> tuple[set[str], list[str]]:
    """The agent files a run cannot use: the names to skip, and one warning per file (``--strict-agents``: an error)."""
    from subagents.definitions import SkillCatalog, discover_skills

    problems = {p.path: p.message for p in found.problems}
    try:
        skills: Any = SkillCatalog(discover_skills(args.skills_dirs, project_dir=Path.cwd()).values)
    except SpecError:  # a broken skill folder is the build's error to report: only the models are checked here
        skills = None
    definitions = Definitions(model_profiles=plan.profiles, unknown_model=args.unknown_model)
    usable = [d for d in found.definitions.values() if d.value.name not in untrusted]
    options = BuildOptions(definitions, skills) if skills is not None else None
    usable_problems = agent_problems(usable, plan, options, check_servers=False)[0]
    problems |= {path: message for path, message in usable_problems.items() if path not in problems}
    if not problems:
        return set(), []
    if args.strict_agents:
        lines = list(problems.values())
        raise SpecError(lines[0] if len(lines) == 1 else f"{len(lines)} invalid agent files:\n"
                        + "\n".join(f"  - {line}" for line in lines))
    skipped = {d.value.name for d in found.definitions.values() if d.path in problems}
    return skipped, [f"skipped {message}" for message in problems.values()]


def untrusted_agents(found: Any, trust_now: bool, *, confined: bool = True, commands: Any = None) -> set[str]:
    """Names of the current folder's command-running agent files a person has not trusted (``commands``: known
    already): ``--trust-folder`` trusts it now; on a terminal the user sees every command and is asked once."""
    folder = Path.cwd()
    commands = folder_commands(found.definitions.values(), folder) if commands is None else commands
    if not commands:
        return set()
    record, digest = TrustRecord(config_dir()), fingerprint(commands)
    if record.is_trusted(folder, digest):
        return set()
    if not trust_now and sys.stdin.isatty():
        print(describe(folder, commands), file=sys.stderr)
        print("They run in Bash's sandbox: no network, keys or home unless the flags give them." if confined else
              "They run on this machine unconfined, with your keys, network and home (Bash is not sandboxed).",
              file=sys.stderr)
        print("Trust this folder and let these commands run? [y/N] ", end="", flush=True)
        trust_now = TypedLines(sys.stdin).readline().strip().lower() in ("y", "yes")
    if trust_now:
        record.trust(folder, digest)
        return set()
    skipped = {d.value.name for d in found.definitions.values() if Path(d.path).resolve() in commands}
    print(f"{HOW_TO_TRUST} (skipped: {', '.join(sorted(skipped))})", file=sys.stderr)
    return skipped


def trust_command(args: argparse.Namespace) -> int:
    """``deep-agent trust [DIR]``: show what the folder's agent files run, and trust it."""
    folder = Path(args.dir).resolve()
    if not folder.is_dir():
        raise UsageError(f"trust {args.dir}: no such directory")
    found = discover_agents(None, project_dir=folder, home=folder / ".deep_agent-no-home")
    commands = folder_commands(found.definitions.values(), folder)
    print(describe(folder, commands) if commands else f"{folder}: no agent file runs a command")
    TrustRecord(config_dir()).trust(folder, fingerprint(commands))
    print(f"trusted {folder} (until one of these files changes)")
    return 0


def read_prices(path: Path | None) -> dict[str, tuple[float, float]] | None:
    """``--prices FILE``: model name -> [USD per million input tokens, output tokens]."""
    if path is None:
        return None
    from subagents._metering import check_prices

    try:
        return check_prices(read_mapping(path, "--prices", "a mapping of model name to [input, output] USD"),
                            argument=f"--prices {path}")
    except SpecError as exc:
        raise UsageError(str(exc)) from None


def _with_limits(profiles: dict[str, Any], args: argparse.Namespace) -> dict[str, Any]:
    """Profiles naming ``provider:model`` get the run's --timeout, --retries and --max-tokens too."""
    from deep_agent._model_choice import model_limits

    limits = model_limits(args.timeout, args.max_tokens, args.retries)
    return {name: {"model": value, **limits} if isinstance(value, str) and ":" in value
            else {**limits, **value} if isinstance(value, dict) and isinstance(value.get("model"), str) else value
            for name, value in profiles.items()}


def _tool_rules(spec: Any, workspace: Any, bash: Any, where: Any) -> Any:
    """``Bash(git diff:*)`` in a ``tools:`` list: a ``Bash`` that runs only what the rules allow (else an error)."""
    from deep_agent.tools._catalog import with_bash_rules

    tools = getattr(spec, "tools", None)
    if not tools:
        return spec
    try:
        chosen = with_bash_rules(tools, workspace, bash)
    except ValueError as exc:
        raise SpecError(f"{where}: tools: {exc}") from None
    return spec.model_copy(update={"tools": chosen}) if chosen != list(tools) else spec
