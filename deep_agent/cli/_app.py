"""The ``deep-agent`` command line (``run``, ``demo``, ``trust``, ``tasks``, ``transcript``, ``agents``; exit codes:
docs/cli.md). A command's module (and LangChain) is imported only when it runs: ``--help`` answers at once."""

from __future__ import annotations

import argparse
import contextlib
import importlib
import os
import signal
import sys
import threading
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from deep_agent.cli._errors import UsageError, describe_error

PERMISSION_CHOICES = ("always_confirm", "confirm_risky", "never_confirm", "default", "acceptEdits",
                      "plan", "dontAsk", "bypassPermissions")


class CommandLineParser(argparse.ArgumentParser):
    """The top-level parser; it keeps each command's own parser, to report a bad argument with its usage."""

    commands: dict[str, argparse.ArgumentParser]


def build_parser() -> CommandLineParser:
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument("--debug", action="store_true", default=argparse.SUPPRESS,
                        help="show tracebacks instead of one-line errors")
    parser = CommandLineParser(prog="deep-agent", description="Governed subagent delegation for LangGraph.",
                               parents=[common])
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    _add_run(commands, common)
    _add_inspect(commands, common)
    _add_agents(commands, common)
    # The packaged small model's server: its own options (`deep-agent serve-model --help`) live beside it.
    serve = commands.add_parser("serve-model", add_help=False, help="serve the packaged small model on an "
                                "OpenAI-compatible endpoint (the realmodel extra)")
    serve.set_defaults(handler="deep_agent._local_model:serve_command")
    parser.commands = dict(commands.choices)
    return parser


def parse(argv: Sequence[str] | None) -> argparse.Namespace:
    """The arguments; an unknown one is reported with the usage of the command it was given to."""
    parser = build_parser()
    args, unknown = parser.parse_known_args(argv)
    if args.command == "serve-model":  # every word after it is the server's own (its parser reads them)
        given = list(sys.argv[1:] if argv is None else argv)
        args.options = given[given.index("serve-model") + 1:]
    elif unknown:
        parser.commands[args.command].error(f"unrecognized arguments: {' '.join(unknown)}")
    return args


def main(argv: Sequence[str] | None = None) -> int:
    args = parse(argv)
    debug = getattr(args, "debug", False)
    program = argv is None  # the deep-agent program itself, not a caller passing its own arguments
    if program:
        _exit_on_termination()
        from subagents.definitions._on_host import absolute_path

        # Its own lookups (bwrap, pasta, bash, git) never find a program of the folder it runs in.
        os.environ["PATH"] = absolute_path()
    try:
        module, _, name = args.handler.partition(":")
        return int(getattr(importlib.import_module(module), name)(args))
    except KeyboardInterrupt:
        print("deep-agent: interrupted", file=sys.stderr)
        return 130
    except Exception as exc:  # noqa: BLE001 - one readable line unless --debug
        if debug:
            raise
        print(f"deep-agent: error: {describe_error(exc)}", file=sys.stderr)
        return 2 if isinstance(exc, UsageError) else 1
    finally:
        if program:  # the process exits next: a signal now must not cut its exit handlers short
            _exiting.set()


_exiting = threading.Event()  # once set, a further SIGTERM or SIGHUP is ignored while the cleanup runs


def _exit_on_termination() -> None:
    """``SIGTERM`` and ``SIGHUP`` end the program by ``SystemExit`` (its exit handlers run); the first also kills the
    running ``Bash`` commands (an async run waits for its tools' threads), later ones cannot cut the cleanup short."""
    if threading.current_thread() is not threading.main_thread():
        return  # signal handlers can only be set from the main thread
    for name in ("SIGTERM", "SIGHUP"):
        if (signum := getattr(signal, name, None)) is not None:
            signal.signal(signum, _exit_now)


def _exit_now(signum: int, _frame: Any) -> None:
    if _exiting.is_set():
        return
    _exiting.set()
    if (shell := sys.modules.get("deep_agent.tools._shell")) is not None:  # imported only if a run used it
        shell.kill_running_commands()
    raise SystemExit(128 + signum)


