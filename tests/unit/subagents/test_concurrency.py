"""The cap's count: one across threads and event loops, places handed on in order, none lost to a waiter that left."""

from __future__ import annotations

import asyncio
import threading

import pytest

from subagents._runner import ConcurrencyLimit


def test_a_place_is_given_back_only_when_the_last_share_is_released():
    cap = ConcurrencyLimit(1)
    slot = cap.acquire()
    slot.share()  # an abandoned child's thread still working
    slot.release()  # the runner is done with it
    assert cap.running == 1
    slot.release()
    assert cap.running == 0
    slot.release()  # once more: nothing to give back twice
    assert cap.running == 0


def test_threads_and_two_event_loops_share_one_count():
    cap, active, peak, lock = ConcurrencyLimit(2), [0], [0], threading.Lock()

    def note(delta: int) -> None:
        with lock:
            active[0] += delta
            peak[0] = max(peak[0], active[0])

    def on_thread() -> None:
        with cap.hold():
            note(1)
            threading.Event().wait(0.05)
            note(-1)

    async def on_loop() -> None:
        async def one() -> None:
            async with cap.ahold():
                note(1)
                await asyncio.sleep(0.05)
                note(-1)

        await asyncio.gather(*(one() for _ in range(3)))

    workers = [threading.Thread(target=on_thread) for _ in range(3)]
    workers += [threading.Thread(target=asyncio.run, args=(on_loop(),)) for _ in range(2)]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join(10)
    assert peak[0] == 2 and cap.running == 0


def test_a_waiter_cancelled_as_it_is_given_the_place_passes_it_on():
    cap = ConcurrencyLimit(1)

    async def main() -> None:
        held = await cap.aacquire()
        first = asyncio.ensure_future(cap.aacquire())
        second = asyncio.ensure_future(cap.aacquire())
        await asyncio.sleep(0)
        held.release()  # the place goes to `first` ...
        first.cancel()  # ... which leaves before it can take it
        with pytest.raises(asyncio.CancelledError):
            await first
        slot = await asyncio.wait_for(second, 5)
        assert cap.running == 1
        slot.release()

    asyncio.run(main())
    assert cap.running == 0


def test_a_waiter_on_a_closed_loop_is_skipped():
    cap = ConcurrencyLimit(1)
    held = cap.acquire()
    loop = asyncio.new_event_loop()
    waiting = loop.create_task(cap.aacquire())
    loop.run_until_complete(asyncio.sleep(0.01))  # it is queued now
    loop.close()
    got = threading.Event()

    def thread_waiter() -> None:
        with cap.hold():
            got.set()

    worker = threading.Thread(target=thread_waiter)
    worker.start()
    held.release()
    assert got.wait(5), "the place went to a loop that can no longer run"
    worker.join(5)
    assert cap.running == 0
    del waiting


@pytest.mark.parametrize("value", [0, -1, 1.5, True])
def test_a_cap_must_be_a_positive_integer(value):
    with pytest.raises(ValueError, match="max_concurrent_tasks"):
        ConcurrencyLimit(value)
