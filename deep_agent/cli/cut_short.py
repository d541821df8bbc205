"""Tasks a run's end cut short: kept in the thread as ``cancelled``, with their transcript.

A ``task`` delegation writes its record into the thread's ledger when its
tool call returns. Ctrl-C (or a failing sibling) ends the turn before that,
so without this the task vanished from ``deep-agent tasks`` and
``deep-agent transcript``, though its JSONL transcript was written and ends
with ``{"type": "cancelled"}``. :func:`cut_short_records` turns what the live
tree saw of such tasks into ledger records for the session to write; a task
whose events the stream never delivered (Ctrl-C as it started) is put in the
tree first by :func:`add_unseen_tasks`, from its transcript, which the runner
opens before the child starts.

Example::

    add_unseen_tasks(tree, thread_id, sessions_dir(state))
    tree.cut_short("interrupted")  # the live view's last frame shows them all cancelled
    records = cut_short_records(tree, thread_id, sessions_dir(state))
    await agent.aupdate_state(config, {LEDGER_KEY: records}, as_node="model")
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
    """Ledger records, as ``cancelled``, for this turn's delegations that started and never recorded an end.

    The tree's rows once :meth:`TaskTree.cut_short` has run: open ones and those that ended as cancelled (an
    event, no record), with those :func:`add_unseen_tasks` found by their transcript.
    """
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
    """Put in the tree, as ``cancelled``, this turn's ``task`` calls that have a transcript and no row.

    The runner opens a task's transcript before its child starts; a Ctrl-C at
    that moment can end the stream before the task's events reach the tree.
    Never raises: the turn's own end is the one to report.
    """
    try:
        folder = jsonl_path(sessions, thread_id, "x").parent
        paths = list(folder.glob("agent-*.jsonl")) if folder.is_dir() else []
        calls = _calls(tree)
        for path in paths:
            if path.stat().st_mtime < tree.started_at:
                continue
            header, messages = read_jsonl(path)
            meta = header.get("metadata")
            meta = meta if isinstance(meta, dict) else {}
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
