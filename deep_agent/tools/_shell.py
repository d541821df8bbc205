"""``Bash``: one shell command in the workspace folder, with a timeout and bounded output.

``timeout`` is in milliseconds, as in Claude Code (default 120000, at most
600000). When it passes, the command's whole process group is killed and
the model is told. The command starts in the workspace, but a shell can
reach any path the user can: that is why ``Bash`` asks for approval by
default in the command line.

Example::

    (bash,) = shell_tools(Workspace("."))
    bash.invoke({"command": "ls -1 | head -3", "timeout": 5000})
"""

from __future__ import annotations

import os
import signal
import subprocess

from langchain_core.tools import StructuredTool
from pydantic import BaseModel, Field

from deep_agent.tools._files import _tool
from deep_agent.tools._workspace import Workspace

DEFAULT_TIMEOUT_MS = 120_000
MAX_TIMEOUT_MS = 600_000


class BashInput(BaseModel):
    command: str = Field(description="The shell command to run (in the workspace folder).")
    timeout: int | None = Field(
        default=None, ge=1, le=MAX_TIMEOUT_MS,
        description="Milliseconds before the command is killed (default 120000, max 600000).",
    )


def shell_tools(ws: Workspace) -> list[StructuredTool]:
    """``Bash``, bound to ``ws``."""

    def bash(command: str, timeout: int | None = None) -> str:
        limit_s = (timeout or DEFAULT_TIMEOUT_MS) / 1000
        process = subprocess.Popen(
            command, shell=True, cwd=ws.root, stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, start_new_session=True,
        )
        try:
            output, _ = process.communicate(timeout=limit_s)
        except subprocess.TimeoutExpired:
            _kill_group(process)
            output, _ = process.communicate()
            text = output.decode("utf-8", "replace")
            return ws.bound(f"{text}\n[command killed after {limit_s:g}s timeout]".lstrip("\n"))
        text = output.decode("utf-8", "replace")
        if process.returncode:
            text = f"{text}\n[exit code {process.returncode}]".lstrip("\n")
        return ws.bound(text or "(no output)")

    return [_tool(bash, "Bash", BashInput, "Run a shell command in the workspace folder.")]


def _kill_group(process: subprocess.Popen[bytes]) -> None:
    try:
        os.killpg(process.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        process.kill()
