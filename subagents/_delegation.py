"""One delegation in flight: its ids, input, sink, limits and events, step by step.

:class:`Delegation` is the runner's working state for one task. Its steps
are named for what they do -- :meth:`~Delegation.resolve`,
:meth:`~Delegation.open_transcript`, :meth:`~Delegation.configure`,
:meth:`~Delegation.begin` -- and the two deadline helpers invoke the child
so that the task's ``timeout_s`` holds on both paths: on ``invoke`` the child
runs on a helper thread we stop waiting for; on ``ainvoke`` the child task
is abandoned (and cancelled) at the deadline even when the executor its
tools need is saturated. Either way the meter then stops the abandoned child
at its next model or tool call.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import dataclasses
import threading
import time
from collections.abc import Callable, Sequence
from typing import Any

from langgraph.constants import CONF, CONFIG_KEY_CHECKPOINTER
from langgraph.errors import GraphBubbleUp

from subagents._budget import Budget, PriceTable
from subagents._errors import StopReason, TaskTimeout
from subagents._failures import Limits, describe_failure
from subagents._meter import TaskMeter
from subagents._outcome import TaskCall, task_id_for
from subagents._recorder import TranscriptRecorder
from subagents._recording_meter import RecordingMeter
from subagents._spec import DEFAULT_MAX_TURNS, CompiledSubagent

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
    inputs: dict[str, Any] = dataclasses.field(default_factory=dict)
    config: dict[str, Any] = dataclasses.field(default_factory=dict)
    meter: TaskMeter | None = None
    recorder: TranscriptRecorder | None = None
    sink: Any = None
    transcript: str | None = None
    limits: Limits = Limits()
    record_extra: dict[str, Any] = dataclasses.field(default_factory=dict)
    events: list[dict[str, Any]] = dataclasses.field(default_factory=list)
    short_answer_threshold: int | None = None
    """The spec's own short-answer threshold (``None``: the runner's applies)."""
    begun: bool = False
    """Past the concurrency cap: the child has been (or is being) run."""

    @classmethod
    def start(cls, call: TaskCall) -> Delegation:
        configurable = call.parent_config.get(CONF) or {}
        thread_id = configurable.get("thread_id")
        namespace = str(configurable.get("checkpoint_ns", ""))
        return cls(call=call, task_id=task_id_for(thread_id, namespace, call.tool_call_id),
                   thread_id=thread_id, namespace=namespace,
                   started_at=time.time(), started_clock=time.monotonic())

    # -- the steps, in order ------------------------------------------------

    def resolve(self, spec: Any, graph: Any, inputs: dict[str, Any], record_extra: dict[str, Any]) -> None:
        """The child graph, its isolated input, and the limits it runs under."""
        self.graph = graph
        self.inputs = inputs
        self.record_extra = record_extra
        self.short_answer_threshold = getattr(spec, "short_answer_threshold", None)
        built = not isinstance(spec, CompiledSubagent)
        # create_agent bakes in 9,999 steps, which is no choice at all: a child without a limit of
        # its own below that takes the parent's, but at most MAX_INHERITED_RECURSION_LIMIT.
        inherited = int(self.call.parent_config.get("recursion_limit") or DEFAULT_RECURSION_LIMIT)
        own = spec.recursion_limit if spec.recursion_limit and spec.recursion_limit < LANGCHAIN_DEFAULT_LIMIT else None
        max_turns = (spec.max_turns or DEFAULT_MAX_TURNS) if built else None
        # Never below what max_turns needs (a model step and a tool step per turn, plus hooks).
        cap = max(MAX_INHERITED_RECURSION_LIMIT, 4 * (max_turns or 0))
        recursion = own or min(inherited, cap)
        self.limits = Limits(max_turns=max_turns, recursion_limit=recursion, timeout_s=spec.timeout_s)

    def open_transcript(self, new_sink: Callable[..., Any]) -> None:
        has_checkpointer = (self.call.parent_config.get(CONF) or {}).get(CONFIG_KEY_CHECKPOINTER) is not None
        self.sink = new_sink(task_id=self.task_id, agent_type=self.call.subagent_type,
                             thread_id=self.thread_id, tool_call_id=self.call.tool_call_id,
                             namespace=self.namespace, store=self.call.store,
                             has_checkpointer=has_checkpointer)
        self.recorder = TranscriptRecorder(self.sink) if self.sink.records else None

    def configure(self, spec: Any, *, prices: PriceTable | None, budget: Budget | None,
                  metadata_key: str) -> None:
        """The meter (limits, budgets) and the child's run config."""
        built = not isinstance(spec, CompiledSubagent)
        # One handler: the recorder rides inside the meter, which sees each event after it.
        meter = TaskMeter() if self.recorder is None else RecordingMeter(self.recorder)
        meter.max_turns = self.limits.max_turns
        meter.max_tokens = spec.max_tokens if built else None
        meter.max_usd = spec.max_budget_per_run if built else None
        meter.prices, meter.budget = prices, budget
        self.meter = meter
        self.config = {
            "recursion_limit": self.limits.recursion_limit,
            "callbacks": [self.meter],
            "metadata": {
                "ls_agent_type": "subagent",
                metadata_key: self.task_id,
                "subagent_tool_call_id": self.call.tool_call_id,
            },
        }
        if getattr(self.graph, "name", None) != self.call.subagent_type:  # a built child is named already
            self.config["run_name"] = self.call.subagent_type

    def begin(self) -> None:
        """The task starts running (after any wait for the concurrency cap)."""
        self.begun = True
        if self.limits.timeout_s is not None and self.meter is not None:
            self.meter.deadline = time.monotonic() + self.limits.timeout_s
        self.emit("running", namespace=tuple(self.namespace.split("|")) if self.namespace else ())

    # -- during and after -----------------------------------------------------

    def remaining(self) -> float | None:
        deadline = self.meter.deadline if self.meter is not None else None
        return None if deadline is None else max(0.0, deadline - time.monotonic())

    def usage(self) -> dict[str, Any]:
        if self.meter is None:
            return {}
        return self.meter.usage()

    def explain(self, exc: BaseException) -> tuple[StopReason, str]:
        if self.meter is None:
            return describe_failure(exc, limits=self.limits)
        try:
            exc, origin = self.meter.source_of(exc), self.meter.origin_of(exc)
        except BaseException:  # noqa: BLE001 - a hostile error's attributes: the failure path must never raise
            origin = None
        return describe_failure(exc, limits=self.limits, origin=origin)

    def emit(self, status: str, **extra: Any) -> None:
        event = {"type": "subagent_task", "task_id": self.task_id, "tool_call_id": self.call.tool_call_id,
                 "agent_type": self.call.subagent_type, "status": status, **extra}
        self.events.append(event)
        if self.call.emit is None:
            return
        try:
            self.call.emit(event)
        except Exception:  # noqa: BLE001 - a broken stream consumer must not fail the task
            pass

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
            self.transcript = None
            self.events.append({"type": "transcript_error", "error": describe_failure(exc)[1]})

    def paused(self, signal: GraphBubbleUp) -> None:
        """An interrupt inside the child: name the task and agent on it, then let it rise."""
        about = {"task_id": self.task_id, "agent_type": self.call.subagent_type,
                 "tool_call_id": self.call.tool_call_id}
        for interrupt in (signal.args[0] if signal.args and isinstance(signal.args[0], Sequence) else ()):
            value = getattr(interrupt, "value", None)
            if isinstance(value, dict):
                value.setdefault("subagent", about)
        if self.recorder is not None:
            # The resumed run records again from its start; keep this part too.
            try:
                self.recorder.sink.end(self.recorder.messages)
            except Exception:  # noqa: BLE001
                pass
            self.sink = None
        self.emit("waiting_for_approval")

    def cancelled(self) -> None:
        """Real cancellation is on its way out: leave the mark, never raise."""
        try:
            if self.meter is not None:
                self.meter.cancel()
            self.close_transcript(None, cancelled=True)
            self.emit("cancelled")
        except BaseException:  # noqa: BLE001 - the cancellation itself must go on
            pass


