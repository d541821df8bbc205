"""``Bash``: one shell command in the workspace folder, with a timeout and bounded output.

``timeout`` is in milliseconds, as in Claude Code (default 120000, at most
600000). When it passes, the command's whole process group is killed and
the model is told. Only as much output as a result can show is kept in
memory; the rest is read and dropped. The command starts in the workspace, but a shell can
reach any path the user can: that is why ``Bash`` asks for approval by
default in the command line. ``rules``
(:class:`~deep_agent.tools.command_rules.CommandRules`, from an agent file's
``Bash(git diff:*)``) limits which commands run at all.

A command that leaves a job running (``server &``) returns when its shell
exits, not at its timeout: ``Bash`` waits at most :data:`GRACE_S` more for
the output to end, then answers with what was printed and a note that
background jobs are still running. Their later output is read and dropped,
so they never block on a full pipe, and it is not shown. They keep running
until the process that ran ``Bash`` exits, which ends them (``SIGTERM``,
then ``SIGKILL`` a second later): on Linux, the processes left in the
command's process group when it answered are noted (with their start
times), and the group is signalled only while one of them is still in it,
so a group id the system has since given to another process is never
signalled. A job that left the group (``setsid``), or whose noted
processes all ended before its own children did, is not ended.

Example::

    (bash,) = shell_tools(Workspace("."))
    bash.invoke({"command": "ls -1 | head -3", "timeout": 5000})
"""

from __future__ import annotations

import atexit
import contextlib
import os
import signal
import subprocess
import threading
import time
from collections.abc import Iterator

from langchain_core.tools import StructuredTool
from pydantic import BaseModel, Field

from deep_agent.tools.command_rules import CommandRules
from deep_agent.tools.files import _tool
from deep_agent.tools.sandbox import Sandbox
from deep_agent.tools.workspace import Workspace, check_text

DEFAULT_TIMEOUT_MS = 120_000
MAX_TIMEOUT_MS = 600_000
GRACE_S = 0.5
"""After the shell exits, how long ``Bash`` waits for jobs it left to close the output."""
BACKGROUND_NOTE = "[background jobs still running: their later output is not shown]"


class BashInput(BaseModel):
    command: str = Field(description="The shell command to run (in the workspace folder).")
    timeout: int | None = Field(
        default=None, ge=1, le=MAX_TIMEOUT_MS,
        description="Milliseconds before the command is killed (default 120000, max 600000).",
    )


def shell_tools(ws: Workspace, sandbox: Sandbox | None = None, *,
                rules: CommandRules | None = None) -> list[StructuredTool]:
    """``Bash``, bound to ``ws``; inside ``sandbox`` (:mod:`deep_agent.tools.sandbox`) when one is given,
    running only what ``rules`` allow when they are given."""

    def bash(command: str, timeout: int | None = None) -> str:
        check_text(command, "command")
        if rules is not None:
            rules.check(command)
        limit_s = (timeout or DEFAULT_TIMEOUT_MS) / 1000
        argv: str | list[str] = sandbox.argv(ws.root, command) if sandbox is not None else command
        process = subprocess.Popen(
            argv, shell=sandbox is None, cwd=ws.root, stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, start_new_session=True,
        )
        # Only what the result can show is kept (UTF-8 is at most 4 bytes a character);
        # the rest is read and dropped, so a command printing gigabytes costs no memory.
        output = _BoundedOutput(process, 4 * ws.max_output_chars + 4)
        deadline = time.monotonic() + limit_s
        with _running(process):
            if not _exited(process, limit_s):
                _kill_group(process)
                process.wait()
                output.join(timeout=1.0)  # a process that left the group may keep the pipe: stop reading
                return output.result(ws, f"[command killed after {limit_s:g}s timeout]")
            output.join(timeout=min(GRACE_S, max(0.0, deadline - time.monotonic())))
            # What the command left in its group (output redirected or not), noted while the exited shell
            # is not yet reaped: until then its pid, and so its group id, cannot be given to anyone else.
            jobs = _members(process.pid)
        process.wait()
        notes = [f"[exit code {process.returncode}]"] if process.returncode else []
        if not (jobs or output.reading()):
            return output.result(ws, "\n".join(notes))
        # Jobs left running: answer now, drain what they print, end them at exit.
        shown = output.result(ws, "\n".join([*notes, BACKGROUND_NOTE]))
        output.keep_nothing_more()
        with _left_running_lock:
            _LEFT_RUNNING[:] = [left for left in _LEFT_RUNNING if left.running()]
            _LEFT_RUNNING.append(_LeftJobs(process.pid, jobs, output))
        return shown

    where = "Run a shell command in the workspace folder."
    if sandbox is not None:
        where = ("Run a shell command in the workspace folder, in a sandbox: only the workspace can be "
                 "written; your home folder and /tmp are empty" + ("" if sandbox.network else "; no network") + ".")
    if rules is not None:
        where += " Only these commands are allowed: " + ", ".join(f"Bash({r})" for r in rules.rules) + \
            " (one command: no ; & | ` $ ( ) < > or newline)."
    return [_tool(ws, bash, "Bash", BashInput, where)]


