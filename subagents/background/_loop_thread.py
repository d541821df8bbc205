"""The thread a background runtime's loop runs on: how it starts, what it survives, how it stops.

One loop serves every background child, status check and server call of a
runtime, so nothing a child raises may stop it. asyncio lets two exceptions
out of ``run_forever`` whatever the task that raised them: ``KeyboardInterrupt``
and ``SystemExit``. On this thread neither can be a real Ctrl-C or a real
exit (signals reach the main thread; ``sys.exit`` here ends only the thread),
so a child's tool raising one would stop the loop, cancel its siblings and
leave every later parent turn facing a closed loop. The loop's task factory
turns them into :class:`StrayExit`, an ordinary exception, in the task where
they rose: code inside that task still sees the original (and may handle
it), and the task fails alone, with an error naming the exception's type.

Also here: how an operation's outcome crosses from the loop to the thread
waiting for it, and how the loop is stopped.

Example::

    with start_portal("background-subagents") as portal:
        portal.call(some_coroutine_function)
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import contextvars
import inspect
import threading
import time
from collections.abc import Callable, Coroutine, Generator
from typing import Any, TypeVar

T = TypeVar("T")


class RuntimeClosed(RuntimeError):
    """Work was handed to a background runtime after it closed (or after its loop stopped)."""


class RuntimeStalled(RuntimeClosed):
    """The loop ran no callback for :data:`STALL_S`: code on it blocks (a blocking call inside async code).

    The waiting caller (a parent turn, a background tool) is let go; the
    runtime stays open, and answers again once the blocking call returns.
    """


WAIT_SLICE_S = 0.5
"""How often a caller waiting on the loop checks that the loop still runs."""

STALL_S = 5.0
"""How long a caller waits for a loop that runs no callback at all before it is let go."""


class LoopProbe:
    """Asks a loop, now and then, whether it still runs callbacks; see :class:`RuntimeStalled`.

    One per loop, shared by its callers: a caller waiting in slices calls
    :meth:`check` after each slice that ended without a result (a fast
    operation never posts a probe), and once one caller found the loop
    stalled, the next is let go after its first slice, not ``stall_s``.
    """

    def __init__(self, stall_s: float | None = None) -> None:
        self.stall_s = STALL_S if stall_s is None else stall_s
        self._sent: float | None = None
        self._answered = threading.Event()
        self._lock = threading.Lock()

    def check(self, future: concurrent.futures.Future[Any], loop: asyncio.AbstractEventLoop | None) -> None:
        """Raise :class:`RuntimeStalled` once a probe has waited ``stall_s`` unanswered.

        The operation ``future`` stands for is cancelled if it never began
        (it must not start late: a start the caller was told failed would
        run untracked); one that began runs on and settles once the loop
        moves again.
        """
        with self._lock:
            now = time.monotonic()
            if self._sent is None or self._answered.is_set():
                self._sent, self._answered = now, threading.Event()
                with contextlib.suppress(RuntimeError, AttributeError):  # a loop already gone is _check_alive's
                    loop.call_soon_threadsafe(self._answered.set)  # type: ignore[union-attr]
                return
            if now - self._sent < self.stall_s:
                return
        if not getattr(future, "begun", False):
            future.cancel()
        future.abandoned = True  # type: ignore[attr-defined]  # see operation_abandoned
        raise RuntimeStalled(
            f"the background loop has run nothing for {self.stall_s:g}s: a background task is blocking it "
            "(a blocking call inside async code?). Its tasks go on; ask again later")


_OPERATION: contextvars.ContextVar[concurrent.futures.Future[Any] | None] = contextvars.ContextVar(
    "background_operation", default=None)


async def begun(coro: Coroutine[Any, Any, T], future: concurrent.futures.Future[T]) -> T:
    """``coro``, marking ``future`` begun at its first step (not when scheduled): see :meth:`LoopProbe.check`."""
    future.begun = True  # type: ignore[attr-defined]
    _OPERATION.set(future)
    return await coro


def operation_abandoned() -> bool:
    """Whether the caller of the operation running here stopped waiting for it (a stalled loop let it go).

    An operation checks it before a step the caller must hear of (a start), which then does not happen.
    """
    future = _OPERATION.get()
    return future is not None and getattr(future, "abandoned", False)


class StrayExit(RuntimeError):
    """A ``KeyboardInterrupt`` or ``SystemExit`` raised by code on a background loop (it ends that task only)."""

    def __init__(self, exc: BaseException) -> None:
        try:
            text = str(exc).strip()
        except Exception:  # noqa: BLE001 - describing a failure never fails
            text = ""
        detail = f" ({text[:200]})" if text else ""
        super().__init__(f"{type(exc).__name__}{detail} raised inside a background task; it stopped this task only")


async def _contained(coro: Coroutine[Any, Any, T]) -> T:
    try:
        return await coro
    except (KeyboardInterrupt, SystemExit) as exc:
        raise StrayExit(exc) from exc


def _task_factory(loop: asyncio.AbstractEventLoop, coro: Any, **kwargs: Any) -> asyncio.Task[Any]:
    if asyncio.iscoroutine(coro):
        coro = _contained(coro)
    return asyncio.Task(coro, loop=loop, **kwargs)


def _contain_exits() -> None:
    """Tasks (their factory) and plain callbacks (``call_soon``, ``call_later``, a future's done callback):
    neither may let an exit out of ``run_forever``."""
    loop = asyncio.get_running_loop()
    loop.set_task_factory(_task_factory)
    for name, at in (("call_soon", 0), ("call_soon_threadsafe", 0), ("call_later", 1), ("call_at", 1)):
        setattr(loop, name, _guarding(loop, getattr(loop, name), at))


def _guarding(loop: asyncio.AbstractEventLoop, schedule: Callable[..., Any], at: int) -> Callable[..., Any]:
    """``schedule`` with the callback (positional argument ``at``) unable to raise an exit into the loop."""
    def guarded(*args: Any, **kwargs: Any) -> Any:
        callback = args[at]

        def run(*callback_args: Any) -> Any:
            try:
                return callback(*callback_args)
            except (KeyboardInterrupt, SystemExit) as exc:
                loop.call_exception_handler({"message": "a callback on the background loop raised an exit",
                                             "exception": StrayExit(exc)})
                return None

        return schedule(*args[:at], run, *args[at + 1:], **kwargs)

    return guarded


@contextlib.contextmanager
def start_portal(name: str) -> Generator[Any, None, None]:
    """A blocking portal on a loop thread of its own, its tasks made unable to stop the loop."""
    from anyio.from_thread import start_blocking_portal

    with start_blocking_portal("asyncio", name=name) as portal:
        portal.call(_contain_exits)
        yield portal


def run_callbacks(callbacks: list[Callable[[], Any]], timeout_s: float) -> None:
    """``on_close`` without the runtime's loop (never started, or died): sync ones here, awaitables on a new loop."""
    pending = []
    for callback in reversed(callbacks):
        try:
            result = callback()
        except Exception:  # noqa: BLE001 - one failing callback must not keep the rest open
            continue
        if inspect.isawaitable(result):
            pending.append(result)
    if pending:
        async def settle() -> None:
            for awaitable in pending:
                with contextlib.suppress(Exception):
                    await asyncio.wait_for(awaitable, timeout_s)

        with start_portal("background-subagents-close") as portal:
            portal.call(settle)


def cancel_if_abandoned(future: concurrent.futures.Future[Any], job: asyncio.Task[Any]) -> None:
    if future.cancelled() and not job.done():
        with contextlib.suppress(RuntimeError):  # the loop has already stopped: nothing left to cancel
            job.get_loop().call_soon_threadsafe(job.cancel)


def settle(job: asyncio.Task[T], future: concurrent.futures.Future[T], *, closed: bool) -> None:
    """Copy a finished operation's outcome into the caller's future (unless the caller gave up)."""
    if future.done():
        return
    if job.cancelled():
        # Not by the caller (its future would be done): by close(), or by a loop going down. The caller is
        # told so, never handed a CancelledError, which would read as its own cancellation.
        future.set_exception(RuntimeClosed("the background runtime closed before this operation finished"
                                           if closed else "the background loop stopped this operation"))
    elif (exc := job.exception()) is not None:
        future.set_exception(exc)
    else:
        future.set_result(job.result())


def stop_portal(portal: Any, portal_cm: contextlib.AbstractContextManager[Any] | None,
            shutdown: Callable[[], Coroutine[Any, Any, None]]) -> None:
    try:
        contextvars.Context().run(portal.call, shutdown)
    except Exception:  # noqa: BLE001 - the failure path never raises; the loop still stops below
        pass
    if portal_cm is not None:
        portal_cm.__exit__(None, None, None)
