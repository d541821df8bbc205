"""Running one delegation: isolate, invoke under limits, record, write back.

The steps of a delegation are written once, as a plan (:meth:`TaskRunner._plan`)
that yields each child input and receives each result; :meth:`TaskRunner.run`
and :meth:`TaskRunner.arun` only drive it, with ``invoke`` or ``ainvoke``.
Whatever the child raises becomes an error ``ToolMessage`` whose content
begins ``Subagent '<name>' failed:``; only LangGraph's control-flow signals
(interrupts for human approval, ``Command`` hand-offs) pass through, so a
paused child resumes natively when the parent resumes.
"""

from __future__ import annotations

import asyncio
import contextvars
import dataclasses
import threading
import time
from collections.abc import Generator, Mapping, Sequence
from pathlib import Path
from typing import Any

from langgraph.errors import GraphBubbleUp
from langgraph.types import Command

from subagents.budget import Budget, PriceTable
from subagents.call_setup import set_up_child
from subagents.continuation import (
    DEFAULT_SHORT_ANSWER_THRESHOLD,
    continuation_input,
    merge_continuation,
)
from subagents.isolation import EXCLUDED_KEYS, LEDGER_KEY, changed_keys, known_private_state_keys
from subagents.limiter import ConcurrencyLimit
from subagents.meter import TaskMeter
from subagents.outcome import describe_failure, final_answer, tool_message
from subagents.record import USAGE_KEY, TaskRecord, task_id_for
from subagents.registry import SubagentRegistry
from subagents.spec import DEFAULT_MAX_TURNS, CompiledSubagent
from subagents.task_call import TaskCall
from subagents.transcript import TranscriptRecorder, header_for, jsonl_path, remember, store_transcript

TASK_ID_METADATA_KEY = "subagent_task_id"
"""Set in the metadata of every child run; its presence means "inside a child"."""

DEFAULT_RECURSION_LIMIT = 25
_CHECKPOINTER_KEY = "__pregel_checkpointer"

@dataclasses.dataclass
class _Run:
    call: TaskCall
    task_id: str
    thread_id: str | None
    graph: Any
    inputs: dict[str, Any]
    config: dict[str, Any]
    meter: TaskMeter
    recorder: TranscriptRecorder | None
    transcript: str
    timeout_s: float | None
    max_turns: int | None
    recursion_limit: int
    started_at: float
    started_clock: float
    record_extra: dict[str, Any] = dataclasses.field(default_factory=dict)

    def remaining(self) -> float | None:
        return None if self.meter.deadline is None else max(0.0, self.meter.deadline - time.monotonic())


