"""The event loop the parent's graph runs on: where an in-process server app must be called.

A server whose app is reached in-process (aegra, through
``httpx.ASGITransport``) holds loop-bound resources -- its database and Redis
connections belong to the loop it serves on. The background runtime runs
its requests on a loop thread of its own, so each request to such an app is
handed back to the loop the parent's graph last awaited the runtime from:
the server's loop, since the server runs the graph there.

Example::

    note_caller_loop()            # in async code on the server's loop
    loop = serving_loop()         # later, from any thread
"""

from __future__ import annotations

import asyncio

_loop: asyncio.AbstractEventLoop | None = None


def note_caller_loop() -> None:
    """Remember the running loop (if any) as the one the parent's graph runs on."""
    global _loop
    try:
        _loop = asyncio.get_running_loop()
    except RuntimeError:  # called from no loop: nothing to remember
        pass


def serving_loop() -> asyncio.AbstractEventLoop | None:
    """The loop last noted by :func:`note_caller_loop`, while it still runs; else ``None``."""
    loop = _loop
    return loop if loop is not None and loop.is_running() and not loop.is_closed() else None
