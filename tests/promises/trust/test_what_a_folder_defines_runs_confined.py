"""In a process whose ``Bash`` is confined, nothing the folder defines runs with more power than its commands.

Every way a hook or a stdio MCP server starts (a sync hook, an async hook, a
server's start, a server started again after a call timed out, a user-level
hook script outside the workspace, ``PostToolUse`` after ``Bash``) goes
through one function (``subagents.definitions._on_host.launch``), which runs it
in ``Bash``'s sandbox. Each route runs a probe that tries what the sandbox
takes away: a variable it drops (``SECRET_TOKEN``), a protected path
(``.git/config``), the host's home folder.

Before: hooks and servers ran on the host, with the user's keys, network and
home; a list of cases (``host_code``) tried to find every file they would run
and keep it read-only, and ``make lint`` whose recipe ``cd sub && ./x.sh`` ran
an agent-written ``sub/x.sh`` on the host. Each check runs as root and as an
unprivileged user (``nobody``, on a workspace it owns).
"""

from __future__ import annotations

import asyncio
import contextlib
import ctypes
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from helpers.mcp_tasks import SERVERS

from deep_agent.tools import Workspace, builtin_tools
from deep_agent.tools._sandbox import Sandbox
from subagents.definitions._hooks import arun_hook, run_hook
from subagents.definitions._mcp import McpServerError, McpSessions, connection_for
from subagents.definitions._on_host import launch

if shutil.which("bwrap") is None:
    pytest.skip("bwrap is not installed (Debian's bubblewrap package)", allow_module_level=True)



def server_command() -> tuple[str, dict[str, str]]:
    """The test server's start, and its declared env: with this interpreter, or (where the unprivileged user
    may not run it: it lies in root's home) with the system's, given this one's packages."""
    if os.access(sys.executable, os.X_OK):
        return f"exec {sys.executable} {SERVERS} stdio", {"DECLARED": "given"}
    packages = ":".join(p for p in sys.path if p.endswith("site-packages"))
    return f"exec python3 {SERVERS} stdio", {"DECLARED": "given", "PYTHONPATH": packages}


