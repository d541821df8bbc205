"""The background runtime: one loop thread (a task outlives the turn, and an ``invoke`` parent has no loop) and the
task table (the loop its only writer: no locks), inboxes, outcome stores and ``on_close``, closed together.
Coroutines start in an empty ``contextvars.Context``: a child seeing the parent's config would run as a subgraph
of a step that has ended."""

from __future__ import annotations

import asyncio
import collections
import concurrent.futures
import contextlib
import contextvars
import dataclasses
import functools
import inspect
import itertools
import json
import os
import socket
import sqlite3
import threading
import time
import urllib.parse
import uuid
import weakref
from collections.abc import Awaitable, Callable, Coroutine, Generator, Iterator, Mapping, Sequence
from typing import Any, Literal, TypeVar

from langchain.agents.middleware import (
    AgentMiddleware,
    AgentState,
    ModelCallResult,
    ModelRequest,
    ModelResponse,
    Runtime,
)
from langchain_core.messages import HumanMessage
from langgraph.constants import CONF, CONFIG_KEY_CHECKPOINTER

from subagents._errors import InvalidArgumentType, RuntimeClosed, RuntimeStalled, SpecError, StrayExit, UnsupportedCall
from subagents._roles import HOOKS, ChildPolicy, overrides, policy_of
from subagents.background._remote import note_caller_loop

# The loop thread. asyncio lets ``KeyboardInterrupt`` and ``SystemExit`` out of ``run_forever`` whatever task
# raised them; on this thread neither is a real Ctrl-C or exit, so a child's tool raising one would stop the
# loop every task shares. The task factory turns them into :class:`StrayExit`: that task fails alone.

T = TypeVar("T")

WAIT_SLICE_S = 0.5
"""How often a caller waiting on the loop checks that the loop still runs."""

STALL_S = 5.0
"""How long a caller waits for a loop that begins no callback while its thread sleeps before it is let go."""


class LoopProbe:
    """Tells a blocked loop from a busy one (see :class:`RuntimeStalled`): blocked when for ``stall_s`` it began no
    callback (``beats``) *and* its thread was not mostly waiting for a CPU (a probe may wait behind its work)."""

    def __init__(self, stall_s: float | None = None) -> None:
        self.stall_s = STALL_S if stall_s is None else stall_s
        self.beats = 0  # callbacks the loop began (only the loop's thread writes it)
        self.thread_id: int | None = None  # the loop thread's native id: whose scheduler statistics to read
        self._sent: float | None = None  # when the current window opened (the probe went out, or was re-armed)
        self._seen: tuple[int, float | None] = (0, None)  # beats and CPU wait when it opened
        self._blocked = False
        self._answered = threading.Event()
        self._lock = threading.Lock()

    def stalled(self) -> bool:
        with self._lock:
            return self._blocked and not self._answered.is_set()

    def check(self, future: concurrent.futures.Future[Any], loop: asyncio.AbstractEventLoop | None) -> None:
        """Raise :class:`RuntimeStalled` once the loop is blocked for ``stall_s``, cancelling ``future``'s operation
        if it never began (a start its caller was told failed must not run untracked)."""
        with self._lock:
            now = time.monotonic()
            if self._sent is None or self._answered.is_set():
                self._open(now)
                self._blocked, self._answered = False, threading.Event()
                with contextlib.suppress(RuntimeError, AttributeError):  # a loop already gone is _check_alive's
                    loop.call_soon_threadsafe(self._answered.set)  # type: ignore[union-attr]
                return
            if now - self._sent < self.stall_s:
                return
            beats, waited = self._seen
            # No scheduler statistics here: the frozen count decides; starved: what held the loop was not its code.
            if self.beats != beats or (waited is not None and (waited_now := _cpu_wait_s(self.thread_id)) is not None
                                       and waited_now - waited >= (now - self._sent) / 2):
                self._open(now)  # busy: the probe waits its turn; judge the next stretch afresh
                return
            self._blocked = True
        if not getattr(future, "begun", False):
            future.cancel()
        future.abandoned = True  # type: ignore[attr-defined]  # see operation_abandoned
        raise RuntimeStalled(
            f"the background loop has run nothing for {self.stall_s:g}s: a background task is blocking it "
            "(a blocking call inside async code?). Its tasks go on; ask again later")

    def _open(self, now: float) -> None:  # a new window: the beats and CPU wait it starts from
        self._sent, self._seen = now, (self.beats, _cpu_wait_s(self.thread_id))


def _cpu_wait_s(thread_id: int | None) -> float | None:
    """Seconds a thread of this process has waited, runnable, for a CPU (Linux's schedstat; else ``None``)."""
    try:
        with open(f"/proc/self/task/{thread_id}/schedstat", "rb") as stat:
            _, waited_ns, _ = stat.read().split()
        return int(waited_ns) / 1e9
    except (OSError, ValueError):
        return None


_OPERATION: contextvars.ContextVar[concurrent.futures.Future[Any] | None] = contextvars.ContextVar(
    "background_operation", default=None)


async def _begun(coro: Coroutine[Any, Any, T], future: concurrent.futures.Future[T]) -> T:
    """``coro``, marking ``future`` begun at its first step (not when scheduled): see :meth:`LoopProbe.check`."""
    future.begun = True  # type: ignore[attr-defined]
    _OPERATION.set(future)
    return await coro


