"""A subagent's MCP tools (``mcp__<server>__<tool>``): listed once when the child is built, called through each
task's own sessions, which close when its run ends; a server that fails fails that task alone, naming it."""

from __future__ import annotations

import asyncio
import atexit
import concurrent.futures
import contextlib
import fnmatch
import logging
import os
import re
import shutil
import threading
import time
from collections.abc import Awaitable, Callable, Coroutine, Iterable, Iterator, Mapping, Sequence
from datetime import timedelta
from typing import Any, cast
from urllib.parse import urlsplit
from uuid import UUID

from langchain_core.callbacks import BaseCallbackHandler
from langchain_core.tools import BaseTool, ToolException

from subagents._errors import McpServerError, RuntimeClosed, SpecError, brief, redact_url
from subagents._metering import TaskMeter
from subagents._outcome import TASK_ID_METADATA_KEY
from subagents.definitions._on_host import launch

TRANSPORTS = ("stdio", "sse", "http", "streamable_http", "streamable-http", "websocket")
SERVER_NAME = re.compile(r"[A-Za-z0-9_-]{1,40}")
_KEYS = frozenset({"command", "args", "env", "cwd", "url", "headers", "transport", "type", "timeout"})


def normalize_mcp_config(value: Any) -> dict[str, dict[str, Any]] | None:
    """``{server name: config}`` from a mapping, ``{"mcpServers": {...}}`` or Claude Code's list form (a bare name,
    stored as ``{}``, is a server of ``mcp_servers=``); ``None`` stays ``None``. Names become part of tool names."""
    if value is None:
        return None
    if isinstance(value, Mapping) and set(value) == {"mcpServers"}:
        value = value["mcpServers"]
    servers: dict[str, Any] = {}
    if isinstance(value, Mapping):
        servers = dict(value)
    elif isinstance(value, list):
        for item in value:
            if isinstance(item, str) and item.strip():
                servers[item.strip()] = {}
            elif isinstance(item, Mapping) and len(item) == 1:
                servers.update(item)
            else:
                raise SpecError(f"expected each list item to be a server name or {{name: config}}, got {brief(item)}")
    else:
        raise SpecError(f"expected a mapping of MCP server names to configs, got {brief(value)}")
    return {name: _server(name, config) for name, config in servers.items()}


def _server(name: Any, config: Any) -> dict[str, Any]:
    if not isinstance(name, str) or not SERVER_NAME.fullmatch(name):
        raise SpecError("expected MCP server names of letters, digits, '-' and '_' (at most 40), "
                        f"got {brief(name)}")
    where = f"MCP server {brief(name)}"
    if not isinstance(config, Mapping | None):
        raise SpecError(f"{where}: expected a mapping with 'command' or 'url', got {brief(config)}")
    config = dict(config or {})
    if not config:  # a bare name: a server of the caller's mcp_servers=
        return cast("dict[str, Any]", config)
    has_command, has_url = "command" in config, "url" in config
    if has_command == has_url:
        raise SpecError(f"{where}: expected exactly one of 'command' (local) or 'url' (remote)")
    key = "command" if has_command else "url"
    if not isinstance(config[key], str) or not config[key].strip():
        raise SpecError(f"{where}: expected '{key}' to be a non-empty string, got {brief(config[key])}")
    args = config.get("args", [])
    if not isinstance(args, list) or not all(isinstance(a, (str, int, float)) for a in args):
        raise SpecError(f"{where}: expected 'args' to be a list of strings, got {brief(args)}")
    for table in ("env", "headers"):
        mapping = config.get(table, {})
        if not isinstance(mapping, Mapping) or not all(isinstance(k, str) for k in mapping):
            raise SpecError(f"{where}: expected '{table}' to be a mapping of strings, got {brief(mapping)}")
    transport = config.get("transport", config.get("type"))
    if transport is not None and transport not in TRANSPORTS:
        raise SpecError(f"{where}: expected transport one of {', '.join(TRANSPORTS)}, got {brief(transport)}")
    timeout = config.get("timeout")
    if timeout is not None and (isinstance(timeout, bool) or not isinstance(timeout, (int, float))
                                or not 0 < timeout <= 86_400):
        raise SpecError(f"{where}: expected 'timeout' to be a number of seconds, got {brief(timeout)}")
    if unknown := sorted(set(config) - _KEYS):
        raise SpecError(f"{where}: unknown key(s) {brief(', '.join(map(str, unknown)))}; "
                        f"expected {', '.join(sorted(_KEYS))}")
    return cast("dict[str, Any]", config)


