"""What a sandboxed command makes at a protected path never runs on the host: it is set aside before any hook
runs, however deep the workspace, or the command's answer says it could not be checked.

Before: the set-aside walk was ``os.walk``, which recurses on Python 3.11: a chain of 1,200 folders raised
``RecursionError``, every later ``Bash`` answer was that error, and the repositories the commands made stayed
(the user's next ``git status`` ran their config). And a missing protected path a command made (a
``GNUmakefile``) was set aside only once the command ended: a parallel tool call's hook running meanwhile ran
it on the host. And an MCP server started while a command ran (a task's first MCP call, in parallel with
``Bash``) could import a ``json.py`` the command had just made.
"""

from __future__ import annotations

import asyncio
import os
import shutil
import subprocess
import threading
import time
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from helpers.mcp_tasks import pids, stdio

from deep_agent.tools import Workspace, builtin_tools
from deep_agent.tools.host_code import files_run_by
from deep_agent.tools.protected import Protected
from deep_agent.tools.sandbox import SET_ASIDE
from subagents.definitions.hooks import arun_hook, run_hook
from subagents.definitions.mcp import McpServerError, McpSessions, connection_for
from subagents.definitions.on_host import TURNS

DEEP = 1200  # beyond Python's recursion limit


def test_a_repository_made_below_a_deep_chain_of_folders_is_set_aside(runner):
    deep = "/".join(["d"] * DEEP)
    try:
        out = runner.run(f"mkdir -p {deep} && git init -q {deep}/../r && git init -q r && echo made")
        assert "made" in out, out
        for repo in ("r", "/".join(["d"] * (DEEP - 1) + ["r"])):
            assert not (runner.ws / repo / ".git").exists(), repo
            assert (runner.ws / repo / f".git{SET_ASIDE}").is_dir(), repo
    finally:
        subprocess.run(["rm", "-rf", str(runner.ws / "d")], check=False)  # shutil.rmtree recurses as deep


def test_a_set_aside_that_fails_says_so_in_the_answer(tmp_path, monkeypatch):
    if shutil.which("bwrap") is None:
        pytest.skip("bwrap is not installed (Debian's bubblewrap package)")

    def broken(root: Path) -> object:
        raise RecursionError("maximum recursion depth exceeded")
        yield

    monkeypatch.setattr("deep_agent.tools.sandbox._walk_all", broken)
    (bash,) = [t for t in builtin_tools(Workspace(tmp_path)) if t.name == "Bash"]
    answer = bash.invoke({"command": "git init -q r && echo made", "timeout": 20_000})
    assert answer.startswith("made") and "could not be checked (RecursionError: " in answer, answer
    assert "may be left in place" in answer, answer


@pytest.mark.parametrize("route", ["invoke", "ainvoke"])
def test_no_hook_runs_while_a_command_may_have_made_what_it_runs(runner, route):
    ws = runner.ws
    protected = Protected.of(ws, extra=files_run_by(SimpleNamespace(hooks={"PreToolUse": [{"hooks": [
        {"type": "command", "command": "make -s lint"}]}]}, mcp_config=None), ws))
    assert ws.resolve() / "GNUmakefile" in protected.watched
    for fifo in ("ready", "gate"):
        os.mkfifo(ws / fifo)
    runner.chown(ws)
    # The command makes a GNUmakefile, says so, and waits for the gate: the hook opens it where it runs at once
    # (before, on invoke: the test fails, not hangs); on ainvoke the test opens it once the loop ran on.
    wait = 3 if route == "invoke" else 120
    command = threading.Thread(target=runner.run, args=(
        f"printf 'lint:\\n\\t@echo planted\\n' > GNUmakefile && echo > ready && timeout {wait} head -n1 gate",),
        kwargs={"protected": protected})
    command.start()
    try:
        Path(ws / "ready").read_text()  # the GNUmakefile is there now
        hook = f"cd {ws} && (cat GNUmakefile 2>/dev/null || echo absent) > seen; exec 3<>gate; echo go >&3"
        if route == "invoke":
            run_hook(hook, {}, 30)
        else:
            async def both() -> bool:
                ran = asyncio.create_task(arun_hook(hook, {}, 30))
                await asyncio.sleep(0)  # the hook waits off the loop: this runs while the command still does
                running = command.is_alive()
                with open(os.open(ws / "gate", os.O_RDWR), "w") as gate:  # open until read, whenever that is
                    gate.write("go\n")
                    gate.flush()
                    await ran
                return running

            assert asyncio.run(both())
    finally:
        command.join()
    assert (ws / "seen").read_text() == "absent\n"
    assert not (ws / "GNUmakefile").exists() and (ws / f"GNUmakefile{SET_ASIDE}").exists()