def _add_run(commands: Any, common: argparse.ArgumentParser) -> None:
    run = commands.add_parser("run", parents=[common],
                              help="run a deep agent on a prompt, with a live view of its tasks",
                              description="Run the agents of your agent files on a prompt. The root plans, delegates "
                              "with `task` (or in the background) and has the built-in tools Read, Write, Edit, "
                              "Glob, Grep, LS and Bash, confined to --workspace.")
    run.add_argument("prompt")
    run.add_argument("--thread", help="continue this thread (default: a new one)")
    run.add_argument("--model", help="provider:name (default: from OPENAI_API_KEY / OPENAI_BASE_URL)")
    run.add_argument("--agents-dir", action="append", dest="agents_dirs", metavar="DIR",
                     help="agent directory, in precedence order (repeatable)")
    run.add_argument("--skills-dir", action="append", dest="skills_dirs", metavar="DIR",
                     help="skill directory (repeatable; default: .agents/skills and .claude/skills, "
                     "project then home)")
    run.add_argument("--workspace", type=Path, metavar="DIR",
                     help="the folder the built-in tools may touch (default: the current one)")
    run.add_argument("--permission-mode", choices=PERMISSION_CHOICES, default="confirm_risky",
                     help="approval policy of the root and of agents whose file sets none "
                     "(default: confirm_risky: Write, Edit and Bash ask)")
    run.add_argument("--yes", "-y", action="store_true", help="approve every risky call without asking")
    run.add_argument("--allow-network", action="store_true",
                     help="let Bash commands, hooks and MCP servers reach the network, outbound only, through pasta "
                     "(Debian: passt) in their own network namespace: the host's loopback services and unix "
                     "sockets stay unreachable (their sandbox has no network by default)")
    run.add_argument("--pass-env", action="append", metavar="NAME",
                     help="give Bash commands, hooks and MCP servers this variable too (repeatable; by default they "
                     "get only PATH, LANG, LC_*, TERM, TZ and an empty HOME, and a server its declared env)")
    run.add_argument("--allow-home-workspace", action="store_true",
                     help="accept a --workspace that is, or holds, your home folder (refused by default: "
                     "the agent could write your dotfiles)")
    run.add_argument("--unsafe-bash", action="store_true",
                     help="run Bash unconfined, without its bubblewrap sandbox (it can reach anything you can)")
    run.add_argument("--timeout", type=_positive(float), default=120.0, metavar="SECONDS",
                     help="bound on one model call, its retries included (default: 120)")
    run.add_argument("--retries", type=_at_least_zero, default=0, metavar="N",
                     help="resend a model call that failed transiently up to N times, within --timeout (default: 0)")
    run.add_argument("--base-url", metavar="URL",
                     help="an OpenAI-compatible server (llama.cpp, vLLM, Ollama); --model NAME is its model name")
    run.add_argument("--api-key-env", metavar="NAME",
                     help="the variable holding the server's key (default: OPENAI_API_KEY; none needed on loopback)")
    run.add_argument("--max-tokens", type=_positive(int), metavar="N", help="output tokens per model call")
    run.add_argument("--budget-tokens", type=_positive(int), metavar="N",
                     help="tokens the whole run may spend; later delegations are refused")
    run.add_argument("--prices", type=Path, metavar="FILE",
                     help="YAML or JSON: model name -> [USD per million input, output tokens]")
    run.add_argument("--force-delegation", action="store_true",
                     help="the first model call of each turn must call task (for small local models)")
    run.add_argument("--short-answer-threshold", type=_positive(int), metavar="CHARS",
                     help="ask a child once for a fuller report when its answer is shorter (default: off; "
                          "an agent file's short_answer_threshold wins for that agent)")
    _add_model_resolution(run)
    _add_state(run)
    run.add_argument("--strict-agents", action="store_true",
                     help="stop on any invalid agent file (default: skip it, with a warning naming it)")
    run.add_argument("--quiet", "-q", action="store_true",
                     help="no start-up notes (without it, notes about the agent files show once per change)")
    run.add_argument("--trust-folder", action="store_true",
                     help="trust the current folder's agent files (hooks, MCP servers) without asking")
    run.set_defaults(handler="deep_agent.cli._run:run_command")

    trust = commands.add_parser("trust", parents=[common],
                                help="show the commands a folder's agent files run, and trust it")
    trust.add_argument("dir", nargs="?", default=".", help="the folder (default: the current one)")
    trust.set_defaults(handler="deep_agent.cli._run:trust_command")

    demo = commands.add_parser("demo", parents=[common],
                               help="an offline, scripted scenario (no model or key needed)")
    _add_state(demo)
    demo.set_defaults(handler="deep_agent.cli._run:demo_command")