@pytest.fixture()
def home(monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """The host user's home, holding a secret and a user-level hook script; ``SECRET_TOKEN`` set."""
    made = Path(tempfile.mkdtemp(prefix="host-home-"))
    made.chmod(0o755)  # readable by the unprivileged user: only the sandbox keeps it out
    (made / "secret.txt").write_text("host secret\n")
    monkeypatch.setenv("HOME", str(made))
    monkeypatch.setenv("SECRET_TOKEN", "s3cret")
    monkeypatch.setenv("SHELL", "/bin/host-shell")  # one of the MCP client's own defaults for a server
    yield made
    shutil.rmtree(made, ignore_errors=True)


def probe(ws: Path, home: Path, *, itself: bool = False) -> str:
    """A shell script's lines that append what it could do to ``probe.out`` in the workspace (``itself``: and
    whether it could change itself, a script outside the workspace)."""
    return (f'{{ echo "ran token=[$SECRET_TOKEN$SHELL] declared=[$DECLARED]"\n'
            f'  cat {home}/secret.txt 2>/dev/null && echo saw-home\n'
            f'  echo planted 2>/dev/null >> {ws}/.git/config && echo wrote-git\n'
            + ('  echo planted 2>/dev/null >> "$0" && echo wrote-itself\n' if itself else '') +
            f'}} >> {ws}/probe.out; exit 0\n')  # read whole before it runs: what it appends is never run


def confined(runner, route: Callable[[Path], None], *, bash: str = "sandbox") -> list[str]:
    """``probe.out``'s lines once ``route`` ran in a process of the runner's user that made a ``Bash`` first
    (``bash``: ``"sandbox"`` installs the confinement, ``"unconfined"`` does not)."""
    ws = runner.ws
    runner.chown(ws)

    def body() -> str:
        builtin_tools(Workspace(ws), bash=bash)  # type: ignore[arg-type]
        route(ws)
        return ""

    runner.in_a_process(body)
    return (ws / "probe.out").read_text().splitlines() if (ws / "probe.out").exists() else []


def workspace(runner, home: Path) -> Path:
    ws = runner.ws
    subprocess.run(["git", "init", "-q", str(ws)], check=True)
    (ws / "probe.sh").write_text(probe(ws, home))
    return ws


def sync_hook(ws: Path) -> None:
    assert run_hook("sh probe.sh", {}, 60).exit_code == 0


def async_hook(ws: Path) -> None:
    assert asyncio.run(arun_hook("sh probe.sh", {}, 60)).exit_code == 0


def _server(ws: Path, timeout: float = 60, call: str | None = None) -> None:
    start, env = server_command()
    sessions = McpSessions({"s": connection_for("s", {"command": "sh", "args": ["-c", f"sh probe.sh; {start}"],
                                                      "env": env})})
    try:
        tools = sessions.wait(sessions.list_tools("s", 60), 60)
        assert "nap" in {t.name for t in tools}
        if call:
            with pytest.raises(McpServerError, match="did not answer"):
                sessions.wait(sessions.call_tool("s", call, {"seconds": 30}, timeout), timeout)
    finally:
        sessions.close()
        assert sessions.closed.wait(60)


def mcp_server(ws: Path) -> None:
    _server(ws)


def mcp_server_after_a_call_timed_out(ws: Path) -> None:
    _server(ws, timeout=0.5, call="nap")  # the task's sessions end with the call that timed out
    _server(ws)  # the next task's start


def post_tool_use_after_bash(ws: Path) -> None:
    from deep_agent import create_deep_agent
    from deep_agent._testing import ScriptedChatModel, tool_call

    hooks = {"PostToolUse": [{"matcher": "Bash", "hooks": [{"type": "command", "command": "sh probe.sh"}]}]}
    model = ScriptedChatModel(responses=[{"tool_calls": [tool_call("Bash", command="echo hi")]}, "done"])
    tools = [t for t in builtin_tools(Workspace(ws)) if t.name == "Bash"]
    create_deep_agent(model, tools=tools, hooks=hooks).invoke({"messages": [("user", "go")]})


ROUTES = [sync_hook, async_hook, mcp_server, mcp_server_after_a_call_timed_out, post_tool_use_after_bash]


@pytest.mark.parametrize("route", ROUTES, ids=[r.__name__ for r in ROUTES])
def test_every_start_of_what_the_folder_defines_is_confined(runner, home, route):
    lines = confined(runner, route, bash="sandbox") if workspace(runner, home) else []
    declared = "given" if "mcp" in route.__name__ else ""
    starts = 2 if route is mcp_server_after_a_call_timed_out else 1
    assert lines == [f"ran token=[] declared=[{declared}]"] * starts, lines  # nothing else it tried worked
    assert "planted" not in (runner.ws / ".git" / "config").read_text()


def test_without_a_confined_bash_the_probe_runs_on_the_host(runner, home):
    # The probe's own check: where Bash is unconfined (--unsafe-bash), hooks run on the host as before.
    if "user" in runner.popen:
        pytest.skip("the host's own rights: root's run shows them all")
    lines = confined(runner, sync_hook, bash="unconfined") if workspace(runner, home) else []
    assert lines == ["ran token=[s3cret/bin/host-shell] declared=[]", "host secret", "saw-home", "wrote-git"]


def test_a_user_level_hook_script_outside_the_workspace_runs_confined_and_read_only(runner, home):
    ws = workspace(runner, home)
    script = home / ".claude" / "hooks" / "notify.sh"
    script.parent.mkdir(parents=True)
    script.write_text(probe(ws, home, itself=True))
    for folder in (home / ".claude", script.parent):
        folder.chmod(0o755)
    lines = confined(runner, lambda ws: sync_hook_of(f"sh {script}"))
    assert lines == ["ran token=[] declared=[]"], lines  # it ran; neither its neighbours nor it were reachable
    assert script.read_text() == probe(ws, home, itself=True)


def test_a_recipe_that_runs_an_agent_written_script_runs_it_confined(runner, home):
    # The old hole: `make lint` whose recipe does `cd sub && ./x.sh` ran the agent's sub/x.sh on the host.
    ws = workspace(runner, home)
    (ws / "Makefile").write_text("lint:\n\t@cd sub && ./x.sh\n")

    def route(ws: Path) -> None:
        (bash,) = [t for t in builtin_tools(Workspace(ws)) if t.name == "Bash"]
        bash.invoke({"command": "mkdir -p sub && cp probe.sh sub/x.sh && chmod +x sub/x.sh && sed -i "
                                "'s|\"$0\"|../probe.sh|' sub/x.sh", "timeout": 20_000})
        sync_hook_of("make -s lint")

    assert confined(runner, route) == ["ran token=[] declared=[]"]


def sync_hook_of(command: str) -> None:
    outcome = run_hook(command, {}, 60)
    assert outcome.exit_code == 0, outcome


def running(marker: str) -> list[str]:
    """The host's processes whose command line holds ``marker`` (the sandbox's, seen from outside)."""
    found = []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        with contextlib.suppress(OSError):
            if marker.encode() in Path(f"/proc/{pid}/cmdline").read_bytes():
                found.append(pid)
    return found


def gone(marker: str) -> bool:
    """Whether every process holding ``marker`` has ended (waited for: a killed sandbox ends as the kernel gets to
    it; the bound is a deadlock detector, not a time budget)."""
    for _ in range(600):
        if not running(marker):
            return True
        time.sleep(0.05)
    return False


def test_a_confined_hook_or_server_that_is_ended_leaves_no_process_nor_placeholder(runner, home):
    # The launcher's end is the command's: killed at a hook's timeout (SIGKILL to its group), killed outright,
    # or sent SIGTERM (as the MCP client ends a server), with pasta's network where there is pasta (as root: as
    # Bash's network tests, test_bash_sandbox).
    ws = workspace(runner, home)
    before = sorted(os.listdir(ws))
    network = shutil.which("pasta") is not None and "user" not in runner.popen

    def route(ws: Path) -> None:
        builtin_tools(Workspace(ws), bash=Sandbox.find(network=network))
        outcome = run_hook("sleep 7771", {}, 1)
        assert outcome.problem == "timed out after 1s", outcome
        assert gone("sleep 7771")
        for end in (signal.SIGKILL, signal.SIGTERM):
            marker = f"sleep 777{end}"
            with launch(["sh", "-c", marker]) as (argv, env):
                process = subprocess.Popen(argv, env=env)
                while not running(marker):
                    time.sleep(0.05)
                process.send_signal(end)
                process.wait()
            assert gone(marker)

    pastas = set(running("/pasta "))
    confined(runner, route)
    assert gone("sleep 777") and set(running("/pasta ")) <= pastas  # pasta ended with each
    assert sorted(os.listdir(ws)) == before  # each placeholder removed


def test_a_launcher_killed_while_bubblewrap_sets_the_sandbox_up_leaves_no_process(runner, home):
    # bubblewrap's child (the sandbox's first process, its command line the command's) waits for bubblewrap to let
    # it go on: a launcher killed before (bubblewrap ends by its death signal) left it waiting for ever, unrecorded.
    # Held there by ptrace: bubblewrap stopped right after that fork, the launcher killed.
    libc = ctypes.CDLL(None, use_errno=True)
    libc.ptrace.argtypes = [ctypes.c_long, ctypes.c_long, ctypes.c_void_p, ctypes.c_void_p]
    cont, detach, options, message, every = 7, 17, 0x4200, 0x4201, 0x40000000  # PTRACE_*, __WALL

    def ptrace(request: int, pid: int, data: int | None = None) -> None:
        assert libc.ptrace(request, pid, None, data) == 0, os.strerror(ctypes.get_errno())

    def forked(pid: int) -> int:  # pid's next stop is a fork's: the new process, at its first stop
        os.waitpid(pid, every)
        child = ctypes.c_ulong()
        ptrace(message, pid, ctypes.addressof(child))
        os.waitpid(child.value, every)
        return child.value

    def route(ws: Path) -> None:
        builtin_tools(Workspace(ws), bash=Sandbox.find())
        with launch(["sh", "-c", "sleep 7770"]) as (argv, env):
            launcher = subprocess.Popen(argv, env=env, preexec_fn=lambda: libc.ptrace(0, 0, None, None))  # TRACEME
            os.waitpid(launcher.pid, every)  # at its exec
            ptrace(options, launcher.pid, 2 | 8 | 16)  # PTRACE_O_TRACEFORK, _TRACECLONE, _TRACEEXEC
            ptrace(cont, launcher.pid)
            bwrap = forked(launcher.pid)
            ptrace(cont, bwrap)
            os.waitpid(bwrap, every)  # at its exec
            ptrace(cont, bwrap)
            ptrace(detach, forked(bwrap))  # on to wait for bubblewrap
            assert running("sleep 7770")
            launcher.kill()
            launcher.wait()
            os.waitpid(bwrap, every)  # ended by its death signal
        assert gone("sleep 7770")

    confined(runner, route)


def test_no_value_a_confined_command_gets_is_on_a_command_line(tmp_path, monkeypatch):
    # A server's declared env and the --pass-env values went to bubblewrap as --setenv NAME VALUE: on its
    # command line, and the launcher's, which any user of the machine reads in /proc/PID/cmdline.
    monkeypatch.setenv("ASKED_FOR", "passed-value")
    sandbox = Sandbox.find(pass_env=("ASKED_FOR",))
    builtin_tools(Workspace(tmp_path), bash=sandbox)  # a sandboxed Bash: what the folder defines is confined
    with launch(["true"], env={"API_KEY": "declared-value"}) as (argv, env):
        assert not [arg for arg in argv if "-value" in arg], argv
        assert env is not None and env["API_KEY"] == "declared-value" and env["ASKED_FOR"] == "passed-value"
    assert not [arg for arg in sandbox.argv(tmp_path, "env") if "-value" in arg]


@pytest.mark.parametrize("pointed", ["a word of its command", "its working folder"])
def test_nothing_the_agents_commands_point_a_hook_or_server_at_is_shown_to_it(monkeypatch, pointed):
    # Each word of a command line was resolved through the workspace's symlinks, and a file it led to in a
    # hidden folder was shown to the hook; a server's cwd, symlinked out of the workspace, was shown whole.
    outside = Path(tempfile.mkdtemp(prefix="beside-"))  # under /tmp: hidden inside, as a home is
    (outside / "secret.txt").write_text("the neighbour's secret\n")
    ws = Path(tempfile.mkdtemp(prefix="confined-ws-"))
    try:
        builtin_tools(Workspace(ws), bash=Sandbox.find())  # a sandboxed Bash: hooks and servers confined
        monkeypatch.chdir(ws)
        if pointed == "a word of its command":  # what the agent's Bash may make: a link where a word points
            (ws / "lint").symlink_to(outside / "secret.txt")
            argv, cwd = ["sh", "-c", "cat lint"], None
        else:
            (ws / "srv").symlink_to(outside, target_is_directory=True)
            argv, cwd = ["sh", "-c", "cat secret.txt"], "srv"
        with launch(argv, cwd) as (confined_argv, env):
            done = subprocess.run(confined_argv, env=env, capture_output=True, text=True, timeout=120)
        assert "secret" not in done.stdout, done.stdout
    finally:
        shutil.rmtree(ws, ignore_errors=True)
        shutil.rmtree(outside, ignore_errors=True)
