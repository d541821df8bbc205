"""A ``PreToolUse`` guard whose sandbox (or shell) could not start blocks the call: it never lets it through.

A hook that ran and failed (any exit but 0 and 2, a timeout) stays a warning, as in Claude Code; one that
never ran is not a verdict. Before, a guard whose confinement failed to start was a warning and the call ran.
And "never ran" was read from the launcher's exit status and text, which a hook could print and exit with too:
now the launcher alone can say it (it ends by a signal, :data:`~subagents.definitions._on_host.DID_NOT_START`).
"""

from __future__ import annotations

import contextlib
import shlex
import subprocess
import sys
from collections.abc import Iterator

import pytest
from helpers.graphs import tool_messages, user
from langchain.agents import create_agent
from langchain_core.tools import tool

from deep_agent._testing import ScriptedChatModel, tool_call
from deep_agent.tools import _confined as confined
from deep_agent.tools._protected import Protected
from deep_agent.tools._sandbox import Confinement, Sandbox
from subagents.definitions import HookMiddleware
from subagents.definitions._hooks import run_hook
from subagents.definitions._on_host import DID_NOT_START, confine

ran: list[str] = []


@tool
def wire_money(to: str) -> str:
    """Send money."""
    ran.append(to)
    return "sent"


@contextlib.contextmanager
def _failing_to_start(argv: list[str], cwd: str | None, env: dict[str, str]) -> Iterator[tuple[list[str], None]]:
    raise confined.SpawnFailed("a path the sandbox binds is now a symlink: /w/scripts", "bwrap")
    yield argv, None  # pragma: no cover - never reached


@contextlib.contextmanager
def _launcher_says_it_did_not_start(argv: list[str], cwd: str | None,
                                    env: dict[str, str]) -> Iterator[tuple[list[str], None]]:
    said = f"import os, sys; sys.stderr.write('the sandbox did not start'); os.kill(os.getpid(), {DID_NOT_START})"
    yield [sys.executable, "-c", said], None


@contextlib.contextmanager
def _as_it_is(argv: list[str], cwd: str | None, env: dict[str, str]) -> Iterator[tuple[list[str], None]]:
    yield argv, None


SAYS_IT_DID_NOT_START = "echo 'the sandbox did not start: bwrap ended (1) before its command started' >&2; exit 125"
"""A hook's command that prints what the launcher prints when its command never started, and exits as it did."""


def _agent(command: str):
    hooks = HookMiddleware({"PreToolUse": [{"matcher": "wire_money",
                                            "hooks": [{"type": "command", "command": command}]}]}, scope="root")
    model = ScriptedChatModel(responses=[{"tool_calls": [tool_call("wire_money", to="mallory")]}, "done"])
    return create_agent(model, [wire_money], middleware=[hooks])


@pytest.fixture
def installed():
    def install(confinement):
        confine(confinement)
    yield install
    confine(None)


@pytest.mark.parametrize("confinement", [_failing_to_start, _launcher_says_it_did_not_start])
def test_a_guard_that_never_ran_blocks_the_call(run, installed, confinement):
    ran.clear()
    installed(confinement)
    out = run(_agent("./guard.sh"), user("go"))
    (result,) = tool_messages(out)
    assert ran == [] and result.status == "error" and result.content.startswith("Blocked: the PreToolUse hook"), (
        result.content)


@pytest.mark.parametrize("command", ["exit 1", SAYS_IT_DID_NOT_START])
def test_a_guard_that_ran_and_failed_is_still_a_warning(run, installed, command):
    ran.clear()
    installed(_as_it_is)  # confined or not, what a command prints and exits with is its own
    out = run(_agent(command), user("go"))
    (result,) = tool_messages(out)
    assert ran == ["mallory"] and result.content == "sent"
    assert f"exited {command.rpartition(' ')[2]}" in " ".join(result.additional_kwargs["hook_warnings"])


def test_the_launcher_ends_a_start_it_could_not_make_by_its_signal(tmp_path):
    # A bind source that does not exist: the launcher refuses it before bubblewrap runs.
    missing = tmp_path / "missing"
    given = confined.argv_file(str(tmp_path), ["bwrap", "--ro-bind", str(missing), str(missing), "--", "true"])
    done = subprocess.run([sys.executable, "-I", confined.__file__, str(tmp_path), *given], capture_output=True,
                          text=True, timeout=60)
    assert done.returncode == -DID_NOT_START and "the sandbox did not start" in done.stderr, (done.returncode,
                                                                                             done.stderr)


def test_the_launcher_runs_only_the_argv_it_was_given(tmp_path):
    given = confined.argv_file(str(tmp_path), ["bwrap", "--ro-bind", "/", "/", "--", "true"])
    (tmp_path / "argv").write_bytes(b"\0".join([b"bwrap", b"--bind", b"/", b"/", b"--", b"true"]))
    done = subprocess.run([sys.executable, "-I", confined.__file__, str(tmp_path), *given], capture_output=True,
                          text=True, timeout=60)
    assert done.returncode == -DID_NOT_START and "argv file was changed" in done.stderr, done.stderr


@pytest.mark.parametrize(("where", "command", "expected"), [
    ("gone", "exit 2", "never ran"),  # bubblewrap's chdir fails: a guard's "exit 2" never ran
    ("", "exit 2", "exit 2"),
    ("", SAYS_IT_DID_NOT_START, "exit 125"),  # it ran: what it says is its own
])
def test_only_a_start_that_failed_never_ran(runner, where, command, expected):
    # bubblewrap failing after the launcher started it (a mount raced by the agent's command, a chdir into a
    # folder renamed meanwhile) exits 1, as a command may: before, the call went on.
    def body() -> str:
        sandbox = Sandbox.find()
        assert sandbox is not None
        real = Confinement(sandbox, runner.ws.resolve(), Protected.of(runner.ws))
        confine(lambda argv, cwd, env: real(argv, str(runner.ws / where), env))
        outcome = run_hook(command, {}, 60)
        return "never ran" if outcome.never_ran else f"exit {outcome.exit_code}"

    assert runner.in_a_process(body) == expected


@pytest.mark.parametrize("guard", ["./missing-guard.sh", "./not-executable.sh"])
def test_a_guard_the_shell_could_not_find_or_run_blocks_the_call(run, tmp_path, monkeypatch, guard):
    # Before: a deleted guard script (exit 127) or one without its x bit (126) was a warning, and the call ran.
    ran.clear()
    monkeypatch.chdir(tmp_path)
    (tmp_path / "not-executable.sh").write_text("#!/bin/sh\nexit 2\n")
    out = run(_agent(guard), user("go"))
    (result,) = tool_messages(out)
    assert ran == [] and result.status == "error" and result.content.startswith("Blocked: the PreToolUse hook"), (
        result.content)


def test_an_inline_python_guard_never_imports_a_module_of_its_folder(run, tmp_path, monkeypatch):
    # Before: `python -c` put the folder first on sys.path, so a json.py written there answered the guard's
    # `import json` (and exited 0: allowed).
    ran.clear()
    monkeypatch.chdir(tmp_path)
    (tmp_path / "json.py").write_text("import sys\nsys.exit(0)\n")
    guard = f"{shlex.quote(sys.executable)} -c 'import json, sys; sys.exit(2 if json.load(sys.stdin) else 0)'"
    out = run(_agent(guard), user("go"))
    (result,) = tool_messages(out)
    assert ran == [] and result.status == "error", result.content
