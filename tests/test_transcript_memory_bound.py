"""The in-memory transcript fallback is bounded by bytes, not only by count: big transcripts push out old ones."""

from __future__ import annotations

import pytest
from langchain_core.messages import AIMessage, HumanMessage

from subagents import transcript


def read(task_id: str) -> list:
    return transcript.read_transcript({"id": task_id, "transcript": f"memory:{task_id}"}, thread_id=None)


def test_big_transcripts_evict_the_oldest_by_bytes(monkeypatch):
    monkeypatch.setattr(transcript, "_MEMORY_MAX_BYTES", 50_000)
    for i in range(5):
        transcript.remember(f"big-{i}", [HumanMessage("job"), AIMessage("x" * 20_000)])
    kept = [i for i in range(5) if _readable(f"big-{i}")]
    assert kept == [3, 4]
    assert transcript._memory_bytes <= 50_000
    # Remembering a task again replaces it and counts its bytes once.
    transcript.remember("big-4", [AIMessage("short")])
    transcript.remember("big-4", [AIMessage("short")])
    assert [m.text for m in read("big-4")] == ["short"] and _readable("big-3")


def test_one_transcript_bigger_than_the_budget_is_still_kept_alone(monkeypatch):
    monkeypatch.setattr(transcript, "_MEMORY_MAX_BYTES", 1_000)
    transcript.remember("huge", [AIMessage("y" * 10_000)])
    assert read("huge")[0].text == "y" * 10_000


def _readable(task_id: str) -> bool:
    try:
        read(task_id)
    except LookupError:
        return False
    return True


@pytest.fixture(autouse=True)
def _fresh_memory(monkeypatch):
    monkeypatch.setattr(transcript, "_memory", type(transcript._memory)())
    monkeypatch.setattr(transcript, "_memory_sizes", {})
    monkeypatch.setattr(transcript, "_memory_bytes", 0)
