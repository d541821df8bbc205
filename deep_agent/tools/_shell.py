"""``Bash``: one shell command in the workspace folder, with a timeout (in milliseconds, as in Claude Code) and
bounded output. In a :class:`~deep_agent.tools._sandbox.Sandbox` the command can write only the workspace; unconfined
it reaches any path the user can. ``rules`` (an agent file's ``Bash(git diff:*)``) limit which commands run. When the
command answers, what it started ends with it (its sandbox's PID namespace, or unconfined, its process group)."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import threading
import time
from pathlib import Path
from typing import Any

from langchain_core.tools import StructuredTool, ToolException
from pydantic import BaseModel, Field

from deep_agent.tools._command_rules import CommandRules
from deep_agent.tools._files import _tool
from deep_agent.tools._protected import GIT
from deep_agent.tools._sandbox import (
    ON_THE_WAY,
    SET_ASIDE,
    Confinement,
    Sandbox,
    SandboxUnavailable,
    SetAsideUnchecked,
)
from deep_agent.tools._workspace import Workspace, check_text
from subagents.definitions._on_host import confine

DEFAULT_TIMEOUT_MS = 120_000
MAX_TIMEOUT_MS = 600_000


class BashInput(BaseModel):
    command: str = Field(description="The shell command to run (in the workspace folder).")
    timeout: int | None = Field(default=None, ge=1, le=MAX_TIMEOUT_MS,
                                description="Milliseconds before the command is killed (default 120000, max 600000).")


def shell_tools(ws: Workspace, sandbox: Sandbox | None = None, *,
                rules: CommandRules | None = None) -> list[StructuredTool]:
    """``Bash``, bound to ``ws``; inside ``sandbox`` when one is given (and this process's hooks and MCP servers
    with it, from now on: nothing a folder defines runs with more power), running only what ``rules`` allow."""
    if sandbox is not None:
        confine(Confinement(sandbox, ws.root, ws.protected))

    def bash(command: str, timeout: int | None = None) -> str:
        check_text(command, "command")
        if rules is not None:
            rules.check(command)
        limit_s = (timeout or DEFAULT_TIMEOUT_MS) / 1000
        popen: dict[str, Any] = {"cwd": ws.root, "stdin": subprocess.DEVNULL, "stdout": subprocess.PIPE,
                                 "stderr": subprocess.STDOUT, "start_new_session": True}
        set_aside: list[Path] = []
        started = (sandbox.running(ws.root, command, ws.protected, set_aside=set_aside, **popen)
                   if sandbox is not None else subprocess.Popen(command, shell=True, **popen))
        answer = ""
        try:
            with started as process:
                answer = _answer(ws, process, limit_s)
        except SandboxUnavailable as exc:
            raise ToolException(f"Bash could not start its sandbox: {exc}") from None
        except SetAsideUnchecked as exc:
            answer += f"\n[WARNING: {exc}]"
        # Each under its old name, with why it was taken: "sub/.git (now .git.made-by-agent): a git directory (...)".
        aside = [(new.with_name(new.name[:new.name.rindex(SET_ASIDE)]), new)
                 for new in set_aside if SET_ASIDE in new.name]
        if aside:
            named = "; ".join(f"{old.relative_to(ws.root)} (now {new.name}): "
                              f"{ws.protected.why(old) or (GIT if old.name in ('.git', 'HEAD') else ON_THE_WAY)}"
                              for old, new in aside)
            answer += (f"\n[protected paths this command made were set aside when it ended (the user can rename them "
                       f"back; a symlink it replaced is put back): {named}]")
        if stuck := [p for p in set_aside if SET_ASIDE not in p.name]:
            named = ", ".join(str(p.relative_to(ws.root)) for p in stuck)
            answer += (f"\n[WARNING: what this command made at protected paths could not be set aside ({named}): "
                       "it would run outside the sandbox; remove them]")
        return answer

    where = "Run a shell command in the workspace folder" + ("" if sandbox is None else (
        ", in a sandbox: only the workspace can be written (not .git or agent files); your home folder and /tmp "
        "are empty" + ("" if sandbox.network else "; no network"))) + "."
    if rules is not None:
        where += " Only these commands are allowed: " + ", ".join(f"Bash({r})" for r in rules.rules) + \
            " (one command: no ; & | ` $ ( ) < > or newline)."
    return [_tool(ws, bash, "Bash", BashInput, where)]


def _answer(ws: Workspace, process: subprocess.Popen[bytes], limit_s: float) -> str:
    """Wait for the command, then end what it left in its group; its output and notes."""
    # Only what the result can show is kept (UTF-8: at most 4 bytes a character); the rest is dropped.
    limit, kept, dropped = 4 * ws.max_output_chars + 4, bytearray(), [0]

    def read() -> None:  # on a thread, to the end of the output
        assert process.stdout is not None
        with process.stdout as stream:
            while chunk := os.read(stream.fileno(), 65536):
                room = max(0, limit - len(kept))
                kept.extend(chunk[:room])
                dropped[0] += max(0, len(chunk) - room)

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    with _running_lock:
        _RUNNING.add(process.pid)
    try:
        exited = _exited(process, limit_s)
        try:  # the group's leader is not reaped yet, so its id is still this command's group
            os.killpg(process.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            process.kill()
    finally:
        with _running_lock:
            _RUNNING.discard(process.pid)
    process.wait()
    reader.join(timeout=1.0)  # a process that left the group (setsid, unconfined) may keep the pipe
    note = (f"[command killed after {limit_s:g}s timeout]" if not exited
            else f"[exit code {process.returncode}]" if process.returncode else "")
    text = ws.bound(bytes(kept).decode("utf-8", "replace"))  # cut to the bound, then the notes (never cut off)
    if dropped[0]:
        text += f"\n... [{dropped[0]} more bytes of output not kept]"
    text = f"{text}\n{note}".strip("\n") if note else text
    return text or "(no output)"


def _exited(process: subprocess.Popen[bytes], timeout_s: float) -> bool:
    """Whether the shell exits within ``timeout_s``, left unreaped (``waitid`` with ``WNOWAIT``)."""
    if not hasattr(os, "waitid"):  # not on every Unix: wait as usual (and reap)
        try:
            process.wait(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            return False
        return True
    deadline, delay = time.monotonic() + timeout_s, 0.0005
    while True:
        try:
            if os.waitid(os.P_PID, process.pid, os.WEXITED | os.WNOHANG | os.WNOWAIT) is not None:
                return True
        except ChildProcessError:  # reaped already
            return True
        if (remaining := deadline - time.monotonic()) <= 0:
            return False
        time.sleep(min(delay, remaining))
        delay = min(delay * 2, 0.05)  # as Popen.wait polls


_RUNNING: set[int] = set()  # process groups of the commands running now (their leaders not yet reaped)
_running_lock = threading.RLock()  # also taken by a signal handler, which may interrupt its holder


def kill_running_commands() -> None:
    """Kill every command ``Bash`` is running now, as its timeout would (for a process told to end); never raises."""
    with _running_lock:
        groups = list(_RUNNING)
    for group in groups:
        with contextlib.suppress(OSError):
            os.killpg(group, signal.SIGKILL)