def operation_abandoned() -> bool:
    """Whether the caller of the operation running here stopped waiting for it (a stalled loop let it go)."""
    future = _OPERATION.get()
    return future is not None and getattr(future, "abandoned", False)


async def _contained(coro: Coroutine[Any, Any, T]) -> T:  # see "The loop thread" above
    try:
        return await coro
    except (KeyboardInterrupt, SystemExit) as exc:
        raise StrayExit(exc) from exc


def _task_factory(loop: asyncio.AbstractEventLoop, coro: Any, **kwargs: Any) -> asyncio.Task[Any]:
    if asyncio.iscoroutine(coro):
        coro = _contained(coro)
    return asyncio.Task(coro, loop=loop, **kwargs)


def _contain_exits(probe: LoopProbe) -> None:
    """No task nor plain callback may let an exit out of ``run_forever``; each callback is a beat of ``probe``."""
    loop = asyncio.get_running_loop()
    loop.set_task_factory(_task_factory)
    probe.thread_id = threading.get_native_id()
    for name, at in (("call_soon", 0), ("call_soon_threadsafe", 0), ("call_later", 1), ("call_at", 1)):
        setattr(loop, name, _guarding(loop, getattr(loop, name), at, probe))


def _guarding(loop: asyncio.AbstractEventLoop, schedule: Callable[..., Any], at: int,
              probe: LoopProbe) -> Callable[..., Any]:
    """``schedule`` with the callback (positional argument ``at``) unable to raise an exit into the loop. One
    ``run`` per loop, handed the callback as its first argument: nothing is made per callback but its handle."""
    def run(callback: Callable[..., Any], *callback_args: Any) -> Any:
        probe.beats += 1
        try:
            return callback(*callback_args)
        except (KeyboardInterrupt, SystemExit) as exc:
            loop.call_exception_handler({"message": "a callback on the background loop raised an exit",
                                         "exception": StrayExit(exc)})
            return None

    if at == 0:
        return functools.partial(schedule, run)
    return lambda when, callback, *args, **kwargs: schedule(when, run, callback, *args, **kwargs)


@contextlib.contextmanager
def _portal(name: str, probe: LoopProbe | None = None) -> Generator[Any, None, None]:
    """A blocking portal on a loop thread of its own, whose tasks cannot stop the loop."""
    from anyio.from_thread import start_blocking_portal

    with start_blocking_portal("asyncio", name=name) as portal:
        portal.call(_contain_exits, LoopProbe() if probe is None else probe)
        yield portal


def _cancel_if_abandoned(future: concurrent.futures.Future[Any], job: asyncio.Task[Any]) -> None:
    if future.cancelled() and not job.done():
        with contextlib.suppress(RuntimeError):  # the loop has already stopped: nothing left to cancel
            job.get_loop().call_soon_threadsafe(job.cancel)


def _settle(job: asyncio.Task[T], future: concurrent.futures.Future[T], *, closed: bool) -> None:
    if future.done():  # the caller gave up
        return
    if job.cancelled():
        # By close() or a loop going down (not the caller: its future would be done); a CancelledError would read
        # as the caller's own cancellation.
        future.set_exception(RuntimeClosed("the background runtime closed before this operation finished"
                                           if closed else "the background loop stopped this operation"))
    elif (exc := job.exception()) is not None:
        future.set_exception(exc)
    else:
        future.set_result(job.result())


def _stop_portal(portal: Any, portal_cm: contextlib.AbstractContextManager[Any] | None,
                 shutdown: Callable[[], Coroutine[Any, Any, None]]) -> None:
    with contextlib.suppress(Exception):  # the failure path never raises; the loop still stops below
        contextvars.Context().run(portal.call, shutdown)
    if portal_cm is not None:
        portal_cm.__exit__(None, None, None)


# Who runs a local task: ``"local:<host>:<pid>:<start>:<runtime>"``, where ``start`` (with the boot id on Linux)
# keeps a reused pid from passing for the owner. Only a ``gone`` owner lets a task be reported ``lost``; one on
# another host is ``unknown`` until its lease in the outcome file lapses.

OwnerState = Literal["self", "alive", "gone", "unknown"]

_PREFIX = "local"


@dataclasses.dataclass(frozen=True)
class Owner:
    """One runtime in one process on one host."""

    host: str
    pid: int
    start: str
    runtime: str

    @property
    def name(self) -> str:
        return f"{_PREFIX}:{self.host}:{self.pid}:{self.start}:{self.runtime}"

    @classmethod
    def current(cls, runtime: str) -> Owner:
        return cls(host=_host(), pid=os.getpid(), start=process_start(os.getpid()) or "?", runtime=runtime)

    @classmethod
    def parse(cls, name: object) -> Owner | None:
        """The owner a ledger ``owner`` field names, or ``None`` if it names none this module wrote."""
        if not isinstance(name, str):
            return None
        parts = name.split(":")
        # ASCII digits only ("²".isdigit() is true), and a pid the OS could have.
        if (len(parts) != 5 or parts[0] != _PREFIX or not (parts[2].isascii() and parts[2].isdigit())
                or len(parts[2]) > 10 or int(parts[2]) > 2**31 - 1):
            return None
        return cls(host=parts[1], pid=int(parts[2]), start=parts[3], runtime=parts[4])


