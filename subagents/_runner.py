"""Running one delegation: resolve, isolate, invoke under limits, return an outcome.

The steps are one plan (:meth:`TaskRunner._plan`) that ``run`` and ``arun`` drive. Whatever the child
raises becomes a failed :class:`~subagents.TaskOutcome` with a typed ``stop_reason``; only interrupts
(approval) pass through. Real cancellation propagates, leaving a ``cancelled`` mark in the transcript; a
``KeyboardInterrupt`` is real only when it may be the user's Ctrl-C (:func:`is_ctrl_c`), else the child's error.
"""

from __future__ import annotations

import asyncio
import collections
import concurrent.futures
import contextlib
import contextvars
import dataclasses
import functools
import os
import signal
import threading
import time
from collections.abc import AsyncIterator, Callable, Generator, Iterator, Mapping, Sequence
from typing import TYPE_CHECKING, Any, cast, get_args

from langchain.agents.middleware.model_call_limit import ModelCallLimitExceededError
from langchain_core.messages import AIMessage
from langgraph.constants import CONF, CONFIG_KEY_CHECKPOINTER
from langgraph.errors import GraphBubbleUp, GraphInterrupt, GraphRecursionError, ParentCommand
from langgraph.types import Interrupt

try:
    from langgraph.errors import NodeCancelledError
except ImportError:  # before langgraph 1.2.3 a node's own CancelledError left it as itself
    class NodeCancelledError(Exception):  # type: ignore[no-redef]
        """Never raised."""
from langsmith import get_tracing_context, tracing_context

from subagents._boundary import (
    CORE_EXCLUDED_KEYS,
    SLOT,
    ChildInput,
    WorkHolder,
    call_returned,
    changed_keys,
    is_forbidden_tool,
    langchain_private_state_keys,
    running_in,
    tool_name,
    type_name,
)
from subagents._builder import call_format, requested_format
from subagents._errors import (
    _STOP,
    REAL_CANCELLATION,
    ChildExit,
    CtrlCHandler,
    MaxTurnsReached,
    OutputSchemaError,
    ParentWriteRefused,
    SpecError,
    StopReason,
    SubagentError,
    UnknownSubagent,
    is_ctrl_c,
    is_real_cancellation,
    safe_text,
)
from subagents._metering import (
    COUNTS,
    ESTIMATE_KEY,
    MIN_TOKEN_SCALE,
    PRICE_KEY,
    Budget,
    PriceTable,
    RecordingMeter,
    TaskMeter,
    TranscriptRecorder,
    WrapUpSetting,
    call_price,
    cost_at,
    cut_short_note,
    estimate_tokens,
    keep_child_exits,
    meter_for,
    metered_apart,
    run_prices,
    token_count,
    unknown_model_price,
)
from subagents._outcome import TASK_ID_METADATA_KEY as TASK_ID_METADATA_KEY  # where callers look for it
from subagents._outcome import (
    ChildAnswer,
    TaskCall,
    TaskOutcome,
    final_answer,
    merge_continuation,
    task_id_for,
)
from subagents._plans import adrive, drive
from subagents._registry import (
    DYNAMIC_SUBAGENTS_KEY,
    SubagentRegistry,
    check_definition,
    definition_key,
    spec_from_definition,
)
from subagents._spec import DEFAULT_MAX_TURNS, AnySpec, CompiledSubagent, SubagentSpec
from subagents._transcripts import NO_TRANSCRIPT, child_messages, sink_chooser

if TYPE_CHECKING:
    from subagents._settings import DelegationSettings


# -- The cap on an agent's running children: one count across threads and event loops, first come first
# served. A place (a :class:`Slot`) returns when the child's *work* stops, not when the parent stops waiting:
# an abandoned child's tool still runs (a thread cannot be killed), and whatever works for it holds a share.


class Slot:
    """One place under the cap, shared by everything still working for one child."""
    __slots__ = ("_limit", "_shares", "_lock")

    def __init__(self, limit: ConcurrencyLimit | None) -> None:
        self._limit = limit
        self._shares = 1
        self._lock = threading.Lock()

    def share(self) -> None:
        """One more piece of work holds this place (a thread or task that outlives its caller)."""
        if self._limit is not None:
            with self._lock:
                self._shares += 1 if self._shares > 0 else 0  # none left: the place went back already

    def release(self) -> None:
        """One piece of work is done; the place returns to the cap when the last one is."""
        if self._limit is None:
            return
        with self._lock:
            if self._shares <= 0:
                return
            self._shares -= 1
            last = self._shares == 0
        if last:
            self._limit._give_back()

    def __enter__(self) -> Slot:
        return self

    def __exit__(self, *exc: object) -> None:
        self.release()


NO_CAP = Slot(None)  # the slot handed out when there is no cap: sharing and releasing it cost nothing


class _Waiter:
    """A thread (an event) or a coroutine (a future on its loop) waiting for a place."""
    __slots__ = ("loop", "signal", "granted")

    def __init__(self, loop: asyncio.AbstractEventLoop | None = None) -> None:
        self.loop = loop
        self.signal: Any = threading.Event() if loop is None else loop.create_future()
        self.granted = False

    def wake(self) -> bool:
        """Tell the waiter it has the place; False if it can no longer be told (its loop is closed)."""
        try:
            if self.loop is None:
                self.signal.set()
            else:
                self.loop.call_soon_threadsafe(_resolve, self.signal)
        except RuntimeError:  # the loop is closed: that waiter is gone
            return False
        return True


def _resolve(future: asyncio.Future[None]) -> None:
    if not future.done():
        future.set_result(None)


