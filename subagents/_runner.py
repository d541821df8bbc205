"""Running one delegation: resolve, isolate, invoke under limits, return an outcome.

The steps are written once, as a plan (:meth:`TaskRunner._plan`) that yields
each child input and receives each result; :meth:`TaskRunner.run` and
:meth:`TaskRunner.arun` only drive it, with ``invoke`` or ``ainvoke``.
Whatever the child raises becomes a failed :class:`~subagents.TaskOutcome`
with a typed ``stop_reason``; only interrupts (human approval) pass through,
so a paused child resumes natively when the parent resumes. A child's
``Command(graph=Command.PARENT)`` never reaches the parent: it fails the task.
Real cancellation (``asyncio.CancelledError``, ``KeyboardInterrupt``,
``SystemExit``) propagates, leaving a ``cancelled`` mark in the transcript.

The runner knows nothing of the parent's state schema, ledger or tool names:
the caller turns the outcome into its own state update.

Example::

    runner = TaskRunner(SubagentRegistry(specs), max_concurrent=4)
    outcome = runner.run(TaskCall("researcher", "Find X", state, "call_1", config, model))
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Generator, Iterator, Mapping
from typing import TYPE_CHECKING, Any

from langgraph.errors import GraphBubbleUp, GraphInterrupt, ParentCommand
from langgraph.types import Interrupt

from subagents._budget import check_prices
from subagents._call_setup import set_up_child
from subagents._delegation import Delegation, ainvoke_with_deadline, invoke_with_deadline
from subagents._errors import (
    REAL_CANCELLATION,
    DelegationRefused,
    ParentWriteRefused,
    StopReason,
    SubagentError,
    is_real_cancellation,
    safe_text,
)
from subagents._failures import describe_failure
from subagents._isolation import CORE_EXCLUDED_KEYS, changed_keys, langchain_private_state_keys
from subagents._limiter import ConcurrencyLimit
from subagents._outcome import (
    TaskCall,
    TaskOutcome,
    continuation_input,
    final_answer,
    merge_continuation,
)
from subagents._registry import SubagentRegistry, UnknownSubagent
from subagents._transcript import NO_TRANSCRIPT, sink_chooser

if TYPE_CHECKING:  # settings build on the background runtime, which builds on this runner
    from subagents.settings import DelegationSettings

TASK_ID_METADATA_KEY = "subagent_task_id"
"""Set in the metadata of every child run; its presence means "inside a child"."""


class TaskRunner:
    """Runs delegations against a registry under one concurrency cap.

    Args:
        registry: the subagents.
        max_concurrent: how many children may run at once (``None``: no cap).
        excluded_keys: keys that never cross the boundary (the caller's
            ledgers, todos, ...); ``messages``, ``structured_response`` and
            ``jump_to`` always are.
        private_keys: the parent's private keys (see
            :func:`subagents.private_state_keys`); LangChain's own
            middleware's are always blocked.
        settings: the runner reads ``settings.limits`` (``budget``,
            ``short_answer_threshold``) and ``settings.observability``
            (transcripts, prices); see :mod:`subagents.settings`.
    """

    def __init__(
        self,
        registry: SubagentRegistry,
        settings: DelegationSettings | None = None,
        *,
        max_concurrent: int | None = None,
        excluded_keys: frozenset[str] = frozenset(),
        private_keys: frozenset[str] = frozenset(),
    ) -> None:
        if settings is None:
            from subagents.settings import DelegationSettings

            settings = DelegationSettings()
        limits, seen = settings.limits, settings.observability
        budget = limits.budget
        self.registry = registry
        self.limit = ConcurrencyLimit(max_concurrent)
        self.prices = check_prices(seen.prices) if seen.prices is not None else (budget.prices if budget else None)
        self.budget = budget
        self.short_answer_threshold = limits.short_answer_threshold
        self.new_sink = sink_chooser(seen.sessions_dir, seen.transcript_store)
        self._paused_usage: dict[str, dict[str, Any]] = {}
        self._paused_lock = threading.Lock()
        self.blocked_keys = (
            CORE_EXCLUDED_KEYS | frozenset(excluded_keys) | frozenset(private_keys)
            | langchain_private_state_keys()
        )

    # -- the two drivers --------------------------------------------------

    def run(self, call: TaskCall) -> TaskOutcome:
        prepared = self._prepare(call)
        if isinstance(prepared, TaskOutcome):
            return prepared
        with _marked_if_cancelled(prepared), self.limit.hold():
            prepared.begin()
            plan = self._plan(prepared)
            step = next(plan)
            while not isinstance(step, TaskOutcome):
                try:
                    value = invoke_with_deadline(prepared, step)
                except BaseException as exc:  # noqa: BLE001 - the plan decides
                    step = _throw(plan, exc)
                else:
                    step = _send(plan, value)
            return step

    async def arun(self, call: TaskCall) -> TaskOutcome:
        prepared = self._prepare(call)
        if isinstance(prepared, TaskOutcome):
            return prepared
        with _marked_if_cancelled(prepared):
            async with self.limit.ahold():
                prepared.begin()
                plan = self._plan(prepared)
                step = next(plan)
                while not isinstance(step, TaskOutcome):
                    try:
                        value = await ainvoke_with_deadline(prepared, step)
                    except BaseException as exc:  # noqa: BLE001 - the plan decides
                        step = _throw(plan, exc)
                    else:
                        step = _send(plan, value)
                return step

    # -- the plan, written once ---------------------------------------------

    def _plan(self, run: Delegation) -> Generator[dict[str, Any], Any, TaskOutcome]:
        try:
            result = yield run.inputs
            answer = final_answer(result)
            own = run.short_answer_threshold  # an agent's own setting wins over the runner's
            threshold = self.short_answer_threshold if own is None else own
            follow_up = continuation_input(result, answer, threshold)
            if follow_up is not None:
                try:
                    second = yield follow_up
                    # The first run's state is what gets written back; the
                    # continuation only contributes its text.
                    answer = merge_continuation(answer, final_answer(second), None)
                except ParentCommand:
                    answer = merge_continuation(answer, None, "a tool tried to write to the parent")
                except GraphBubbleUp:
                    raise
                except Exception as exc:  # noqa: BLE001 - keep the first answer
                    answer = merge_continuation(answer, None, run.explain(exc)[1])
            return self._finish(run, result, answer)
        except ParentCommand:
            return self._fail(run, ParentWriteRefused(
                "a tool of the subagent returned Command(graph=Command.PARENT); a subagent cannot "
                "write to the parent's state, only its final answer comes back"))
        except GraphInterrupt as signal:
            if not _is_approval(signal):
                return self._fail(run, SubagentError("raised an interrupt that carries nothing to resume"))
            run.paused(signal)
            self._carry_usage(run)
            raise
        except GraphBubbleUp as signal:
            return self._fail(run, SubagentError(f"raised a LangGraph control signal "
                                                 f"({type(signal).__name__}) that cannot leave a subagent"))
        except Exception as exc:  # noqa: BLE001 - fault isolation is the point
            return self._fail(run, exc)
        except BaseException as exc:
            if is_real_cancellation(exc):
                run.cancelled()
                raise
            # Any other BaseException (a library's own, a stray GeneratorExit) fails this task alone.
            return self._fail(run, exc)

    def _prepare(self, call: TaskCall) -> Delegation | TaskOutcome:
        """Resolve the spec and graph, isolate the input, choose the sink, set the limits."""
        run = Delegation.start(call)
        if (call.parent_config.get("metadata") or {}).get(TASK_ID_METADATA_KEY):
            return self._refuse(run, "subagents cannot delegate; do the work yourself")
        if self.budget is not None and (spent := self.budget.exhausted()):
            return self._refuse(run, f"{spent}; no new delegations can start", "budget")
        try:
            # Which spec, graph and input (delegation modes included): subagents/_call_setup.py.
            setup = set_up_child(self.registry, call, self.blocked_keys)
            run.resolve(setup.spec, call.graph or setup.graph, setup.inputs, setup.record_extra)
            run.open_transcript(self.new_sink)
            run.configure(setup.spec, prices=self.prices, budget=self.budget, metadata_key=TASK_ID_METADATA_KEY)
            self._resume_usage(run)
        except UnknownSubagent as exc:
            return self._refuse(run, safe_text(exc), "invalid_call")
        except Exception as exc:  # noqa: BLE001 - a bad spec or sink fails this task alone
            return self._refuse(run, safe_text(exc), describe_failure(exc)[0])
        return run

    def _carry_usage(self, run: Delegation) -> None:
        """A task paused for approval: what it spent so far counts again when it resumes."""
        with self._paused_lock:
            self._paused_usage[run.task_id] = run.usage()
            while len(self._paused_usage) > 1024:
                self._paused_usage.pop(next(iter(self._paused_usage)))

    def _resume_usage(self, run: Delegation) -> None:
        if not self._paused_usage:  # nothing paused: no lock to take
            return
        with self._paused_lock:
            spent = self._paused_usage.pop(run.task_id, None)
        if spent and run.meter is not None:
            run.meter.carry(spent)

    def _finish(self, run: Delegation, result: Mapping[str, Any], answer: str) -> TaskOutcome:
        run.close_transcript(result.get("messages"))
        record = self._record(run, "completed", answer=answer)
        run.emit("completed", duration_ms=record["duration_ms"], **run.usage())
        return TaskOutcome(record, answer=answer, changes=changed_keys(result, run.inputs, self.blocked_keys),
                           inputs=run.inputs, events=run.events)

    def _fail(self, run: Delegation, exc: BaseException) -> TaskOutcome:
        stop_reason, reason = run.explain(exc)
        run.close_transcript(None)
        record = self._record(run, stop_reason, error=reason)
        run.emit("error", error=reason, stop_reason=stop_reason, duration_ms=record["duration_ms"], **run.usage())
        return TaskOutcome(record, error=reason, events=run.events)

    def _refuse(self, run: Delegation, reason: str, stop_reason: StopReason = "refused") -> TaskOutcome:
        """A delegation that never ran a child: a record (its transcript is empty), an event, an error."""
        error = DelegationRefused(reason, stop_reason=stop_reason)
        run.transcript = NO_TRANSCRIPT
        record = self._record(run, error.stop_reason, error=reason)
        run.emit("error", error=reason, stop_reason=error.stop_reason, duration_ms=record["duration_ms"],
                 refused=True)
        return TaskOutcome(record, error=reason, events=run.events)

    @staticmethod
    def _record(run: Delegation, stop_reason: StopReason, *, answer: str | None = None,
                error: str | None = None) -> dict[str, Any]:
        """The record, as the JSON-ready dict :class:`TaskRecord` describes (built directly: hot path)."""
        duration_ms = (time.monotonic() - run.started_clock) * 1000
        usage = run.usage() or {"model_calls": 0, "input_tokens": 0, "output_tokens": 0, "cost_usd": 0.0}
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
            "finished_at": run.started_at + duration_ms / 1000,
            "duration_ms": round(duration_ms, 3),
            **usage,
            "transcript": run.transcript,
            "skipped_writes": None,
            **run.record_extra,
        }


@contextlib.contextmanager
def _marked_if_cancelled(run: Delegation) -> Iterator[None]:
    """Cancelled before the concurrency cap let the child start: its transcript still gets the mark."""
    try:
        yield
    except REAL_CANCELLATION:
        if not run.begun:  # once begun, the plan has left the mark already
            run.cancelled()
        raise


def _is_approval(signal: GraphInterrupt) -> bool:
    """An interrupt that can be resumed: it carries at least one ``Interrupt``."""
    found = signal.args[0] if signal.args else None
    return isinstance(found, (list, tuple)) and bool(found) and all(isinstance(i, Interrupt) for i in found)


def _send(plan: Generator[Any, Any, TaskOutcome], value: Any) -> Any:
    try:
        return plan.send(value)
    except StopIteration as stop:
        return stop.value


def _throw(plan: Generator[Any, Any, TaskOutcome], exc: BaseException) -> Any:
    try:
        return plan.throw(exc)
    except StopIteration as stop:
        return stop.value