class _BoundedOutput:
    """Reads a process's stdout on a thread to its end, keeping the first ``limit`` bytes."""

    def __init__(self, process: subprocess.Popen[bytes], limit: int) -> None:
        self._stream = process.stdout
        self._limit = limit
        self._kept = bytearray()
        self._dropped = 0
        self._thread = threading.Thread(target=self._read, daemon=True)
        self._thread.start()

    def _read(self) -> None:
        assert self._stream is not None
        with self._stream:
            while chunk := os.read(self._stream.fileno(), 65536):
                room = max(0, self._limit - len(self._kept))
                self._kept += chunk[:room]
                self._dropped += max(0, len(chunk) - room)

    def join(self, timeout: float | None) -> None:
        self._thread.join(timeout)

    def reading(self) -> bool:
        return self._thread.is_alive()

    def keep_nothing_more(self) -> None:
        """The answer is given: what is still read is only drained, and what was kept is let go."""
        self._limit, self._kept = 0, bytearray()

    def result(self, ws: Workspace, note: str) -> str:
        """The output cut to the workspace's bound, then the notes (never cut off)."""
        text = ws.bound(bytes(self._kept).decode("utf-8", "replace"))
        if self._dropped:
            text += f"\n... [{self._dropped} more bytes of output not kept]"
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


_RUNNING: set[int] = set()
"""Process groups of the commands running now (each group's shell not yet reaped, so the id is its own)."""
_running_lock = threading.RLock()  # also taken by a signal handler, which may interrupt its holder


@contextlib.contextmanager
def _running(process: subprocess.Popen[bytes]) -> Iterator[None]:
    with _running_lock:
        _RUNNING.add(process.pid)
    try:
        yield
    finally:
        with _running_lock:
            _RUNNING.discard(process.pid)


def kill_running_commands() -> None:
    """Kill every command ``Bash`` is running now, as its timeout would (for a process told to end); never raises."""
    with _running_lock:
        groups = list(_RUNNING)
    for group in groups:
        try:
            os.killpg(group, signal.SIGKILL)
        except OSError:
            pass


def _kill_group(process: subprocess.Popen[bytes]) -> None:
    try:
        os.killpg(process.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        process.kill()


Process = tuple[int, bytes]
"""A process as (pid, start time in clock ticks since boot): a pid the system reuses has another start time."""


def _stat(pid: int) -> list[bytes] | None:
    """The fields of ``/proc/PID/stat`` after the command name (state first); ``None`` if it cannot be read."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as stat:
            return stat.read().rsplit(b")", 1)[1].split()
    except (OSError, IndexError):
        return None


def _members(group: int) -> list[Process]:
    """The live processes of process group ``group`` (Linux; elsewhere none are known)."""
    try:
        os.killpg(group, 0)  # no signal: only whether the group has anyone left, without reading /proc
        pids = [int(entry) for entry in os.listdir("/proc") if entry.isdigit()]
    except OSError:
        return []
    found = []
    for pid in pids:
        fields = _stat(pid)
        if fields is not None and len(fields) > 19 and fields[0] != b"Z" and fields[2] == str(group).encode():
            found.append((pid, fields[19]))
    return found


def _still_in(group: int, process: Process) -> bool:
    """Whether ``process`` is alive, the same process (same start time) and still in ``group``."""
    fields = _stat(process[0])
    return (fields is not None and len(fields) > 19 and fields[0] != b"Z" and fields[19] == process[1]
            and fields[2] == str(group).encode())


class _LeftJobs:
    """A command's jobs that outlived it: its process group, the processes noted in it, its output's reader."""

    def __init__(self, group: int, jobs: list[Process], output: _BoundedOutput) -> None:
        self.group, self.jobs, self.output = group, jobs, output

    def ours(self) -> bool:
        """Whether the group is still this command's: one of the processes noted in it is alive and in it."""
        return any(_still_in(self.group, job) for job in self.jobs)

    def running(self) -> bool:
        return self.output.reading() or self.ours()


_LEFT_RUNNING: list[_LeftJobs] = []
"""Commands whose jobs outlived them."""
_left_running_lock = threading.Lock()


def end_background_jobs(grace_s: float = 1.0) -> None:
    """End the jobs ``Bash`` commands left running (run at exit): ``SIGTERM``, then ``SIGKILL``; never raises."""
    for signum in (signal.SIGTERM, signal.SIGKILL):
        with _left_running_lock:
            _LEFT_RUNNING[:] = [left for left in _LEFT_RUNNING if left.running()]
            signalled = [left for left in _LEFT_RUNNING if left.ours()]
        for left in signalled:
            try:
                os.killpg(left.group, signum)
            except OSError:  # gone already, or not ours to signal
                pass
        stop = time.monotonic() + grace_s
        while any(left.ours() for left in signalled) and time.monotonic() < stop:
            time.sleep(0.05)


atexit.register(end_background_jobs)
