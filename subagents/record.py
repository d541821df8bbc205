"""The record every delegation leaves in the parent's state.

The ledger (``subagent_tasks`` in the parent state) maps a task id to a
record. Records are stored as JSON-ready dicts, so every checkpointer and a
LangGraph Server can persist them without custom serialisers; read one back
typed with ``TaskRecord.model_validate(state["subagent_tasks"][task_id])``.
"""

from __future__ import annotations

import uuid
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict

TaskStatus = Literal[
    "pending",
    "running",
    "waiting_for_approval",
    "completed",
    "error",
    "cancelled",
    "lost",
]

_TASK_ID_NAMESPACE = uuid.UUID("6f1c1c1e-2b8e-4d3e-9d0a-5a2f1f0c7e11")


class TaskRecord(BaseModel):
    """One delegation: who ran it, how it went, what it cost, what it returned."""

    model_config = ConfigDict(extra="allow")

    id: str
    agent_type: str
    tool_call_id: str | None = None
    status: TaskStatus
    description: str
    result: str | None = None
    error: str | None = None
    started_at: float
    finished_at: float | None = None
    duration_ms: float | None = None
    model_calls: int = 0
    input_tokens: int = 0
    output_tokens: int = 0
    cost_usd: float = 0.0
    transcript: str | None = None
    """Where the child's messages can be read back (a checkpoint namespace)."""


def task_id_for(thread_id: str | None, checkpoint_ns: str, tool_call_id: str | None) -> str:
    """A task id that is unique per tool call and stable when a paused run resumes.

    The parent's tool task (its checkpoint namespace) is re-executed with the
    same namespace after an interrupt, so the resumed delegation keeps its id.
    """
    key = f"{thread_id}|{checkpoint_ns}|{tool_call_id}"
    return uuid.uuid5(_TASK_ID_NAMESPACE, key).hex


def merge_records(
    left: dict[str, dict[str, Any]] | None, right: dict[str, dict[str, Any]] | None
) -> dict[str, dict[str, Any]]:
    """Reducer for the ledger: parallel delegations each add their own ids."""
    if not left:
        return dict(right or {})
    if not right:
        return left
    return {**left, **right}


USAGE_KEY = "subagent_usage"
"""Parent state key: the run's rollup of every delegation's usage."""


def add_usage(left: dict[str, Any] | None, right: dict[str, Any] | None) -> dict[str, Any]:
    """Reducer for the usage rollup: parallel delegations add up."""
    if not left:
        return dict(right or {})
    if not right:
        return left
    return {k: round(left.get(k, 0) + right.get(k, 0), 6) for k in {*left, *right}}
