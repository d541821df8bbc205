"""Importing the factory loads only what an agent without background tasks, MCP or hooks runs.

Background tasks (their runtime, SQLite store and remote client), MCP
clients, hook runners and dynamic subagents load when an agent asks for
them, so ``from deep_agent import create_deep_agent`` costs
no more than deepagents' own import (``python -m bench --only construction``).
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[3]

ON_DEMAND = (
    "sqlite3",
    "mcp",
    "langchain_mcp_adapters",
    "middleware._background",
    "middleware._dynamic",
    "subagents.background",
    "subagents.background._remote",
    "subagents.background._runtime",
    "subagents.definitions._hooks",
    "subagents.definitions._mcp",
    "deep_agent.cli",
    "deep_agent.tools",
)


def _loaded_after(statement: str) -> list[str]:
    code = f"import json, sys\n{statement}\nprint(json.dumps(sorted(sys.modules)))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, timeout=120)
    assert out.returncode == 0, out.stderr
    loaded = set(json.loads(out.stdout.splitlines()[-1]))
    return [name for name in ON_DEMAND if name in loaded]


@pytest.mark.parametrize("statement", [
    "from deep_agent import create_deep_agent",
    "from middleware import SubAgentMiddleware",
    "from subagents import SubagentSpec, TaskRunner",
])
def test_the_everyday_imports_leave_background_mcp_and_hooks_unloaded(statement: str) -> None:
    assert _loaded_after(statement) == []


def test_importing_the_packages_alone_loads_neither_langchain_nor_its_clients() -> None:
    # LangGraph itself loads langgraph_sdk, httpx and rich; a bare package import (the CLI's
    # `--help`, a type annotation) loads none of them, nor LangChain.
    code = ("import json, sys\nimport deep_agent, middleware, subagents, subagents.definitions\n"
            "print(json.dumps(sorted(sys.modules)))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, timeout=120)
    assert out.returncode == 0, out.stderr
    tops = {name.split(".")[0] for name in json.loads(out.stdout.splitlines()[-1])}
    assert tops.isdisjoint({"langchain", "langchain_core", "langgraph", "langgraph_sdk", "httpx", "rich", "sqlite3"})


def test_they_load_when_an_agent_uses_them() -> None:
    # The check itself can fail: asking for background tasks and hooks does load their modules.
    loaded = _loaded_after(
        "from deep_agent import create_deep_agent\n"
        "from deep_agent._testing import ScriptedChatModel\n"
        "create_deep_agent(ScriptedChatModel(responses=['ok']), background=True,\n"
        "                  hooks={'PreToolUse': [{'matcher': 'task', 'hooks': [{'type': 'command', 'command': 'true'}]}]})"
    )
    assert {"middleware._background", "subagents.background", "subagents.definitions._hooks", "sqlite3"} <= set(loaded)