class ConcurrencyLimit:
    """``with limit.hold():`` or ``async with limit.ahold():``: one count across threads and loops."""

    def __init__(self, limit: int | None) -> None:
        if limit is not None and (type(limit) is not int or limit < 1):
            raise SpecError(f"max_concurrent_tasks must be an integer of at least 1 (got {limit!r})")
        self.limit = limit
        self._running = 0
        self._waiting: collections.deque[_Waiter] = collections.deque()
        self._lock = threading.Lock()

    @property
    def running(self) -> int:
        """Places held now (children running, or still working after they were abandoned)."""
        return self._running

    def acquire(self) -> Slot:
        """Wait on this thread for a place."""
        return drive(self._place(None), lambda event: event.wait())

    async def aacquire(self) -> Slot:
        """Wait on the running event loop for a place (the same count as threads and other loops)."""
        return await adrive(self._place(asyncio.get_running_loop()), lambda future: future)

    def _place(self, loop: asyncio.AbstractEventLoop | None) -> Generator[Any, Any, Slot]:
        """A place now, or once the waiter queued (a thread's event without ``loop``, else a future on it) is woken."""
        if self.limit is None:
            return NO_CAP
        with self._lock:
            if self._running < self.limit and not self._waiting:
                self._running += 1
                return Slot(self)
            waiter = _Waiter(loop)
            self._waiting.append(waiter)
        try:
            yield waiter.signal
        except BaseException:  # Ctrl-C or cancellation while waiting: leave the queue, or pass on a place just given
            self._abandon(waiter)
            raise
        return Slot(self)

    hold = acquire  # ``with limit.hold():`` (a slot is released as its block ends)

    @contextlib.asynccontextmanager
    async def ahold(self) -> AsyncIterator[Slot]:
        with await self.aacquire() as slot:
            yield slot

    def _give_back(self) -> None:
        """A place is free: hand it to the first waiter that can still take it, or count it free."""
        with self._lock:
            while self._waiting:
                waiter = self._waiting.popleft()
                waiter.granted = True
                if waiter.wake():
                    return  # the place passes on: the running count stays
            self._running -= 1

    def _abandon(self, waiter: _Waiter) -> None:
        with self._lock:
            if not waiter.granted:
                with contextlib.suppress(ValueError):
                    self._waiting.remove(waiter)
                return
        self._give_back()  # it was handed a place it will not use


# -- What a child raised, as a stop reason and a sentence a model can act on: by type and origin, never by
# message text, and total (a hostile ``__str__`` still yields a bounded reason).

_FAILURE_REASONS = frozenset(get_args(StopReason)) - {"completed", "truncated"}


def describe_failure(exc: BaseException, run: Delegation | None = None, origin: StopReason | None = None
                    ) -> tuple[StopReason, str]:
    """``(stop_reason, reason)`` for a failed task (of ``run``, naming its limits); never raises. ``origin``:
    ``model_error`` or ``tool_error``."""
    try:
        return _describe(exc, run.recursion_limit if run else None, run.timeout_s if run else None, origin)
    except BaseException:  # noqa: BLE001 - the failure path must never raise
        return "error", f"{type_name(exc)}: (the error could not be described)"


def _describe(exc: BaseException, recursion_limit: int | None, timeout_s: float | None, origin: StopReason | None
              ) -> tuple[StopReason, str]:
    if origin in ("model_error", "tool_error") and isinstance(exc, SubagentError):
        # The library's error raised by a child's model or tool (one that itself delegates, say): its
        # stop_reason tells of that tool's inner run, not of this task. The meter's own are never here.
        return origin, f"{type_name(exc)}: {safe_text(exc).strip() or '(no message)'}"
    if isinstance(exc, MaxTurnsReached):
        return "max_turns", (f"hit its max_turns limit ({exc.max_turns} model calls) before finishing. "
                             "Split the task into smaller pieces, or raise max_turns.")
    if isinstance(exc, ModelCallLimitExceededError) and origin not in ("model_error", "tool_error"):
        return "max_turns", (f"was stopped by its own ModelCallLimitMiddleware ({safe_text(exc, 300)}). "
                             "Split the task into smaller pieces, or raise that middleware's limit.")
    if isinstance(exc, GraphRecursionError) and origin != "tool_error":
        return "recursion", (f"hit its recursion limit ({recursion_limit} steps) before finishing. "
                             "Split the task into smaller pieces, or raise recursion_limit.")
    if isinstance(exc, SubagentError):
        claimed: Any = exc.stop_reason  # one a failure can have; a subclass's own invention is "error"
        reason = cast(StopReason, claimed) if type(claimed) is str and claimed in _FAILURE_REASONS else "error"
        if reason == "timeout":
            after = f" after {timeout_s:g}s" if isinstance(timeout_s, (int, float)) else ""
            stalled = getattr(exc, "stalled", None)
            if isinstance(stalled, str) and stalled:
                return "timeout", f"timed out{after}, but {stalled}"
            return "timeout", f"timed out{after}. Split the task, or raise timeout_s."
        return reason, safe_text(exc) or reason
    text = safe_text(exc).strip() or "(no message)"
    return origin or "error", f"{type_name(exc)}: {text}"


# -- Which child one call runs, on which graph, from which input. By default the registry's spec and cached
# graph and the isolated input; a dynamic subagent (resolved from the parent's state), a per-call output
# schema and a fork each change one part. What a mode adds to the record comes back as ``record_extra``.


def set_up_child(registry: SubagentRegistry, call: TaskCall, blocked: frozenset[str]
                 ) -> tuple[AnySpec, Any, Callable[[], ChildInput], dict[str, Any]]:
    """``(spec, graph, prepare, record_extra)`` for ``call``: ``prepare`` makes the child's input and own copies,
    as its task runs (a stand-in registry: declared specs and forks only)."""
    modes = isinstance(registry, SubagentRegistry)
    spec, spec_key, extra = _spec_for(registry, call, modes)
    requested = requested_format(call.output_schema, call.parent_config) if modes else None
    if requested is not None:
        graph = _graph_with_format(registry, call, spec, spec_key, requested, extra)
    elif spec_key[0] == "dynamic" and isinstance(spec, SubagentSpec):  # run-time definitions are specs
        graph = registry.call_graph(spec_key, spec, parent_model=call.parent_model, parent_tools=call.parent_tools)
    else:
        graph = registry.graph(call.subagent_type, parent_model=call.parent_model,
                               parent_tools=call.parent_tools)
    fork = getattr(spec, "context", "isolated") == "fork"
    if fork:
        extra["context"] = "fork"
    # The child's own copies, made once, as its task runs: what it changes in place stays its own.
    return spec, graph, lambda: ChildInput.of(call.parent_state, call.description, blocked, fork=fork,
                                              tool_call_id=call.tool_call_id), extra


