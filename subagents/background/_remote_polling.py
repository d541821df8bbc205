"""Polling remote tasks in batches, within a time budget: what a parent turn spends on them.

Before each parent model call every live remote task is brought up to date.
Asking each one (a run and a thread read: 400 requests for 200 tasks) costs
seconds; instead, per server:

1. one ``threads.search(ids=...)`` for the status of every task's thread --
   a busy thread is a task still working, a waiting one still waits;
2. one more search for the values of the threads that ended (``idle``:
   completed; ``interrupted``: waiting for approval or cancelled);
3. only what that cannot settle (a failed run, an unknown thread) is read
   one by one, a few at a time.

All of it within the runner's ``refresh_budget_s``: what was learnt in time is
kept, the rest waits for the next turn, and a server that did not answer at
all counts as a failure for its circuit (its tasks get a note).

Example (on the background loop)::

    results = await poll(runner, live_records)   # {task id: (fields, note)}
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from subagents.background._remote_health import ServerUnavailable
from subagents.background._remote_states import ENDED_THREAD_STATUSES, fields_from_thread

if TYPE_CHECKING:
    from subagents.background._remote import RemoteTaskRunner
    from subagents.background._remote_spec import RemoteSubagentSpec

_SEARCH_PAGE = 1000
_DETAIL_CONCURRENCY = 16


async def poll(runner: RemoteTaskRunner, records: Sequence[Mapping[str, Any]]
               ) -> dict[str, tuple[dict[str, Any], str | None]]:
    """Refresh many tasks at once: batched requests per server, all within ``refresh_budget_s``.

    Returns ``{task id: (fields, note)}``. What was learnt before the
    budget ran out is kept; a task not reached in time keeps its fields
    (and note) for the next turn. A server that did not answer at all in
    the budget counts as a failure for its circuit, and its tasks get a note.
    """
    out: dict[str, tuple[dict[str, Any], str | None]] = {}
    answered: set[str] = set()
    groups: dict[str, tuple[RemoteSubagentSpec, list[Mapping[str, Any]]]] = {}
    for record in records:
        spec = runner.specs.get(record["agent_type"])
        if spec is None:
            out[record["id"]] = ({}, f"no remote subagent named {record['agent_type']!r} is configured here")
            continue
        groups.setdefault(spec.url, (spec, []))[1].append(record)
    jobs = {url: asyncio.ensure_future(_refresh_server(runner, spec, recs, out, answered))
            for url, (spec, recs) in groups.items()}
    try:
        if jobs:
            await asyncio.wait(jobs.values(), timeout=runner.refresh_budget_s)
    except asyncio.CancelledError:  # a caller's own deadline came first: leave no request behind
        for job in jobs.values():
            job.cancel()
        raise
    for url, job in jobs.items():
        if not job.done():
            job.cancel()
        elif not job.cancelled() and job.exception() is not None:
            answered.discard(url)
        left = [r for r in groups[url][1] if r["id"] not in out]
        if not left:
            continue
        if url in answered:  # a slow answer, not a dead server: the rest waits for the next turn
            out.update({r["id"]: ({}, r.get("note")) for r in left})
            continue
        failure = runner.pool.health.failed(url, f"no answer within the {runner.refresh_budget_s:g} s poll budget")
        note = runner.pool.health.note(url) or str(failure)
        out.update({r["id"]: ({}, note) for r in left})
    return out


async def _refresh_server(runner: RemoteTaskRunner, spec: RemoteSubagentSpec, records: list[Mapping[str, Any]],
                          out: dict[str, tuple[dict[str, Any], str | None]], answered: set[str]) -> None:
    """Fill ``out`` for ``records``: a status search, a values search for the finished, then the rest one by one."""
    try:
        states = await _thread_rows(runner, spec, [r["thread_id"] for r in records], ["thread_id", "status"])
        answered.add(spec.url)
    except ServerUnavailable as exc:
        note = runner.pool.health.note(spec.url) or str(exc)
        out.update({r["id"]: ({}, note) for r in records})
        return
    except Exception:  # noqa: BLE001 - a server without batched search: read each task
        states = {}
    stale = []
    for record in records:
        known = _known(record, (states.get(record["thread_id"]) or {}).get("status"))
        if known is not None:
            out[record["id"]] = (known, None)
        else:
            stale.append(record)
    ended = [r["thread_id"] for r in stale if (states.get(r["thread_id"]) or {}).get("status")
             in ENDED_THREAD_STATUSES]
    if ended:
        try:
            rows = await _thread_rows(runner, spec, ended, ["thread_id", "status", "values", "interrupts"])
        except ServerUnavailable:
            raise
        except Exception:  # noqa: BLE001 - read them one by one below
            rows = {}
        for record in stale:
            fields = _settled_by(rows.get(record["thread_id"]))
            if fields is not None:
                out[record["id"]] = (fields, None)
    gate = asyncio.Semaphore(_DETAIL_CONCURRENCY)

    async def one(record: Mapping[str, Any]) -> None:
        async with gate:
            out[record["id"]] = await runner.refresh(record)

    await asyncio.gather(*(one(r) for r in stale if r["id"] not in out))


async def _thread_rows(runner: RemoteTaskRunner, spec: RemoteSubagentSpec, thread_ids: list[str],
                       select: list[str]) -> dict[str, dict[str, Any]]:
    client = runner.client(spec)
    rows: dict[str, dict[str, Any]] = {}
    for i in range(0, len(thread_ids), _SEARCH_PAGE):
        page = thread_ids[i:i + _SEARCH_PAGE]
        found = await runner.request(spec, client.threads.search(ids=page, select=select, limit=len(page)),
                                   poll=True)
        rows.update({row["thread_id"]: row for row in found})
    return rows


def _settled_by(row: Any) -> dict[str, Any] | None:
    """What a thread row settles, or ``None``: a row this cannot read is read one by one, and only
    that task is told why (the server answered, so it is no outage of the others)."""
    try:
        return fields_from_thread(row) if isinstance(row, Mapping) else None
    except Exception:  # noqa: BLE001 - a server's data, written by anyone
        return None


def _known(record: Mapping[str, Any], thread_status: str | None) -> dict[str, Any] | None:
    """The fields a batched thread status alone tells (``{}``: none changed), or ``None`` if it needs a full read."""
    if thread_status == "busy" and record.get("status") == "running":
        return {}
    if thread_status == "busy" and record.get("status") == "pending":
        return {"status": "running"}  # its run has begun: the ledger and list_async_tasks say so
    if thread_status == "interrupted" and record.get("status") == "waiting_for_approval":
        return {}
    return None
