"""Adopting orphaned remote tasks: runs a parent started but never recorded.

A parent that dies while starting remote tasks may leave runs on the server
that its ledger never saw: the tool step is lost with the process, and if
the user sends a new message instead of resuming, nothing starts them again.
Those runs still work, and still cost. So before a model call the parent
looks for ``start_async_task`` calls in its messages that name a remote
subagent and have no ledger record (:func:`unrecorded_starts`), asks each
server once for the threads whose metadata names this parent thread, and
takes the matching ones into its ledger (:func:`adopt_orphans`). Each call
is looked for once per process, so a start that simply failed costs one
search, not one per turn.

Example (on the background loop)::

    missing = unrecorded_starts(state["messages"], ledger, runner.specs, "start_async_task")
    records = await adopt_orphans(runner, parent_thread_id, missing)   # {task id: record}
"""

from __future__ import annotations

import asyncio
from collections.abc import Collection, Iterable, Mapping
from typing import TYPE_CHECKING, Any

from subagents._runner import TASK_ID_METADATA_KEY
from subagents.background._ledger import AsyncTaskRecord, is_count, now
from subagents.background._remote_states import run_id_of, run_status

if TYPE_CHECKING:
    from subagents.background._remote import RemoteTaskRunner

_SEARCH_LIMIT = 1000


def unrecorded_starts(messages: Iterable[Any], ledger: Mapping[str, Mapping[str, Any]],
                      remote_names: Collection[str], start_tool: str) -> dict[str, tuple[str, str]]:
    """``{tool call id: (subagent_type, description)}`` of remote starts with no ledger record.

    ``start_tool`` is the name of the tool that starts tasks, as the middleware that owns it calls it.
    """
    recorded = {r.get("tool_call_id") for r in ledger.values()}
    missing: dict[str, tuple[str, str]] = {}
    for message in messages:
        for call in getattr(message, "tool_calls", None) or ():
            args = call.get("args") or {}
            kind = args.get("subagent_type")
            if call.get("name") == start_tool and kind in remote_names and call.get("id") not in recorded:
                missing[call["id"]] = (str(kind), str(args.get("description") or ""))
    return missing


class OrphanSearch:
    """Which unrecorded remote starts are still to be looked for: each once per process."""

    def __init__(self, remote_names: Collection[str], start_tool: str) -> None:
        self.remote_names, self.start_tool = remote_names, start_tool
        self._looked_for: set[tuple[str, str]] = set()

    def due(self, messages: Iterable[Any], ledger: Mapping[str, Mapping[str, Any]],
            parent_thread_id: str | None) -> tuple[str, dict[str, tuple[str, str]]] | None:
        """``(parent thread id, missing starts)`` to pass to :func:`adopt_orphans`, or ``None``."""
        if not self.remote_names or not parent_thread_id:
            return None
        missing = unrecorded_starts(messages, ledger, self.remote_names, self.start_tool)
        fresh = {k: v for k, v in missing.items() if (parent_thread_id, k) not in self._looked_for}
        self._looked_for.update((parent_thread_id, k) for k in fresh)
        return (parent_thread_id, fresh) if fresh else None


async def adopt_orphans(runner: RemoteTaskRunner, parent_thread_id: str,
                        missing: Mapping[str, tuple[str, str]]) -> dict[str, dict[str, Any]]:
    """Ledger records for the server threads that belong to the ``missing`` starts.

    Never raises, and takes at most the runner's ``refresh_budget_s``: a
    server that cannot be asked in time is asked again in a later process.
    """
    records: dict[str, dict[str, Any]] = {}
    try:
        async with asyncio.timeout(runner.refresh_budget_s):
            await _adopt_into(records, runner, parent_thread_id, missing)
    except Exception:  # noqa: BLE001 - best effort: out of time, or a server's answer it cannot read
        pass
    return records


async def _adopt_into(records: dict[str, dict[str, Any]], runner: RemoteTaskRunner, parent_thread_id: str,
                      missing: Mapping[str, tuple[str, str]]) -> None:
    specs = {runner.specs[kind].url: runner.specs[kind] for kind, _ in missing.values() if kind in runner.specs}
    for spec in specs.values():
        try:
            rows = await runner.request(spec, runner.client(spec).threads.search(
                metadata={"parent_thread_id": parent_thread_id}, select=["thread_id", "metadata"],
                limit=_SEARCH_LIMIT), poll=True)
        except Exception:  # noqa: BLE001 - adoption is best effort
            continue
        for row in rows if isinstance(rows, list) else ():
            meta = row.get("metadata") if isinstance(row, Mapping) else None
            if not isinstance(meta, Mapping):
                continue
            call_id = meta.get("tool_call_id")
            task_id = meta.get(TASK_ID_METADATA_KEY)
            if (not isinstance(call_id, str) or call_id not in missing or not isinstance(task_id, str)
                    or not task_id or missing[call_id][0] != meta.get("agent_type")):
                continue
            attempt = meta.get("attempt") or 1
            if not is_count(attempt):  # a server's metadata, written by anyone: not a count to carry on
                continue
            if task_id in records and records[task_id]["attempt"] >= attempt:
                continue
            try:
                run = await runner.latest_run(spec, row["thread_id"])
                if run is not None:
                    records[task_id] = _record(task_id, missing[call_id], call_id, row["thread_id"], run, attempt)
            except Exception:  # noqa: BLE001 - adoption is best effort (a server's answer it cannot read)
                continue


def _record(task_id: str, call: tuple[str, str], call_id: str, thread_id: str, run: Mapping[str, Any],
            attempt: int) -> dict[str, Any]:
    agent_type, description = call
    return AsyncTaskRecord(
        id=task_id, agent_type=agent_type, runner="remote", status=run_status(run.get("status")),
        description=description, tool_call_id=call_id, created_at=now(), started_at=now(),
        thread_id=thread_id, run_id=run_id_of(run), attempt=attempt,
    ).model_dump()