def owner_state(name: object, *, me: Owner | None = None,
                runtime_alive: Callable[[str], bool] = lambda _rid: False) -> OwnerState:
    """Whether the owner a record names is this runtime, alive, provably gone, or cannot be told."""
    owner = Owner.parse(name)
    if owner is None:
        return "gone"
    if me is not None and owner == me:
        return "self"
    if owner.host != _host():
        return "unknown"
    started = process_start(owner.pid)
    if owner.pid == os.getpid() and owner.start == (started or "?"):
        return "alive" if runtime_alive(owner.runtime) else "gone"
    # A start time that cannot be compared here (a "?"): a live pid counts as the owner.
    alive = started is not None and (started == owner.start or "?" in (owner.start, started)
                                     or "?" in owner.start.split("-", 1)[0])
    return "alive" if alive else "gone"


def process_start(pid: int) -> str | None:
    """When process ``pid`` started (boot id and clock ticks on Linux); ``None``: no such process (nor a zombie)."""
    if not os.path.isdir("/proc/self"):  # no procfs: only whether the pid exists can be told
        return "?" if _pid_exists(pid) else None
    try:
        with open(f"/proc/{pid}/stat", "rb") as handle:
            stat = handle.read().decode("ascii", "replace")
    except FileNotFoundError:
        return None
    except OSError:
        return "?" if _pid_exists(pid) else None
    # The command name (field 2) is in parentheses and may hold spaces: split after it.
    fields = stat.rsplit(")", 1)[-1].split()
    if fields[:1] in (["Z"], ["X"], ["x"]):  # exited, only its entry left until its parent reaps it
        return None
    ticks = fields[19] if len(fields) > 19 else "?"
    return f"{_boot_id()}-{ticks}"