_BRACED = re.compile(r"\$\{([^}]+)\}")  # the MCP client's rule: braced only; an unset name stays


def connection_for(name: str, config: Mapping[str, Any]) -> dict[str, Any]:
    """The ``langchain-mcp-adapters`` connection for one normalised server config."""
    if not config:
        raise SpecError(f"MCP server '{name}' is named but not defined; pass its config in "
                        "DelegationSettings.of(mcp_servers=...) or give it in the agent file")
    if "command" in config:
        connection: dict[str, Any] = {"transport": "stdio", "command": config["command"],
                                      "args": [str(a) for a in config.get("args", [])]}
        if config.get("env"):  # what the config declares: launch() gives it on top of this process's (or a sandbox's)
            connection["env"] = {k: str(v) for k, v in config["env"].items()}
        if config.get("cwd"):
            connection["cwd"] = str(config["cwd"])
        return connection
    transport = config.get("transport", config.get("type"))
    if transport in (None, "http", "streamable-http"):
        sse = transport is None and config["url"].split("?")[0].rstrip("/").endswith("/sse")
        transport = "sse" if sse else "streamable_http"
    connection = {"transport": transport, "url": config["url"]}
    if config.get("headers") and transport != "websocket":  # `${NAME}` read from the environment, as `env`'s is
        connection["headers"] = {k: _BRACED.sub(lambda m: os.environ.get(m[1], m[0]), str(v))
                                 for k, v in config["headers"].items()}
    return connection


def check_mcp_servers(config: Mapping[str, Mapping[str, Any]] | None,
                      defined: Mapping[str, Any] | None = None) -> tuple[list[str], list[str]]:
    """``(problems, notes)``: missing stdio commands, bad URLs; a bare name is a note unless ``defined`` lacks it."""
    problems: list[str] = []
    notes: list[str] = []
    for name, server in (config or {}).items():
        if not server:
            if defined is None:
                notes.append(f"MCP server '{name}' refers to a server the caller defines (mcp_servers=)")
            elif name not in defined:
                problems.append(f"MCP server '{name}' is named but not defined")
        elif "command" in server:
            command = server["command"]
            if shutil.which(command) is None:
                problems.append(f"MCP server '{name}': command {brief(command)} not found on PATH")
        else:
            try:
                parts = urlsplit(server["url"])
                valid = parts.scheme in ("http", "https", "ws", "wss") and bool(parts.hostname)
            except ValueError:
                valid = False
            if not valid:
                shown = brief(redact_url(str(server["url"])))
                problems.append(f"MCP server '{name}': url {shown} is not an http(s) or ws(s) URL")
    return problems, notes


# An MCP session is an anyio context, entered and left by one asyncio task on one loop, while a child's tools run
# wherever LangGraph picks: so each task's sessions get a loop on a daemon thread, each server an owner coroutine
# there. Sessions open at exit are closed and waited for (bounded), or a hung stdio server would outlive us.

CLOSE_GRACE_S = 5.0  # how long a sync caller waits past its own bound for the loop to hand back a timed-out call

_open: set[McpSessions] = set()
_open_lock = threading.Lock()


@atexit.register
def close_open_sessions(wait_s: float = 6.0) -> None:
    """Close every task's sessions still open; wait (bounded: stdio waits 2 s, then terminates) for their servers."""
    with _open_lock:
        sessions = list(_open)
    for each in sessions:
        each.close()
    deadline = time.monotonic() + wait_s
    for each in sessions:
        each.closed.wait(max(deadline - time.monotonic(), 0))