class TaskRunner:
    """Runs delegations against a registry under one concurrency cap.

    Args:
        registry: the subagents.
        max_concurrent: how many children may run at once (``None``: no cap).
        private_keys: more keys that never cross the boundary.
        sessions_dir: write JSONL transcripts under this folder.
        transcript_store: ``True`` to keep transcripts in the parent's
            ``BaseStore``, or a store to use.
        prices: model name -> USD per million (input, output) tokens.
        budget: a :class:`subagents.Budget` shared by the whole tree.
        short_answer_threshold: answers shorter than this get one
            continuation request (0: off).

    Example::

        runner = TaskRunner(SubagentRegistry(specs), max_concurrent=4)
        command = runner.run(TaskCall("researcher", "Find X", state, "call_1", config, model))
    """

    def __init__(
        self,
        registry: SubagentRegistry,
        *,
        max_concurrent: int | None = None,
        private_keys: frozenset[str] = frozenset(),
        sessions_dir: str | Path | None = None,
        transcript_store: Any = None,
        prices: PriceTable | None = None,
        budget: Budget | None = None,
        short_answer_threshold: int = DEFAULT_SHORT_ANSWER_THRESHOLD,
    ) -> None:
        if short_answer_threshold < 0:
            raise ValueError(f"short_answer_threshold must be >= 0 (got {short_answer_threshold})")
        self.registry = registry
        self.limit = ConcurrencyLimit(max_concurrent)
        self.sessions_dir = sessions_dir
        self.transcript_store = transcript_store
        self.prices = prices if prices is not None else (budget.prices if budget else None)
        self.budget = budget
        self.short_answer_threshold = short_answer_threshold
        self._private_keys = private_keys
        self._blocked_keys: frozenset[str] | None = None

    @property
    def blocked_keys(self) -> frozenset[str]:
        """Keys that never cross the boundary (computed once, at first use)."""
        if self._blocked_keys is None:
            self._blocked_keys = EXCLUDED_KEYS | self._private_keys | known_private_state_keys()
        return self._blocked_keys

    # -- the two drivers --------------------------------------------------

    def run(self, call: TaskCall) -> Command:
        prepared = self._prepare(call)
        if isinstance(prepared, Command):
            return prepared
        with self.limit.hold():
            self._begin(prepared)
            plan = self._plan(prepared)
            step = next(plan)
            while not isinstance(step, Command):
                try:
                    value = _invoke_with_timeout(prepared, step)
                except BaseException as exc:  # noqa: BLE001 - the plan decides
                    step = _throw(plan, exc)
                else:
                    step = _send(plan, value)
            return step

    async def arun(self, call: TaskCall) -> Command:
        prepared = self._prepare(call)
        if isinstance(prepared, Command):
            return prepared
        async with self.limit.ahold():
            self._begin(prepared)
            plan = self._plan(prepared)
            step = next(plan)
            while not isinstance(step, Command):
                try:
                    value = await asyncio.wait_for(
                        prepared.graph.ainvoke(step, prepared.config), prepared.remaining()
                    )
                except BaseException as exc:  # noqa: BLE001 - the plan decides
                    step = _throw(plan, exc)
                else:
                    step = _send(plan, value)
            return step

    # -- the plan, written once ---------------------------------------------

    def _plan(self, run: _Run) -> Generator[dict[str, Any], Any, Command]:
        try:
            result = yield run.inputs
            answer = final_answer(result)
            follow_up = continuation_input(result, answer, self.short_answer_threshold)
            if follow_up is not None:
                try:
                    second = yield follow_up
                    # The first run's state is what gets written back; the
                    # continuation only contributes its text.
                    answer = merge_continuation(answer, final_answer(second), None)
                except GraphBubbleUp:
                    raise
                except Exception as exc:  # noqa: BLE001 - keep the first answer
                    answer = merge_continuation(answer, None, self._reason(run, exc))
            return self._finish(run, result, answer)
        except GraphBubbleUp as signal:
            self._paused(run, signal)
            raise
        except Exception as exc:  # noqa: BLE001 - fault isolation is the point
            return self._fail(run, exc)

    def _prepare(self, call: TaskCall) -> _Run | Command:
        config = call.parent_config
        configurable = config.get("configurable") or {}
        thread_id = configurable.get("thread_id")
        namespace = configurable.get("checkpoint_ns", "")
        task_id = task_id_for(thread_id, namespace, call.tool_call_id)
        started_at, clock = time.time(), time.monotonic()

        def refuse(reason: str) -> Command:
            return self._command(call, self._record(call, task_id, started_at, clock, error=reason))

        if (config.get("metadata") or {}).get(TASK_ID_METADATA_KEY):
            return refuse("subagents cannot delegate; do the work yourself")
        if self.budget is not None and (spent := self.budget.exhausted()):
            return refuse(f"{spent}; no new delegations can start")
        try:
            # Delegation modes (dynamic subagents, per-call schemas, forks): subagents/call_setup.py.
            setup = set_up_child(self.registry, call, self.blocked_keys)
            spec, graph = setup.spec, setup.graph
            path = jsonl_path(self.sessions_dir, thread_id, task_id) if self.sessions_dir else None
            has_checkpointer = configurable.get(_CHECKPOINTER_KEY) is not None
            recorder = None
            if path is not None or self.transcript_store is not None or not has_checkpointer:
                # The header (it reads the working directory) only when a sink writes it.
                header = (
                    header_for(task_id, call.subagent_type, thread_id, call.tool_call_id)
                    if path is not None or self.transcript_store is not None
                    else {"id": task_id}
                )
                recorder = TranscriptRecorder(header, path)
        except Exception as exc:  # noqa: BLE001 - a bad spec or sink fails this task alone
            return refuse(str(exc))
        if path is not None:
            transcript = f"jsonl:{path}"
        elif self.transcript_store is not None:
            transcript = "store:pending"
        elif has_checkpointer:
            transcript = f"checkpoint:{namespace}"
        else:
            transcript = f"memory:{task_id}"

        built = not isinstance(spec, CompiledSubagent)
        max_turns = (spec.max_turns or DEFAULT_MAX_TURNS) if built else None
        meter = TaskMeter(
            max_turns=max_turns,
            max_tokens=spec.max_tokens if built else None,
            max_usd=spec.max_budget_per_run if built else None,
            prices=self.prices,
            budget=self.budget,
        )
        recursion_limit = spec.recursion_limit or int(config.get("recursion_limit") or DEFAULT_RECURSION_LIMIT)
        run_config: dict[str, Any] = {
            "recursion_limit": recursion_limit,
            # The meter goes last: when it stops a child, every other handler has had the event.
            "callbacks": [meter] if recorder is None else [recorder, meter],
            "run_name": call.subagent_type,
            "metadata": {
                "ls_agent_type": "subagent",
                TASK_ID_METADATA_KEY: task_id,
                "subagent_tool_call_id": call.tool_call_id,
                "subagent_type": call.subagent_type,
            },
        }
        return _Run(
            call=call,
            task_id=task_id,
            thread_id=thread_id,
            graph=graph,
            inputs=setup.inputs,
            config=run_config,
            meter=meter,
            recorder=recorder,
            transcript=transcript,
            timeout_s=spec.timeout_s,
            max_turns=max_turns,
            recursion_limit=recursion_limit,
            started_at=started_at,
            started_clock=clock,
            record_extra=setup.record_extra,
        )

    def _begin(self, run: _Run) -> None:
        """The task starts running (after any wait for the concurrency cap)."""
        if run.timeout_s is not None:
            run.meter.deadline = time.monotonic() + run.timeout_s
        namespace = (run.call.parent_config.get("configurable") or {}).get("checkpoint_ns", "")
        self._emit(run, "running", namespace=tuple(namespace.split("|")) if namespace else ())

    def _finish(self, run: _Run, result: Mapping[str, Any], answer: str) -> Command:
        self._keep_transcript(run, result.get("messages"))
        record = self._record(run.call, run.task_id, run.started_at, run.started_clock,
                              answer=answer, run=run)
        self._emit(run, "completed", duration_ms=record["duration_ms"], **run.meter.usage())
        return self._command(run.call, record, changed_keys(result, run.inputs, self.blocked_keys))

    def _fail(self, run: _Run, exc: BaseException) -> Command:
        self._keep_transcript(run, None)
        reason = self._reason(run, exc)
        record = self._record(run.call, run.task_id, run.started_at, run.started_clock,
                              error=reason, run=run)
        self._emit(run, "error", error=reason, duration_ms=record["duration_ms"], **run.meter.usage())
        return self._command(run.call, record)

    def _paused(self, run: _Run, signal: GraphBubbleUp) -> None:
        """An interrupt inside the child: name the task and agent on it, then let it rise."""
        about = {"task_id": run.task_id, "agent_type": run.call.subagent_type,
                 "tool_call_id": run.call.tool_call_id}
        for interrupt in (signal.args[0] if signal.args and isinstance(signal.args[0], Sequence) else ()):
            value = getattr(interrupt, "value", None)
            if isinstance(value, dict):
                value.setdefault("subagent", about)
        if run.recorder is not None:
            run.recorder.close()
        self._emit(run, "waiting_for_approval")

    def _reason(self, run: _Run, exc: BaseException) -> str:
        return describe_failure(exc, max_turns=run.max_turns, recursion_limit=run.recursion_limit,
                                timeout_s=run.timeout_s)

    def _keep_transcript(self, run: _Run, final_messages: Any) -> None:
        if run.recorder is None:
            return
        messages = run.recorder.close(list(final_messages) if final_messages else None)
        if run.transcript.startswith("memory:"):
            remember(run.task_id, messages)
        elif run.transcript.startswith("store:"):
            store = run.call.store if self.transcript_store is True else self.transcript_store
            if store is None:
                remember(run.task_id, messages)
                run.transcript = f"memory:{run.task_id}"
            else:
                run.transcript = store_transcript(store, run.thread_id, run.task_id,
                                                  run.recorder.header, messages)

    def _emit(self, run: _Run, status: str, **extra: Any) -> None:
        if run.call.emit is None:
            return
        event = {"type": "subagent_task", "task_id": run.task_id, "tool_call_id": run.call.tool_call_id,
                 "agent_type": run.call.subagent_type, "status": status, **extra}
        try:
            run.call.emit(event)
        except Exception:  # noqa: BLE001 - a broken stream consumer must not fail the task
            pass

    def _record(self, call: TaskCall, task_id: str, started_at: float, started_clock: float, *,
                answer: str | None = None, error: str | None = None, run: _Run | None = None) -> dict[str, Any]:
        duration_ms = (time.monotonic() - started_clock) * 1000
        usage = run.meter.usage() if run else {}
        return TaskRecord(
            id=task_id,
            agent_type=call.subagent_type,
            tool_call_id=call.tool_call_id,
            status="error" if error is not None else "completed",
            description=call.description,
            result=answer,
            error=error,
            started_at=started_at,
            finished_at=started_at + duration_ms / 1000,
            duration_ms=round(duration_ms, 3),
            transcript=run.transcript if run else None,
            **usage,
            **(run.record_extra if run else {}),
        ).model_dump()

    def _command(self, call: TaskCall, record: dict[str, Any], update: dict[str, Any] | None = None) -> Command:
        usage = {k: record[k] for k in ("model_calls", "input_tokens", "output_tokens", "cost_usd")}
        return Command(
            update={
                **(update or {}),
                LEDGER_KEY: {record["id"]: record},
                USAGE_KEY: {**usage, "tasks": 1},
                "messages": [tool_message(call.subagent_type, call.tool_call_id,
                                          answer=record["result"], error=record["error"])],
            }
        )


def _send(plan: Generator[Any, Any, Command], value: Any) -> Any:
    try:
        return plan.send(value)
    except StopIteration as stop:
        return stop.value


def _throw(plan: Generator[Any, Any, Command], exc: BaseException) -> Any:
    try:
        return plan.throw(exc)
    except StopIteration as stop:
        return stop.value


def _invoke_with_timeout(run: _Run, inputs: dict[str, Any]) -> Any:
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
        run.meter.stop("timed out")
        raise TimeoutError()
    if "error" in outcome:
        raise outcome["error"]
    return outcome["value"]