def test_a_parallel_tool_calls_hook_never_meets_what_bash_made(tmp_path, run):
    # The agent's own route (the command line's): Bash and Grep called at once; Grep's PostToolUse hook reads
    # the GNUmakefile as `make` would, once there (before: it met it, and `make` ran it on the host).
    if shutil.which("bwrap") is None:
        pytest.skip("bwrap is not installed (Debian's bubblewrap package)")
    from deep_agent import create_deep_agent
    from deep_agent.testing import ScriptedChatModel, tool_call

    ws = tmp_path.resolve()
    os.mkfifo(ws / "gate")
    hook = (f"cd {ws} && for i in $(seq 100); do [ -e GNUmakefile ] && break; sleep 0.05; done; "
            "(cat GNUmakefile 2>/dev/null || echo absent) > seen; exec 3<>gate; echo go >&3")
    hooks = {"PostToolUse": [{"matcher": "Grep", "hooks": [{"type": "command", "command": hook}]}]}
    protected = Protected.of(ws, extra=files_run_by(SimpleNamespace(hooks=hooks, mcp_config=None), ws) + [
        ws / "GNUmakefile"])
    tools = [t for t in builtin_tools(Workspace(ws, protected=protected)) if t.name in ("Bash", "Grep")]
    model = ScriptedChatModel(responses=[{"tool_calls": [
        tool_call("Bash", command="printf 'lint:\\n\\t@echo planted\\n' > GNUmakefile; timeout 3 head -n1 gate"),
        tool_call("Grep", pattern="lint")]}, "done"])
    run(create_deep_agent(model, tools=tools, hooks=hooks), {"messages": [("user", "go")]})
    assert (ws / "seen").read_text() == "absent\n"
    assert not (ws / "GNUmakefile").exists() and (ws / f"GNUmakefile{SET_ASIDE}").exists()


def _sessions(server: dict, tmp_path: Path) -> McpSessions:
    return McpSessions({"s": connection_for("s", {**server, "env": {"MCP_PID_FILE": str(tmp_path / "pids")}})},
                       label="turns")


def _start_while_a_command_runs(sessions: McpSessions, tmp_path: Path) -> Any:
    """The session's future, once its start waits for its turn: the sandbox side is held (as Sandbox.running
    holds it while a command runs)."""
    session = sessions.submit(sessions.session("s", 60))
    while not (TURNS._waiting["host"] or session.done()):
        time.sleep(0.01)
    assert not session.done() and pids(tmp_path / "pids") == []  # before: started at once
    return session


def test_an_mcp_server_starts_once_no_sandboxed_command_runs_and_leaves_the_turn_once_started(tmp_path):
    sessions = _sessions(stdio(), tmp_path)
    try:
        with TURNS.held("sandbox"):
            session = _start_while_a_command_runs(sessions, tmp_path)
        session.result(60)
        assert len(pids(tmp_path / "pids")) == 1
        assert TURNS._holders == {"sandbox": 0, "host": 0}  # a later command need not wait for the session's end
        with TURNS.held("sandbox"):
            assert not sessions.closed.is_set()
    finally:
        sessions.close()
        assert sessions.closed.wait(30)


def test_a_start_that_waited_for_its_turn_past_its_tasks_end_starts_nothing(tmp_path):
    sessions = _sessions(stdio(), tmp_path)
    try:
        with TURNS.held("sandbox"):
            session = _start_while_a_command_runs(sessions, tmp_path)
            sessions.close()
    finally:
        sessions.close()
        assert sessions.closed.wait(60)
    with pytest.raises(McpServerError, match="failed to start: RuntimeError: its task had ended"):
        session.result(0)
    assert pids(tmp_path / "pids") == []


def test_a_server_that_never_answers_its_start_leaves_the_turn_once_its_bound_is_up(tmp_path):
    # Unbounded, its start would hold the host side until its task ended: the task's next Bash waited for ever.
    sessions = _sessions(stdio("hang"), tmp_path)
    try:
        with pytest.raises(McpServerError, match="did not start within 1s"):
            sessions.submit(sessions.session("s", 1)).result(60)
        assert TURNS._holders == {"sandbox": 0, "host": 0}
    finally:
        sessions.close()
        assert sessions.closed.wait(30)


def test_a_call_whose_bound_ends_while_its_servers_start_waits_for_its_turn_says_so(tmp_path):
    sessions = _sessions(stdio(), tmp_path)
    try:
        with TURNS.held("sandbox"), pytest.raises(McpServerError, match=(
                r"did not list its tools within 0.5s: its start waited all that time for sandboxed commands")):
            sessions.wait(sessions.list_tools("s", 0.5), 0.5)
    finally:
        sessions.close()
        assert sessions.closed.wait(60)
    assert pids(tmp_path / "pids") == []
