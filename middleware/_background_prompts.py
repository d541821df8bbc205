"""The words of background tasks: tool descriptions, the prompt block, results and notices.

Results the model reads back (check, list) are compact JSON, so a model can
quote ids and statuses exactly; confirmations are one sentence naming the
task id.
"""

from __future__ import annotations

import json
import reprlib
from collections.abc import Iterable, Mapping
from typing import Any

BACKGROUND_INSTRUCTIONS = """You can also run subagents in the background with `start_async_task`.
It returns a task id at once and the subagent works while you continue. You are told
when a background task finishes, so do not poll in a loop: do other work, or end your
turn and the result will be there in a later turn. Use `check_async_task` for one task's
status and result, `update_async_task` to send it a new instruction (or a follow-up once
it has finished, or an approval decision when it waits for one), `cancel_async_task`,
`list_async_tasks`, and `retry_async_task` for failed, cancelled or lost tasks."""

START_DESCRIPTION = """Start a subagent in the background and return its task id at once.

The subagent sees only `description`, never this conversation: put every instruction,
the context it needs and the form of the answer you want in it. Choose `subagent_type`
from <available_agents>. You will be told when the task finishes."""

CHECK_DESCRIPTION = """Get a background task's status and, once it has finished, its result or error."""

UPDATE_DESCRIPTION = """Send a message to a background task.

A running task sees it before its next step (use this to steer it). A completed task
continues the same conversation with it as a follow-up. A task waiting for approval is
answered with decision="approve" or decision="reject" (the message is then the reason
the task sees); without a decision, the message "approve" (exactly that word) approves
and any other message rejects, with your message as the reason."""

CANCEL_DESCRIPTION = """Cancel a pending, running or waiting background task."""

LIST_DESCRIPTION = """List background tasks with their statuses, optionally only those with one status."""

RETRY_DESCRIPTION = """Run a failed, cancelled or lost background task again, under the same task id."""

_PREVIEW = 80


def started(record: Mapping[str, Any]) -> str:
    return (
        f"Started background task {record['id']} ({record['agent_type']}, {record['status']}). "
        "It works while you continue; you will be told when it finishes."
    )


def checked(record: Mapping[str, Any], problem: str | None = None) -> str:
    """One task as the model sees it."""
    view: dict[str, Any] = {
        "task_id": record["id"],
        "agent_type": record["agent_type"],
        "status": record["status"],
    }
    if record.get("result") is not None and record["status"] == "completed":
        view["result"] = record["result"]
    if record.get("error"):
        view["error"] = record["error"]
    if record["status"] == "waiting_for_approval":
        view["approval_request"] = record.get("approval_request")
    view["usage"] = {k: record.get(k, 0) for k in ("model_calls", "input_tokens", "output_tokens")}
    if problem:
        view["note"] = problem
    return _json(view)


def listed(records: Iterable[Mapping[str, Any]], status: str | None) -> str:
    rows = []
    for r in sorted(records, key=lambda r: r.get("created_at") or 0):
        row = {
            "task_id": r["id"],
            "agent_type": r["agent_type"],
            "status": r["status"],
            "description": _clip(r.get("description") or "", _PREVIEW),
        }
        if r.get("note"):
            row["note"] = r["note"]
        rows.append(row)
    if not rows:
        return f"No background tasks with status {status!r}." if status else "No background tasks."
    return json.dumps(rows)


DEFAULT_NOTICE_TOTAL_CHARS = 12_000
"""Default bound on one completion notice, whatever the number of tasks (about 3k tokens)."""


def notice(records: Iterable[Mapping[str, Any]], result_chars: int,
           total_chars: int = DEFAULT_NOTICE_TOTAL_CHARS,
           unreachable: Iterable[Mapping[str, Any]] = ()) -> str:
    """The one message announcing every task that finished (or needs approval) since the last call.

    Each result is clipped to ``result_chars`` and the whole message to
    ``total_chars``; tasks that do not fit are counted and pointed to
    ``check_async_task``. Tasks whose server just became unreachable
    (``unreachable``: records with a ``note``) are named once, briefly.
    """
    lines = [_notice_line(r, result_chars) for r in records]
    by_note: dict[str, list[str]] = {}
    for r in unreachable:
        by_note.setdefault(r["note"], []).append(r["id"])
    for note, ids in by_note.items():
        named = ", ".join(ids[:5]) + (f" and {len(ids) - 5} more" if len(ids) > 5 else "")
        lines.append(f"- not checked ({named}): {note}")
    return capped_notice("Background task updates:", lines, total_chars)


def capped_notice(head: str, lines: list[str], total_chars: int) -> str:
    """``head`` and as many whole ``lines`` as fit in ``total_chars``, then how many were left out.

    Never longer than ``total_chars``, unless that is too small for the head
    and the closing line, which are always kept. A first line too long to fit
    whole is clipped rather than dropped.
    """
    def rest(n: int) -> str:
        return (f"...and {n} more update{'s' if n != 1 else ''} not shown here: "
                "call list_async_tasks to see them and check_async_task for each result.")

    kept = [head]
    size = len(head)
    for i, line in enumerate(lines):
        left = len(lines) - i - 1
        reserve = len(rest(left)) + 1 if left else 0
        room = total_chars - size - 1 - reserve
        if len(line) > room and len(kept) == 1 and room >= 40:
            line = _clip(line, room)
        if len(line) > room:
            kept.append(rest(len(lines) - i))
            break
        kept.append(line)
        size += 1 + len(line)
    return "\n".join(kept)


def _notice_line(r: Mapping[str, Any], result_chars: int) -> str:
    """One task's line; never raises, whatever a hand-edited record or a child's interrupt holds."""
    try:
        return _line(r, result_chars)
    except Exception:  # noqa: BLE001 - the notice runs before every model call: it must not stop the parent
        return f"- {_clip(_text(r.get('id')), 200)}: {_clip(_text(r.get('status')), 100)} " \
               "(its record could not be shown; call check_async_task)."


def _line(r: Mapping[str, Any], result_chars: int) -> str:
    head = f"- {r['id']} ({r['agent_type']}): {r['status']}"
    if r["status"] == "completed":
        result = r.get("result") or ""
        clipped = _clip(result, result_chars)
        more = " [truncated; check_async_task has the full result]" if clipped != result else ""
        return f"{head}. Result: {clipped}{more}"
    if r["status"] == "waiting_for_approval":
        request = _json(r.get("approval_request"))
        return (f"{head}. It asks for approval: {_clip(request, result_chars)}. "
                "Answer with update_async_task.")
    if r.get("error"):
        return f"{head}. {_clip(r['error'], result_chars)}"
    return f"{head}."


def _clip(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: max(0, limit - 1)] + "…"


_REPR = reprlib.Repr()
_REPR.maxstring, _REPR.maxother, _REPR.maxlevel = 500, 200, 8


def _json(value: Any) -> str:
    """``value`` as JSON; what JSON cannot hold (a tuple key, a cycle, bytes) as bounded text instead."""
    try:
        return json.dumps(value, default=_text)
    except Exception:  # noqa: BLE001 - a key JSON refuses, a cycle, a nesting too deep: shown as text
        return _text(value)


def _text(value: Any) -> str:
    """A bounded ``repr`` that never raises (long and deep values are cut short)."""
    try:
        return _REPR.repr(value)
    except Exception:  # noqa: BLE001 - a hostile __repr__: its type still says what it was
        return f"<{type(value).__name__}>"
