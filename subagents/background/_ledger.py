"""The ledger of background tasks (``async_tasks``): one plain dict per task id, merged field by field, so any
checkpointer persists it with no custom serialiser; it is what survives a restart."""

from __future__ import annotations

import logging
import time
from collections.abc import Mapping
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict

from subagents._errors import StoredDataError, brief

# The reducer lives with the sync ledger's, so declaring the channel imports nothing of the background runtime.
from subagents._ledger import merge_async_records as merge_async_records
from subagents._outcome import TaskStatus

log = logging.getLogger(__name__)

AsyncTaskStatus = TaskStatus
"""The statuses a background task can have (the same set as :data:`subagents.TaskStatus`)."""

ACTIVE_STATUSES: frozenset[str] = frozenset({"pending", "running"})
"""The task is doing (or about to do) work: it can be steered or cancelled."""

# Not settled: it can be cancelled, and its owner or server still decides its end.
LIVE_STATUSES: frozenset[str] = ACTIVE_STATUSES | {"waiting_for_approval"}
SETTLED_STATUSES: frozenset[str] = frozenset({"completed", "error", "cancelled", "lost"})  # nothing more to do
RETRYABLE_STATUSES: frozenset[str] = frozenset({"error", "cancelled", "lost"})

NOTEWORTHY_STATUSES: frozenset[str] = SETTLED_STATUSES | {"waiting_for_approval"}
"""Statuses the parent is told about, once, before its next model call."""

RunnerKind = Literal["local", "remote"]


class AsyncTaskRecord(BaseModel):
    """One background task, as the parent's ledger keeps it.

    ``owner``: the runtime, process and host running a local task (it is ``lost`` only once that owner is provably
    gone). ``outcome_db``: the SQLite file its outcome is stored in (``None``: the owner's memory).
    ``thread_id``/``run_id``: the child's conversation (on the server, for a remote task). ``announced``: the parent
    model has been told how it ended.
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
    charged_input_tokens: int = 0
    charged_output_tokens: int = 0
    """As charged (a report far below the prompt's estimate is charged the estimate), beside the reported ones."""
    cost_usd: float = 0.0
    priced_as: list[str] = []
    """The price-table keys the calls were charged at."""
    stop_reason: str | None = None
    """A local task's last run: why it ended (``max_turns``, ``budget``, ``timeout`` with ``partial``)."""
    partial: bool = False
    """A limit cut the last run short: ``result`` is its wrap-up answer, after one line naming the limit."""
    attempt: int = 1
    turns: int = 1
    """Runs of the child conversation so far: the first, then one per follow-up."""
    transcript: str | None = None
    """Where the local child's messages can be read back (see :mod:`subagents._transcripts`)."""
    owner: str | None = None
    outcome_db: str | None = None
    thread_id: str | None = None
    run_id: str | None = None
    parent_thread_id: str | None = None
    """Remote tasks: the parent thread their server thread's metadata names, so a server without
    batched search by thread ids is polled with one metadata search (see :mod:`subagents.background._remote`)."""
    announced: bool = False


_TEXT_FIELDS = ("description", "result", "error", "note")
_COUNT_FIELDS = ("attempt", "turns")
MAX_COUNT = 2**31 - 1  # the largest attempt or turns a record may hold: one more is still one any checkpointer keeps
_TIME_FIELDS = ("created_at", "updated_at", "started_at", "finished_at")


def record_problem(task_id: Any, record: Any) -> str | None:
    """Why ``record``, the ledger's entry under ``task_id``, cannot be acted on (waited for, polled, listed,
    announced); ``None`` when it can. Records the middleware writes always pass; a hand-edited one may not."""
    if not isinstance(task_id, str):
        return f"its key is a {type(task_id).__name__}, not a task id string"
    if not isinstance(record, Mapping):
        return f"it is a {type(record).__name__}, not a mapping of fields"
    if record.get("id") != task_id:
        return f"field 'id' is {record.get('id')!r}, not its key {task_id!r}"
    if not isinstance(record.get("status"), str):
        return f"field 'status' is {record.get('status')!r}, not a status name"
    if not isinstance(record.get("agent_type"), str):
        return f"field 'agent_type' is {record.get('agent_type')!r}, not a subagent name"
    if record.get("runner") not in ("local", "remote"):  # who may act on it hangs on it (the owner check)
        return f"field 'runner' is {brief(record.get('runner'))}, not 'local' or 'remote'"
    for field in _TEXT_FIELDS:
        if not isinstance(record.get(field), (str, type(None))):
            return f"field {field!r} is a {type(record.get(field)).__name__}, not text"
    for field in _COUNT_FIELDS:
        if (value := record.get(field)) is not None and not is_count(value):
            return f"field {field!r} is {value!r}, not a count (a whole number from 0 to {MAX_COUNT})"
    for field in _TIME_FIELDS:
        value = record.get(field)
        if value is not None and (isinstance(value, bool) or not isinstance(value, (int, float))):
            return f"field {field!r} is {value!r}, not a time in seconds"
    request = record.get("approval_request")
    if request is not None and not (isinstance(request, list) and all(isinstance(i, Mapping) for i in request)):
        return f"field 'approval_request' is a {type(request).__name__}, not a list of requests"
    if (record.get("runner") == "remote" and record["status"] not in SETTLED_STATUSES
            and not isinstance(record.get("thread_id"), str)):
        return f"field 'thread_id' of a remote task is {record.get('thread_id')!r}, not a string"
    return None


def is_count(value: Any) -> bool:
    """Whether ``value`` is an ``attempt``/``turns`` a record may hold (``1.0`` from a JSON file is not)."""
    return type(value) is int and 0 <= value <= MAX_COUNT


def checked_ledger(ledger: Any, where: str) -> dict[str, dict[str, Any]]:
    """``ledger`` as plain dicts (``None``: empty), or ``ValueError`` naming ``where``, the task id and the field."""
    if ledger is None:  # ``state.get("async_tasks")`` of a run that started none
        return {}
    if not isinstance(ledger, Mapping):
        raise StoredDataError(f"{where}: the ledger must be the async_tasks mapping (task id -> record), "
                              f"not a {type(ledger).__name__}")
    for task_id, record in ledger.items():
        if (problem := record_problem(task_id, record)) is not None:
            raise StoredDataError(f"{where}: ledger record {task_id!r}: {problem}")
    return {task_id: dict(record) for task_id, record in ledger.items()}


def usable_records(ledger: Mapping[str, Any]) -> dict[str, dict[str, Any]]:
    """The records of ``ledger`` that can be acted on, as plain dicts; a damaged one is logged once per process (the
    1,024 latest remembered) and left in state, neither polled, announced nor listed."""
    out: dict[str, dict[str, Any]] = {}
    for task_id, record in ledger.items():
        if (problem := record_problem(task_id, record)) is None:
            out[task_id] = dict(record)
        elif (key := (repr(task_id)[:200], problem[:200])) not in _warned:
            _warned[key] = None
            while len(_warned) > 1024:
                del _warned[next(iter(_warned))]
            log.warning("async_tasks: ledger record %r is ignored: %s", task_id, problem)
    return out


_warned: dict[tuple[str, str], None] = {}


def changed_fields(before: dict[str, Any], after: dict[str, Any]) -> dict[str, Any]:
    """The fields of ``after`` that differ from ``before`` (what an update must carry)."""
    return {k: v for k, v in after.items() if before.get(k) != v}


now = time.time  # wall-clock seconds, as every ledger timestamp is stored
