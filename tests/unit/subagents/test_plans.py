"""A plan written once runs its own clean-up when its call is interrupted, on both drivers.

A plan may hold a ``with`` block across a call (the root's budget sets the meter its call is counted by): a
cancellation or Ctrl-C in that call must leave the block at once, not whenever the suspended plan is collected.
"""

from __future__ import annotations

import asyncio
from collections.abc import Generator

import pytest

from subagents._plans import adrive, drive


def _plan(left: list[str]) -> Generator[str, str, str]:
    try:
        return (yield "call")
    finally:
        left.append("cleaned up")


def test_an_interrupted_call_is_thrown_into_the_plan() -> None:
    def interrupted(step: str) -> str:
        raise KeyboardInterrupt

    left: list[str] = []
    plan = _plan(left)  # still referenced: only the driver can end it
    with pytest.raises(KeyboardInterrupt):
        drive(plan, interrupted)
    assert left == ["cleaned up"]


def test_a_cancelled_call_is_thrown_into_the_plan() -> None:
    async def cancelled(step: str) -> str:
        raise asyncio.CancelledError

    left: list[str] = []
    plan = _plan(left)
    with pytest.raises(asyncio.CancelledError):
        asyncio.run(adrive(plan, cancelled))
    assert left == ["cleaned up"]