def _spec_for(registry: SubagentRegistry, call: TaskCall, modes: bool
             ) -> tuple[AnySpec, tuple[str, str], dict[str, Any]]:
    name = call.subagent_type
    try:
        return registry.spec(name), ("spec", name), {}
    except UnknownSubagent:
        if not modes:
            raise
    definitions = call.parent_state.get(DYNAMIC_SUBAGENTS_KEY) or {}
    definition = definitions.get(name) if isinstance(definitions, Mapping) else None
    if not isinstance(definition, Mapping):
        created = list(definitions) if isinstance(definitions, Mapping) else []
        message = f"unknown subagent_type {name!r}; valid types are: {', '.join([*registry.names, *created]) or 'none'}"
        last = (call.parent_state.get("messages") or (None,))[-1]
        if isinstance(last, AIMessage) and any(c.get("name") == "create_subagent" and (c.get("args") or {}).get(
                "name") == name for c in last.tool_calls):
            message += (f". {name!r} is being created by a create_subagent call in this same turn; "
                        "delegate to it with task from your next turn")
        raise UnknownSubagent(message)
    # Checked again at use: a definition may have reached the state without create_subagent.
    fields = {k: v for k, v in definition.items() if k in ("name", "description", "system_prompt",
                                                           "tools", "max_turns")}
    checked = check_definition(fields, declared=registry.names, existing={},
                               parent_tools=inheritable_tool_names(call.parent_tools), cap=1)
    if checked.name != name:
        raise UnknownSubagent(f"created subagent {name!r} is stored under another name ({checked.name!r})")
    return spec_from_definition(checked), ("dynamic", definition_key(fields)), {"dynamic": True}


def inheritable_tool_names(tools: Any) -> list[str]:
    """Names of the parent's tools a child may be given."""
    return [tool_name(t) for t in tools or () if not is_forbidden_tool(t)]


def _graph_with_format(registry: SubagentRegistry, call: TaskCall, spec: AnySpec, spec_key: tuple[str, str],
                       requested: Any, extra: dict[str, Any]) -> Any:
    if isinstance(spec, CompiledSubagent):
        raise OutputSchemaError(
            f"a per-call output schema cannot be used with compiled subagent {spec.name!r}: its graph "
            "is fixed when it is compiled. Give the graph its own response_format, or declare the "
            "subagent as a spec"
        )
    fmt = call_format(requested)
    extra["output_schema"] = fmt.label
    shaped = spec.model_copy(update={"response_format": fmt.response_format,
                                     "middleware": (*spec.middleware, *fmt.middleware)})
    return registry.call_graph((spec_key, fmt.key), shaped, parent_model=call.parent_model,
                               parent_tools=call.parent_tools)


# -- One delegation in flight, step by step; the deadline helpers keep ``timeout_s`` on both paths (the meter
# then stops the abandoned child at its next model or tool call).

DEFAULT_RECURSION_LIMIT = 25
MAX_INHERITED_RECURSION_LIMIT = 100
LANGCHAIN_DEFAULT_LIMIT = 9_999
"""A child without its own ``recursion_limit`` gets the parent's, but never more than this."""


