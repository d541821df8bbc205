"""The in-memory transcript fallback is bounded by the bytes it really holds: big transcripts push out old ones.

Before: the bound was an estimate (text + 200 bytes a message) of message
objects that really held three to ten times that (a 32 MB table held 98 MB
of text transcripts and 271 MB of transcripts with 10 KB tool arguments).
Here the real memory is measured with ``tracemalloc``.
"""

from __future__ import annotations

import gc
import json
import random
import threading
import tracemalloc
from collections.abc import Callable
from typing import Any

import pytest
from langchain_core.messages import AIMessage, HumanMessage, ToolMessage
from pydantic import BaseModel

from subagents._transcripts import TranscriptTable, deep_size

_rng = random.Random(3)
_WORDS = [f"w{_rng.randrange(10**6)}" for _ in range(5000)]


def _text(words: int) -> str:
    return " ".join(_rng.choice(_WORDS) for _ in range(words))


def _plain() -> list[Any]:
    return [HumanMessage(_text(40)), AIMessage(_text(150))]


def _tool_calls() -> list[Any]:
    args = {"path": "notes.txt", "content": _text(1500)}  # about 10 KB of arguments
    return [HumanMessage(_text(20)), AIMessage("", tool_calls=[{"name": "write", "args": args, "id": "call_1"}]),
            ToolMessage("written", tool_call_id="call_1"), AIMessage(_text(30))]


def _structured() -> list[Any]:
    report = {"title": _text(5), "items": [{"n": i, "text": _text(12)} for i in range(20)]}
    return [HumanMessage(_text(20)), AIMessage(json.dumps(report), response_metadata={"finish_reason": "stop"},
                                               usage_metadata={"input_tokens": 9, "output_tokens": 9,
                                                               "total_tokens": 18})]


class _Finding(BaseModel):
    title: str
    score: float
    notes: list[str]


def _pydantic() -> list[Any]:
    finding = _Finding(title=_text(5), score=0.5, notes=[_text(10) for _ in range(10)])
    return [HumanMessage(_text(20)),
            AIMessage([{"type": "text", "text": _text(40)}, {"type": "text", "text": _text(40)}]),
            ToolMessage(finding.model_dump_json(), tool_call_id="call_1", artifact=finding)]


class _Unpicklable:
    """An artifact the checkpoint serializer refuses: kept as objects and counted by walking them."""

    def __init__(self) -> None:
        self.rows = [{"text": _text(12), "n": i} for i in range(10)]
        self.lock = threading.Lock()


def _opaque() -> list[Any]:
    return [HumanMessage(_text(20)), ToolMessage("done", tool_call_id="c", artifact=_Unpicklable())]


def _filled(make: Callable[[], list[Any]], bound: int) -> tuple[TranscriptTable, int]:
    """A table of ``bound`` bytes given transcripts until it has turned over twice (at most 1,500), and the bytes
    it really holds (tracemalloc). Past two turnovers more puts only repeat what it holds: of 10 KB transcripts
    it holds 150, and 1,500 of them cost seconds of tracemalloc for nothing."""
    gc.collect()
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        table = TranscriptTable(max_bytes=bound)
        for i in range(1500):
            table.put(f"{i:032x}", make())
            if i + 1 >= 3 * len(table):
                break
        gc.collect()
        held = tracemalloc.get_traced_memory()[0] - before
    finally:
        tracemalloc.stop()
    assert len(table) < 1500, "the bound never evicted anything: the test proves nothing"
    return table, held


@pytest.mark.parametrize("make", [_plain, _tool_calls, _structured, _pydantic],
                         ids=["text", "tool_calls", "structured", "pydantic"])
def test_the_table_holds_what_its_bound_says_within_ten_percent(make: Callable[[], list[Any]]):
    bound = 1_000_000
    table, held = _filled(make, bound)
    assert held <= 1.1 * bound, (held, bound)
    assert abs(table.bytes - held) <= 0.1 * held, (table.bytes, held)


def test_transcripts_kept_as_objects_never_hold_more_than_the_bound():
    # Walking objects counts what they share with the rest of the process (interned strings) too:
    # the count errs high, so the table holds a little less than its bound, never more.
    bound = 1_000_000
    table, held = _filled(_opaque, bound)
    assert 0.8 * bound <= held <= 1.1 * bound, (held, bound)
    assert table.bytes >= 0.95 * held, (table.bytes, held)


def test_big_transcripts_evict_the_oldest_by_bytes():
    table = TranscriptTable(max_bytes=50_000)
    for i in range(5):
        table.put(f"big-{i}", [HumanMessage("job"), AIMessage(_rng.randbytes(20_000).hex())])  # ~20 KB compressed
    assert [i for i in range(5) if table.get(f"big-{i}") is not None] == [3, 4]
    assert table.bytes <= 50_000
    # Putting a task again replaces it and counts its bytes once.
    table.put("big-4", [AIMessage("short")])
    table.put("big-4", [AIMessage("short")])
    assert [m.text for m in table.get("big-4")] == ["short"] and table.get("big-3") is not None


def test_one_transcript_bigger_than_the_budget_is_still_kept_alone():
    table = TranscriptTable(max_bytes=1_000)
    table.put("old", [AIMessage("z")])
    huge = _text(3000)
    table.put("huge", [AIMessage(huge)])
    assert table.get("huge")[0].text == huge and table.get("old") is None


def test_what_is_read_back_is_the_transcript_and_changing_it_changes_nothing_kept():
    table = TranscriptTable()
    messages = _tool_calls()
    table.put("t", messages)
    first = table.get("t")
    assert [m.model_dump() for m in first] == [m.model_dump() for m in messages]
    first[1].tool_calls[0]["args"]["content"] = "changed"
    assert table.get("t")[1].tool_calls[0]["args"]["content"] == messages[1].tool_calls[0]["args"]["content"]


class _Opaque:
    def __init__(self, payload: bytes) -> None:
        self.payload = payload


def test_a_message_the_serializer_cannot_store_is_kept_as_is_and_counted_by_its_size():
    table = TranscriptTable()
    odd = ToolMessage("done", tool_call_id="c", artifact=_Opaque(b"x" * 50_000))
    table.put("odd", [odd])
    assert table.get("odd")[0].artifact is odd.artifact
    assert table.bytes >= 50_000 and table.bytes >= deep_size([odd])


def test_a_task_read_back_through_its_record_uses_the_shared_table():
    from subagents._transcripts import MEMORY, read_transcript

    MEMORY.put("through-record", [AIMessage("kept")])
    record = {"id": "through-record", "transcript": "memory:through-record"}
    assert read_transcript(record, thread_id=None)[0].text == "kept"