def _add_inspect(commands: Any, common: argparse.ArgumentParser) -> None:
    tasks = commands.add_parser("tasks", parents=[common], help="list a thread's tasks")
    tasks.add_argument("thread", nargs="?", help="thread id (default: the last thread run here)")
    tasks.add_argument("--full", action="store_true", help="print each result or error whole, not cut")
    tasks.add_argument("--format", choices=("text", "json"), default="text",
                       help="json: one JSON document with every task's fields, texts whole")
    tasks.set_defaults(handler="deep_agent.cli._inspect:tasks_command")
    transcript = commands.add_parser("transcript", parents=[common], help="print one task's transcript")
    transcript.add_argument("task_id", help="a task id, or a unique prefix of one")
    transcript.add_argument("--thread", help="look only in this thread")
    transcript.set_defaults(handler="deep_agent.cli._inspect:transcript_command")
    for parser in (tasks, transcript):
        _add_state(parser)


def _add_agents(commands: Any, common: argparse.ArgumentParser) -> None:
    agents = commands.add_parser("agents", parents=[common], help="list or validate agent files",
                                 description="Find agent files (markdown with YAML frontmatter) and check them.")
    actions = agents.add_subparsers(dest="action", required=True, metavar="ACTION")
    listing = actions.add_parser("list", parents=[common], help="print each agent with its resolved fields")
    listing.add_argument("--format", choices=("text", "json"), default="text")
    listing.set_defaults(handler="deep_agent.cli._agents:agents_list")
    validate = actions.add_parser("validate", parents=[common],
                                  help="check every agent file; exit 1 if any is invalid")
    validate.set_defaults(handler="deep_agent.cli._agents:agents_validate")
    for sub in (listing, validate):
        sub.add_argument("dirs", nargs="*", metavar="DIR", help="agent directories in precedence order (default: "
                         ".agents/agents and .claude/agents under the project, then under your home)")
        sub.add_argument("--project-dir", type=Path, default=None, help="default: the current directory")
        sub.add_argument("--skills-dir", action="append", dest="skills_dirs", metavar="DIR",
                         help="skill directory (repeatable; default: the standard project and user ones)")
        _add_model_resolution(sub)


def _add_model_resolution(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--model-profiles", type=Path, metavar="FILE",
                        help="YAML or JSON mapping of an agent file's model name to 'provider:model', 'inherit' or "
                        "init arguments (Claude's sonnet, opus and haiku run on the run's model unless mapped)")
    parser.add_argument("--unknown-model", choices=("error", "inherit"), default="error",
                        help="a model name no profile maps: an error (default), or the run's model")


def _add_state(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--state-dir", help="where threads, ledgers and transcripts live (default: ./.deep_agent)")
    parser.add_argument("--db", dest="db_url", help="a postgresql:// URL instead of the embedded SQLite")


def _checked(kind: type, ok: Callable[[Any], bool], expected: str) -> Callable[[str], Any]:
    def parse(text: str) -> Any:
        with contextlib.suppress(ValueError):
            if ok(value := kind(text)):
                return value
        raise argparse.ArgumentTypeError(f"expected {expected}, got {text!r}")

    return parse


def _positive(kind: type) -> Callable[[str], Any]:
    return _checked(kind, lambda value: value > 0 and value != float("inf"), "a positive number")


_at_least_zero = _checked(int, lambda value: value >= 0, "a whole number >= 0")


if __name__ == "__main__":
    raise SystemExit(main())