@dataclasses.dataclass
class Delegation:
    """The runner's state for one task, from the tool call to the outcome."""
    call: TaskCall
    task_id: str
    thread_id: Any
    namespace: str
    started_at: float
    started_clock: float
    graph: Any = None
    spec: Any = None
    inputs: dict[str, Any] = dataclasses.field(default_factory=dict)
    config: dict[str, Any] = dataclasses.field(default_factory=dict)
    meter: TaskMeter | None = None
    recorder: TranscriptRecorder | None = None
    sink: Any = None
    transcript: str | None = None
    max_turns: int | None = None  # the limits it runs under
    recursion_limit: int | None = None
    timeout_s: float | None = None
    record_extra: dict[str, Any] = dataclasses.field(default_factory=dict)
    events: list[dict[str, Any]] = dataclasses.field(default_factory=list)
    short_answer_threshold: int | None = None  # the spec's own (None: the runner's applies)
    begun: bool = False  # past the concurrency cap
    given: dict[str, Any] = dataclasses.field(default_factory=dict)  # the child's own copies (ChildInput)
    prepare: Callable[[], ChildInput] | None = None  # makes inputs and given (own_input)
    in_place: bool = False  # nothing to copy or read for its input: made on the event loop's thread too
    slot: Slot = NO_CAP  # its place under the cap, shared by whatever still works for it
    # Across approval pauses: earlier segments' work time, the pauses, and the run time timeout_s has used.
    carried_ms: float = 0.0
    waiting_ms: float = 0.0
    ran_s: float = 0.0
    begun_clock: float = 0.0  # when this segment began to run (after any wait for the cap)
    carried: bool = False  # this agent object paused it and carries what it spent

    @classmethod
    def start(cls, call: TaskCall) -> Delegation:
        configurable = call.parent_config.get(CONF) or {}
        thread_id = configurable.get("thread_id")
        namespace = str(configurable.get("checkpoint_ns", ""))
        return cls(call=call, task_id=task_id_for(thread_id, namespace, call.tool_call_id), thread_id=thread_id,
                   namespace=namespace, started_at=time.time(), started_clock=time.monotonic())

    def resolve(self, spec: Any, graph: Any, prepare: Callable[[], ChildInput], record_extra: dict[str, Any]) -> None:
        """The child graph, what makes its isolated input, and the limits it runs under."""
        self.spec, self.graph, self.prepare, self.record_extra = spec, graph, prepare, record_extra
        self.short_answer_threshold = getattr(spec, "short_answer_threshold", None)
        built = not isinstance(spec, CompiledSubagent)
        # create_agent bakes in 9,999 steps, which is no choice at all: a child without a limit of
        # its own below that takes the parent's, but at most MAX_INHERITED_RECURSION_LIMIT.
        inherited = int(self.call.parent_config.get("recursion_limit") or DEFAULT_RECURSION_LIMIT)
        own = spec.recursion_limit if spec.recursion_limit and spec.recursion_limit < LANGCHAIN_DEFAULT_LIMIT else None
        self.max_turns = (spec.max_turns or DEFAULT_MAX_TURNS) if built else None
        # Never below what max_turns needs (a model step and a tool step per turn, plus hooks).
        self.recursion_limit = own or min(inherited, max(MAX_INHERITED_RECURSION_LIMIT, 4 * (self.max_turns or 0)))
        self.timeout_s = spec.timeout_s

    def open_transcript(self, new_sink: Callable[..., Any]) -> None:
        """Open the task's transcript sink; one that cannot open costs the transcript, not the task."""
        has_checkpointer = (self.call.parent_config.get(CONF) or {}).get(CONFIG_KEY_CHECKPOINTER) is not None
        try:
            self.sink = new_sink(task_id=self.task_id, agent_type=self.call.subagent_type, thread_id=self.thread_id,
                                 tool_call_id=self.call.tool_call_id, namespace=self.namespace, store=self.call.store,
                                 has_checkpointer=has_checkpointer)
        except Exception as exc:  # noqa: BLE001 - an unwritable sessions_dir, a store that refuses
            self.sink = self.recorder = None
            self.transcript_failed(exc)

    def transcript_failed(self, exc: BaseException) -> None:
        """The transcript is lost: the record says why (``transcript_error``), the task goes on."""
        reason = describe_failure(exc)[1]
        self.transcript = None
        self.record_extra["transcript_error"] = reason
        self.events.append({"type": "transcript_error", "error": reason})

    def configure(self, spec: Any, *, prices: PriceTable | None, budget: Budget | None,
                  metadata_key: str, wrap_up: WrapUpSetting = True) -> None:
        """The meter (limits, budgets, wrap-up) and the child's run config."""
        built = not isinstance(spec, CompiledSubagent)
        # One handler: the recorder rides inside the meter, which sees each event after it.
        meter = meter_for(self.sink)
        self.recorder = meter.recorder if isinstance(meter, RecordingMeter) else None
        meter.max_turns = self.max_turns
        meter.max_tokens = spec.max_tokens if built else None
        meter.max_usd = spec.max_budget_per_run if built else None
        meter.prices, meter.budget = prices, budget
        own = getattr(spec, "wrap_up", None) if built else False  # a compiled graph's calls are not ours to wrap
        meter.wrap_up = wrap_up if own is None else own
        # The meter sends progress straight to the stream: a live view's line, not a step of the task.
        meter.on_progress = self.call.emit
        meter.progress_about = {"type": "subagent_progress", "task_id": self.task_id,
                                "tool_call_id": self.call.tool_call_id, "agent_type": self.call.subagent_type}
        self.meter = meter
        self.config = {"recursion_limit": self.recursion_limit, "callbacks": [self.meter],
                       "metadata": {metadata_key: self.task_id, "subagent_tool_call_id": self.call.tool_call_id}}
        if getattr(self.graph, "name", None) != self.call.subagent_type:  # a built child is named already
            self.config["run_name"] = self.call.subagent_type

    def begin(self) -> None:
        """The task starts running (after any wait for the concurrency cap)."""
        self.begun = True
        self.begun_clock = time.monotonic()
        if self.timeout_s is not None and self.meter is not None:
            # One timeout_s for the whole task: a task resumed after an approval has what its segments left.
            self.meter.deadline = self.begun_clock + max(0.0, self.timeout_s - self.ran_s)
            self.meter.timeout_s = self.timeout_s
        resumed = {"waiting_ms": round(self.waiting_ms, 3)} if self.waiting_ms else {}
        self.emit("running", namespace=tuple(self.namespace.split("|")) if self.namespace else (), **resumed)

    def own_input(self) -> dict[str, Any]:
        """The child's input with its own copies, made as its task runs (``timeout_s`` counts copying; a task
        whose deadline passed meanwhile never starts its child)."""
        assert self.prepare is not None  # resolved before it runs
        prepared = self.prepare()
        if self.meter is not None:
            self.meter.raise_if_stopped()
        self.inputs, self.given = prepared.inputs, prepared.given
        # Resumed by another agent object: its checkpoint says.
        if not self.carried and self.meter is not None and (spent := self.checkpointed_usage(
                len(prepared.given.get("messages") or ()))):
            self.meter.carry(spent)
        made = {"inherited_tokens": prepared.inherited_tokens, "withheld_keys": prepared.withheld or None}
        # A new dict, not an update: past the deadline the record may be read on another thread meanwhile.
        self.record_extra = {**self.record_extra, **{k: v for k, v in made.items() if v is not None}}
        return prepared.given

    def checkpointed_usage(self, given: int) -> dict[str, Any]:
        """What the earlier segments of a task paused for approval spent, as its child's checkpoint holds it: its
        model calls (the messages after the ``given`` ones), each charged as the meter would, at least the estimate
        it was sent with (its reply's :data:`ESTIMATE_KEY`; without one, the conversation's) where its report is
        far below it."""
        saver = (self.call.parent_config.get(CONF) or {}).get(CONFIG_KEY_CHECKPOINTER)
        key = None if self.thread_id is None else str(self.thread_id)
        saved = None if saver is None else saver.get_tuple({CONF: {"thread_id": key, "checkpoint_ns": self.namespace}})
        if saved is None:  # a first segment: nothing spent yet
            return {}
        spent: dict[str, Any] = {**dict.fromkeys(COUNTS, 0), "cost_usd": 0.0, "priced_as": []}
        prices = self.meter.prices if self.meter is not None else None
        messages = child_messages(saver, saved)
        prompt = estimate_tokens(messages[:given])
        for message in messages[given:]:
            if isinstance(message, AIMessage):
                usage: Mapping[str, Any] = message.usage_metadata or {}
                reported_in, reported_out = (token_count(usage.get(k)) for k in ("input_tokens", "output_tokens"))
                # Never below the conversation's own estimate: a key the meter did not write says no less.
                sent = max(prompt, token_count(message.response_metadata.get(ESTIMATE_KEY)))
                reply = estimate_tokens([message])
                charged_in = reported_in if reported_in >= sent * MIN_TOKEN_SCALE else sent
                charged_out = reported_out if reported_out >= reply * MIN_TOKEN_SCALE else reply
                # As it was charged live; a reply without it (an older checkpoint): its sent model is not known.
                price = call_price(prices, message.response_metadata.get(PRICE_KEY)) or unknown_model_price(prices)
                for name, value in zip(COUNTS, (1, reported_in, reported_out, charged_in, charged_out), strict=True):
                    spent[name] += value
                spent["cost_usd"] += cost_at(price, charged_in, charged_out)
                spent["priced_as"] += [price[0]] if price else []
            prompt += estimate_tokens([message])
        return spent

    def remaining(self) -> float | None:
        deadline = self.meter.deadline if self.meter is not None else None
        return None if deadline is None else max(0.0, deadline - time.monotonic())

    def usage(self) -> dict[str, Any]:
        """What the task spent, read as it ends, pauses or is cancelled: the room it held in a budget is freed."""
        return {} if self.meter is None else self.meter.settled_usage()

    def explain(self, exc: BaseException) -> tuple[StopReason, str]:
        # What ``exc`` stands in for: LangChain's async model call takes a non-``Exception`` error for a result and
        # ends in an ``AttributeError`` whose ``obj`` is it; a ``ChildExit`` holds a ``SystemExit`` or
        # ``GeneratorExit``, LangGraph's ``NodeCancelledError`` a node's ``CancelledError`` (whose text it drops).
        if type(exc) in (ChildExit, NodeCancelledError) and isinstance(exc.__cause__, BaseException):
            exc = exc.__cause__
        elif type(exc) is AttributeError and isinstance(exc.obj, BaseException) and not isinstance(exc.obj, Exception):
            exc = exc.obj
        origin = None
        with contextlib.suppress(BaseException):  # a hostile error's attributes: the failure path must never raise
            if self.meter is not None:
                exc, origin = self.meter.source_of(exc), self.meter.origin_of(exc)
        return describe_failure(exc, self, origin)

    def emit(self, status: str, **extra: Any) -> None:
        event = {"type": "subagent_task", "task_id": self.task_id, "tool_call_id": self.call.tool_call_id,
                 "agent_type": self.call.subagent_type, "status": status, **extra}
        self.events.append(event)
        if self.call.emit is not None:
            with contextlib.suppress(Exception):  # a broken stream consumer must not fail the task
                self.call.emit(event)

    def close_transcript(self, final_messages: Any, *, cancelled: bool = False) -> None:
        """End the sink and keep its reference; a failing sink costs the transcript, not the task."""
        if self.sink is None:
            return
        sink, self.sink = self.sink, None
        try:
            if self.recorder is not None:
                messages = list(final_messages) if final_messages else None
                self.transcript = self.recorder.close(messages, cancelled=cancelled)
            else:
                self.transcript = sink.end([], cancelled=cancelled)
        except Exception as exc:  # noqa: BLE001 - reported in the record instead
            self.transcript_failed(exc)

    def paused(self, signal: GraphBubbleUp) -> None:
        """An interrupt inside the child: name the task and agent on it, then let it rise."""
        about = {"task_id": self.task_id, "agent_type": self.call.subagent_type,
                 "tool_call_id": self.call.tool_call_id}
        for interrupt in (signal.args[0] if signal.args and isinstance(signal.args[0], Sequence) else ()):
            value = getattr(interrupt, "value", None)
            if isinstance(value, dict):
                value.setdefault("subagent", about)
        if self.recorder is not None:
            with contextlib.suppress(Exception):  # the resumed run records again from its start: keep this part too
                self.recorder.sink.end(self.recorder.messages)
            self.sink = None
        # What it spent so far rides along: cut short at the prompt, its record keeps it.
        self.emit("waiting_for_approval", **self.usage())

    def cancelled(self, exc: BaseException) -> None:
        """Real cancellation is on its way out: leave the mark, never raise."""
        try:
            if self.meter is not None:
                self.meter.cancel()
            self.close_transcript(None, cancelled=True)
            # No record follows a cancellation: the event is the only place that names the transcript, and
            # says why, when the cancellation says (``task.cancel("shutting down")``).
            text = safe_text(exc).strip()
            why = {"reason": f"{type_name(exc)}: {text}"} if text else {}
            self.emit("cancelled", transcript=self.transcript, **why, **self.usage())
        except BaseException:  # noqa: BLE001 - the cancellation itself must go on
            pass


