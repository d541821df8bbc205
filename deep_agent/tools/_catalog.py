"""The set of built-in tools, which of them are risky, and what agent files ask for beyond them.

Example::

    with_bash_rules(["Read", "Bash(git diff:*)"], Workspace("."))   # ['Read', <Bash running only git diff>]
    tools_not_provided(specs)   # {'WebFetch': ['researcher'], 'mcp__github__search': ['triager']}
"""

from __future__ import annotations

import fnmatch
import os
import re
from collections.abc import Iterable
from typing import Any, Literal

from langchain_core.tools import BaseTool

from deep_agent.tools._command_rules import CommandRules
from deep_agent.tools._files import file_tools
from deep_agent.tools._sandbox import Sandbox
from deep_agent.tools._search import search_tools
from deep_agent.tools._shell import shell_tools
from deep_agent.tools._workspace import Workspace
from subagents._errors import SpecError

BUILTIN_TOOL_NAMES: tuple[str, ...] = ("Read", "Write", "Edit", "Glob", "Grep", "LS", "Bash")
RISKY_TOOLS: frozenset[str] = frozenset({"Write", "Edit", "Bash"})  # they ask for approval under confirm_risky

# A given Sandbox; "sandbox": this machine's (no Bash without bwrap); "unconfined": a plain shell; None: no Bash.
BashSetting = Sandbox | Literal["sandbox", "unconfined"] | None

_RULE = re.compile(r"^([A-Za-z_][\w-]*)\s*\(.*\)$", re.DOTALL)


def builtin_tools(workspace: Workspace | str | os.PathLike[str] | None = None, *,
                  bash: BashSetting = "sandbox") -> list[BaseTool]:
    """The seven tools, confined to ``workspace`` (default: the current folder); ``bash``: by default in
    bubblewrap's sandbox, left out where ``bwrap`` is missing; ``"unconfined"``: a plain shell; ``None``: none."""
    ws = workspace if isinstance(workspace, Workspace) else Workspace(workspace)
    offered, sandbox = _bash(bash)
    tools = [*file_tools(ws), *search_tools(ws), *(shell_tools(ws, sandbox) if offered else [])]
    order = {name: i for i, name in enumerate(BUILTIN_TOOL_NAMES)}
    return sorted(tools, key=lambda t: order[t.name])


def with_bash_rules(entries: Iterable[Any], ws: Workspace, bash: BashSetting = "sandbox") -> list[Any]:
    """A ``tools`` list with ``Bash(...)`` rules enforced: one ``Bash`` bound to them, other rules as plain names
    (plain ``Bash`` beside rules means every command; where no ``Bash`` is offered the entry stays a name)."""
    items = list(entries)
    rules = CommandRules.parse(item for item in items if isinstance(item, str))
    names: list[Any] = list(dict.fromkeys(base_tool_name(t) if isinstance(t, str) else t for t in items))
    offered, sandbox = _bash(bash)
    if rules is None or not offered:
        return names
    (limited,) = shell_tools(ws, sandbox, rules=rules)
    return [limited if name == "Bash" else name for name in names]


def _bash(bash: BashSetting) -> tuple[bool, Sandbox | None]:
    """Whether ``Bash`` is offered, and the sandbox it runs in (``None``: unconfined)."""
    if isinstance(bash, Sandbox):
        return True, bash
    if bash == "sandbox":
        found = Sandbox.find()
        return found is not None, found
    if bash in ("unconfined", None):
        return bash is not None, None
    raise SpecError(f"bash={bash!r}: expected a Sandbox, 'sandbox', 'unconfined' or None")


def base_tool_name(entry: str) -> str:
    """``Bash(git diff:*)`` -> ``Bash``: Claude Code's permission rule names the tool it limits."""
    match = _RULE.match(entry.strip())
    return match.group(1) if match else entry.strip()


def tools_not_provided(specs: Iterable[Any], provided: Iterable[str] = BUILTIN_TOOL_NAMES) -> dict[str, list[str]]:
    """Tool names agent files list that no built-in (nor the agent's own MCP server) provides -> the agents."""
    have = set(provided)
    missing: dict[str, list[str]] = {}
    for spec in specs:
        servers = getattr(spec, "mcp_config", None) or {}
        for entry in getattr(spec, "tools", None) or ():
            # An entry naming tools of an MCP server the spec defines (not one it only names) is served.
            server = entry.split("__")[1] if isinstance(entry, str) and entry.startswith("mcp__") else ""
            served = server and any(config and fnmatch.fnmatchcase(name, server) for name, config in servers.items())
            if isinstance(entry, str) and base_tool_name(entry) not in have and not served:
                missing.setdefault(base_tool_name(entry), []).append(spec.name)
    return missing

