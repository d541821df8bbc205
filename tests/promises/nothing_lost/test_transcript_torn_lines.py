"""A JSONL transcript torn by a crash mid-write: the torn line alone is lost, never the file or a later message."""

from __future__ import annotations

import json

from langchain_core.messages import AIMessage, HumanMessage, message_to_dict

from subagents._transcripts import JsonlSink, read_jsonl


def test_a_line_cut_inside_a_character_is_skipped_not_an_error(tmp_path):
    path = tmp_path / "agent-t.jsonl"
    lines = [{"id": "t"}, message_to_dict(HumanMessage("hi", id="1")),
             message_to_dict(AIMessage("caf\u00e9 \u2603", id="2"))]
    data = "".join(json.dumps(line, ensure_ascii=False) + "\n" for line in lines).encode("utf-8")
    path.write_bytes(data[:data.rindex("\u2603".encode()) + 1])  # the crash cut the snowman's three bytes
    header, messages = read_jsonl(path)
    assert header == {"id": "t"}
    assert [m.content for m in messages] == ["hi"]


def test_a_transcript_continued_after_a_torn_line_keeps_every_new_message(tmp_path):
    path = tmp_path / "agent-t.jsonl"
    first = JsonlSink(path, {"id": "t"})
    first.add(HumanMessage("do it", id="h1"))
    first.end([])
    with path.open("a", encoding="utf-8") as handle:
        handle.write('{"type": "ai", "data": {"content": "half a mess')  # the process died here
    again = JsonlSink(path, {"id": "t"})  # the task resumed (an approval answered, a retry)
    again.add(AIMessage("resumed answer", id="a2"))
    again.end([])
    header, messages = read_jsonl(path)
    assert header == {"id": "t"}
    assert [m.content for m in messages] == ["do it", "resumed answer"]


def test_a_whole_file_is_continued_without_a_blank_line(tmp_path):
    path = tmp_path / "agent-t.jsonl"
    for text, mid in (("one", "m1"), ("two", "m2")):
        sink = JsonlSink(path, {"id": "t"})
        sink.add(AIMessage(text, id=mid))
        sink.end([])
    assert "\n\n" not in path.read_text(encoding="utf-8")
    assert [m.content for m in read_jsonl(path)[1]] == ["one", "two"]


def test_an_empty_file_left_by_a_crash_is_begun_with_its_header(tmp_path):
    # The file was created and the process died before the header was written: continuing it
    # without a header made the first message the header, and it was lost on reading.
    path = tmp_path / "agent-t.jsonl"
    path.touch()
    sink = JsonlSink(path, {"id": "t"})
    sink.add(HumanMessage("first", id="h1"))
    sink.add(AIMessage("second", id="a1"))
    sink.end([])
    header, messages = read_jsonl(path)
    assert header == {"id": "t"}
    assert [m.content for m in messages] == ["first", "second"]


def test_a_line_that_is_json_but_no_message_costs_that_line_alone(tmp_path):
    # It failed the whole transcript with langchain's own error (ValueError, ValidationError,
    # TypeError), naming neither the task nor the file.
    path = tmp_path / "agent-t.jsonl"
    rows = [[1, 2], message_to_dict(HumanMessage("hi", id="1")), {"type": "wat", "data": {}},
            {"type": "ai", "data": {"id": "x"}}, {"type": "ai", "data": "text"},
            message_to_dict(AIMessage("done", id="2"))]
    path.write_text("".join(json.dumps(row) + "\n" for row in rows), encoding="utf-8")
    header, messages = read_jsonl(path)
    assert header == {}
    assert [m.content for m in messages] == ["hi", "done"]