@contextlib.contextmanager
def traced_as_subagent(meter: TaskMeter | None = None) -> Iterator[None]:
    """Child runs started inside reach LangSmith as a subagent's: ``ls_agent_type`` rides in the tracing
    context (as in deepagents), not the run config, where every callback and streamed event would see it."""
    current: dict[str, Any] = dict(get_tracing_context())
    with (tracing_context(**{**current, "metadata": {**(current.get("metadata") or {}), "ls_agent_type": "subagent"}}),
          metered_apart(meter)):  # the child's own meter counts its calls: the root run's must not count them again
        yield


ChildStep = dict[str, Any] | Callable[[], dict[str, Any]]  # the child's input, or what makes it (own_input)


def _made(inputs: ChildStep) -> dict[str, Any]:
    return inputs() if callable(inputs) else inputs


def invoke_with_deadline(run: Delegation, inputs: ChildStep) -> Any:
    """Invoke on this thread, or, with a timeout, on a helper thread we can stop waiting for."""
    with traced_as_subagent(run.meter):
        if (remaining := run.remaining()) is None:
            return run.graph.invoke(_made(inputs), run.config)
        context = contextvars.copy_context()
    outcome: dict[str, Any] = {}
    slot = run.slot

    def target() -> None:
        try:
            outcome["value"] = context.run(lambda: run.graph.invoke(_made(inputs), run.config))
        except BaseException as exc:  # noqa: BLE001 - handed back to the caller's thread
            outcome["error"] = exc
        finally:
            slot.release()  # abandoned or not, the child's place is free once its thread is done

    worker = threading.Thread(target=target, name=f"subagent-{run.task_id[:8]}", daemon=True)
    slot.share()
    worker.start()
    worker.join(remaining)
    if worker.is_alive():
        return _expired(run)
    if "error" in outcome:
        raise outcome["error"]
    return outcome["value"]


async def ainvoke_with_deadline(run: Delegation, inputs: ChildStep) -> Any:
    """Run the child as its own task; at the deadline, abandon it. Waited on with ``asyncio.wait``, never
    ``await``-ed: a child's ``GeneratorExit`` thrown into an awaiting coroutine would close the whole chain."""
    # A runner without a cap of its own, in work that holds one (a background task's place), charges that.
    slot: Slot | WorkHolder = (SLOT.get() or NO_CAP) if run.slot is NO_CAP else run.slot
    # The child's task copies this context: it charges its sync tools to this slot and is traced as a subagent.
    keep_child_exits()  # any task the child makes, its own included, fails alone on its code's exit
    with running_in(slot), traced_as_subagent(run.meter):
        child = asyncio.ensure_future(_ainvoke(run, inputs))
    slot.share()
    child.add_done_callback(functools.partial(call_returned, slot))  # abandoned or not: free once it has ended
    try:
        done, _ = await asyncio.wait({child}, timeout=run.remaining())
    except BaseException as exc:  # this task is cancelled: so is the child, and it ends before we do
        child.cancel()
        if not isinstance(exc, GeneratorExit):  # a coroutine being closed may not await again
            with contextlib.suppress(BaseException):  # cancelled again: stop waiting, the first reason stands
                await asyncio.wait({child})
        raise
    if child in done:
        return child.result()
    child.cancel()
    return _expired(run)


