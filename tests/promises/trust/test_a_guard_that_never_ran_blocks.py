"""A ``PreToolUse`` guard whose sandbox (or shell) could not start blocks the call: it never lets it through.

A hook that ran and failed (any exit but 0 and 2, a timeout) stays a warning, as in Claude Code; one that
never ran is not a verdict. Before, a guard whose confinement failed to start was a warning and the call ran.
"""

from __future__ import annotations

import contextlib
import shlex
import shutil
import subprocess
import sys
from collections.abc import Iterator

import pytest
from helpers.graphs import tool_messages, user
from langchain.agents import create_agent
from langchain_core.tools import tool

from deep_agent.testing import ScriptedChatModel, tool_call
from deep_agent.tools import confined
from subagents.definitions import HookMiddleware
from subagents.definitions.on_host import DID_NOT_START, confine

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
    status, text = DID_NOT_START
    said = f"import sys; sys.stderr.write({text!r} + ' bwrap did not start'); sys.exit({status})"
    yield [sys.executable, "-c", said], None


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


def test_a_guard_that_ran_and_failed_is_still_a_warning(run, installed):
    ran.clear()
    out = run(_agent("exit 1"), user("go"))
    (result,) = tool_messages(out)
    assert ran == ["mallory"] and result.content == "sent"
    assert "exited 1" in " ".join(result.additional_kwargs["hook_warnings"])


def test_the_launcher_ends_a_start_it_could_not_make_with_that_status_and_text(tmp_path):
    # A bind source that does not exist: the launcher refuses it before bubblewrap runs.
    missing = tmp_path / "missing"
    done = subprocess.run([sys.executable, "-I", confined.__file__, str(tmp_path / "record"), "--", "bwrap",
                           "--ro-bind", str(missing), str(missing), "true"], capture_output=True, text=True, timeout=60)
    status, text = DID_NOT_START
    assert done.returncode == status and done.stderr.startswith(text), (done.returncode, done.stderr)


@pytest.mark.skipif(shutil.which("bwrap") is None, reason="needs bubblewrap")
def test_a_start_whose_bubblewrap_fails_on_its_way_never_ran(tmp_path):
    # bubblewrap failing after the launcher started it (a mount raced by the agent's command, a chdir into a
    # folder renamed meanwhile) exits 1, as a command may: a guard's "exit 2" never ran and the call went on.
    from deep_agent.tools.protected import Protected
    from deep_agent.tools.sandbox import Confinement, Sandbox
    from subagents.definitions.hooks import HookOutcome

    ws = tmp_path / "ws"
    ws.mkdir()
    sandbox = Sandbox.find()
    assert sandbox is not None
    confinement = Confinement(sandbox, ws.resolve(), Protected.of(ws))
    for cwd, expected in ((str(ws / "gone"), None), (str(ws), 2)):  # bubblewrap's chdir fails / the hook runs
        with confinement(["/bin/sh", "-c", "exit 2"], cwd, {}) as (argv, env):
            done = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=60)
        outcome = HookOutcome("exit 2", done.returncode, done.stdout, done.stderr)
        if expected is None:
            assert outcome.never_ran, (done.returncode, done.stderr)
        else:
            assert done.returncode == expected and not outcome.never_ran, (done.returncode, done.stderr)


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
