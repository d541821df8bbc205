"""Delegating again and again without a checkpointer keeps memory flat: what stays is the small, documented table.

Before: the shared transcript table kept up to 32 MB, so every delegation
of a long-lived process stayed in memory until 32 MB of them had piled up
(10,000 short delegations kept about 7 MB). Now it keeps 1 MiB by default:
the most recent transcripts, each still readable through its record, while
an older one reads back as a clear error saying where to keep every
transcript. Measured with ``tracemalloc``.
"""

from __future__ import annotations

import gc
import random
import tracemalloc
from typing import Any

import pytest
from helpers.graphs import records, user
from langchain.agents import create_agent

import subagents._transcripts as transcripts
from deep_agent._testing import ScriptedChatModel, tool_call
from middleware import SubAgentMiddleware
from subagents import get_transcript
from subagents._settings import DelegationSettings

MIB = 1024 * 1024
RUNS = 125
# Hex of random bytes: zlib keeps about half of it, so each transcript costs about 18 KB in the table: the
# 1 MiB bound is passed after some 58 runs, and all 125 kept (the old bound) come to about 2.5 MB. Few big
# transcripts, not many small ones: a delegation under tracemalloc costs far more than its bytes.
_REPORT = "report: " + random.Random(7).randbytes(16384).hex()


@pytest.fixture
def table(monkeypatch: pytest.MonkeyPatch) -> transcripts.TranscriptTable:
    """A fresh shared table with the default bound, so other tests' transcripts do not count."""
    fresh = transcripts.TranscriptTable()
    monkeypatch.setattr(transcripts, "MEMORY", fresh)
    return fresh


def _agent() -> tuple[Any, ScriptedChatModel]:
    model = ScriptedChatModel(rules=[
        ("child job", [_REPORT]),
        ("delegate", [{"tool_calls": [tool_call("task", description="child job", subagent_type="worker")]},
                      "finished"]),
    ])
    worker = {"name": "worker", "description": "Does one job.", "system_prompt": "Do it.", "model": model}
    return create_agent(model, [], middleware=[SubAgentMiddleware([worker], settings=DelegationSettings.of(
        general_purpose=False,
    ))]), model


def _delegate(agent: Any, model: ScriptedChatModel) -> dict[str, Any]:
    state = agent.invoke(user("delegate"))
    model.calls.clear()  # the scripted model's own log of requests is a test aid, not the library's memory
    return state


def test_repeated_delegations_keep_no_more_than_the_tables_small_bound(table: transcripts.TranscriptTable):
    agent, model = _agent()
    first = _delegate(agent, model)  # imports and compiled graphs of the first use stay: not measured
    gc.collect()
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        for _ in range(RUNS):
            last = _delegate(agent, model)
        last_record = records(last)[0]
        gc.collect()
        kept = tracemalloc.get_traced_memory()[0] - before
    finally:
        tracemalloc.stop()
    # The table's bound plus half of it for everything else (the last run's state held here included);
    # before, these 125 delegations kept about 2.5 MB.
    assert kept <= 1.5 * MIB, f"{RUNS} delegations kept {kept / MIB:.2f} MiB"
    assert len(table) < RUNS, "the table never dropped a transcript: the test measured nothing"
    # The newest transcript reads back whole; the first one was pushed out and says where to keep them all.
    assert get_transcript(last, {}, last_record["id"])[-1].text == _REPORT
    with pytest.raises(LookupError, match=r"max_bytes.*sessions_dir"):
        get_transcript(first, {}, records(first)[0]["id"])


def test_the_shared_tables_bound_can_be_raised_or_lowered_and_lowering_drops_the_oldest_at_once(
        table: transcripts.TranscriptTable):
    agent, model = _agent()
    states = [_delegate(agent, model) for _ in range(3)]
    ids = [records(s)[0]["id"] for s in states]
    assert all(table.get(i) is not None for i in ids)
    table.max_bytes = 1  # below one transcript: only the newest stays
    assert [table.get(i) is not None for i in ids] == [False, False, True]
    assert len(table) == 1 and table.bytes > 1
    table.max_bytes = 64 * MIB
    _delegate(agent, model)
    assert len(table) == 2


@pytest.mark.parametrize("bad", [-1, 1.5, "1MB", None, True])
def test_a_bound_that_is_not_a_whole_number_of_bytes_is_refused_naming_max_bytes(bad: Any):
    with pytest.raises(ValueError, match="max_bytes"):
        transcripts.TranscriptTable(max_bytes=bad)
    with pytest.raises(ValueError, match="max_bytes"):
        transcripts.TranscriptTable().max_bytes = bad