_COPIES: concurrent.futures.ThreadPoolExecutor


def _copies_pool() -> None:
    """Where a child's state is copied on ainvoke: its own pool, never behind abandoned children's tools. Made
    again in a forked child, which has none of the pool's threads: the old pool would take work and never run it."""
    global _COPIES
    _COPIES = concurrent.futures.ThreadPoolExecutor(max_workers=4, thread_name_prefix="subagent-copy")


_copies_pool()
os.register_at_fork(after_in_child=_copies_pool)


async def _ainvoke(run: Delegation, inputs: ChildStep) -> Any:
    if callable(inputs) and not run.in_place:  # copying may be slow: on a worker thread (siblings, deadline go on)
        context = contextvars.copy_context()
        inputs = await asyncio.wrap_future(_COPIES.submit(context.run, inputs))
    return await run.graph.ainvoke(_made(inputs), run.config)


def _expired(run: Delegation) -> Any:
    assert run.meter is not None  # a deadline is the meter's (remaining)
    error = run.meter.timeout_error()
    run.meter.stop(error)
    raise error


class TaskRunner:
    """Runs delegations against a registry under one concurrency cap (``max_concurrent``, ``None``: none).

    ``excluded_keys`` and ``private_keys`` never cross the boundary (nor ``messages``, ``structured_response``,
    ``jump_to``, LangChain's private keys); ``settings``: limits, transcripts, prices. ``stop_on_interrupt``:
    Ctrl-C stops its children (background tasks, which outlive the parent's turn, pass ``False``).
    """

    def __init__(self, registry: SubagentRegistry, settings: DelegationSettings | None = None, *,
                 max_concurrent: int | None = None, excluded_keys: frozenset[str] = frozenset(),
                 private_keys: frozenset[str] = frozenset(), stop_on_interrupt: bool = True) -> None:
        if settings is None:
            from subagents._settings import DelegationSettings

            settings = DelegationSettings()
        limits, seen = settings.limits, settings.observability
        self.registry = registry
        self.limit = ConcurrencyLimit(max_concurrent)
        self.budget = budget = limits.budget
        self.prices = run_prices(seen.prices, budget)
        self.short_answer_threshold = limits.short_answer_threshold
        self.wrap_up = limits.wrap_up
        self.new_sink = sink_chooser(seen.sessions_dir, seen.transcript_store)
        self._paused_usage: dict[str, dict[str, Any]] = {}
        self._paused_lock = threading.Lock()
        self.blocked_keys = (CORE_EXCLUDED_KEYS | frozenset(excluded_keys) | frozenset(private_keys)
                             | langchain_private_state_keys())
        self.in_flight: dict[int, Delegation] | None = _IN_FLIGHT if stop_on_interrupt else None

    def run(self, call: TaskCall) -> TaskOutcome:
        prepared = self._prepare(call)
        if isinstance(prepared, TaskOutcome):
            return prepared
        # The runner's share of the task's place; what still works for an abandoned child holds its own.
        with _marked_if_cancelled(prepared, self.in_flight), self.limit.acquire() as prepared.slot:
            return drive(self._plan(prepared, KeyboardInterrupt), lambda step: invoke_with_deadline(prepared, step))

    async def arun(self, call: TaskCall) -> TaskOutcome:
        prepared = self._prepare(call)
        if isinstance(prepared, TaskOutcome):
            return prepared
        with _marked_if_cancelled(prepared, self.in_flight), await self.limit.aacquire() as prepared.slot:
            return await adrive(self._plan(prepared, asyncio.CancelledError),
                                lambda step: ainvoke_with_deadline(prepared, step))

    def _refused_for_budget(self, run: Delegation) -> TaskOutcome | None:
        """A spent budget refuses a delegation: as it is prepared, and again once it has its place."""
        if self.budget is not None and (spent := self.budget.exhausted()):
            return self._refuse(run, f"{spent}; no new delegations can start", "budget")
        return None

    def _child(self, step: ChildStep, cancellation: type[BaseException]) -> Generator[ChildStep, Any, Any]:
        """One run of the child. Its end once Ctrl-C was pressed is real cancellation (the task is ``cancelled``); a
        ``KeyboardInterrupt`` no Ctrl-C raised (:func:`is_ctrl_c`) is the child's failure, as its ``sys.exit`` is."""
        try:
            return (yield step)
        except BaseException as exc:
            if issubclass(type(exc), KeyboardInterrupt) and not is_ctrl_c():
                raise ChildExit(exc) from exc
            if self.in_flight is not None and not is_real_cancellation(exc) and stop_requested():
                raise cancellation()  # noqa: B904 - chained as the child's end, as LangGraph's own are
            raise

    def _plan(self, run: Delegation, cancellation: type[BaseException]) -> Generator[ChildStep, Any, TaskOutcome]:
        if (late := self._refused_for_budget(run)) is not None:  # again, once it has its place
            return late
        # The child starts unless Ctrl-C was pressed: in flight already, so a Ctrl-C after this stops the meter.
        if self.in_flight is not None and stop_requested():
            raise cancellation()
        run.begin()
        try:
            result = yield from self._child(run.own_input, cancellation)
            if run.meter is not None and (stop := run.meter.stopped_by) is not None:
                # The child ended normally after a limit stopped it: a middleware of its own caught the stop.
                messages = result.get("messages") if isinstance(result, Mapping) else None
                return self._fail(run, stop, final_messages=messages)
            own = run.short_answer_threshold  # an agent's own setting wins over the runner's
            wrapped = run.meter.wrapped_up if run.meter is not None else None
            # A wrap-up's answer is the last a limit allows: no request for a longer one follows it.
            read = ChildAnswer.of(result, 0 if wrapped else self.short_answer_threshold if own is None else own)
            if wrapped is not None:
                if not read.answer:  # nothing said (or only tool calls, which never ran): the limit's error
                    return self._fail(run, wrapped, final_messages=result.get("messages"))
                return self._finish(run, result, read.answer, read, cut_short_by=wrapped)
            answer, follow_up = read.answer, read.follow_up
            if follow_up is not None:
                try:
                    second = yield from self._child(follow_up, cancellation)
                    if run.meter is not None and (stop := run.meter.stopped_by) is not None:
                        # A limit stopped the request and a middleware of the child's answered in its place.
                        raise stop
                    # The first run's state is what gets written back; the continuation only gives its text.
                    answer = merge_continuation(answer, final_answer(second), None)
                except ParentCommand:
                    answer = merge_continuation(answer, None, "a tool tried to write to the parent")
                except GraphBubbleUp:
                    raise
                except Exception as exc:  # noqa: BLE001 - keep the first answer
                    answer = merge_continuation(answer, None, run.explain(exc)[1])
            return self._finish(run, result, answer, read)
        except ParentCommand:
            return self._fail(run, ParentWriteRefused(
                "a tool of the subagent returned Command(graph=Command.PARENT); a subagent cannot "
                "write to the parent's state, only its final answer comes back"))
        except GraphInterrupt as signal:
            found = signal.args[0] if signal.args else None  # resumable: it carries at least one Interrupt
            if not (isinstance(found, (list, tuple)) and found and all(isinstance(i, Interrupt) for i in found)):
                return self._fail(run, SubagentError("raised an interrupt that carries nothing to resume"))
            run.paused(signal)
            # What it spent and its work time count again when it resumes.
            carried = {"usage": run.usage(), "started_at": run.started_at, "paused_at": time.time(),
                       "work_ms": run.carried_ms + (time.monotonic() - run.started_clock) * 1000,
                       "waiting_ms": run.waiting_ms,
                       "ran_s": run.ran_s + (time.monotonic() - run.begun_clock if run.begun else 0.0)}
            with self._paused_lock:
                self._paused_usage[run.task_id] = carried
                while len(self._paused_usage) > 1024:
                    self._paused_usage.pop(next(iter(self._paused_usage)))
            raise
        except GraphBubbleUp as signal:
            return self._fail(run, SubagentError(f"raised a LangGraph control signal "
                                                 f"({type(signal).__name__}) that cannot leave a subagent"))
        except Exception as exc:  # noqa: BLE001 - fault isolation is the point
            cut = run.meter.cut_before_wrap_up(exc) if run.meter is not None else None
            if cut is None:
                return self._fail(run, exc)
            stop, said = cut
            # A limit refused a call before the wrap-up (a root middleware's own): the task ends on the last text
            # the child gave, as when other calls took the turns left; its run ended there, so nothing is written.
            return self._finish(run, {}, said, ChildAnswer(said, None, False, 0), cut_short_by=stop)
        except BaseException as exc:
            if is_real_cancellation(exc):
                run.cancelled(exc)
                raise
            # Any other BaseException (a library's own, a stray GeneratorExit) fails this task alone.
            return self._fail(run, exc)

    def _prepare(self, call: TaskCall) -> Delegation | TaskOutcome:
        run = Delegation.start(call)
        if (call.parent_config.get("metadata") or {}).get(TASK_ID_METADATA_KEY):
            return self._refuse(run, "subagents cannot delegate; do the work yourself")
        if (spent := self._refused_for_budget(run)) is not None:
            return spent
        try:
            spec, graph, prepare, extra = set_up_child(self.registry, call, self.blocked_keys)
            run.resolve(spec, call.graph or graph, prepare, extra)
            # A worker thread's hop costs more than an input with no shared key, fork history or checkpoint to read.
            run.in_place = (self.blocked_keys.issuperset(call.parent_state) and "context" not in extra
                            and (call.parent_config.get(CONF) or {}).get(CONFIG_KEY_CHECKPOINTER) is None)
            run.open_transcript(self.new_sink)
            run.configure(spec, prices=self.prices, budget=self.budget, metadata_key=TASK_ID_METADATA_KEY,
                          wrap_up=self.wrap_up)
            if self._paused_usage:  # nothing paused: no lock to take
                with self._paused_lock:
                    kept = self._paused_usage.pop(run.task_id, None)
                if kept:
                    run.carried = True
                    if kept["usage"] and run.meter is not None:
                        run.meter.carry(kept["usage"])
                    # The task began when its first segment did; the pause is waiting, not work.
                    run.waiting_ms = kept["waiting_ms"] + max(0.0, run.started_at - kept["paused_at"]) * 1000
                    run.carried_ms, run.ran_s, run.started_at = kept["work_ms"], kept["ran_s"], kept["started_at"]
        except UnknownSubagent as exc:
            return self._refuse(run, safe_text(exc), "invalid_call")
        except Exception as exc:  # noqa: BLE001 - a bad spec or sink fails this task alone
            return self._refuse(run, safe_text(exc), describe_failure(exc)[0])
        return run

    def _finish(self, run: Delegation, result: Mapping[str, Any], answer: str, read: ChildAnswer,
                cut_short_by: SubagentError | None = None) -> TaskOutcome:
        """A completed task; ``cut_short_by``: the limit whose wrap-up call gave its answer (``partial``)."""
        run.close_transcript(result.get("messages"))
        # A reply cut at the token limit still answers: completed, with the stop reason saying so.
        usage = run.usage()  # read once: the record and the event carry the same figures
        stop_reason = cut_short_by.stop_reason if cut_short_by else "truncated" if read.cut_short else "completed"
        record = self._record(run, stop_reason, answer=answer, usage=usage)
        record.update(truncated_retries=read.truncated_retries, partial=cut_short_by is not None)
        cut = {"stop_reason": stop_reason, "partial": True} if cut_short_by else {}
        run.emit("completed", duration_ms=record["duration_ms"], **cut, **usage)
        changes = changed_keys(result, run.inputs, self.blocked_keys, run.given)
        told = f"{cut_short_note(cut_short_by)}\n\n{answer}" if cut_short_by else answer
        return TaskOutcome(record, answer=told, changes=changes, inputs=run.inputs, events=run.events)

    def _fail(self, run: Delegation, exc: BaseException, *, final_messages: Any = None) -> TaskOutcome:
        stop_reason, reason = run.explain(exc)
        run.close_transcript(final_messages)
        usage = run.usage()
        record = self._record(run, stop_reason, error=reason, usage=usage)
        run.emit("error", error=reason, stop_reason=stop_reason, duration_ms=record["duration_ms"], **usage)
        return TaskOutcome(record, error=reason, events=run.events)

    def _refuse(self, run: Delegation, reason: str, stop_reason: StopReason = "refused") -> TaskOutcome:
        """A delegation that never ran a child: a record (its transcript is empty), an event, an error."""
        run.transcript = NO_TRANSCRIPT
        record = self._record(run, stop_reason, error=reason)
        run.emit("error", error=reason, stop_reason=stop_reason, duration_ms=record["duration_ms"], refused=True)
        return TaskOutcome(record, error=reason, events=run.events)

    @staticmethod
    def _record(run: Delegation, stop_reason: StopReason, *, answer: str | None = None,
                error: str | None = None, usage: dict[str, Any] | None = None) -> dict[str, Any]:
        """The record, as the JSON-ready dict :class:`TaskRecord` describes (built directly: hot path)."""
        duration_ms = run.carried_ms + (time.monotonic() - run.started_clock) * 1000
        usage = (run.usage() if usage is None else usage) or {"model_calls": 0, "input_tokens": 0,
                                                                "output_tokens": 0, "cost_usd": 0.0}
        return {
            "id": run.task_id,
            "agent_type": run.call.subagent_type,
            "tool_call_id": run.call.tool_call_id,
            "status": "error" if error is not None else "completed",
            "stop_reason": stop_reason,
            "description": run.call.description,
            "result": answer,
            "error": error,
            "started_at": run.started_at,
            "finished_at": run.started_at + (duration_ms + run.waiting_ms) / 1000,
            "duration_ms": round(duration_ms, 3),
            "waiting_ms": round(run.waiting_ms, 3),
            **usage,
            "transcript": run.transcript,
            "transcript_error": None,  # a lost transcript's reason comes in record_extra
            "skipped_writes": None,
            "truncated_retries": 0,
            "partial": False,
            **run.record_extra,
        }


