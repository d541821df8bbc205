"""Every task of a thread as one kind of row: delegations, refused calls and background tasks.

The command line shows a thread's tasks in three places (the live tree,
``deep-agent tasks`` and ``deep-agent transcript``); all three read them
through :func:`task_rows`, so none can miss a kind:

* ``task`` delegations from the ledger ``subagent_tasks``, including the
  ones refused before a child ran (unknown agent type, spent budget): they
  have no transcript;
* background tasks from ``async_tasks`` (runner, status, attempt);
* delegation calls the model got wrong (invalid arguments) that reached no
  ledger: found in the messages, as the call and its error reply.

Example::

    rows = task_rows(state)          # state: a thread's values
    [(r.id[:8], r.kind, r.agent_type, r.status) for r in rows]
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Iterable, Mapping
from typing import Any, Literal

LEDGER_KEY = "subagent_tasks"
ASYNC_LEDGER_KEY = "async_tasks"
DELEGATION_TOOLS = frozenset({"task", "start_async_task"})

TaskKind = Literal["task", "background", "refused"]
REFUSED_STOP_REASONS = frozenset({"refused", "invalid_call"})
"""Stop reasons of a delegation that never ran a child (a spent budget is ``budget`` with no calls)."""


@dataclasses.dataclass
class TaskRow:
    """One task as the command line shows it."""

    id: str
    kind: TaskKind
    agent_type: str
    status: str
    description: str = ""
    tool_call_id: str | None = None
    started_at: float | None = None
    finished_at: float | None = None
    duration_s: float | None = None
    model_calls: int = 0
    input_tokens: int = 0
    output_tokens: int = 0
    cost_usd: float = 0.0
    result: str | None = None
    error: str | None = None
    runner: str | None = None
    attempt: int | None = None
    transcript: str | None = None

    @property
    def tokens(self) -> int:
        return self.input_tokens + self.output_tokens

    @property
    def outcome(self) -> str:
        return (self.result if self.status == "completed" else self.error) or ""

    def seconds(self, now: float | None = None) -> float:
        """Its duration, or for a task still going, the time since it started."""
        if self.duration_s is not None:
            return self.duration_s
        if self.started_at is None:
            return 0.0
        end = self.finished_at or (now if now is not None else time.time())
        return max(0.0, end - self.started_at)


def sync_row(record: Mapping[str, Any]) -> TaskRow:
    # "none:" is the transcript of a delegation refused before any child ran.
    refused = record.get("stop_reason") in REFUSED_STOP_REASONS or record.get("transcript") == "none:" or (
        record.get("status") == "error" and not record.get("transcript") and not record.get("model_calls"))
    duration = record.get("duration_ms")
    return TaskRow(
        id=str(record["id"]), kind="refused" if refused else "task",
        agent_type=str(record.get("agent_type") or "?"), status=str(record.get("status") or "running"),
        description=record.get("description") or "", tool_call_id=record.get("tool_call_id"),
        started_at=record.get("started_at"), finished_at=record.get("finished_at"),
        duration_s=None if duration is None else duration / 1000,
        model_calls=int(record.get("model_calls") or 0), input_tokens=int(record.get("input_tokens") or 0),
        output_tokens=int(record.get("output_tokens") or 0), cost_usd=float(record.get("cost_usd") or 0.0),
        result=record.get("result"), error=record.get("error"), transcript=record.get("transcript"),
    )


def background_row(record: Mapping[str, Any]) -> TaskRow:
    started = record.get("started_at") or record.get("created_at")
    finished = record.get("finished_at")
    return TaskRow(
        id=str(record["id"]), kind="background", agent_type=str(record.get("agent_type") or "?"),
        status=str(record.get("status") or "pending"), description=record.get("description") or "",
        tool_call_id=record.get("tool_call_id"), started_at=started, finished_at=finished,
        duration_s=(finished - started) if finished and started else None,
        model_calls=int(record.get("model_calls") or 0), input_tokens=int(record.get("input_tokens") or 0),
        output_tokens=int(record.get("output_tokens") or 0), cost_usd=float(record.get("cost_usd") or 0.0),
        result=record.get("result"), error=record.get("error"), runner=record.get("runner"),
        attempt=record.get("attempt"), transcript=record.get("transcript"),
    )


def invalid_call_rows(messages: Iterable[Any], known_calls: set[str]) -> list[TaskRow]:
    """Delegation calls answered with an error and no record (e.g. invalid arguments)."""
    messages = list(messages)
    replies = {getattr(m, "tool_call_id", None): m for m in messages if getattr(m, "type", "") == "tool"}
    rows: list[TaskRow] = []
    for message in messages:
        if getattr(message, "type", "") != "ai":
            continue
        for call in getattr(message, "tool_calls", None) or ():
            reply = replies.get(call.get("id"))
            if (call.get("name") in DELEGATION_TOOLS and call.get("id") not in known_calls
                    and reply is not None and getattr(reply, "status", "") == "error"):
                rows.append(_refused(call.get("id"), call.get("args") or {}, _text(reply)))
        for call in getattr(message, "invalid_tool_calls", None) or ():
            if call.get("name") in DELEGATION_TOOLS and call.get("id") not in known_calls:
                reason = call.get("error") or "the call's arguments could not be parsed"
                rows.append(_refused(call.get("id"), {}, f"invalid arguments: {reason}"))
    return rows


def task_rows(values: Mapping[str, Any]) -> list[TaskRow]:
    """Every task of a thread, oldest first."""
    rows = [sync_row(r) for r in (values.get(LEDGER_KEY) or {}).values()]
    full_texts(rows, (values.get(LEDGER_KEY) or {}).values(), values.get("messages") or ())
    rows += [background_row(r) for r in (values.get(ASYNC_LEDGER_KEY) or {}).values()]
    known = {r.tool_call_id for r in rows if r.tool_call_id}
    rows += invalid_call_rows(values.get("messages") or (), known)
    return sorted(rows, key=lambda r: r.started_at or float("inf"))


def full_texts(rows: list[TaskRow], records: Iterable[Mapping[str, Any]], messages: Iterable[Any]) -> None:
    """Put back the full description and answer of rows whose ledger record holds previews.

    The ledger keeps short previews (see :mod:`middleware.ledger_entry`); the
    texts are the ``task`` call's arguments and its ToolMessage.
    """
    clipped = {r.get("tool_call_id") for r in records
               if r.get("tool_call_id") and any(is_clipped(r, k) for k in ("description", "result", "error"))}
    if not clipped:
        return
    calls: dict[str, str] = {}
    replies: dict[str, str] = {}
    for message in messages:
        kind = getattr(message, "type", "")
        if kind == "ai":
            for call in getattr(message, "tool_calls", None) or ():
                if call.get("id") in clipped and isinstance((call.get("args") or {}).get("description"), str):
                    calls[call["id"]] = call["args"]["description"]
        elif kind == "tool" and getattr(message, "tool_call_id", None) in clipped:
            replies[message.tool_call_id] = _text(message)
    for row in rows:
        if row.tool_call_id is None or row.tool_call_id not in clipped:
            continue
        row.description = calls.get(row.tool_call_id, row.description)
        reply = replies.get(row.tool_call_id)
        if reply is None:
            continue
        if row.status == "completed":
            row.result = reply
        elif row.error is not None:
            row.error = reply.removeprefix(f"Subagent '{row.agent_type}' failed: ")


def is_clipped(record: Mapping[str, Any], key: str) -> bool:
    """True when a ledger record's ``key`` is a preview (shorter than its ``<key>_chars``)."""
    text, full = record.get(key), record.get(f"{key}_chars")
    return isinstance(text, str) and isinstance(full, int) and full > len(text)


def _refused(call_id: str | None, args: Mapping[str, Any], error: str) -> TaskRow:
    agent = args.get("subagent_type")
    return TaskRow(
        id=str(call_id or "unknown-call"), kind="refused",
        agent_type=agent if isinstance(agent, str) and agent else "?", status="error",
        description=str(args.get("description") or ""), tool_call_id=call_id, error=error,
    )


def _text(message: Any) -> str:
    try:
        return str(message.text)
    except Exception:  # noqa: BLE001 - a reply with odd content still names the failure
        return str(getattr(message, "content", ""))