def invoke_with_deadline(run: Delegation, inputs: dict[str, Any]) -> Any:
    """Invoke on this thread, or, with a timeout, on a helper thread we can stop waiting for.

    A thread cannot be killed; once the timeout passes we return and the
    meter stops the abandoned child at its next model or tool call.
    """
    remaining = run.remaining()
    if remaining is None:
        return run.graph.invoke(inputs, run.config)
    outcome: dict[str, Any] = {}
    context = contextvars.copy_context()

    def target() -> None:
        try:
            outcome["value"] = context.run(run.graph.invoke, inputs, run.config)
        except BaseException as exc:  # noqa: BLE001 - handed back to the caller's thread
            outcome["error"] = exc

    worker = threading.Thread(target=target, name=f"subagent-{run.task_id[:8]}", daemon=True)
    worker.start()
    worker.join(remaining)
    if worker.is_alive():
        return _expired(run)
    if "error" in outcome:
        raise outcome["error"]
    return outcome["value"]


async def ainvoke_with_deadline(run: Delegation, inputs: dict[str, Any]) -> Any:
    """Run the child as its own task; at the deadline, abandon it (cancelled, never awaited again).

    Its own task, waited on with ``asyncio.wait``, never ``await``-ed: asyncio
    resumes a coroutine that awaits a failed task by *throwing* the error into
    it, and a ``GeneratorExit`` thrown into a coroutine closes the whole chain
    of awaits above it, the parent's included. Read with ``result()``, a
    child's ``GeneratorExit`` is one more exception this task can fail with.
    """
    child = asyncio.ensure_future(run.graph.ainvoke(inputs, run.config))
    try:
        done, _ = await asyncio.wait({child}, timeout=run.remaining())
    except BaseException as exc:  # this task is cancelled: so is the child, and it ends before we do
        child.cancel()
        child.add_done_callback(_discard)
        if not isinstance(exc, GeneratorExit):  # a coroutine being closed may not await again
            with contextlib.suppress(BaseException):  # cancelled again: stop waiting, the first reason stands
                await asyncio.wait({child})
        raise
    if child in done:
        return child.result()
    child.cancel()
    child.add_done_callback(_discard)
    return _expired(run)


def _expired(run: Delegation) -> Any:
    error = TaskTimeout("timed out")
    if run.meter is not None:
        run.meter.stop(error)
    raise error


def _discard(task: asyncio.Future[Any]) -> None:
    if not task.cancelled():
        task.exception()