def _pid_exists(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:  # it exists, and belongs to someone else
        return True
    return True


@functools.cache
def _boot_id() -> str:
    try:
        with open("/proc/sys/kernel/random/boot_id", encoding="ascii") as handle:
            return handle.read().strip().replace("-", "")[:12] or "?"
    except OSError:
        return "?"


def _host() -> str:
    return socket.gethostname().replace(":", "_") or "localhost"


# The table of one runtime's local tasks. A finished task is kept for follow-ups until ``max_age_s`` or until the
# finished ones hold more than ``max_bytes`` (oldest first); an evicted one loses nothing (its outcome is in the
# ledger or the store and a follow-up rebuilds it).

DEFAULT_MAX_AGE_S = 3600.0  # how long a finished task stays in memory
DEFAULT_MAX_BYTES = 64 * 1024 * 1024  # how much the finished tasks of one runtime may hold together


class TaskTable(dict[str, T]):
    """Tasks by id; finished ones in the order they finished, with their sizes (``max_bytes`` together)."""

    def __init__(self, max_age_s: float = DEFAULT_MAX_AGE_S, max_bytes: int = DEFAULT_MAX_BYTES) -> None:
        super().__init__()
        if not max_age_s > 0:  # named as BackgroundRuntime's arguments, which come here
            raise SpecError(f"settled_max_age_s must be a positive number of seconds (got {max_age_s!r})")
        if not max_bytes >= 0:
            raise SpecError(f"settled_max_bytes must not be negative (got {max_bytes!r})")
        self.max_age_s = float(max_age_s)
        self.max_bytes = int(max_bytes)
        self._settled: collections.OrderedDict[str, tuple[float, int]] = collections.OrderedDict()
        self.settled_bytes = 0

    def revive(self, task_id: str) -> None:
        """A finished task runs again (a follow-up, a retry, an answer): it is no longer evictable."""
        entry = self._settled.pop(task_id, None)
        if entry is not None:
            self.settled_bytes -= entry[1]

    def settle(self, task_id: str, *, size: int, at: float) -> float | None:
        """Mark a task finished at ``at``, holding ``size`` bytes; evict what is due (returns :meth:`next_due`)."""
        if task_id not in self:
            return self.next_due(at)
        self.revive(task_id)
        self._settled[task_id] = (at, max(0, int(size)))
        self.settled_bytes += max(0, int(size))
        return self.evict(at)

    def evict(self, at: float) -> float | None:
        """Drop finished tasks older than ``max_age_s`` or beyond ``max_bytes``, oldest first."""
        while self._settled:
            task_id, (settled_at, size) = next(iter(self._settled.items()))
            if at - settled_at < self.max_age_s and self.settled_bytes <= self.max_bytes:
                break
            self._settled.popitem(last=False)
            self.settled_bytes -= size
            self.pop(task_id, None)
        return self.next_due(at)

    def next_due(self, at: float) -> float | None:
        """Seconds until the oldest finished task is due for eviction (``None``: none is kept)."""
        if not self._settled:
            return None
        settled_at, _size = next(iter(self._settled.values()))
        return max(0.0, settled_at + self.max_age_s - at)

    def all(self) -> Iterator[T]:
        return iter(list(self.values()))

    def unsettled(self) -> Iterator[T]:
        """The tasks that have not finished (a snapshot, safe to change the table while iterating)."""
        return iter([t for i, t in self.items() if i not in self._settled])

    def clear(self) -> None:
        super().clear()
        self._settled.clear()
        self.settled_bytes = 0


# Steering waits in the task's inbox until :class:`SteeringInbox` hands it to the child before its next model call
# (a call cannot be cut halfway); the child finds its task id in its run's metadata, so one instance serves all.

INBOX_METADATA_KEY = "background_task_id"  # run metadata naming the background task a child run belongs to
STEERING_PREFIX = "[Update from your caller] "

class Inboxes(dict[str, list[str]]):
    """Steering messages waiting for their tasks, by task id."""

    def post(self, task_id: str, message: str) -> None:
        self.setdefault(task_id, []).append(message)

    def take(self, task_id: str) -> list[str]:
        """Remove and return everything queued for the task (its inbox goes with it)."""
        return self.pop(task_id, [])


def steering_message(text: str) -> HumanMessage:
    return HumanMessage(content=STEERING_PREFIX + text)


class SteeringInbox(AgentMiddleware):
    """Delivers queued steering messages before each model call of a background child."""

    name = "SteeringInbox"
    child_policy = ChildPolicy(request_neutral=True)  # a steering message is a user turn: no tool, no prompt text

    def __init__(self, inboxes: Inboxes) -> None:
        super().__init__()
        self.inboxes = inboxes

    def before_model(self, state: AgentState[Any], runtime: Runtime[Any]) -> dict[str, Any] | None:
        from langgraph.config import get_config

        try:
            task_id = (get_config().get("metadata") or {}).get(INBOX_METADATA_KEY)
        except RuntimeError:  # not inside a run: nothing to deliver
            return None
        messages = self.inboxes.take(task_id) if task_id else []
        return {"messages": [steering_message(m) for m in messages]} if messages else None


# The models a runtime's loop calls are copies with async HTTP clients of their own: LangChain's OpenAI integration
# shares one async pool between models of one base URL, and a connection opened on one loop fails on another.

class LoopModels:
    """One runtime's copies of the models its loop calls, each with its own async HTTP client."""

    def __init__(self) -> None:
        self._copies: dict[int, tuple[Any, Any]] = {}  # id(original) -> (original, copy): the original kept alive
        self._mine: set[int] = set()  # ids of the copies (and of models that need none)
        self._closers: list[Callable[[], Any]] = []
        self._lock = threading.Lock()

    def own(self, model: Any) -> Any:
        """The copy of ``model`` for this runtime's loop, made on first use; a copy or a non-model as it is."""
        from subagents.definitions._models import with_own_async_client

        with self._lock:
            if id(model) in self._mine:
                return model
            known = self._copies.get(id(model))
            if known is not None:
                return known[1]
            copy, close = with_own_async_client(model)
            self._copies[id(model)] = (model, copy)
            self._mine.add(id(copy))
            if close is not None:
                self._closers.append(close)
            return copy

    async def aclose(self) -> None:
        """Close the copies' clients (on the runtime's loop, theirs) and forget the copies."""
        with self._lock:
            closers, self._closers = self._closers, []
            self._copies.clear()
            self._mine.clear()
        for close in closers:
            with contextlib.suppress(Exception):
                await close()


class OwnLoopModels(AgentMiddleware):
    """Puts the runtime's copy of the model in each model call of a background child (see :class:`LoopModels`)."""

    name = "OwnLoopModels"
    child_policy = ChildPolicy(model_call_only=True, request_neutral=True)  # it swaps the model, never the tools

    def __init__(self, models: LoopModels) -> None:
        super().__init__()
        self.models = models

    async def awrap_model_call(  # async only: a background child runs with ainvoke, on the runtime's loop
        self, request: ModelRequest[Any], handler: Callable[[ModelRequest[Any]], Awaitable[ModelResponse[Any]]]
    ) -> ModelCallResult[Any]:
        return await handler(request.override(model=self.models.own(request.model)))


# Model-call wraps run as one: LangChain runs each ``wrap_model_call`` in a traced layer costing two thread hops per
# call on ``ainvoke`` (a measurable share of CPU with a thousand children), so neighbours that only wrap model calls
# (``ChildPolicy(model_call_only=True)``) are joined in order into one :class:`FusedModelCalls`.

def model_call_only(middleware: Any) -> bool:
    """Whether ``middleware``'s policy says it only wraps model calls and it has no tools, state or other hook."""
    return (policy_of(middleware).model_call_only and not getattr(middleware, "tools", None)
            and getattr(type(middleware), "state_schema", None) is getattr(AgentMiddleware, "state_schema", None)
            and not any(overrides(middleware, hook) for hook in HOOKS if "model_call" not in hook))


def _chain(parts: Sequence[Any], handler: Callable[[Any], Any], wrap: Callable[..., Any]) -> Any:
    """``handler`` wrapped by ``parts``, the first outermost; ``wrap(part, request, inner)`` calls one."""
    call = handler
    for part in reversed(parts):
        call = functools.partial(wrap, part, inner=call)
    return call


class FusedModelCalls(AgentMiddleware):
    """Model-call middlewares run as one, the first outermost; named ``'A+B'``."""

    def __init__(self, parts: Sequence[Any]) -> None:
        super().__init__()
        self.parts = tuple(parts)
        self._name = "+".join(part.name for part in self.parts)

    @property
    def name(self) -> str:
        return self._name

    def wrap_model_call(self, request: Any, handler: Callable[[Any], Any]) -> Any:
        return _chain(self.parts, handler, lambda part, req, inner: part.wrap_model_call(req, inner))(request)

    async def awrap_model_call(self, request: Any, handler: Callable[[Any], Any]) -> Any:
        return await _chain(self.parts, handler, lambda part, req, inner: part.awrap_model_call(req, inner))(request)


def fused_model_calls(middleware: Sequence[Any]) -> list[Any]:
    """``middleware`` with each run of two or more neighbouring model-call-only ones joined into one."""
    out: list[Any] = []
    for only, group in itertools.groupby(middleware, model_call_only):
        run = list(group)
        out.extend([FusedModelCalls(run)] if only and len(run) > 1 else run)
    return out


def may_swap_model(middleware: Any) -> bool:
    """Whether ``middleware`` wraps model calls and its policy does not say it keeps the model."""
    return not policy_of(middleware).keeps_model and any(
        overrides(middleware, hook) for hook in ("wrap_model_call", "awrap_model_call"))


def background_child_middleware(middleware: Sequence[Any]) -> list[Any]:
    """A built background child's middleware, ours only where they have work: :class:`OwnLoopModels` only if another
    may swap the model; with no other, none (each run is one model call, its steering in its input). A model- or
    tool-call wrap that is sync only is refused: a background child's ``ainvoke`` would fail."""
    for mw, sync in itertools.product(middleware, ("wrap_model_call", "wrap_tool_call")):
        kind, async_ = type(mw), "a" + sync
        if (getattr(kind, sync, None) is not getattr(AgentMiddleware, sync)
                and getattr(kind, async_, None) is getattr(AgentMiddleware, async_)):
            raise InvalidArgumentType(
                f"middleware {getattr(mw, 'name', kind.__name__)!r} ({kind.__module__}.{kind.__qualname__}) "
                f"defines {sync} but not {async_}: a background child runs async, on the background loop, even "
                f"under a parent's invoke; give it an async {async_} too (or run this subagent with task)")
    others = [mw for mw in middleware if not isinstance(mw, (SteeringInbox, OwnLoopModels))]
    if not others:
        return []
    swaps = any(may_swap_model(mw) for mw in others)
    return fused_model_calls([mw for mw in middleware if swaps or not isinstance(mw, OwnLoopModels)])


# A local task's outcome is written as it settles, so a restart between two parent turns loses nothing: beside the
# thread's checkpoints when the checkpointer is a SQLite file (``outcome_db``), else in memory; it applies only to
# the same owner, attempt and turn. A lease per live task, renewed every :data:`LEASE_RENEW_S`, proves an owner
# gone once older than :data:`LEASE_S` (six missed renewals).

TABLE = "background_task_outcomes"
LEASE_TABLE = "background_task_leases"
LEASE_RENEW_S = 10.0
LEASE_S = 60.0
MEMORY_MAX_BYTES = 16 * 1024 * 1024  # outcome text one runtime keeps in memory (oldest dropped first)

_MATCH_KEYS = ("owner", "attempt", "turns")


def outcome_for(record: Mapping[str, Any], outcome: Mapping[str, Any] | None) -> dict[str, Any]:
    """The stored fields that bring ``record`` up to date (empty if the outcome is of another run)."""
    if not outcome or any(outcome.get(k) != record.get(k) for k in _MATCH_KEYS if k in outcome):
        return {}
    return dict(outcome)


class MemoryOutcomes:
    """Outcomes in memory, at most ``max_bytes``, none dropped whole (its task would read ``lost``): a large result
    keeps its start, past ``max_bytes`` the oldest lose their result; beyond :data:`MEMORY_MAX_STUBS`, stubs go."""

    def __init__(self, max_bytes: int = MEMORY_MAX_BYTES) -> None:
        self.max_bytes = max_bytes
        self.bytes = 0
        self._items: collections.OrderedDict[str, tuple[dict[str, Any], int]] = collections.OrderedDict()
        self._stubs: collections.OrderedDict[str, dict[str, Any]] = collections.OrderedDict()

    def save(self, task_id: str, fields: Mapping[str, Any]) -> None:
        kept, size = _cut_result(dict(fields), max(self.max_bytes // 8, 4096))
        self._stubs.pop(task_id, None)
        self.bytes += size - self._items.pop(task_id, ({}, 0))[1]  # popped: the new outcome is the newest
        self._items[task_id] = (kept, size)
        while self.bytes > self.max_bytes and self._items:
            oldest, (old, dropped) = self._items.popitem(last=False)
            self.bytes -= dropped
            # Reduced to what says how the task ended: no result text, a short error.
            stub = {k: v for k, v in old.items() if not isinstance(v, str) or len(v) <= 512}
            if isinstance(old.get("error"), str):
                stub["error"] = old["error"][:512]
            if old.get("result") is not None:
                stub["result"] = (f"[cut: this result was dropped from memory, where this process keeps at most "
                                  f"{self.max_bytes:,} bytes of results (its parent's checkpointer is not a SQLite "
                                  "file)]")
            self._stubs[oldest] = stub
        while len(self._stubs) > MEMORY_MAX_STUBS:
            self._stubs.popitem(last=False)

    def save_all(self, outcomes: Mapping[str, Mapping[str, Any]]) -> None:
        for task_id, fields in outcomes.items():
            self.save(task_id, fields)

    async def save_soon(self, outcomes: Mapping[str, Mapping[str, Any]]) -> None:
        self.save_all(outcomes)

    def clear(self) -> None:
        self._items.clear()
        self._stubs.clear()
        self.bytes = 0

    def load(self, task_id: str) -> dict[str, Any] | None:
        item = self._items.get(task_id)
        found = item[0] if item is not None else self._stubs.get(task_id)
        return dict(found) if found is not None else None


MEMORY_MAX_STUBS = 10_000  # outcomes cut to their status (no result) one runtime keeps in memory


def _cut_result(fields: dict[str, Any], limit: int) -> tuple[dict[str, Any], int]:
    """``fields`` with a result too large for ``limit`` cut to its start, and a note saying so; and their size."""
    size, result = _size(fields), fields.get("result")
    if not isinstance(result, str) or size <= limit:
        return fields, size
    width = _char_bytes(result)
    room = max(0, (limit - (size - len(result) * width) - 400) // width)
    fields["result"] = result[:room] + (
        f"\n[cut: the result was {len(result):,} characters; this process keeps the first {room:,} in "
        "memory (its parent's checkpointer is not a SQLite file, where it would be kept whole)]")
    return fields, _size(fields)


class SqliteOutcomes:
    """Outcomes in a table of a SQLite file (the parent's checkpoint database)."""

    def __init__(self, path: str) -> None:
        self.path = path
        self._conn: sqlite3.Connection | None = None
        self._lock = threading.Lock()
        self._table_ready = False
        self._batch: tuple[dict[str, Mapping[str, Any]], asyncio.Future[None]] | None = None

    def save(self, task_id: str, fields: Mapping[str, Any]) -> None:
        self.save_all({task_id: fields})

    async def save_soon(self, outcomes: Mapping[str, Mapping[str, Any]]) -> None:
        """:meth:`save_all`, in one transaction with the other saves of the loop's step (see :meth:`_write`)."""
        if self._batch is None:
            self._batch = ({}, asyncio.get_running_loop().create_future())
            asyncio.get_running_loop().call_soon(self._save_batch)
        rows, saved = self._batch
        rows.update(outcomes)
        await asyncio.shield(saved)

    def _save_batch(self) -> None:
        assert self._batch is not None
        (rows, saved), self._batch = self._batch, None
        try:
            self.save_all(rows)
        except Exception as exc:  # noqa: BLE001 - each waiting task falls back on its own
            saved.set_exception(exc)
        else:
            saved.set_result(None)

    def save_all(self, outcomes: Mapping[str, Mapping[str, Any]]) -> None:
        """Store several outcomes in one transaction: on disk, all of them, when this returns."""
        rows = {task_id: json.dumps(dict(fields), default=str) for task_id, fields in outcomes.items()}
        # A settled task needs no lease any more (a follow-up takes a new one).
        leases = {task_id: str(fields.get("owner")) for task_id, fields in outcomes.items()}
        self._write(
            (f"INSERT OR REPLACE INTO {TABLE} (task_id, fields) SELECT key, value FROM json_each(?)",
             (json.dumps(rows),)),
            (f"DELETE FROM {LEASE_TABLE} WHERE (task_id, owner) IN (SELECT key, value FROM json_each(?))",
             (json.dumps(leases),)),
        )

    def renew(self, owner: str, task_ids: list[str], at: float) -> None:
        self._write((f"INSERT OR REPLACE INTO {LEASE_TABLE} (task_id, owner, renewed_at) "
                     "SELECT value, ?, ? FROM json_each(?)", (owner, at, json.dumps(task_ids))))

    def _write(self, *statements: tuple[str, tuple[Any, ...]]) -> None:
        """Every write: one transaction, each statement over all its rows (a JSON array). A commit per row (a thousand
        leases) kept the checkpointer's connection from the file past its five seconds ("database is locked")."""
        with self._lock:
            conn = self._ready()
            conn.execute("BEGIN IMMEDIATE")
            try:
                for sql, params in statements:
                    conn.execute(sql, params)
            except BaseException:
                conn.execute("ROLLBACK")
                raise
            conn.execute("COMMIT")

    def lease(self, task_id: str) -> tuple[str, float] | None:
        """The task's lease: its owner and when it was last renewed (``None``: no lease)."""
        row = self._row(f"SELECT owner, renewed_at FROM {LEASE_TABLE} WHERE task_id = ?", task_id)
        return (str(row[0]), float(row[1])) if row else None

    def load(self, task_id: str) -> dict[str, Any] | None:
        row = self._row(f"SELECT fields FROM {TABLE} WHERE task_id = ?", task_id)
        try:
            value = json.loads(row[0]) if row is not None else None
        except ValueError:
            return None
        return value if isinstance(value, dict) else None

    def _row(self, sql: str, task_id: str) -> Any:
        with self._lock:
            try:
                return self._connect().execute(sql, (task_id,)).fetchone()
            except sqlite3.Error:  # no file, or no table yet: nothing stored
                return None

    def close(self) -> None:
        with self._lock:
            if self._conn is not None:
                self._conn.close()
                self._conn = None

    def _ready(self) -> sqlite3.Connection:
        conn = self._connect()
        if not self._table_ready:
            conn.execute(f"CREATE TABLE IF NOT EXISTS {TABLE} (task_id TEXT PRIMARY KEY, fields TEXT NOT NULL)")
            conn.execute(f"CREATE TABLE IF NOT EXISTS {LEASE_TABLE} "
                         "(task_id TEXT PRIMARY KEY, owner TEXT NOT NULL, renewed_at REAL NOT NULL)")
            self._table_ready = True
        return conn

    def _connect(self) -> sqlite3.Connection:
        if self._conn is None:
            # Only an existing database (the checkpointer's): a path read from a record never makes a file.
            uri = "file:" + urllib.parse.quote(self.path) + "?mode=rw"
            self._conn = sqlite3.connect(uri, uri=True, timeout=10, check_same_thread=False,
                                         isolation_level=None)
        return self._conn


OutcomeStore = MemoryOutcomes | SqliteOutcomes


class OutcomeStores:
    """A runtime's outcome stores: its memory, and each SQLite file it has written to or read from."""

    def __init__(self) -> None:
        self.memory = MemoryOutcomes()
        self._files: dict[str, SqliteOutcomes] = {}

    def file(self, path: str) -> SqliteOutcomes:
        return self._files.setdefault(path, SqliteOutcomes(path))

    def close(self) -> None:
        for store in self._files.values():
            store.close()
        self._files.clear()
        self.memory.clear()  # only this runtime reads them; another finds it closed and reports its tasks lost


async def checkpoint_db(config: Mapping[str, Any]) -> str | None:
    """The SQLite file the run's checkpointer writes to, if it is one (``None`` otherwise). LangGraph has no public
    accessor for a run's checkpointer: this reads its config key, in this one place."""
    with contextlib.suppress(LookupError):  # only an async SQLite connection not yet asked goes on
        return checkpoint_db_now(config)
    conn = _checkpoint_conn(config)
    try:
        async with conn.execute("PRAGMA database_list") as cursor:
            rows = await cursor.fetchall()
    except Exception:  # noqa: BLE001 - a checkpointer we cannot ask keeps outcomes in memory
        return None
    with contextlib.suppress(TypeError):  # a connection that cannot be weakly referenced is asked each time
        _ASYNC_DBS[conn] = _main_db(rows)
    return _main_db(rows)


_ASYNC_DBS: weakref.WeakKeyDictionary[Any, str | None] = weakref.WeakKeyDictionary()  # asked once, on its loop


def checkpoint_db_now(config: Mapping[str, Any]) -> str | None:
    """:func:`checkpoint_db` from any thread; ``LookupError`` for an unasked async SQLite connection (its loop's)."""
    conn = _checkpoint_conn(config)
    if conn is None:
        return None
    if type(conn).__module__.startswith("aiosqlite"):
        try:
            return _ASYNC_DBS[conn]
        except (KeyError, TypeError):
            raise LookupError("an async SQLite checkpointer is asked on its loop, once") from None
    if not isinstance(conn, sqlite3.Connection):
        return None
    saver = (config.get(CONF) or {}).get(CONFIG_KEY_CHECKPOINTER)
    try:
        lock = getattr(saver, "lock", None) or threading.Lock()
        with lock:
            rows = conn.execute("PRAGMA database_list").fetchall()
    except Exception:  # noqa: BLE001 - a checkpointer we cannot ask keeps outcomes in memory
        return None
    return _main_db(rows)


def _checkpoint_conn(config: Mapping[str, Any]) -> Any:
    saver = (config.get(CONF) or {}).get(CONFIG_KEY_CHECKPOINTER)
    return getattr(saver, "conn", None)


def _main_db(rows: Any) -> str | None:
    return next((str(os.path.abspath(path)) for _seq, name, path in rows if name == "main" and path), None)


def _size(fields: Mapping[str, Any]) -> int:
    """Bytes the fields' text holds in memory (a str keeps 1, 2 or 4 bytes a character), plus a fixed part."""
    return 256 + sum(len(v) * _char_bytes(v) for v in fields.values() if isinstance(v, str))


def _char_bytes(text: str) -> int:
    if not text or text.isascii():
        return 1
    widest = ord(max(text))
    return 1 if widest < 0x100 else 2 if widest < 0x10000 else 4


_open: weakref.WeakValueDictionary[str, BackgroundRuntime] = weakref.WeakValueDictionary()  # open runtimes, by id

_forked_away: list[Any] = []


def _forget_after_fork() -> None:
    """A forked child has none of its parent's loop threads: it closes its copies of the open runtimes untouched,
    keeping their portals forever (collected, a portal's exit waits for its thread)."""
    for runtime in list(_open.values()):
        _forked_away.append(runtime._portal_cm)
        runtime.closed, runtime._portal, runtime._portal_cm = True, None, None
    _open.clear()


os.register_at_fork(after_in_child=_forget_after_fork)


class BackgroundRuntime:
    """An event loop thread and the background tasks that live on it; ``close()`` ends both.

    Args:
        settled_max_age_s: how long a finished local task stays in memory.
        settled_max_bytes: how much the finished local tasks may hold together.
        close_timeout_s: how long :meth:`close` waits for cancelled tasks and callbacks.
        name: the loop thread's name.

    Attributes:
        on_close: callables run once on the loop when the runtime closes (coroutine functions are awaited); a
            failing one does not stop the others. Other runners put their clients and pools here.
        models: the :class:`LoopModels` that background children call; closed with the runtime.
    """

    def __init__(self, *, settled_max_age_s: float = DEFAULT_MAX_AGE_S, settled_max_bytes: int = DEFAULT_MAX_BYTES,
                 close_timeout_s: float = 5.0, name: str = "background-subagents") -> None:
        self.id = uuid.uuid4().hex[:16]
        self.owner = Owner.current(self.id)
        self.table: TaskTable[Any] = TaskTable(settled_max_age_s, settled_max_bytes)
        self.inboxes = Inboxes()
        self.outcomes = OutcomeStores()
        self.models = LoopModels()
        self.on_close: list[Callable[[], Any]] = [self.outcomes.close, self.models.aclose]
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
        self._new_leases: dict[str, list[str]] = {}  # db -> tasks launched since the last lease write
        self.closed = False
        _open[self.id] = self

    @staticmethod
    def find(runtime_id: str) -> BackgroundRuntime | None:
        """The open runtime of this process with that id, if any."""
        runtime = _open.get(runtime_id)
        return runtime if runtime is not None and not runtime.closed else None

    @staticmethod
    def all_open() -> list[BackgroundRuntime]:
        """Every open runtime of this process (for views that know a task id only)."""
        return [r for r in list(_open.values()) if not r.closed]

    def in_loop(self) -> bool:
        """Whether the caller runs on this runtime's loop thread."""
        return self._thread is not None and threading.current_thread() is self._thread

    def submit(self, coro: Coroutine[Any, Any, T]) -> concurrent.futures.Future[T]:
        """Schedule ``coro`` on the loop, in a clean context; return at once (never waiting for the loop thread,
        as a portal's ``start_task_soon`` does). One :meth:`close` has to stop fails with :class:`RuntimeClosed`."""
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
        if self.closed or future.cancelled():
            coro.close()
            if not future.cancelled():
                future.set_exception(RuntimeClosed("the background runtime is closed"))
            return
        job = asyncio.get_running_loop().create_task(_begun(coro, future), context=contextvars.Context())
        self._ops.add(job)
        job.add_done_callback(self._ops.discard)
        job.add_done_callback(lambda done: _settle(done, future, closed=self.closed))
        future.add_done_callback(lambda f: _cancel_if_abandoned(f, job))  # a caller that stops waiting cancels it

    def stalled(self) -> bool:
        """Whether a caller waiting on the loop already found it blocked (see :class:`RuntimeStalled`)."""
        return self._probe.stalled()

    def run(self, coro: Coroutine[Any, Any, T], timeout: float | None = None) -> T:
        """Run ``coro`` on the loop and block this (non-loop) thread for its result."""
        if self.in_loop():
            coro.close()
            raise UnsupportedCall("BackgroundRuntime.run called from the runtime's own loop; await arun")
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
        note_caller_loop()  # an in-process server app is called back on this loop (serving_loop)
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
                self.close()
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

    def lease_soon(self, db: str, task_id: str) -> None:
        """Take a lease for a task just launched (from the loop), in one write with the others of this step."""
        if not self._new_leases:
            asyncio.get_running_loop().call_soon(self._renew)
        self._new_leases.setdefault(db, []).append(task_id)
        if self._leases is None or self._leases.done():  # renewed until no live task is left
            self._leases = self.spawn(self._renew_leases())

    def _renew(self, by_db: Mapping[str, list[str]] | None = None) -> None:
        """Renew the leases of ``by_db``'s tasks (default: of those launched since the last write)."""
        if by_db is None:
            by_db, self._new_leases = self._new_leases, {}
        for db, ids in by_db.items():
            with contextlib.suppress(Exception):  # a locked file: renewed next time
                self.outcomes.file(db).renew(self.owner.name, ids, time.time())

    async def _renew_leases(self) -> None:
        while True:
            await asyncio.sleep(LEASE_RENEW_S)  # the leases were just taken: renew them when due
            by_db: dict[str, list[str]] = {}
            for task in self.table.unsettled():
                if db := task.fields.get("outcome_db"):
                    by_db.setdefault(str(db), []).append(task.id)
            if not by_db:
                return
            self._renew(by_db)

    def close(self) -> None:
        """Cancel what still runs (recorded as ``lost``), run ``on_close``, stop the loop thread. A sync tool already
        running in a worker thread cannot be interrupted: ``close`` returns when it does."""
        with self._lock:
            if self.closed:
                return
            self.closed = True
            portal_cm, portal = self._portal_cm, self._portal
        _open.pop(self.id, None)
        if portal is None or not self._alive():  # never started, or its loop died: the rest closes on a loop of its own
            with _portal("background-subagents-close") as closing:
                closing.call(self._close_rest)
            return
        if self.in_loop():  # closing from one of our own tasks: finish from another thread
            threading.Thread(target=_stop_portal, args=(portal, portal_cm, self._shutdown), daemon=True).start()
            return
        _stop_portal(portal, portal_cm, self._shutdown)

    def _alive(self) -> bool:
        return self._thread is not None and self._thread.is_alive()

    async def _close_rest(self) -> None:
        """Unsettled tasks made ``lost``, ``on_close`` run (last first), all let go (a closed middleware lives on)."""
        for task in self.table.unsettled():  # waiting for approval, or not yet started: nothing runs them now
            with contextlib.suppress(Exception):
                task.abandon()
        for callback in reversed(self.on_close):
            try:
                result = callback()
                if inspect.isawaitable(result):
                    await asyncio.wait_for(result, self.close_timeout_s)
            except Exception:  # noqa: BLE001 - one failing callback must not keep the rest open
                continue
        self.table.clear()
        self.inboxes.clear()

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
        await self._close_rest()

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
            self.close()
        with self._lock:
            if self.closed:
                raise RuntimeClosed("the background runtime is closed; create a new one (or a new middleware)")
            if self._portal is None:
                cm = _portal(self._name, self._probe)
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
