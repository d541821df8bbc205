"""A subagent's MCP tools: listed once when the child is built, called through each task's sessions.

The child graph is built once and cached, so its tools must be known then:
:meth:`McpToolset.connect` connects to each server of the spec's
``mcp_config`` once, lists its tools (bounded by the spec's ``timeout_s``,
at most :data:`LIST_TIMEOUT_S`), and disconnects. Each listed tool becomes a
:class:`McpTool` named ``mcp__<server>__<tool>`` (Claude Code's convention),
so it never collides with the parent's tools and ``tools`` /
``disallowed_tools`` filter it like any other (``mcp__github`` or
``mcp__github__*`` for all of a server's tools).

Lifecycle (per task, not per agent): a task's sessions are opened when it
first calls an MCP tool, reused for the rest of its run, and closed when the
child's run ends, however it ends -- :attr:`McpToolset.lifecycle` is a
callback handler bound to the child graph that counts the run's chains per
task id and closes that task's sessions when the count drops to zero. Two
tasks (parallel siblings, background tasks) never share a connection. A
call waits at most until the task's deadline (``timeout_s``) or the
server's ``timeout`` (default :data:`CALL_TIMEOUT_S`); a server that fails
to start, answer or stay up raises :class:`McpServerError` naming it, which
fails that task alone.

Example::

    toolset = McpToolset.connect("researcher", {"files": {"command": "mcp-files"}}, timeout=10)
    [t.name for t in toolset.tools]      # ['mcp__files__read', 'mcp__files__list']
"""

from __future__ import annotations

import asyncio
import fnmatch
import logging
import re
import threading
import time
from collections.abc import Iterable, Mapping, Sequence
from typing import Any
from uuid import UUID

from langchain_core.callbacks import BaseCallbackHandler
from langchain_core.tools import BaseTool, ToolException

from subagents._meter import TaskMeter
from subagents.definitions._mcp_config import connection_for
from subagents.definitions._mcp_sessions import McpServerError, McpSessions

log = logging.getLogger(__name__)

MCP_PREFIX = "mcp__"
LIST_TIMEOUT_S = 30.0
"""Longest wait for a server to start and list its tools when the child is built."""
CALL_TIMEOUT_S = 120.0
"""Longest wait for one call when neither the task nor the server sets a shorter bound."""
TASK_ID_METADATA_KEY = "subagent_task_id"
"""The runner's metadata key naming the task a child run belongs to (``runner.TASK_ID_METADATA_KEY``)."""

_UNSAFE = re.compile(r"[^A-Za-z0-9_-]")


def mcp_tool_name(server: str, tool: str) -> str:
    """``mcp__<server>__<tool>``, with characters providers refuse made ``_``, at most 64."""
    return _UNSAFE.sub("_", f"{MCP_PREFIX}{server}__{tool}")[:64]


def is_mcp_name(name: str) -> bool:
    return name.startswith(MCP_PREFIX)


def _matches(name: str, server: str, pattern: str) -> bool:
    return pattern in (name, f"{MCP_PREFIX}{server}") or fnmatch.fnmatchcase(name, pattern)


def select_mcp_tools(
    tools: Iterable[McpTool], allow: Sequence[Any] | None, deny: Sequence[str]
) -> list[McpTool]:
    """The tools an allow list (``None``: all) admits and no deny entry names."""
    allowed = None if allow is None else [p for p in allow if isinstance(p, str) and is_mcp_name(p)]
    return [
        t for t in tools
        if (allowed is None or any(_matches(t.name, t.server, p) for p in allowed))
        and not any(_matches(t.name, t.server, p) for p in deny)
    ]


class McpTool(BaseTool):
    """One tool of one MCP server, executed through the calling task's session."""

    server: str
    remote_name: str
    toolset: Any
    handle_tool_error: bool = True

    def _run(self, *args: Any, run_manager: Any = None, **kwargs: Any) -> Any:
        sessions, timeout = self.toolset.sessions_for(run_manager, self.server)
        try:
            result = sessions.wait(sessions.call_tool(self.server, self.remote_name, kwargs, timeout), timeout)
        except McpServerError:
            _stop_if_due(run_manager)
            raise
        return tool_content(result)

    async def _arun(self, *args: Any, run_manager: Any = None, **kwargs: Any) -> Any:
        sessions, timeout = self.toolset.sessions_for(run_manager, self.server)
        try:
            result = await sessions.await_(sessions.call_tool(self.server, self.remote_name, kwargs, timeout))
        except McpServerError:
            _stop_if_due(run_manager)
            raise
        return tool_content(result)


def tool_content(result: Any) -> Any:
    """An MCP ``CallToolResult`` as tool output; a tool-level error is a :class:`ToolException`."""
    parts: list[dict[str, Any]] = []
    for block in result.content or ():
        kind = getattr(block, "type", "")
        if kind == "text":
            parts.append({"type": "text", "text": block.text})
        elif kind == "image":
            parts.append({"type": "image", "base64": block.data, "mime_type": block.mimeType})
        elif kind == "resource" and hasattr(block.resource, "text"):
            parts.append({"type": "text", "text": block.resource.text})
        else:
            parts.append({"type": "text", "text": f"[{kind or 'unknown'} content omitted]"})
    if all(p["type"] == "text" for p in parts):
        text = "\n".join(p["text"] for p in parts)
        if result.isError:
            raise ToolException(text or "the MCP tool reported an error")
        return text
    if result.isError:
        raise ToolException("the MCP tool reported an error")
    return parts


