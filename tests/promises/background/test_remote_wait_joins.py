"""The pause between a wait's polls: cut short by a run's end, never a loop, never a leak.

``settle_remote`` joins one live task at a time while it waits, so the poll
after a run ends comes at once instead of at the next tick. These tests drive
it against a stand-in for the background tasks (its server answers scripted
here), to pin what no real server does on cue: a join that fails, a join
that returns while the status still says running, a join that never returns.
"""

from __future__ import annotations

import asyncio
import time
from typing import Any

import pytest

from subagents.background._tasks import JOIN_AT_MOST, settle_remote

pytestmark = pytest.mark.busy  # .ci/run runs it again with every core hogged


class _Server:
    """Scripted answers: each task is ``running`` until ``ends_at`` (monotonic), then ``completed``."""

    def __init__(self, ends_at: float, *, join: str = "waits", lag_polls: int = 0) -> None:
        self.ends_at, self.join_mode, self.lag_polls = ends_at, join, lag_polls
        self.polls = 0
        self.joins: list[str] = []
        self.open_joins = 0
        self.remote = self  # settle_remote reaches the runner as tasks.remote

    async def refresh(self, live: dict[str, Any]) -> dict[str, dict[str, Any]]:
        self.polls += 1
        ended = time.monotonic() >= self.ends_at
        if ended and self.lag_polls > 0:
            self.lag_polls -= 1
            ended = False
        return {k: {"status": "completed" if ended else "running"} for k in live}

    def keep_waited(self, before: Any, after: Any) -> None:
        """What a wait read is kept for the next turn (by the real tasks); nothing to keep here."""

    def reads_by_join(self, record: dict[str, Any]) -> bool:
        return False  # a server whose polls read answers in batches (langgraph dev)

    async def remote_end(self, record: dict[str, Any], fields: dict[str, Any]) -> dict[str, Any]:
        return fields

    async def join(self, record: dict[str, Any]) -> dict[str, Any] | None:
        self.joins.append(record["id"])
        if self.join_mode == "answers":  # the join's body holds the answer
            await asyncio.sleep(max(0.0, self.ends_at - time.monotonic()))
            return {"status": "completed", "result": f"answer of {record['id']}"}
        if self.join_mode == "fails":
            raise ConnectionError("the server dropped the join")
        if self.join_mode == "returns":
            return
        self.open_joins += 1
        try:
            if self.join_mode == "hangs":
                await asyncio.sleep(3600)
            await asyncio.sleep(max(0.0, self.ends_at - time.monotonic()))
        finally:
            self.open_joins -= 1


def _records(n: int) -> dict[str, dict[str, Any]]:
    return {f"t{i}": {"id": f"t{i}", "runner": "remote", "status": "running", "agent_type": "w",
                      "thread_id": f"th{i}", "run_id": f"r{i}"} for i in range(n)}


async def _settle(server: _Server, n: int, *, every_s: float, within: float) -> tuple[bool, float]:
    began = time.monotonic()
    _, settled = await settle_remote(server, _records(n), deadline=began + within, every_s=every_s)  # type: ignore[arg-type]
    return settled, time.monotonic() - began


async def test_a_run_that_ends_is_seen_at_once_whatever_the_poll_interval():
    server = _Server(ends_at=time.monotonic() + 0.3)
    settled, _ = await _settle(server, 3, every_s=30.0, within=20.0)
    assert settled  # before the deadline (20 s), so not at the timer's next tick (30 s)
    assert server.joins == ["t0"] and server.polls == 2


async def test_a_join_that_brings_the_answer_settles_its_task_with_no_poll_reading_it_again():
    server = _Server(ends_at=time.monotonic() + 0.3, join="answers")
    remote, settled = await settle_remote(server, _records(1), deadline=time.monotonic() + 20,  # type: ignore[arg-type]
                                          every_s=30.0)
    assert settled and remote["t0"]["status"] == "completed" and remote["t0"]["result"] == "answer of t0"
    assert server.joins == ["t0"] and server.polls == 1  # the poll before the join, none after it


async def test_a_failed_join_leaves_the_wait_to_the_timer_and_is_not_retried():
    server = _Server(ends_at=time.monotonic() + 0.5, join="fails")
    settled, _ = await _settle(server, 3, every_s=0.05, within=10.0)
    assert settled
    assert server.joins == ["t0"], server.joins


async def test_a_join_that_returns_before_the_status_moves_joins_each_task_once_not_in_a_loop():
    server = _Server(ends_at=time.monotonic(), join="returns", lag_polls=5)
    settled, took = await _settle(server, 2, every_s=0.1, within=10.0)
    assert settled
    assert sorted(server.joins) == ["t0", "t1"]  # then the timer: at least three pauses of 0.1 s
    assert took >= 0.25 and server.polls == 6


@pytest.mark.parametrize("every_s", [0.05, 30.0])
async def test_a_join_that_never_returns_does_not_stretch_the_deadline_and_is_closed(every_s):
    server = _Server(ends_at=time.monotonic() + 3600, join="hangs")
    # An hour had the join stretched it: the guard catches that hang (it is no budget).
    settled, took = await asyncio.wait_for(_settle(server, 2, every_s=every_s, within=0.6), 120)
    assert settled is False and took >= 0.55, f"{settled} after {took:.2f} s"
    await asyncio.sleep(0)  # let the cancelled join unwind
    assert server.open_joins == 0


async def test_a_cancelled_wait_closes_its_join():
    server = _Server(ends_at=time.monotonic() + 3600, join="hangs")
    waiting = asyncio.ensure_future(_settle(server, 1, every_s=0.05, within=60.0))
    await asyncio.sleep(0.3)
    waiting.cancel()
    with pytest.raises(asyncio.CancelledError):
        await waiting
    await asyncio.sleep(0)
    assert server.joins == ["t0"] and server.open_joins == 0


@pytest.mark.parametrize(("tasks", "joined"), [(JOIN_AT_MOST + 4, []), (JOIN_AT_MOST, ["t0"])])
async def test_many_live_tasks_are_left_to_the_timer_and_the_last_few_are_joined(tasks, joined):
    server = _Server(ends_at=time.monotonic() + 0.3)
    settled, _ = await _settle(server, tasks, every_s=0.05, within=10.0)
    assert settled and server.joins == joined
