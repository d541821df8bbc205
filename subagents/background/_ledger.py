"""The ledger of background tasks: one record per task, merged field by field.

The parent state key ``async_tasks`` maps a task id to a JSON-ready record
(a dict), so every checkpointer and a LangGraph Server can persist it with no
custom serialiser. The ledger is the source of truth that survives a
restart: a new process reading the checkpoint knows every task, where it ran
(``runner``, ``owner``, ``thread_id``, ``run_id``) and how it last stood.

Example::

    record = AsyncTaskRecord(id="t1", agent_type="researcher", runner="local",
                             status="pending", description="Find X", created_at=time.time())
    ledger = merge_async_records({}, {record.id: record.model_dump()})
    ledger = merge_async_records(ledger, {"t1": {"status": "running"}})
    AsyncTaskRecord.model_validate(ledger["t1"]).status      # 'running'
"""

from __future__ import annotations

import time
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict

from subagents._outcome import TaskStatus

AsyncTaskStatus = TaskStatus
"""The statuses a background task can have (the same set as :data:`subagents.TaskStatus`)."""

ACTIVE_STATUSES: frozenset[str] = frozenset({"pending", "running"})
"""The task is doing (or about to do) work: it can be steered or cancelled."""

SETTLED_STATUSES: frozenset[str] = frozenset({"completed", "error", "cancelled", "lost"})
"""The task does nothing more until the parent acts on it."""

RETRYABLE_STATUSES: frozenset[str] = frozenset({"error", "cancelled", "lost"})

NOTEWORTHY_STATUSES: frozenset[str] = SETTLED_STATUSES | {"waiting_for_approval"}
"""Statuses the parent is told about, once, before its next model call."""

RunnerKind = Literal["local", "remote"]


class AsyncTaskRecord(BaseModel):
    """One background task, as the parent's ledger keeps it.

    ``owner`` names the runtime, process and host that run a local task
    (see :mod:`subagents.background._owner`); a local task that is still
    pending, running or waiting is ``lost`` only once that owner is provably
    gone. ``outcome_db`` is the SQLite file its outcome is stored in the
    moment it settles (``None``: the owner's memory).
    ``thread_id``/``run_id`` name the child's conversation: a thread and run
    on the LangGraph Server for remote tasks, the in-process child thread
    for local ones. ``announced`` is set once the parent model has been told
    how the task ended, so each outcome is announced once.
    """

    model_config = ConfigDict(extra="allow")

    id: str
    agent_type: str
    runner: RunnerKind
    status: AsyncTaskStatus
    description: str
    tool_call_id: str | None = None
    created_at: float
    updated_at: float | None = None
    started_at: float | None = None
    finished_at: float | None = None
    result: str | None = None
    error: str | None = None
    approval_request: Any = None
    """What the child waits for approval of (the interrupt values), while it waits."""
    model_calls: int = 0
    input_tokens: int = 0
    output_tokens: int = 0
    attempt: int = 1
    turns: int = 1
    """Runs of the child conversation so far: the first, then one per follow-up."""
    transcript: str | None = None
    """Where the local child's messages can be read back (see :mod:`subagents._transcript`)."""
    owner: str | None = None
    outcome_db: str | None = None
    thread_id: str | None = None
    run_id: str | None = None
    announced: bool = False


def merge_async_records(
    left: dict[str, dict[str, Any]] | None, right: dict[str, dict[str, Any]] | None
) -> dict[str, dict[str, Any]]:
    """Reducer for ``async_tasks``: a later update of an id replaces only the fields it names.

    Updates are partial on purpose: a status check writes ``status`` and the
    usage it saw without repeating the description, and two tools touching
    different tasks in one step never overwrite each other.
    """
    if not left:
        return {k: dict(v) for k, v in (right or {}).items()}
    if not right:
        return left
    merged = dict(left)
    for task_id, fields in right.items():
        merged[task_id] = {**left.get(task_id, {}), **fields}
    return merged


def changed_fields(before: dict[str, Any], after: dict[str, Any]) -> dict[str, Any]:
    """The fields of ``after`` that differ from ``before`` (what an update must carry)."""
    return {k: v for k, v in after.items() if before.get(k) != v}


def now() -> float:
    """Wall-clock seconds, as every ledger timestamp is stored."""
    return time.time()
