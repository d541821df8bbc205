"""MCP servers for a child: the test servers of ``mcp_servers.py`` over stdio, and scripted parents using them."""

from __future__ import annotations

import os
import sys
from pathlib import Path

from deep_agent._testing import ScriptedChatModel, tool_call
from helpers import TESTS
from helpers.agent_files import DETAIL

SERVERS = TESTS / "helpers" / "mcp_servers.py"


def stdio(mode: str = "stdio", **extra: object) -> dict:
    return {"command": sys.executable, "args": [str(SERVERS), mode], **extra}


def report(messages: list) -> str:
    """The child's final answer: every tool result it saw."""
    return "Results: " + " | ".join(m.text for m in messages if m.type == "tool") + DETAIL


def delegate(*jobs: tuple[str, str], child_rules: list) -> ScriptedChatModel:
    return ScriptedChatModel(
        rules=child_rules,
        responses=[{"tool_calls": [tool_call("task", description=d, subagent_type=t) for d, t in jobs]},
                   "parent carried on"],
    )


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


def pids(path: Path) -> list[int]:
    return [int(line) for line in path.read_text().split()] if path.exists() else []


def _napping(spec_extra: dict, server_extra: dict | None = None) -> tuple[dict, object]:
    spec = {"name": "h", "description": "h", "mcp_config": {"slow": stdio(**(server_extra or {}))}, **spec_extra}
    model = delegate(("wait", "h"), child_rules=[
        ("wait", [{"tool_calls": [{"name": "mcp__slow__nap", "args": {"seconds": 3600}}]}, report])])
    return spec, model