class _Lifecycle(BaseCallbackHandler):
    """Opens nothing; closes a task's sessions when the last chain of its run ends."""

    run_inline = True

    def __init__(self, toolset: McpToolset) -> None:
        self.toolset = toolset

    def on_chain_start(self, serialized: Any, inputs: Any, *, run_id: UUID,
                       metadata: Mapping[str, Any] | None = None, **kwargs: Any) -> None:
        self.toolset._enter(run_id, _task_key(metadata))

    def on_chain_end(self, outputs: Any, *, run_id: UUID, **kwargs: Any) -> None:
        self.toolset._exit(run_id)

    def on_chain_error(self, error: BaseException, *, run_id: UUID, **kwargs: Any) -> None:
        self.toolset._exit(run_id)


def _task_key(metadata: Mapping[str, Any] | None) -> str:
    return str((metadata or {}).get(TASK_ID_METADATA_KEY) or "")


class McpToolset:
    """The MCP tools of one built child, and the live sessions of its running tasks."""

    def __init__(self, agent: str, connections: Mapping[str, Mapping[str, Any]],
                 call_timeouts: Mapping[str, float]) -> None:
        self.agent = agent
        self.connections = dict(connections)
        self.call_timeouts = dict(call_timeouts)
        self.tools: list[McpTool] = []
        self.lifecycle = _Lifecycle(self)
        self._lock = threading.Lock()
        self._runs: dict[UUID, str] = {}
        self._active: dict[str, int] = {}
        self._sessions: dict[str, McpSessions] = {}

    @classmethod
    def connect(cls, agent: str, servers: Mapping[str, Mapping[str, Any]], *, timeout: float) -> McpToolset:
        """List every server's tools once; :class:`McpServerError` names a server that fails."""
        connections = {name: connection_for(name, config) for name, config in servers.items()}
        call_timeouts = {name: float(config.get("timeout") or CALL_TIMEOUT_S) for name, config in servers.items()}
        toolset = cls(agent, connections, call_timeouts)
        listing = McpSessions(connections, label=f"{agent}-listing")

        async def list_all() -> list[list[Any]]:
            return await asyncio.gather(*(listing.list_tools(s, timeout) for s in connections))

        try:
            listed = listing.wait(list_all(), timeout)
        finally:
            listing.close()
        seen: set[str] = set()
        for server, tools in zip(connections, listed, strict=True):
            for tool in tools:
                name = mcp_tool_name(server, tool.name)
                if name in seen:
                    log.warning("subagent %r: MCP tool %r of %r skipped: its name is taken", agent, tool.name, server)
                    continue
                seen.add(name)
                toolset.tools.append(McpTool(
                    name=name, description=tool.description or f"{tool.name} (MCP server {server})",
                    args_schema=dict(tool.inputSchema or {"type": "object", "properties": {}}),
                    server=server, remote_name=tool.name, toolset=toolset,
                ))
        return toolset

    # -- per task ------------------------------------------------------------------

    def sessions_for(self, run_manager: Any, server: str) -> tuple[McpSessions, float]:
        """This task's sessions (opened on first use) and how long a call may take."""
        key = _task_key(getattr(run_manager, "metadata", None))
        with self._lock:
            sessions = self._sessions.get(key)
            if sessions is None:
                sessions = McpSessions(self.connections, label=f"{self.agent}-{key[:8] or 'run'}")
                self._sessions[key] = sessions
        timeout = self.call_timeouts.get(server, CALL_TIMEOUT_S)
        deadline = _deadline(run_manager)
        if deadline is not None:
            timeout = min(timeout, max(deadline - time.monotonic(), 0.01))
        return sessions, timeout

    def _enter(self, run_id: UUID, key: str) -> None:
        with self._lock:
            self._runs[run_id] = key
            self._active[key] = self._active.get(key, 0) + 1

    def _exit(self, run_id: UUID) -> None:
        with self._lock:
            key = self._runs.pop(run_id, None)
            if key is None:
                return
            self._active[key] -= 1
            if self._active[key] > 0:
                return
            del self._active[key]
            sessions = self._sessions.pop(key, None)
        if sessions is not None:
            sessions.close()

    @property
    def open_tasks(self) -> int:
        """How many tasks hold sessions right now."""
        return len(self._sessions)


def _meters(run_manager: Any) -> list[TaskMeter]:
    handlers = [*(getattr(run_manager, "handlers", None) or ()),
                *(getattr(run_manager, "inheritable_handlers", None) or ())]
    return [h for h in handlers if isinstance(h, TaskMeter)]


def _deadline(run_manager: Any) -> float | None:
    deadlines = [m.deadline for m in _meters(run_manager) if m.deadline is not None]
    return min(deadlines) if deadlines else None


def _stop_if_due(run_manager: Any) -> None:
    """A call cut short by the task's own limit (its ``timeout_s``, a cancel) stops as that limit.

    The wait was bounded by the task's deadline, so the server "not answering"
    is the task timing out: raised as the meter's own stop, it is recorded as
    ``timeout``, not as this tool's failure.
    """
    for meter in _meters(run_manager):
        meter.raise_if_stopped()


__all__ = ["McpServerError", "McpTool", "McpToolset", "mcp_tool_name", "select_mcp_tools"]
