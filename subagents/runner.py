"""Running one delegation: isolate, invoke under limits, record, write back.

:meth:`TaskRunner.run` and :meth:`TaskRunner.arun` are thin shells around
one shared path (:meth:`_prepare`, then :meth:`_finish` or :meth:`_fail`).
Whatever the child raises becomes an error ``ToolMessage`` whose content
begins ``Subagent '<name>' failed:``; only LangGraph's control-flow signals
(interrupts for human approval, ``Command`` hand-offs) pass through, so a
paused child resumes natively when the parent resumes.
"""

from __future__ import annotations

import asyncio
import contextvars
import dataclasses
import json
import threading
import time
from collections.abc import Mapping, Sequence
from typing import Any

from langchain_core.messages import AIMessage, ToolMessage
from langgraph.errors import GraphBubbleUp, GraphRecursionError
from langgraph.types import Command

from subagents.isolation import (
    EXCLUDED_KEYS,
    LEDGER_KEY,
    changed_keys,
    child_input,
    known_private_state_keys,
)
from subagents.limiter import ConcurrencyLimit
from subagents.meter import TaskMeter, TaskStopped
from subagents.record import TaskRecord, task_id_for
from subagents.registry import SubagentRegistry
from subagents.spec import DEFAULT_MAX_TURNS, CompiledSubagent

TASK_ID_METADATA_KEY = "subagent_task_id"
"""Set in the metadata of every child run; its presence means "inside a child"."""

DEFAULT_RECURSION_LIMIT = 25


@dataclasses.dataclass(frozen=True)
class TaskCall:
    """One ``task`` call as the parent's tool received it."""

    subagent_type: str
    description: str
    parent_state: Mapping[str, Any]
    tool_call_id: str | None
    parent_config: Mapping[str, Any]
    parent_model: Any = None
    parent_tools: Sequence[Any] = ()


@dataclasses.dataclass
class _Run:
    call: TaskCall
    task_id: str
    graph: Any
    inputs: dict[str, Any]
    config: dict[str, Any]
    meter: TaskMeter
    timeout_s: float | None
    max_turns: int | None
    recursion_limit: int
    started_at: float
    started_clock: float


