"""Waiting for remote tasks on the server's join: told the moment a run ends, not at the next poll.

:func:`settle_remote` is what :func:`~subagents.wait_for_background` does
with live remote tasks, on the runtime's loop:

* each task gets a join (``GET /threads/{id}/runs/{id}/join``) -- a server long-poll that answers when the
  run ends, as raw ``langgraph-sdk`` waits -- at most
  :data:`~subagents.background._remote_clients.MAX_JOINS` open at once per
  server and credentials (each holds a connection; starts and polls need
  the rest of the pool). One join attempt lasts at most the spec's
  ``timeout_s`` and the time left, then the task is joined again;
* whenever a join answers, the live tasks are refreshed once (the batched
  poll of :mod:`subagents.background._remote_polling`), which records the
  outcome -- completed, error, waiting for approval -- in the records;
* a task without an open join (queued behind the cap, or its join failed:
  an error, a dropped connection, an open circuit) is polled every
  ``every_s``, as before joins; with every task joined a poll still runs
  every :data:`FALLBACK_POLL_S`, in case a server keeps a join open after
  its run ended.

Nothing here raises and nothing outlives the deadline: at the deadline the
open joins are cancelled and the records are returned as they stand, with
``False``.

Example (on the background loop)::

    records, settled = await settle_remote(tasks, remote_records, deadline=time.monotonic() + 30)
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Literal
from urllib.parse import quote

from subagents.background._ledger import ACTIVE_STATUSES, merge_async_records

if TYPE_CHECKING:
    from subagents.background._remote import RemoteTaskRunner
    from subagents.background._tasks import BackgroundTasks

FALLBACK_POLL_S = 1.0
"""How often tasks that all have a join open are polled anyway."""

_State = Literal["queued", "open", "ended", "failed"]


async def settle_remote(tasks: BackgroundTasks, records: Mapping[str, Mapping[str, Any]], *,
                        deadline: float, every_s: float = 0.1) -> tuple[dict[str, dict[str, Any]], bool]:
    """Wait until no remote record of ``records`` is pending or running, or ``deadline`` (``time.monotonic``).

    Returns the records as last seen and whether they settled in time.
    Never raises for a server's faults; never runs past the deadline.
    """
    remote = {k: dict(v) for k, v in records.items()}
    woke = asyncio.Event()
    states: dict[str, _State] = {}
    joins: dict[str, asyncio.Task[None]] = {}
    try:
        while live := {k: r for k, r in remote.items() if r.get("status") in ACTIVE_STATUSES}:
            for task_id, record in live.items():
                if task_id not in joins:
                    joins[task_id] = asyncio.ensure_future(
                        _join(tasks.remote, record, states, woke, deadline))
            await asyncio.sleep(0)  # let new joins take their places under the cap before choosing the interval
            if (left := deadline - time.monotonic()) <= 0:
                return remote, False
            polling = any(states.get(k) != "open" for k in live)
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(min(left, every_s if polling else max(every_s, FALLBACK_POLL_S))):
                    await woke.wait()
            woke.clear()
            if (left := deadline - time.monotonic()) <= 0:
                return remote, False
            try:
                async with asyncio.timeout(left):
                    updates = await tasks.refresh(live, settle_s=0)
            except TimeoutError:
                return remote, False
            remote = merge_async_records(remote, updates)
        return remote, True
    finally:
        for join in joins.values():
            join.cancel()
        await asyncio.gather(*joins.values(), return_exceptions=True)


async def _join(runner: RemoteTaskRunner, record: Mapping[str, Any], states: dict[str, _State],
                woke: asyncio.Event, deadline: float) -> None:
    """Join the task's run until it ends (``ended``, and ``woke`` is set) or the join fails (``failed``)."""
    task_id = record["id"]
    states[task_id] = "queued"
    try:
        spec = runner.specs[record["agent_type"]]
        # runs.join's own GET, without its reconnect: a dropped join is polled at once instead of
        # retried after seconds of sleep (with a warning each time).
        path = f"/threads/{quote(str(record['thread_id']), safe='')}/runs/{quote(str(record['run_id']), safe='')}/join"
        gate = runner.pool.join_gate(spec)
        async with gate:
            states[task_id] = "open"
            while (left := deadline - time.monotonic()) > 0:
                runner.pool.health.check(spec.url)  # an open circuit: poll instead (it backs off)
                with contextlib.suppress(TimeoutError):
                    async with asyncio.timeout(min(left, spec.timeout_s)):
                        await runner.client(spec).http.get(path)
                        states[task_id] = "ended"
                        woke.set()
                        return
        states[task_id] = "failed"
    except asyncio.CancelledError:
        raise
    except Exception:  # noqa: BLE001 - any failure of a join: the task is polled instead
        states[task_id] = "failed"
        woke.set()
