"""What this process may run on the host: every hook mapping and MCP server config it has read.

The two normalisers every hook mapping and server config goes through
(:func:`~subagents.definitions.hooks.normalize_hooks`,
:func:`~subagents.definitions.mcp.normalize_mcp_config`) note what they
return, whoever reads it: an agent file (trusted or not: one trusted later
runs it), a spec, ``HookMiddleware``, ``create_deep_agent``, the command line.
A sandbox keeps the files those name out of its commands' reach (the built-in
tools' protected set reads :func:`noted`), so no route to a hook or a server
is left out by a caller that built it another way. Each distinct content is
kept once: a process building many children holds only its distinct ones.

And when: a hook's command, or an MCP server's start, never runs while a
sandboxed command is running or what it made at protected paths is not yet
set aside (:data:`TURNS`).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import threading
from collections.abc import AsyncIterator, Iterator
from types import SimpleNamespace
from typing import Any, Literal

_LOCK = threading.Lock()
_NOTED: dict[str, SimpleNamespace] = {}


def note(*, hooks: Any = None, mcp_config: Any = None) -> None:
    """Record normalised ``hooks`` or ``mcp_config`` (as a definition's fields) as run on the host, from the
    current folder (``folder``): hooks run their shell there, and a relative path names a file from there."""
    if not hooks and not mcp_config:
        return
    try:
        folder = os.getcwd()
    except OSError:  # the current folder was removed: nothing relative to it can be found
        return
    key = json.dumps([hooks, mcp_config, folder], sort_keys=True, default=repr)
    with _LOCK:
        _NOTED.setdefault(key, SimpleNamespace(hooks=hooks, mcp_config=mcp_config, folder=folder))


def noted() -> list[SimpleNamespace]:
    """Everything noted so far, oldest first (a later call returns these first, then the new)."""
    with _LOCK:
        return list(_NOTED.values())


Side = Literal["sandbox", "host"]


class _Turns:
    """Two sides that never overlap: any number of holders of one side at a time, none of the other.

    ``"sandbox"``: a sandboxed command, from before it starts until what it made at protected paths is set
    aside; ``"host"``: a hook's command, an MCP server's start (through its handshake). A path a command
    makes where one is missing (a ``GNUmakefile``, a module file) is set aside only once it ends, so a hook
    or a server starting meanwhile (a parallel tool call's) would run it on the host. Fair: a side waiting
    while the other holds goes next, so neither starves. Never held across a tool call: ``Bash`` releases
    before its own ``PostToolUse`` hook; no MCP call is made while either side is held.
    """

    def __init__(self) -> None:
        self._changed = threading.Condition()
        self._holders = {"sandbox": 0, "host": 0}
        self._waiting = {"sandbox": 0, "host": 0}
        self._turn = "sandbox"

    def _enter(self, side: Side) -> None:
        other: Side = "host" if side == "sandbox" else "sandbox"
        with self._changed:
            if self._holders[other]:
                self._turn = side  # next, before newcomers of the side holding now
            self._waiting[side] += 1
            try:
                self._changed.wait_for(lambda: not self._holders[other]
                                       and (not self._waiting[other] or self._turn == side))
            finally:
                self._waiting[side] -= 1
            self._holders[side] += 1

    def _leave(self, side: Side) -> None:
        with self._changed:
            self._holders[side] -= 1
            if not self._holders[side]:
                self._turn = "host" if side == "sandbox" else "sandbox"
                self._changed.notify_all()

    @contextlib.contextmanager
    def held(self, side: Side) -> Iterator[None]:
        self._enter(side)
        try:
            yield
        finally:
            self._leave(side)

    @contextlib.asynccontextmanager
    async def aheld(self, side: Side) -> AsyncIterator[None]:
        """:meth:`held`, waited for on a thread: the event loop runs on meanwhile."""
        entered = asyncio.get_running_loop().run_in_executor(None, self._enter, side)
        try:
            await asyncio.shield(entered)
        except BaseException:  # cancelled while waiting: the side is left once it was entered
            def leave(done: asyncio.Future[None]) -> None:
                if not done.cancelled() and done.exception() is None:
                    self._leave(side)

            entered.add_done_callback(leave)
            raise
        try:
            yield
        finally:
            self._leave(side)


TURNS = _Turns()
"""This process's sandboxed commands and hook commands, taking turns (:class:`_Turns`)."""
