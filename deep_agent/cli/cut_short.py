"""Tasks a run's end cut short: kept in the thread as ``cancelled``, with their transcript.

A delegation records itself when its tool call returns; Ctrl-C (or a failing sibling) ends the turn
before that, so the live tree's view of such tasks becomes their ledger records here.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from deep_agent.cli.live_view import UNFINISHED, TaskTree
from middleware.task_tool import ledger_entry
from subagents.metering import token_count
from subagents.outcome import TaskRecord
from subagents.transcripts import jsonl_path, read_jsonl

REASON = "cancelled: the run ended (Ctrl-C or an error) before the task did"


def cut_short_records(tree: TaskTree, thread_id: str, sessions: Path) -> dict[str, dict[str, Any]]:
    """Ledger records, as ``cancelled``, for this turn's delegations that started and never recorded an end."""
    now = time.time()
    calls = _calls(tree)
    records: dict[str, dict[str, Any]] = {}
    for row in tree.rows():
        if row.kind != "task" or row.status not in UNFINISHED | {"cancelled"} or row.id in tree.sync:
            continue
        args = (calls.get(row.tool_call_id) or {}).get("args") or {}
        transcript = jsonl_path(sessions, thread_id, row.id)
        started = row.started_at if row.started_at is not None else now
        record = TaskRecord(
            id=row.id, agent_type=row.agent_type, tool_call_id=row.tool_call_id, status="cancelled",
            stop_reason="cancelled", description=str(args.get("description") or ""), error=REASON,
            started_at=started, finished_at=now, duration_ms=round(row.seconds(now) * 1000, 3),
            waiting_ms=round(row.waiting(now) * 1000, 3), model_calls=row.model_calls,
            input_tokens=row.input_tokens, output_tokens=row.output_tokens,
            transcript=f"jsonl:{transcript}" if transcript.is_file() else None,
        )
        records[row.id] = ledger_entry(record.model_dump())
    return records


def add_unseen_tasks(tree: TaskTree, thread_id: str, sessions: Path) -> None:
    """Put in the tree, as ``cancelled``, this turn's ``task`` calls that have a transcript and no row (a Ctrl-C
    as a child starts can end the stream before its events arrive). Never raises."""
    try:
        folder = jsonl_path(sessions, thread_id, "x").parent
        paths = list(folder.glob("agent-*.jsonl")) if folder.is_dir() else []
        calls = _calls(tree)
        for path in paths:
            if path.stat().st_mtime < tree.started_at:
                continue
            header, messages = read_jsonl(path)
            meta = header["metadata"] if isinstance(header.get("metadata"), dict) else {}
            task_id, call_id = header.get("id"), meta.get("tool_call_id")
            if not isinstance(task_id, str) or task_id in tree.live or task_id in tree.sync or call_id not in calls:
                continue
            spent = [getattr(m, "usage_metadata", None) or {} for m in messages if m.type == "ai"]
            tree.live[task_id] = {
                "agent_type": str(meta.get("agent_type") or "?"), "tool_call_id": call_id, "status": "cancelled",
                "started_at": path.stat().st_ctime, "model_calls": len(spent),
                "input_tokens": sum(token_count(s.get("input_tokens")) for s in spent),
                "output_tokens": sum(token_count(s.get("output_tokens")) for s in spent),
            }
    except Exception:  # noqa: BLE001 - an unreadable folder or file: the tree keeps what it saw
        return


def _calls(tree: TaskTree) -> dict[Any, Any]:
    return {call.get("id"): call for message in tree.messages for call in getattr(message, "tool_calls", None) or ()}
