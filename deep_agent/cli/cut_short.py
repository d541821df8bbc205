"""Tasks a run's end cut short: kept in the thread as ``cancelled``, with their transcript.

A ``task`` delegation writes its record into the thread's ledger when its
tool call returns. Ctrl-C (or a failing sibling) ends the turn before that,
so without this the task vanished from ``deep-agent tasks`` and
``deep-agent transcript``, though its JSONL transcript was written and ends
with ``{"type": "cancelled"}``. :func:`cut_short_records` turns what the live
tree saw of such tasks into ledger records for the session to write.

Example::

    records = cut_short_records(tree, thread_id, sessions_dir(state))
    await agent.aupdate_state(config, {LEDGER_KEY: records}, as_node="model")
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from deep_agent.cli.live_view import TaskTree
from middleware.task_tool import ledger_entry
from subagents.outcome import TaskRecord
from subagents.transcripts import jsonl_path

UNFINISHED = frozenset({"pending", "running", "waiting_for_approval"})
REASON = "cancelled: the run ended (Ctrl-C or an error) before the task did"


def cut_short_records(tree: TaskTree, thread_id: str, sessions: Path) -> dict[str, dict[str, Any]]:
    """Ledger records, as ``cancelled``, for this turn's delegations that started and never recorded an end."""
    now = time.time()
    calls = {call.get("id"): call for message in tree.messages
             for call in getattr(message, "tool_calls", None) or ()}
    records: dict[str, dict[str, Any]] = {}
    for row in tree.rows():
        if row.kind != "task" or row.status not in UNFINISHED or row.id in tree.sync:
            continue
        args = (calls.get(row.tool_call_id) or {}).get("args") or {}
        transcript = jsonl_path(sessions, thread_id, row.id)
        started = row.started_at if row.started_at is not None else now
        waiting = row.waiting(now)
        record = TaskRecord(
            id=row.id, agent_type=row.agent_type, tool_call_id=row.tool_call_id, status="cancelled",
            stop_reason="cancelled", description=str(args.get("description") or ""), error=REASON,
            started_at=started, finished_at=now, duration_ms=round(max(0.0, now - started - waiting) * 1000, 3),
            waiting_ms=round(waiting * 1000, 3), model_calls=row.model_calls, input_tokens=row.input_tokens,
            output_tokens=row.output_tokens, transcript=f"jsonl:{transcript}" if transcript.is_file() else None,
        )
        records[row.id] = ledger_entry(record.model_dump())
    return records
