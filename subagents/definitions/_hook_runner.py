"""Running one hook command: the event as JSON on stdin, bounded by its timeout.

The command runs through the shell in its own process group, so a timeout
ends it and anything it started. Whatever happens -- the command is
missing, crashes, prints megabytes or never ends -- the result is a
:class:`HookOutcome`, never an exception. :func:`run_hook` blocks its
thread; :func:`arun_hook` awaits an asyncio subprocess and never blocks the
event loop. What an outcome *means* is decided in one place,
:mod:`subagents.definitions._hook_middleware`.

Example::

    outcome = run_hook("./check.sh", {"hook_event_name": "PreToolUse", "tool_name": "Bash"}, 30)
    outcome.exit_code, outcome.stderr       # (2, 'rm -rf is not allowed')
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
import os
import signal
import subprocess
from collections.abc import Mapping
from typing import Any

MAX_OUTPUT_CHARS = 8000
"""Most characters of a hook's stdout or stderr kept."""


@dataclasses.dataclass(frozen=True)
class HookOutcome:
    """How a hook command ended: ``exit_code`` is ``None`` when it timed out or did not start."""

    command: str
    exit_code: int | None
    stdout: str = ""
    stderr: str = ""
    problem: str | None = None

    def describe(self) -> str:
        """One line for a warning."""
        what = self.problem or f"exited {self.exit_code}"
        detail = f": {self.stderr.strip()[:300]}" if self.stderr.strip() else ""
        return f"hook {self.command[:80]!r} {what}{detail}"


def _payload(event: Mapping[str, Any]) -> bytes:
    return json.dumps(event, default=str).encode("utf-8")


def _text(data: bytes | None) -> str:
    return (data or b"").decode("utf-8", "replace")[:MAX_OUTPUT_CHARS]


def _kill_group(pid: int) -> None:
    try:
        os.killpg(pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError, OSError):
        pass


def run_hook(command: str, event: Mapping[str, Any], timeout: float) -> HookOutcome:
    """Run ``command`` with ``event`` on stdin, waiting at most ``timeout`` seconds."""
    try:
        proc = subprocess.Popen(command, shell=True, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, start_new_session=True)
    except Exception as exc:  # noqa: BLE001 - a hook that cannot start is a warning
        return HookOutcome(command, None, problem=f"could not start ({type(exc).__name__}: {exc})")
    try:
        out, err = proc.communicate(_payload(event), timeout=timeout)
    except subprocess.TimeoutExpired:
        _kill_group(proc.pid)
        proc.communicate()
        return HookOutcome(command, None, problem=f"timed out after {timeout:g}s")
    except Exception as exc:  # noqa: BLE001
        _kill_group(proc.pid)
        return HookOutcome(command, None, problem=f"failed ({type(exc).__name__})")
    return HookOutcome(command, proc.returncode, _text(out), _text(err))


async def arun_hook(command: str, event: Mapping[str, Any], timeout: float) -> HookOutcome:
    """:func:`run_hook` on the running event loop, without blocking it."""
    try:
        proc = await asyncio.create_subprocess_shell(
            command, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
            start_new_session=True,
        )
    except Exception as exc:  # noqa: BLE001
        return HookOutcome(command, None, problem=f"could not start ({type(exc).__name__}: {exc})")
    try:
        out, err = await asyncio.wait_for(proc.communicate(_payload(event)), timeout)
    except BaseException as exc:
        _kill_group(proc.pid)
        await asyncio.shield(proc.wait())
        if isinstance(exc, TimeoutError):
            return HookOutcome(command, None, problem=f"timed out after {timeout:g}s")
        if not isinstance(exc, Exception):
            raise  # cancellation of the task propagates, after the hook is ended
        return HookOutcome(command, None, problem=f"failed ({type(exc).__name__})")
    return HookOutcome(command, proc.returncode, _text(out), _text(err))
