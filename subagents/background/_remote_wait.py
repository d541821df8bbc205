"""Waiting for remote tasks: batched polls on the runtime's loop, never past the deadline.

:func:`settle_remote` is what :func:`~subagents.wait_for_background` does
with live remote tasks: the per-turn batched poll
(:mod:`subagents.background._remote_polling`, one status search per server)
every ``every_s``, until none is pending or running. The whole wait is one
coroutine on the runtime's loop, so each poll costs no hop between threads,
and every await is bounded by the time left: a server that hangs, dies or
answers slowly makes the wait return ``False`` at its deadline, never raise.

Between polls one task at a time is also joined (``runs.join``, a long-poll
the server answers when the run ends), so the end of a batch is seen as soon
as the server knows it rather than up to ``every_s`` later: see
:class:`_EndWatch`.

Why polling and not only the server's join (``runs.join``, a long-poll answered
when the run ends, which raw ``langgraph-sdk`` uses): a join streams the
whole run to the waiter, which costs the server more than a batched status
search. Measured on ``langgraph dev`` with 50 tasks, 32 joins open at once
made them settle in 3.3 s instead of 1.9 s by polling every 50 ms (raw SDK
with a join each: 2.2 s); 4 joins, 2.3 s.

Example (on the background loop)::

    records, settled = await settle_remote(tasks, remote_records, deadline=time.monotonic() + 30)
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from subagents.background._ledger import ACTIVE_STATUSES, merge_async_records

if TYPE_CHECKING:
    from subagents.background._tasks import BackgroundTasks


async def settle_remote(tasks: BackgroundTasks, records: Mapping[str, Mapping[str, Any]], *,
                        deadline: float, every_s: float = 0.1) -> tuple[dict[str, dict[str, Any]], bool]:
    """Poll until no record of ``records`` is pending or running, or ``deadline`` (``time.monotonic``).

    Returns the records as last seen and whether they settled in time.
    Never raises for a server's faults; never runs past the deadline.
    """
    remote = {k: dict(v) for k, v in records.items()}
    watch = _EndWatch(tasks)
    try:
        while live := {k: r for k, r in remote.items() if r.get("status") in ACTIVE_STATUSES}:
            if (left := deadline - time.monotonic()) <= 0:
                return remote, False
            try:
                async with asyncio.timeout(left):
                    updates = await tasks.refresh(live)
            except TimeoutError:
                return remote, False
            remote = merge_async_records(remote, updates)
            if still := [r for r in remote.values() if r.get("status") in ACTIVE_STATUSES]:
                await watch.pause(still, max(0.0, min(every_s, deadline - time.monotonic())))
        return remote, True
    finally:
        watch.close()


JOIN_AT_MOST = 16
"""Join only while this few tasks are live: a batch's end is worth seeing at once, but with many
tasks ending one after another each join brings a poll of them all (at N = 200 that was slower)."""


class _EndWatch:
    """The pause between polls, cut short when a run the server is watching for us ends.

    One join at a time, on the oldest live task: a batch of tasks started
    together mostly ends together, so the poll that follows the first end
    finds the rest, up to ``every_s`` sooner than the timer would (only while
    at most :data:`JOIN_AT_MOST` are live). Each task
    is joined at most once (a status that lags the join cannot loop), and
    the first join that fails -- a server that refuses or drops joins, or a
    run longer than the client's read timeout -- leaves the rest of this wait
    to the timer alone.
    """

    def __init__(self, tasks: BackgroundTasks) -> None:
        self.tasks = tasks
        self.job: asyncio.Future[Any] | None = None
        self.joined: set[str] = set()
        self.broken = False

    async def pause(self, live: Sequence[Mapping[str, Any]], seconds: float) -> None:
        if self.job is not None and self.job.done():
            failed = self.job.cancelled() or self.job.exception() is not None
            self.broken, self.job = self.broken or failed, None
        if self.job is None and not self.broken and len(live) <= JOIN_AT_MOST:
            record = next((r for r in live if r.get("runner") == "remote" and r.get("run_id")
                           and r["id"] not in self.joined), None)
            if record is not None:
                self.joined.add(record["id"])
                self.job = asyncio.ensure_future(self.tasks.remote.join(record))
        if self.job is None:
            await asyncio.sleep(seconds)
        else:
            await asyncio.wait({self.job}, timeout=seconds)

    def close(self) -> None:
        if self.job is not None and not self.job.done():
            self.job.cancel()
        elif self.job is not None and not self.job.cancelled():
            self.job.exception()  # retrieved: a failed join is no news to report