def describe_cause(exc: BaseException) -> str:
    """The innermost readable cause, out of anyio's exception groups, bounded."""
    while isinstance(exc, BaseExceptionGroup) and exc.exceptions:
        exc = exc.exceptions[0]
    try:
        text = str(exc)
    except Exception:  # noqa: BLE001 - a hostile __str__
        text = ""
    return f"{type(exc).__name__}: {text[:300]}" if text else type(exc).__name__


class McpSessions:
    """The sessions of one task (or one listing), on a loop thread started on first use."""

    def __init__(self, connections: Mapping[str, Mapping[str, Any]], *, label: str = "mcp") -> None:
        self._connections = dict(connections)
        self._label = label
        self._lock = threading.Lock()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._closing: asyncio.Event | None = None
        self._ready: dict[str, asyncio.Future[Any]] = {}
        self._owners: list[asyncio.Task[None]] = []
        self.closed = threading.Event()
        """Set once every server of this task is disconnected and the loop has stopped."""

    def _start(self) -> asyncio.AbstractEventLoop:
        with self._lock:
            if self.closed.is_set():
                raise RuntimeClosed("these MCP sessions are closed")
            if self._loop is None:
                with _open_lock:
                    _open.add(self)
                started = threading.Event()
                threading.Thread(target=self._main, args=(started,), name=f"{self._label}-sessions",
                                 daemon=True).start()
                started.wait()
            assert self._loop is not None
            return self._loop

    def _main(self, started: threading.Event) -> None:
        async def main() -> None:
            self._loop = asyncio.get_running_loop()
            self._closing = asyncio.Event()
            started.set()
            await self._closing.wait()
            await asyncio.gather(*self._owners, return_exceptions=True)

        try:
            asyncio.run(main())
        finally:
            with _open_lock:
                _open.discard(self)
            self.closed.set()

    def close(self) -> None:
        """Disconnect every server (without waiting); safe to call twice or never started."""
        with self._lock:
            loop, closing = self._loop, self._closing
            if loop is None:
                self.closed.set()
                return
        with contextlib.suppress(RuntimeError):  # the loop already stopped
            loop.call_soon_threadsafe(closing.set)  # type: ignore[union-attr]

    async def session(self, server: str, timeout: float) -> Any:
        """The server's session, started on first use by an owner coroutine (within ``timeout`` of its turn)."""
        ready = self._ready.get(server)
        if ready is None:
            ready = asyncio.get_running_loop().create_future()
            # Read here too: a waiter cut short by its timeout leaves the start's failure to no one (a warning).
            ready.add_done_callback(lambda done: done.cancelled() or done.exception())
            self._ready[server] = ready
            self._owners.append(asyncio.create_task(self._own(server, ready, timeout)))
        return await asyncio.shield(ready)

    async def _own(self, server: str, ready: asyncio.Future[Any], timeout: float) -> None:
        from langchain_mcp_adapters.client import MultiServerMCPClient

        assert self._closing is not None
        try:
            connection = dict(self._connections[server])
            async with contextlib.AsyncExitStack() as stack:
                if connection.get("transport") == "stdio":  # started confined where this process's Bash is
                    argv, env = stack.enter_context(launch([connection["command"], *connection.get("args", [])],
                                                           connection.get("cwd"), connection.get("env")))
                    connection.update(command=argv[0], args=argv[1:], env=env)
                client = MultiServerMCPClient({server: connection})  # type: ignore[dict-item]
                async with asyncio.timeout(timeout):
                    session = await stack.enter_async_context(client.session(server))
                ready.set_result(session)
                await self._closing.wait()
        except BaseException as exc:  # noqa: BLE001 - reported to whoever waits for the session
            if not ready.done():
                ready.set_exception(McpServerError(server, f"did not start within {round(timeout, 1):g}s"
                                                   if isinstance(exc, TimeoutError)
                                                   else f"failed to start: {describe_cause(exc)}"))
            if isinstance(exc, (KeyboardInterrupt, SystemExit)):
                raise

    async def _bounded(self, server: str, what: str, use: Callable[[Any], Awaitable[Any]], timeout: float) -> Any:
        """``use(session)`` of the server, within ``timeout`` (its start included); any failure names the server."""
        try:
            async with asyncio.timeout(timeout):
                return await use(await self.session(server, timeout))
        except TimeoutError:
            raise McpServerError(server, f"did not {what} within {round(timeout, 1):g}s") from None
        except McpServerError:
            raise
        except Exception as exc:  # noqa: BLE001 - any transport failure names the server
            raise McpServerError(server, f"failed: {describe_cause(exc)}") from None

    async def list_tools(self, server: str, timeout: float) -> list[Any]:
        """Every tool the server offers (all pages)."""

        async def listing(session: Any) -> list[Any]:
            tools: list[Any] = []
            cursor: str | None = None
            for _ in range(100):
                page = await session.list_tools(cursor=cursor)
                tools.extend(page.tools)
                cursor = page.nextCursor
                if not cursor:
                    return tools
            raise McpServerError(server, "listed more than 100 pages of tools")

        return cast("list[Any]", await self._bounded(server, "list its tools", listing, timeout))

    async def call_tool(self, server: str, tool: str, args: Mapping[str, Any], timeout: float) -> Any:
        """The server's ``CallToolResult`` for one call."""
        return await self._bounded(server, f"answer a call of {brief(tool, 60)}", lambda session: session.call_tool(
            tool, dict(args), read_timeout_seconds=timedelta(seconds=timeout)), timeout)

    def wait(self, coro: Coroutine[Any, Any, Any], timeout: float) -> Any:
        """Run ``coro`` here and block this (non-loop) thread for its result."""
        future = asyncio.run_coroutine_threadsafe(coro, self._start())
        try:
            return future.result(timeout + CLOSE_GRACE_S)
        except concurrent.futures.TimeoutError:
            future.cancel()
            raise McpServerError(self._label, f"did not answer within {timeout:g}s") from None

    async def await_(self, coro: Coroutine[Any, Any, Any]) -> Any:
        """Run ``coro`` here and await its result from another loop."""
        return await asyncio.wrap_future(asyncio.run_coroutine_threadsafe(coro, self._start()))