@contextlib.contextmanager
def _marked_if_cancelled(run: Delegation, in_flight: dict[int, Delegation] | None) -> Iterator[None]:
    """The delegation is in flight (Ctrl-C can reach it); cancelled before it began, it still gets the mark."""
    if in_flight is not None:
        in_flight[id(run)] = run
    try:
        yield
    except REAL_CANCELLATION as exc:
        if not run.begun:  # once begun, the plan has left the mark already
            run.cancelled(exc)
        raise
    finally:
        if in_flight is not None:
            in_flight.pop(id(run), None)


# -- Ctrl-C: no child starts and every child in flight stops at its next model or tool call, as ``cancelled``.
# One handler sets a process-wide flag, stops every foreground child in flight, then does what the handler
# it wraps did. A delegation is put in flight before it reads the flag: no window where a child starts unseen.
# A program installs it for the whole run (the command line does); a synchronous run on the main thread for
# its own length (:func:`watch_interrupts`), since its children run on threads Python cannot interrupt.

_IN_FLIGHT: dict[int, Delegation] = {}  # foreground delegations running now, in this process
_WATCHING = threading.Event()  # set once watch_interrupts installed its handler, cleared as unwatch looks


def stop_requested() -> bool:
    """Whether Ctrl-C was pressed during the run a handler of ours watches (and still does)."""
    return _STOP.is_set() and isinstance(signal.getsignal(signal.SIGINT), _CtrlC)


