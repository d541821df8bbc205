"""What each background-task tool does, as one ``Command``: start, check, update, cancel, retry, list.

The tools (:mod:`middleware._background_tools`) run these on the runtime's
loop. Each answers with one ``ToolMessage`` plus the ledger records it
changed; an unknown id or an operation the task's state forbids is an error
result naming it, never an exception.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from typing import Any

from langchain.tools import ToolRuntime
from langchain_core.messages import ToolMessage
from langgraph.types import Command

from middleware import _background_prompts as words
from middleware._ledger import ASYNC_LEDGER_KEY
from subagents import TaskCall, brief, safe_text
from subagents.background import (
    NOTEWORTHY_STATUSES,
    BackgroundRuntime,
    BackgroundTasks,
    TaskStateError,
    merge_async_records,
    record_problem,
    usable_records,
)

CallFor = Callable[[ToolRuntime, str, str], TaskCall]
"""``(runtime, description, subagent_type) -> TaskCall``: the parent's call, as the middleware builds it."""


class BackgroundTaskHandlers:
    """The six tools' handlers over one :class:`subagents.background.BackgroundTasks`."""

    def __init__(self, tasks: BackgroundTasks, runtime: BackgroundRuntime, call_for: CallFor) -> None:
        self.tasks = tasks
        self.runtime = runtime
        self._call = call_for

    async def handle_start(self, runtime: ToolRuntime, description: str, subagent_type: str) -> Command:
        try:
            ledger = runtime.state.get(ASYNC_LEDGER_KEY) or {}  # read only: no copy per start
            record = await self.tasks.start(self._call(runtime, description, subagent_type), ledger)
        except Exception as exc:  # noqa: BLE001 - a refused start fails this call alone
            return _reply(runtime, f"Subagent '{subagent_type}' failed: {_reason(exc)}", error=True)
        return _reply(runtime, words.started(record), record)

    async def handle_check(self, runtime: ToolRuntime, task_id: str) -> Command:
        return await self._on_task(runtime, task_id, self._checked)

    async def _checked(self, runtime: ToolRuntime, record: Mapping[str, Any]) -> Command:
        current, problem = await self.tasks.check(record)
        if current["status"] in NOTEWORTHY_STATUSES:
            current["announced"] = True  # the model has now seen how it ended
        return _reply(runtime, words.checked(current, problem), current)

    async def handle_update(self, runtime: ToolRuntime, task_id: str, message: str,
                            decision: str | None = None) -> Command:
        async def act(runtime: ToolRuntime, record: Mapping[str, Any]) -> Command:
            call = self._call(runtime, "", record["agent_type"])
            current, what = await self.tasks.update(record, message, call, decision)
            return _reply(runtime, f"Task {task_id} ({current['status']}): {what}.", current)

        return await self._on_task(runtime, task_id, act)

    async def handle_cancel(self, runtime: ToolRuntime, task_id: str) -> Command:
        async def act(runtime: ToolRuntime, record: Mapping[str, Any]) -> Command:
            current = await self.tasks.cancel(record)
            return _reply(runtime, f"Cancelled background task {task_id}.", current)

        return await self._on_task(runtime, task_id, act)

    async def handle_retry(self, runtime: ToolRuntime, task_id: str) -> Command:
        async def act(runtime: ToolRuntime, record: Mapping[str, Any]) -> Command:
            current = await self.tasks.retry(record, self._call(runtime, "", record["agent_type"]))
            return _reply(runtime, f"Retrying background task {task_id} (attempt {current['attempt']}).",
                          current)

        return await self._on_task(runtime, task_id, act)

    async def handle_list(self, runtime: ToolRuntime, status: str | None) -> Command:
        ledger = ledger_of(runtime.state)
        try:
            updates = await self.tasks.refresh(ledger)
        except Exception:  # noqa: BLE001 - a status poll must never stop the parent: list what is known
            updates = {}
        merged = merge_async_records(ledger, updates)
        rows = [r for r in merged.values() if status is None or r["status"] == status]
        return _reply(runtime, words.listed(rows, status), updates=updates)

    async def _on_task(self, runtime: ToolRuntime, task_id: str,
                       act: Callable[[ToolRuntime, Mapping[str, Any]], Awaitable[Command]]) -> Command:
        ledger = ledger_of(runtime.state)
        record = ledger.get(task_id)
        if record is None and (damage := _damage(runtime.state, task_id)):
            return _reply(runtime, f"Task {brief(task_id)} cannot be acted on: its ledger record is damaged "
                          f"({damage}).", error=True)
        if record is None:
            return _reply(runtime, f"Unknown task id {brief(task_id)}. {_known_ids(ledger)}", error=True)
        try:
            return await act(runtime, record)
        except TaskStateError as exc:
            return _reply(runtime, f"Cannot do that: {exc}", error=True)
        except Exception as exc:  # noqa: BLE001 - a runner failure fails this call alone
            return _reply(runtime, f"Task {task_id}: the operation failed: {_reason(exc)}", error=True)


_IDS_LISTED = 20
"""An unknown id's answer names at most this many known ones (the newest): a model needs a few, not all."""


def _known_ids(ledger: Mapping[str, Any]) -> str:
    ids = list(ledger)
    if not ids:
        return "Known task ids: none yet."
    shown = ", ".join(safe_text(i, 80) for i in ids[-_IDS_LISTED:])
    more = f" (the newest {_IDS_LISTED} of {len(ids)}; list_async_tasks shows all)" if len(ids) > _IDS_LISTED else ""
    return f"Known task ids{more}: {shown}."


def ledger_of(state: Mapping[str, Any]) -> dict[str, dict[str, Any]]:
    """A copy of the ``async_tasks`` ledger in ``state`` (empty when there is none).

    Only records the middleware can act on: a hand-edited or damaged one
    stays in state untouched, logged, but is not polled, announced or listed.
    """
    ledger = state.get(ASYNC_LEDGER_KEY)
    return usable_records(ledger) if isinstance(ledger, Mapping) else {}


def _damage(state: Mapping[str, Any], task_id: str) -> str | None:
    """What is wrong with the record state holds for ``task_id``, if it holds one."""
    ledger = state.get(ASYNC_LEDGER_KEY)
    if not isinstance(ledger, Mapping) or task_id not in ledger:
        return None
    return record_problem(task_id, ledger[task_id])


def _reason(exc: BaseException) -> str:
    if isinstance(exc, TaskStateError):
        return str(exc)
    return f"{type(exc).__name__}: {str(exc).strip() or '(no message)'}"


def _reply(runtime: ToolRuntime, content: str, record: Mapping[str, Any] | None = None, *,
           updates: Mapping[str, Any] | None = None, error: bool = False) -> Command:
    message = ToolMessage(content=content, tool_call_id=runtime.tool_call_id or "",
                          status="error" if error else "success")
    update: dict[str, Any] = {"messages": [message]}
    ledger = dict(updates or {})
    if record is not None:
        ledger[record["id"]] = dict(record)
    if ledger:
        update[ASYNC_LEDGER_KEY] = ledger
    return Command(update=update)