log = logging.getLogger(__name__)

MCP_PREFIX = "mcp__"
LIST_TIMEOUT_S = 30.0  # for a server to start and list its tools when the child is built
CALL_TIMEOUT_S = 120.0  # for one call when neither the task nor the server sets a shorter bound

_UNSAFE = re.compile(r"[^A-Za-z0-9_-]")


def mcp_tool_name(server: str, tool: str) -> str:
    """``mcp__<server>__<tool>``, with characters providers refuse made ``_``, at most 64."""
    return _UNSAFE.sub("_", f"{MCP_PREFIX}{server}__{tool}")[:64]


def _matches(name: str, server: str, pattern: str) -> bool:
    return pattern in (name, f"{MCP_PREFIX}{server}") or fnmatch.fnmatchcase(name, pattern)


def select_mcp_tools(tools: Iterable[McpTool], allow: Sequence[Any] | None, deny: Sequence[str]) -> list[McpTool]:
    """The tools an allow list (``None``: all) admits and no deny entry names."""
    allowed = None if allow is None else [p for p in allow if isinstance(p, str) and p.startswith(MCP_PREFIX)]
    return [t for t in tools if (allowed is None or any(_matches(t.name, t.server, p) for p in allowed))
            and not any(_matches(t.name, t.server, p) for p in deny)]


