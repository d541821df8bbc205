"""The in-memory transcript fallback is bounded by bytes, not only by count: big transcripts push out old ones."""

from __future__ import annotations

from langchain_core.messages import AIMessage, HumanMessage

from subagents.transcripts import TranscriptTable


def test_big_transcripts_evict_the_oldest_by_bytes():
    table = TranscriptTable(max_bytes=50_000)
    for i in range(5):
        table.put(f"big-{i}", [HumanMessage("job"), AIMessage("x" * 20_000)])
    assert [i for i in range(5) if table.get(f"big-{i}") is not None] == [3, 4]
    assert table.bytes <= 50_000
    # Putting a task again replaces it and counts its bytes once.
    table.put("big-4", [AIMessage("short")])
    table.put("big-4", [AIMessage("short")])
    assert [m.text for m in table.get("big-4")] == ["short"] and table.get("big-3") is not None


def test_one_transcript_bigger_than_the_budget_is_still_kept_alone():
    table = TranscriptTable(max_bytes=1_000)
    table.put("old", [AIMessage("z")])
    table.put("huge", [AIMessage("y" * 10_000)])
    assert table.get("huge")[0].text == "y" * 10_000 and table.get("old") is None


def test_a_task_read_back_through_its_record_uses_the_shared_table():
    from subagents.transcripts import read_transcript
    from subagents.transcripts import MEMORY

    MEMORY.put("through-record", [AIMessage("kept")])
    record = {"id": "through-record", "transcript": "memory:through-record"}
    assert read_transcript(record, thread_id=None)[0].text == "kept"
