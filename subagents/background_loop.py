"""The process's background event loop: where every background task lives.

A background task must outlive the parent turn that started it. A task
started on the parent's own loop would die with it (``asyncio.run`` cancels
what is left when the parent's ``ainvoke`` returns), and a ``invoke`` parent
has no loop at all. So one daemon thread per process runs one event loop,
and every background child, status poll and server call runs there. That
loop is also the only place that changes the task table, so the table needs
no locks.

Coroutines start in an empty ``contextvars.Context``: the parent's runnable
config travels in a context variable, and a child that saw it would run as
a subgraph of a parent step that has already ended.

Example::

    loop = background_loop()
    value = loop.run(some_coroutine())          # from sync code: block for the result
    value = await loop.arun(some_coroutine())   # from async code: await it
    future = loop.submit(long_coroutine())      # fire and keep going
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextvars
import threading
from collections.abc import Coroutine
from typing import Any, TypeVar

T = TypeVar("T")


class BackgroundLoop:
    """One event loop on one daemon thread, started on first use."""

    def __init__(self, name: str = "background-subagents") -> None:
        self._name = name
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._lock = threading.Lock()

    @property
    def loop(self) -> asyncio.AbstractEventLoop:
        if self._loop is None:
            with self._lock:
                if self._loop is None:
                    ready = threading.Event()
                    loop = asyncio.new_event_loop()

                    def serve() -> None:
                        asyncio.set_event_loop(loop)
                        loop.call_soon(ready.set)
                        loop.run_forever()

                    thread = threading.Thread(target=serve, name=self._name, daemon=True)
                    thread.start()
                    ready.wait()
                    self._thread, self._loop = thread, loop
        return self._loop

    def in_loop(self) -> bool:
        """Whether the caller runs on the background loop's own thread."""
        return self._thread is not None and threading.current_thread() is self._thread

    def submit(self, coro: Coroutine[Any, Any, T]) -> concurrent.futures.Future[T]:
        """Schedule ``coro`` on the loop, in a clean context; return at once."""
        loop = self.loop
        future: concurrent.futures.Future[T] = concurrent.futures.Future()

        def start() -> None:
            if not future.set_running_or_notify_cancel():
                coro.close()
                return
            task = loop.create_task(coro, context=contextvars.Context())
            task.add_done_callback(lambda done: _settle(future, done))

        loop.call_soon_threadsafe(start, context=contextvars.Context())
        return future

    def run(self, coro: Coroutine[Any, Any, T], timeout: float | None = None) -> T:
        """Run ``coro`` on the loop and block this (non-loop) thread for its result."""
        if self.in_loop():
            coro.close()
            raise RuntimeError("BackgroundLoop.run called from the background loop itself")
        return self.submit(coro).result(timeout)

    async def arun(self, coro: Coroutine[Any, Any, T]) -> T:
        """Run ``coro`` on the loop and await its result from another loop."""
        if self.in_loop():
            return await coro
        return await asyncio.wrap_future(self.submit(coro))


def _settle(future: concurrent.futures.Future[Any], task: asyncio.Task[Any]) -> None:
    if task.cancelled():
        # A cancelled Future cannot be marked running again; report it as an error.
        future.set_exception(concurrent.futures.CancelledError())
    elif (exc := task.exception()) is not None:
        future.set_exception(exc)
    else:
        future.set_result(task.result())


_shared = BackgroundLoop()


def background_loop() -> BackgroundLoop:
    """The process-wide background loop."""
    return _shared
