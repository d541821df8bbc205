"""The background runtime: one object that owns everything background tasks need, and closes it.

A background task must outlive the parent turn that started it: a task on
the parent's own loop would die with it, and an ``invoke`` parent has no
loop at all. So a :class:`BackgroundRuntime` runs one event loop on one
thread (an ``anyio`` blocking portal) and owns what lives there: the table
of local tasks, their steering inboxes, the outcome stores, and whatever
other runners hand it to close (``on_close``). Every background child,
status check and server call runs on that loop; it is the only writer of
the table, so the table needs no locks.

The :class:`~middleware.BackgroundSubagentMiddleware` creates one (or is
given one to share between graphs), and :meth:`close` tears it down: tasks
still running are cancelled and recorded as ``lost`` wherever their outcome
is stored, the ``on_close`` callbacks run, the loop and its thread stop.
Closing is idempotent; a closed runtime refuses new work with a clear error.
A caller waiting on a loop that runs nothing (a child blocking it) is let go
(:class:`~subagents.background.RuntimeStalled`). Nothing survives in module
state but a weak directory of the open runtimes, so another graph in the same
process can find a task's owner (and tell a closed owner from a live one).

Coroutines start in an empty ``contextvars.Context``: the parent's runnable
config travels in a context variable, and a child that saw it would run as
a subgraph of a parent step that has already ended.

Example::

    with BackgroundRuntime() as runtime:
        value = runtime.run(some_coroutine())          # from sync code: block for the result
        value = await runtime.arun(some_coroutine())   # from async code: await it
        runtime.on_close.append(client.aclose)         # closed with the runtime
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import contextvars
import inspect
import threading
import time
import uuid
import weakref
from collections.abc import Callable, Coroutine
from typing import Any, TypeVar

from subagents.background._inbox import Inboxes
from subagents.background._loop_thread import (
    WAIT_SLICE_S,
    LoopProbe,
    RuntimeClosed,
    RuntimeStalled,
    begun,
    cancel_if_abandoned,
    run_callbacks,
    settle,
    start_portal,
    stop_portal,
)
from subagents.background._outcomes import LEASE_RENEW_S, OutcomeStores
from subagents.background._owner import Owner
from subagents.background._table import DEFAULT_MAX_AGE_S, DEFAULT_MAX_BYTES, TaskTable

T = TypeVar("T")

_open: weakref.WeakValueDictionary[str, BackgroundRuntime] = weakref.WeakValueDictionary()
"""Runtimes that are open in this process, by id (weak: a dropped runtime leaves no trace)."""


class BackgroundRuntime:
    """An event loop thread and the background tasks that live on it; ``close()`` ends both.

    Args:
        settled_max_age_s: how long a finished local task stays in memory.
        settled_max_bytes: how much the finished local tasks may hold together.
        close_timeout_s: how long :meth:`close` waits for cancelled tasks and callbacks.
        name: the loop thread's name.

    Attributes:
        on_close: callables run once on the loop when the runtime closes
            (coroutine functions are awaited); a failing one does not stop
            the others. Other runners put their clients and pools here.
    """

    def __init__(
        self,
        *,
        settled_max_age_s: float = DEFAULT_MAX_AGE_S,
        settled_max_bytes: int = DEFAULT_MAX_BYTES,
        close_timeout_s: float = 5.0,
        name: str = "background-subagents",
    ) -> None:
        if not settled_max_age_s > 0:
            raise ValueError(f"settled_max_age_s must be a positive number of seconds (got {settled_max_age_s!r})")
        if not settled_max_bytes >= 0:
            raise ValueError(f"settled_max_bytes must not be negative (got {settled_max_bytes!r})")
        self.id = uuid.uuid4().hex[:16]
        self.owner = Owner.current(self.id)
        self.table: TaskTable[Any] = TaskTable(settled_max_age_s, settled_max_bytes)
        self.inboxes = Inboxes()
        self.outcomes = OutcomeStores()
        self.on_close: list[Callable[[], Any]] = [self.outcomes.close]
        self.close_timeout_s = close_timeout_s
        self._name = name
        self._lock = threading.Lock()
        self._portal: Any = None
        self._portal_cm: contextlib.AbstractContextManager[Any] | None = None
        self._thread: threading.Thread | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._probe = LoopProbe()  # shared by every caller waiting on the loop
        self._jobs: set[asyncio.Task[Any]] = set()
        self._ops: set[asyncio.Task[Any]] = set()  # submitted operations: closing waits for them
        self._sweep: asyncio.TimerHandle | None = None
        self._leases: asyncio.Task[None] | None = None
        self.closed = False
        _open[self.id] = self

    # -- finding runtimes ------------------------------------------------------

    @staticmethod
    def find(runtime_id: str) -> BackgroundRuntime | None:
        """The open runtime of this process with that id, if any."""
        runtime = _open.get(runtime_id)
        return runtime if runtime is not None and not runtime.closed else None

    @staticmethod
    def all_open() -> list[BackgroundRuntime]:
        """Every open runtime of this process (for views that know a task id only)."""
        return [r for r in list(_open.values()) if not r.closed]

    # -- running coroutines ------------------------------------------------------

    def in_loop(self) -> bool:
        """Whether the caller runs on this runtime's loop thread."""
        return self._thread is not None and threading.current_thread() is self._thread

    def submit(self, coro: Coroutine[Any, Any, T]) -> concurrent.futures.Future[T]:
        """Schedule ``coro`` on the loop, in a clean context; return at once.

        The caller never waits for the loop thread (a portal's
        ``start_task_soon`` does, which serialised 50 parallel starts on a
        busy loop): the operation is started by a callback on the loop and
        settles the returned future. :meth:`close` lets operations finish
        (up to ``close_timeout_s``); one it has to stop fails with
        :class:`RuntimeClosed`.
        """
        try:
            self._started()
            loop = self._loop
            assert loop is not None  # set with the portal
            future: concurrent.futures.Future[T] = concurrent.futures.Future()
            # call_soon_threadsafe copies the caller's context: hand it an empty one.
            contextvars.Context().run(loop.call_soon_threadsafe, self._begin, coro, future)
            return future
        except BaseException:
            coro.close()
            raise

    def _begin(self, coro: Coroutine[Any, Any, T], future: concurrent.futures.Future[T]) -> None:
        """On the loop: start ``coro`` as a job whose outcome settles ``future``."""
        if self.closed or future.cancelled():
            coro.close()
            if not future.cancelled():
                future.set_exception(RuntimeClosed("the background runtime is closed"))
            return
        job = asyncio.get_running_loop().create_task(begun(coro, future), context=contextvars.Context())
        self._ops.add(job)
        job.add_done_callback(self._ops.discard)
        job.add_done_callback(lambda done: settle(done, future, closed=self.closed))
        # A caller that stops waiting (cancelled) cancels the job too.
        future.add_done_callback(lambda f: cancel_if_abandoned(f, job))

    def run(self, coro: Coroutine[Any, Any, T], timeout: float | None = None) -> T:
        """Run ``coro`` on the loop and block this (non-loop) thread for its result."""
        if self.in_loop():
            coro.close()
            raise RuntimeError("BackgroundRuntime.run called from the runtime's own loop; await arun")
        future = self.submit(coro)
        deadline = None if timeout is None else time.monotonic() + timeout
        while True:
            left = WAIT_SLICE_S if deadline is None else min(WAIT_SLICE_S, deadline - time.monotonic())
            try:
                return future.result(max(left, 0.0))
            except concurrent.futures.TimeoutError:
                self._check_alive(future)
                if deadline is not None and time.monotonic() >= deadline:
                    raise

    async def arun(self, coro: Coroutine[Any, Any, T]) -> T:
        """Run ``coro`` on the loop and await its result from any loop."""
        if self.in_loop():
            return await coro
        future = asyncio.wrap_future(submitted := self.submit(coro))
        try:
            while not future.done():
                await asyncio.wait({future}, timeout=WAIT_SLICE_S)
                self._check_alive(submitted)
            return future.result()
        except BaseException as exc:
            if not isinstance(exc, RuntimeStalled):  # let go of a stalled loop: what began runs on
                future.cancel()  # given up on (cancelled, or the loop died): so is the job
            raise

    def _check_alive(self, future: Any) -> None:
        """A caller still waiting on a loop that died, or that runs nothing, would wait forever: it is let go."""
        if not future.done():
            if not self._alive():
                self._died()
                raise RuntimeClosed("the background runtime's loop stopped unexpectedly; its tasks are lost")
            self._probe.check(future, self._loop)

    def spawn(self, coro: Coroutine[Any, Any, T]) -> asyncio.Task[T]:
        """Start a job on the loop (call it from the loop), in a clean context; closing cancels it."""
        if self.closed:
            coro.close()
            raise RuntimeClosed("the background runtime is closed; it starts no new tasks")
        job = asyncio.get_running_loop().create_task(coro, context=contextvars.Context())
        self._jobs.add(job)
        job.add_done_callback(self._jobs.discard)
        return job

    def evict_later(self, delay: float | None) -> None:
        """Evict finished tasks from the table when the oldest is due (call it from the loop)."""
        if delay is None or self.closed or (self._sweep is not None and not self._sweep.cancelled()):
            return

        self._sweep = asyncio.get_running_loop().call_later(delay + 0.01, _sweep, weakref.ref(self))

    def keep_leases(self) -> None:
        """Renew the leases of live tasks stored in SQLite files, until none is left (call it from the loop)."""
        if self._leases is None or self._leases.done():
            self._leases = self.spawn(self._renew_leases())

    async def _renew_leases(self) -> None:
        while True:
            by_db: dict[str, list[str]] = {}
            for task in self.table.unsettled():
                if db := task.fields.get("outcome_db"):
                    by_db.setdefault(str(db), []).append(task.id)
            if not by_db:
                return
            for db, ids in by_db.items():
                with contextlib.suppress(Exception):  # a locked file: renewed next time
                    self.outcomes.file(db).renew(self.owner.name, ids, time.time())
            await asyncio.sleep(LEASE_RENEW_S)

    # -- closing ---------------------------------------------------------------------

    def close(self) -> None:
        """Cancel what still runs (recorded as ``lost``), run ``on_close``, stop the loop thread.

        A sync tool already running in a worker thread cannot be interrupted:
        its task is recorded as ``lost`` at once, and ``close`` returns when
        the tool does.
        """
        with self._lock:
            if self.closed:
                return
            self.closed = True
            portal_cm, portal = self._portal_cm, self._portal
        _open.pop(self.id, None)
        if portal is None or not self._alive():  # never started, or its loop died: nothing runs to stop
            self._close_without_loop()
            return
        if self.in_loop():  # closing from one of our own tasks: finish from another thread
            threading.Thread(target=stop_portal, args=(portal, portal_cm, self._shutdown), daemon=True).start()
            return
        stop_portal(portal, portal_cm, self._shutdown)

    def _alive(self) -> bool:
        return self._thread is not None and self._thread.is_alive()

    def _died(self) -> None:
        """The loop thread ended without :meth:`close` (something got past its guard): closed from here."""
        with self._lock:
            if self.closed:
                return
            self.closed = True
        _open.pop(self.id, None)
        self._close_without_loop()

    def _close_without_loop(self) -> None:
        for task in self.table.unsettled():  # nothing runs them any more: lost, and stored as such
            with contextlib.suppress(Exception):
                task.abandon()
        run_callbacks(self.on_close, self.close_timeout_s)

    def close_soon(self) -> None:
        """:meth:`close` on a thread of its own: for finalizers, which must never block."""
        if not self.closed:
            threading.Thread(target=self.close, name=f"{self._name}-close", daemon=True).start()

    async def _shutdown(self) -> None:
        if self._sweep is not None:
            self._sweep.cancel()
        jobs = [j for j in self._jobs if not j.done()]
        for job in jobs:
            job.cancel()
        if jobs:
            await asyncio.wait(jobs, timeout=self.close_timeout_s)
        ops = [o for o in self._ops if not o.done()]
        if ops:  # operations callers wait for: let them finish, then stop the rest
            _, late = await asyncio.wait(ops, timeout=self.close_timeout_s)
            for op in late:
                op.cancel()
        for task in self.table.unsettled():  # waiting for approval, or not yet started
            with contextlib.suppress(Exception):
                task.abandon()
        for callback in reversed(self.on_close):
            try:
                result = callback()
                if inspect.isawaitable(result):
                    await asyncio.wait_for(result, self.close_timeout_s)
            except Exception:  # noqa: BLE001 - one failing callback must not keep the rest open
                continue

    def __enter__(self) -> BackgroundRuntime:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        state = "closed" if self.closed else ("running" if self._portal is not None else "idle")
        return f"<BackgroundRuntime {self.id} {state}, {len(self.table)} tasks>"

    def _started(self) -> Any:
        if self._portal is not None and not self.closed:
            if self._alive():
                return self._portal
            self._died()
        with self._lock:
            if self.closed:
                raise RuntimeClosed("the background runtime is closed; create a new one (or a new middleware)")
            if self._portal is None:
                cm = start_portal(self._name)
                portal = cm.__enter__()
                self._thread = portal.call(threading.current_thread)
                self._loop = portal.call(asyncio.get_running_loop)
                self._portal_cm, self._portal = cm, portal
        return self._portal


def _sweep(ref: weakref.ref[BackgroundRuntime]) -> None:
    """The eviction timer; it holds its runtime weakly, so a dropped runtime is not kept for it."""
    runtime = ref()
    if runtime is not None and not runtime.closed:
        runtime._sweep = None
        runtime.evict_later(runtime.table.evict(time.time()))