def request_stop() -> None:
    """What a Ctrl-C does first: no child starts from now on, and every child in flight stops."""
    _STOP.set()
    # No lock: the handler runs on the main thread, which may be registering a delegation (a copy under
    # the GIL is safe); a delegation is registered before it reads the flag, the flag set before this copy.
    for run in list(_IN_FLIGHT.values()):
        if run.meter is not None:
            run.meter.cancel()


class _CtrlC(CtrlCHandler):
    """The SIGINT handler: :func:`request_stop`, then the handler it replaced."""

    def __init__(self, then: Any) -> None:
        self.then = then

    def __call__(self, signum: int, frame: Any) -> None:
        request_stop()
        then = self.then if callable(self.then) else signal.default_int_handler
        then(signum, frame)


@contextlib.contextmanager
def stop_on_ctrl_c(then: Any = None) -> Iterator[bool]:
    """Within the block, Ctrl-C stops every child first (:func:`request_stop`), then ``then`` (default: the
    handler in place). Main thread only; yields whether it is in place. The flag is cleared as the outermost
    block starts, never as it ends: a program reads it after."""
    installed = False
    if threading.current_thread() is threading.main_thread():
        with contextlib.suppress(ValueError, OSError):  # no signals here (an embedded interpreter, say)
            previous = signal.getsignal(signal.SIGINT)
            if _is_watch(previous):
                # A synchronous run's watch outlives its run when the run stops between the model call that
                # started children and the next one (an approval pause, an error): it stands in for Python's own.
                previous = signal.default_int_handler
            if not isinstance(previous, _CtrlC):
                _STOP.clear()  # a new run: an earlier run's Ctrl-C is not this one's
            signal.signal(signal.SIGINT, _CtrlC(previous if then is None else then))
            installed = True
    try:
        yield installed
    finally:
        if installed:
            with contextlib.suppress(ValueError, OSError, TypeError):
                signal.signal(signal.SIGINT, previous)


def watch_interrupts() -> bool:
    """:func:`stop_on_ctrl_c` over Python's own handler (never a program's) for a synchronous run on the main
    thread, until :func:`unwatch_interrupts` or the first Ctrl-C; returns whether it is in place."""
    if threading.current_thread() is not threading.main_thread():
        return False
    _WATCHING.set()  # unwatch_interrupts looks from now on
    try:
        current = signal.getsignal(signal.SIGINT)
        if isinstance(current, _CtrlC):
            return True
        if current is not signal.default_int_handler:
            return False
        _STOP.clear()
        signal.signal(signal.SIGINT, _CtrlC(_restore_then_interrupt))
    except (ValueError, OSError):
        return False
    return True


def unwatch_interrupts() -> None:
    """Put Python's own SIGINT handler back, if :func:`watch_interrupts` installed the one in place."""
    # Every model call that starts no child comes here: without a watch installed since, it asks nothing of
    # the signal module, whose getsignal formats an error message for any handler that is a function.
    if not _WATCHING.is_set() or threading.current_thread() is not threading.main_thread():
        return
    _WATCHING.clear()
    with contextlib.suppress(ValueError, OSError):
        if _is_watch(signal.getsignal(signal.SIGINT)):
            signal.signal(signal.SIGINT, signal.default_int_handler)


def _is_watch(handler: Any) -> bool:
    return isinstance(handler, _CtrlC) and handler.then is _restore_then_interrupt


def _restore_then_interrupt(signum: int, frame: Any) -> None:
    with contextlib.suppress(ValueError, OSError):  # the run ends with this interrupt: nothing to wrap after it
        signal.signal(signal.SIGINT, signal.default_int_handler)
    signal.default_int_handler(signum, frame)