class TaskRunner:
    """Runs delegations against a registry under one concurrency cap.

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
    ) -> None:
        self.registry = registry
        self.limit = ConcurrencyLimit(max_concurrent)
        self._private_keys = private_keys
        self._blocked_keys: frozenset[str] | None = None

    @property
    def blocked_keys(self) -> frozenset[str]:
        """Keys that never cross the boundary (computed once, at first use)."""
        if self._blocked_keys is None:
            self._blocked_keys = EXCLUDED_KEYS | self._private_keys | known_private_state_keys()
        return self._blocked_keys

    # -- the two shells -------------------------------------------------

    def run(self, call: TaskCall) -> Command:
        prepared = self._prepare(call)
        if isinstance(prepared, Command):
            return prepared
        try:
            with self.limit.hold():
                prepared.meter.deadline = _deadline(prepared.timeout_s)
                result = _invoke_with_timeout(prepared)
        except GraphBubbleUp:
            raise
        except Exception as exc:  # noqa: BLE001 - fault isolation is the point
            return self._fail(prepared, exc)
        return self._finish(prepared, result)

    async def arun(self, call: TaskCall) -> Command:
        prepared = self._prepare(call)
        if isinstance(prepared, Command):
            return prepared
        try:
            async with self.limit.ahold():
                prepared.meter.deadline = _deadline(prepared.timeout_s)
                invocation = prepared.graph.ainvoke(prepared.inputs, prepared.config)
                if prepared.timeout_s is None:
                    result = await invocation
                else:
                    result = await asyncio.wait_for(invocation, prepared.timeout_s)
        except GraphBubbleUp:
            raise
        except Exception as exc:  # noqa: BLE001 - fault isolation is the point
            return self._fail(prepared, exc)
        return self._finish(prepared, result)

    # -- the shared path ------------------------------------------------

    def _prepare(self, call: TaskCall) -> _Run | Command:
        config = call.parent_config
        configurable = config.get("configurable") or {}
        task_id = task_id_for(
            configurable.get("thread_id"), configurable.get("checkpoint_ns", ""), call.tool_call_id
        )
        started_at, clock = time.time(), time.monotonic()
        name = call.subagent_type
        if (config.get("metadata") or {}).get(TASK_ID_METADATA_KEY):
            return self._result(
                call, task_id, started_at, clock, error="subagents cannot delegate; do the work yourself"
            )
        try:
            spec = self.registry.spec(name)
            graph = self.registry.graph(
                name, parent_model=call.parent_model, parent_tools=call.parent_tools
            )
        except Exception as exc:  # noqa: BLE001 - a bad spec fails this task alone
            return self._result(call, task_id, started_at, clock, error=str(exc))
        recursion_limit = spec.recursion_limit or int(
            config.get("recursion_limit") or DEFAULT_RECURSION_LIMIT
        )
        meter = TaskMeter()
        run_config: dict[str, Any] = {
            "recursion_limit": recursion_limit,
            "callbacks": [meter],
            "run_name": name,
            "metadata": {
                "ls_agent_type": "subagent",
                TASK_ID_METADATA_KEY: task_id,
                "subagent_tool_call_id": call.tool_call_id,
                "subagent_type": name,
            },
        }
        return _Run(
            call=call,
            task_id=task_id,
            graph=graph,
            inputs=child_input(call.parent_state, call.description, self.blocked_keys),
            config=run_config,
            meter=meter,
            timeout_s=spec.timeout_s,
            max_turns=None
            if isinstance(spec, CompiledSubagent)
            else (spec.max_turns or DEFAULT_MAX_TURNS),
            recursion_limit=recursion_limit,
            started_at=started_at,
            started_clock=clock,
        )

    def _finish(self, run: _Run, result: Any) -> Command:
        if not isinstance(result, Mapping) or "messages" not in result:
            return self._fail(
                run,
                ValueError(
                    "the child graph returned no 'messages' (a compiled subagent's state "
                    "must have a 'messages' key)"
                ),
            )
        answer = final_answer(result)
        update = changed_keys(result, run.inputs, self.blocked_keys)
        return self._result(
            run.call,
            run.task_id,
            run.started_at,
            run.started_clock,
            answer=answer,
            meter=run.meter,
            update=update,
        )

    def _fail(self, run: _Run, exc: BaseException) -> Command:
        return self._result(
            run.call,
            run.task_id,
            run.started_at,
            run.started_clock,
            error=describe_failure(exc, run),
            meter=run.meter,
        )

    def _result(
        self,
        call: TaskCall,
        task_id: str,
        started_at: float,
        started_clock: float,
        *,
        answer: str | None = None,
        error: str | None = None,
        meter: TaskMeter | None = None,
        update: dict[str, Any] | None = None,
    ) -> Command:
        failed = error is not None
        duration_ms = (time.monotonic() - started_clock) * 1000
        record = TaskRecord(
            id=task_id,
            agent_type=call.subagent_type,
            tool_call_id=call.tool_call_id,
            status="error" if failed else "completed",
            description=call.description,
            result=answer,
            error=error,
            started_at=started_at,
            finished_at=started_at + duration_ms / 1000,
            duration_ms=round(duration_ms, 3),
            model_calls=meter.model_calls if meter else 0,
            input_tokens=meter.input_tokens if meter else 0,
            output_tokens=meter.output_tokens if meter else 0,
        )
        content = f"Subagent '{call.subagent_type}' failed: {error}" if failed else answer
        message = ToolMessage(
            content=content or "",
            tool_call_id=call.tool_call_id or "",
            name="task",
            status="error" if failed else "success",
        )
        return Command(
            update={
                **(update or {}),
                LEDGER_KEY: {task_id: record.model_dump()},
                "messages": [message],
            }
        )


def _deadline(timeout_s: float | None) -> float | None:
    return None if timeout_s is None else time.monotonic() + timeout_s


def _invoke_with_timeout(run: _Run) -> Any:
    """Invoke on this thread, or, with a timeout, on a helper thread we can stop waiting for.

    A thread cannot be killed; once the timeout passes we return and the
    meter stops the abandoned child at its next model or tool call.
    """
    if run.timeout_s is None:
        return run.graph.invoke(run.inputs, run.config)
    outcome: dict[str, Any] = {}
    context = contextvars.copy_context()

    def target() -> None:
        try:
            outcome["value"] = context.run(run.graph.invoke, run.inputs, run.config)
        except BaseException as exc:  # noqa: BLE001 - handed back to the caller's thread
            outcome["error"] = exc

    worker = threading.Thread(target=target, name=f"subagent-{run.task_id[:8]}", daemon=True)
    worker.start()
    worker.join(run.timeout_s)
    if worker.is_alive():
        run.meter.stop("timed out")
        raise TimeoutError()
    if "error" in outcome:
        raise outcome["error"]
    return outcome["value"]


def final_answer(result: Mapping[str, Any]) -> str:
    """The child's answer: its structured response as JSON, else its last non-empty AI text."""
    structured = result.get("structured_response")
    if structured is not None:
        if hasattr(structured, "model_dump_json"):
            return structured.model_dump_json()
        if dataclasses.is_dataclass(structured) and not isinstance(structured, type):
            return json.dumps(dataclasses.asdict(structured), default=str)
        return json.dumps(structured, default=str)
    for message in reversed(result["messages"]):
        if isinstance(message, AIMessage):
            text = (message.text or "").strip()
            if text:
                return text
    return ""


def describe_failure(exc: BaseException, run: _Run) -> str:
    """A reason the parent model can act on, never a stack trace."""
    from langchain.agents.middleware.model_call_limit import ModelCallLimitExceededError

    if isinstance(exc, ModelCallLimitExceededError):
        return (
            f"hit its max_turns limit ({run.max_turns} model calls) before finishing. "
            "Split the task into smaller pieces, or raise max_turns."
        )
    if isinstance(exc, GraphRecursionError):
        return (
            f"hit its recursion limit ({run.recursion_limit} steps) before finishing. "
            "Split the task into smaller pieces, or raise recursion_limit."
        )
    if isinstance(exc, (TimeoutError, asyncio.TimeoutError)) or (
        isinstance(exc, TaskStopped) and str(exc) == "timed out"
    ):
        return f"timed out after {run.timeout_s:g}s. Split the task, or raise timeout_s."
    text = str(exc).strip() or "(no message)"
    return f"{type(exc).__name__}: {text}"
