"""The completion notice stays bounded whatever the number and size of finished tasks."""

from __future__ import annotations

import asyncio
import threading
from typing import Any

from langchain.agents import create_agent
from langgraph.checkpoint.memory import InMemorySaver
from hypothesis import given, settings
from hypothesis import strategies as st

from helpers.background import ledger, notices, start
from helpers.graphs import user
from deep_agent._testing import ScriptedChatModel
from middleware import BackgroundSubagentMiddleware
from middleware._background import capped_notice
from subagents import wait_for_background
from subagents._settings import DelegationSettings

TASKS = 60
ANSWER = "x" * 5000


class _Gated(ScriptedChatModel):
    """Answers once ``gate`` is open (waiting for it at most a minute, a hang guard)."""

    gate: Any = None

    def _generate(self, *args: Any, **kwargs: Any) -> Any:
        self.gate.wait(60)
        return super()._generate(*args, **kwargs)

    async def _agenerate(self, *args: Any, **kwargs: Any) -> Any:
        for _ in range(6000):  # polled, not waited for in a thread: the loop's own threads stay free
            if self.gate.is_set():
                break
            await asyncio.sleep(0.01)
        return await super()._agenerate(*args, **kwargs)


def test_many_large_local_results_make_one_capped_notice_pointing_to_check(run):
    # None answers before the first turn has ended, however loaded the machine: the gate opens after it.
    worker = _Gated(default=ANSWER, gate=threading.Event())
    parent = ScriptedChatModel(
        rules=[("Background task updates", ["noted"]),
               ("PARENT start", [start(*[(f"job {i}", "worker") for i in range(TASKS)]), "started"])],
        default="ok",
    )
    middleware = BackgroundSubagentMiddleware(
        [{"name": "worker", "description": "Answers at length.", "model": worker}],
        settings=DelegationSettings.of(
            general_purpose=False, max_background_tasks=TASKS, max_delegations=None, notice_result_chars=3000,
            notice_total_chars=10_000,
        ),
    )
    agent = create_agent(parent, middleware=[middleware], checkpointer=InMemorySaver())
    config = {"configurable": {"thread_id": f"cap-{run.mode}"}}
    out = run(agent, user("PARENT start"), config)
    assert not notices(out)
    worker.gate.set()
    assert wait_for_background(ledger(out), timeout_s=60)
    out = run(agent, user("PARENT news"), config)
    (notice,) = notices(out)
    assert len(notice) <= 10_000
    assert notice.count("Result: ") == 3, "whole results up to the cap, each clipped to 3000 chars"
    assert f"...and {TASKS - 3} more updates" in notice and "check_async_task" in notice
    assert all(r["announced"] for r in ledger(out).values()), "the rest are pointed to, not announced again"
    out = run(agent, user("PARENT later"), config)
    assert len(notices(out)) == 1, "no second notice for the same tasks"


LINES = st.lists(st.text(st.characters(exclude_characters="\n"), max_size=400), max_size=60)


@settings(max_examples=200, deadline=None)
@given(lines=LINES, limit=st.integers(200, 5000))
def test_a_capped_notice_never_exceeds_its_limit_and_counts_what_it_left_out(lines, limit):
    text = capped_notice("Background task updates:", lines, limit)
    assert len(text) <= limit
    shown = text.split("\n")[1:]
    if shown and shown[-1].startswith("...and "):
        left_out = int(shown[-1].split()[1])
        assert len(shown) - 1 + left_out == len(lines)
    else:
        assert len(shown) == len(lines)