def unmatched_mcp_names(tools: Iterable[McpTool], allow: Sequence[Any] | None) -> list[str]:
    """The MCP names (``mcp__...``) in an allow list that admit none of ``tools``: a typo, or a server not given."""
    listed = list(tools)
    return [p for p in allow or () if isinstance(p, str) and p.startswith(MCP_PREFIX)
            and not any(_matches(t.name, t.server, p) for t in listed)]


class McpTool(BaseTool):
    """One tool of one MCP server, executed through the calling task's session."""

    server: str
    remote_name: str
    toolset: Any
    handle_tool_error: bool = True

    def _run(self, *args: Any, run_manager: Any = None, **kwargs: Any) -> Any:
        sessions, timeout = self.toolset.sessions_for(run_manager, self.server)
        with _stopping_if_due(run_manager):
            return tool_content(sessions.wait(sessions.call_tool(self.server, self.remote_name, kwargs, timeout),
                                              timeout))

    async def _arun(self, *args: Any, run_manager: Any = None, **kwargs: Any) -> Any:
        sessions, timeout = self.toolset.sessions_for(run_manager, self.server)
        with _stopping_if_due(run_manager):
            return tool_content(await sessions.await_(sessions.call_tool(self.server, self.remote_name, kwargs,
                                                                          timeout)))


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


def _task_key(metadata: Mapping[str, Any] | None) -> str:
    return str((metadata or {}).get(TASK_ID_METADATA_KEY) or "")


class McpToolset(BaseCallbackHandler):
    """The MCP tools of one built child, and the live sessions of its running tasks: a callback on the child's
    runs (it opens nothing), it closes a task's sessions when the last chain of its run ends."""

    run_inline = True

    def __init__(self, agent: str, connections: Mapping[str, Mapping[str, Any]],
                 call_timeouts: Mapping[str, float]) -> None:
        self.agent = agent
        self.connections = dict(connections)
        self.call_timeouts = dict(call_timeouts)
        self.tools: list[McpTool] = []
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
                    server=server, remote_name=tool.name, toolset=toolset))
        return toolset

    def sessions_for(self, run_manager: Any, server: str) -> tuple[McpSessions, float]:
        """This task's sessions (opened on first use) and how long a call may take."""
        key = _task_key(getattr(run_manager, "metadata", None))
        with self._lock:
            if (sessions := self._sessions.get(key)) is None:
                sessions = self._sessions[key] = McpSessions(self.connections, label=f"{self.agent}-{key[:8] or 'run'}")
        timeout = self.call_timeouts.get(server, CALL_TIMEOUT_S)
        deadlines = [m.deadline for m in _meters(run_manager) if m.deadline is not None]
        if deadlines:
            timeout = min(timeout, max(min(deadlines) - time.monotonic(), 0.01))
        return sessions, timeout

    def on_chain_start(self, serialized: Any, inputs: Any, *, run_id: UUID,
                       metadata: Mapping[str, Any] | None = None, **kwargs: Any) -> None:
        with self._lock:
            key = self._runs[run_id] = _task_key(metadata)
            self._active[key] = self._active.get(key, 0) + 1

    def on_chain_error(self, error: BaseException, *, run_id: UUID, **kwargs: Any) -> None:
        self.on_chain_end(None, run_id=run_id)

    def on_chain_end(self, outputs: Any, *, run_id: UUID, **kwargs: Any) -> None:
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


def _meters(run_manager: Any) -> list[TaskMeter]:
    handlers = [*(getattr(run_manager, "handlers", None) or ()),
                *(getattr(run_manager, "inheritable_handlers", None) or ())]
    return [h for h in handlers if isinstance(h, TaskMeter)]


@contextlib.contextmanager
def _stopping_if_due(run_manager: Any) -> Iterator[None]:
    """A call cut short by the task's own limit (its ``timeout_s``, a cancel) stops as that limit: the wait was
    bounded by the task's deadline, so the server "not answering" is the task timing out."""
    try:
        yield
    except McpServerError:
        for meter in _meters(run_manager):
            meter.raise_if_stopped()
        raise
