"""One task's live connections to its MCP servers.

An MCP client session is an anyio context: it must be entered and left by
one asyncio task, and it lives on one event loop. A child's tools run on
whatever thread or loop LangGraph picks (``invoke`` runs them on worker
threads, ``ainvoke`` on the caller's loop), so each task's sessions get a
small event loop of their own, on a daemon thread started when the task
first calls an MCP tool. Each server is connected once by its own owner
coroutine on that loop and reused by every later call of the task; closing
the task's sessions lets the owners leave their contexts (a stdio server's
process is ended) and stops the loop.

Sessions still open when the interpreter exits are closed then, and the
exit waits for them (at most :data:`EXIT_WAIT_S`): the loop threads are
daemons, so without this a stdio server that ignores its closed stdin (a
hung one) would outlive the process that started it.

Calls from sync code wait on a ``concurrent.futures.Future``; calls from
async code await it without blocking their loop. Every wait is bounded: a
server that does not start or answer within the time given fails with
:class:`McpServerError` naming the server.

Example::

    sessions = McpSessions({"files": {"transport": "stdio", "command": "mcp-files", "args": []}})
    result = sessions.call_sync("files", "read", {"path": "a.txt"}, timeout=30)
    sessions.close()
"""

from __future__ import annotations

import asyncio
import atexit
import concurrent.futures
import threading
import time
from collections.abc import Coroutine, Mapping
from datetime import timedelta
from typing import Any

from subagents._errors import brief

CLOSE_GRACE_S = 5.0
"""How long a sync caller waits past its own bound for the loop to hand back a timed-out call."""
EXIT_WAIT_S = 6.0
"""How long interpreter exit waits for open sessions to end their servers (the MCP client's
stdio shutdown waits 2 s for a server to leave on its own, then terminates it)."""

_open: set[McpSessions] = set()
_open_lock = threading.Lock()


@atexit.register
def close_open_sessions(wait_s: float = EXIT_WAIT_S) -> None:
    """Close every task's sessions still open and wait (bounded) until their servers are ended."""
    with _open_lock:
        sessions = list(_open)
    for each in sessions:
        each.close()
    deadline = time.monotonic() + wait_s
    for each in sessions:
        each.closed.wait(max(deadline - time.monotonic(), 0))


class McpServerError(RuntimeError):
    """An MCP server failed to start, answer or stay up; ``server`` names it."""

    def __init__(self, server: str, cause: str) -> None:
        self.server = server
        self.cause = cause
        super().__init__(f"MCP server '{server}' {cause}")


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
        self._thread: threading.Thread | None = None
        self._closing: asyncio.Event | None = None
        self._ready: dict[str, asyncio.Future[Any]] = {}
        self._owners: list[asyncio.Task[None]] = []
        self.closed = threading.Event()
        """Set once every server of this task is disconnected and the loop has stopped."""

    # -- the loop ------------------------------------------------------------

    def _start(self) -> asyncio.AbstractEventLoop:
        with self._lock:
            if self.closed.is_set():
                raise RuntimeError("these MCP sessions are closed")
            if self._loop is None:
                with _open_lock:
                    _open.add(self)
                started = threading.Event()
                self._thread = threading.Thread(
                    target=self._main, args=(started,), name=f"{self._label}-sessions", daemon=True
                )
                self._thread.start()
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

    def submit(self, coro: Coroutine[Any, Any, Any]) -> concurrent.futures.Future[Any]:
        """Run ``coro`` on this task's loop (starting it if need be)."""
        return asyncio.run_coroutine_threadsafe(coro, self._start())

    def close(self) -> None:
        """Disconnect every server (without waiting); safe to call twice or never started."""
        with self._lock:
            loop, closing = self._loop, self._closing
            if loop is None:
                self.closed.set()
                return
        try:
            loop.call_soon_threadsafe(closing.set)  # type: ignore[union-attr]
        except RuntimeError:  # the loop already stopped
            pass

    # -- on the loop -----------------------------------------------------------

    async def session(self, server: str) -> Any:
        """The server's session, connected on first use by an owner coroutine."""
        ready = self._ready.get(server)
        if ready is None:
            ready = asyncio.get_running_loop().create_future()
            self._ready[server] = ready
            self._owners.append(asyncio.create_task(self._own(server, ready)))
        return await asyncio.shield(ready)

    async def _own(self, server: str, ready: asyncio.Future[Any]) -> None:
        from langchain_mcp_adapters.client import MultiServerMCPClient

        try:
            client = MultiServerMCPClient({server: self._connections[server]})  # type: ignore[dict-item]
            async with client.session(server) as session:
                ready.set_result(session)
                assert self._closing is not None
                await self._closing.wait()
        except BaseException as exc:  # noqa: BLE001 - reported to whoever waits for the session
            if not ready.done():
                ready.set_exception(McpServerError(server, f"failed to start: {describe_cause(exc)}"))
            if isinstance(exc, (KeyboardInterrupt, SystemExit)):
                raise

    async def _bounded(self, server: str, what: str, coro: Coroutine[Any, Any, Any], timeout: float) -> Any:
        try:
            async with asyncio.timeout(timeout):
                return await coro
        except TimeoutError:
            raise McpServerError(server, f"did not {what} within {round(timeout, 1):g}s") from None
        except McpServerError:
            raise
        except Exception as exc:  # noqa: BLE001 - any transport failure names the server
            raise McpServerError(server, f"failed: {describe_cause(exc)}") from None

    async def list_tools(self, server: str, timeout: float) -> list[Any]:
        """Every tool the server offers (all pages)."""

        async def listing() -> list[Any]:
            session = await self.session(server)
            tools: list[Any] = []
            cursor: str | None = None
            for _ in range(100):
                page = await session.list_tools(cursor=cursor)
                tools.extend(page.tools)
                cursor = page.nextCursor
                if not cursor:
                    return tools
            raise McpServerError(server, "listed more than 100 pages of tools")

        return await self._bounded(server, "list its tools", listing(), timeout)

    async def call_tool(self, server: str, tool: str, args: Mapping[str, Any], timeout: float) -> Any:
        """The server's ``CallToolResult`` for one call."""

        async def calling() -> Any:
            session = await self.session(server)
            return await session.call_tool(tool, dict(args), read_timeout_seconds=timedelta(seconds=timeout))

        return await self._bounded(server, f"answer a call of {brief(tool, 60)}", calling(), timeout)

    # -- from any thread or loop ------------------------------------------------

    def wait(self, coro: Coroutine[Any, Any, Any], timeout: float) -> Any:
        """Run ``coro`` here and block this (non-loop) thread for its result."""
        future = self.submit(coro)
        try:
            return future.result(timeout + CLOSE_GRACE_S)
        except concurrent.futures.TimeoutError:
            future.cancel()
            raise McpServerError(self._label, f"did not answer within {timeout:g}s") from None

    async def await_(self, coro: Coroutine[Any, Any, Any]) -> Any:
        """Run ``coro`` here and await its result from another loop."""
        return await asyncio.wrap_future(self.submit(coro))
