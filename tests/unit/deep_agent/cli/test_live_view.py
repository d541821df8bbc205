"""The live tree tells the truth: moving timers, every kind of task, this turn only, agent colours."""

from __future__ import annotations

import re
import time

from langchain_core.messages import AIMessage, ToolMessage
from rich.console import Console

from deep_agent.cli._live_view import TaskTree
from deep_agent.cli._store import task_rows


def render(tree: TaskTree, color: bool = False) -> str:
    console = Console(width=200, record=True, force_terminal=color, color_system="standard" if color else None)
    console.print(tree)
    return console.export_text(styles=color)


def test_the_timers_move_on_every_render_without_new_events():
    tree = TaskTree("deep agent")
    tree.event({"type": "subagent_task", "task_id": "a" * 32, "agent_type": "editor", "status": "running"})
    first = render(tree)
    time.sleep(0.25)
    second = render(tree)
    assert first != second

    def root_time(text: str) -> float:
        found = re.search(r"deep agent  running (\d+\.\d)s", text)
        assert found, text
        return float(found.group(1))

    # About the sleep between the two renders (less a tenth for the rounding), however long drawing takes.
    assert root_time(second) - root_time(first) >= 0.15, (first, second)


def test_refused_background_and_invalid_calls_are_rows_of_the_tree():
    tree = TaskTree("deep agent")
    refused = {"id": "r" * 32, "agent_type": "translator", "status": "error", "description": "x",
               "error": "unknown subagent_type 'translator'", "started_at": time.time(), "duration_ms": 0.1,
               "tool_call_id": "c1", "transcript": None}
    background = {"id": "b" * 32, "agent_type": "surveyor", "runner": "local", "status": "running",
                  "description": "y", "created_at": time.time(), "attempt": 2, "tool_call_id": "c2"}
    bad_call = AIMessage(content="", tool_calls=[{"name": "task", "args": {"description": "z"}, "id": "c3"}])
    reply = ToolMessage(content="Error invoking tool 'task': subagent_type missing", tool_call_id="c3",
                        status="error")
    tree.feed((), "updates", {"tools": [{"subagent_tasks": {refused["id"]: refused}},
                                        {"async_tasks": {background["id"]: background}}]})
    tree.feed((), "updates", {"model": {"messages": [bad_call]}})
    tree.feed((), "updates", {"tools": {"messages": [reply]}})
    text = render(tree)
    assert "translator [refused]" in text and "unknown subagent_type" in text
    assert "surveyor [background, local, attempt 2]" in text
    assert "? [refused]" in text and "subagent_type missing" in text
    ledgered = {**refused, "id": "i" * 32, "agent_type": "(unknown)", "stop_reason": "invalid_call",
                "transcript": "jsonl:x", "tool_call_id": "c9"}
    assert task_rows({"subagent_tasks": {"i" * 32: ledgered}})[0].kind == "refused"
    state = {"subagent_tasks": {refused["id"]: refused}, "async_tasks": {background["id"]: background},
             "messages": [bad_call, reply]}
    assert sorted(r.kind for r in task_rows(state)) == ["background", "refused", "refused"]


def test_a_later_turn_lists_its_own_tasks_and_counts_earlier_ones():
    tree = TaskTree("deep agent", earlier={"old1", "old2"})
    tree.event({"type": "subagent_task", "task_id": "old1", "agent_type": "editor", "status": "completed"})
    tree.event({"type": "subagent_task", "task_id": "new1", "agent_type": "editor", "status": "running"})
    text = render(tree)
    assert "2 task(s) of earlier turns" in text and "new1" in text and "old1" not in text


def test_the_root_model_calls_are_counted():
    tree = TaskTree("deep agent")
    answer = AIMessage(content="done", usage_metadata={"input_tokens": 10, "output_tokens": 5, "total_tokens": 15},
                       response_metadata={"model_name": "m"})
    tree.feed((), "updates", {"model": {"messages": [answer]}})
    tree.feed(("tools:1",), "updates", {"model": {"messages": [answer]}})  # a child's: not the root's
    assert tree.root_usage == {"model_calls": 1, "input_tokens": 10, "output_tokens": 5}


def test_each_agent_is_drawn_in_its_files_color_and_a_bad_color_is_ignored():
    tree = TaskTree("deep agent", colors={"editor": "cyan", "odd": "not-a-colour"})
    tree.event({"type": "subagent_task", "task_id": "e" * 32, "agent_type": "editor", "status": "completed"})
    tree.event({"type": "subagent_task", "task_id": "o" * 32, "agent_type": "odd", "status": "completed"})
    text = render(tree, color=True)
    assert "\x1b[36meditor" in text
    assert "odd" in text


def test_a_childs_text_and_stray_events_never_break_or_drive_the_terminal():
    tree = TaskTree("deep agent")
    # A custom event a child's own tool wrote: no task id of ours, so no row and no crash.
    tree.feed(("tools:1",), "custom", {"type": "subagent_task", "status": "running"})
    tree.feed(("tools:1",), "custom", {"type": "subagent_task", "task_id": ["x"]})
    assert tree.rows() == []
    tree.event({"type": "subagent_task", "task_id": "e" * 32, "agent_type": "editor", "status": "error",
                "model_calls": "many", "input_tokens": -4, "error": "boom\x1b[2J\x1b]0;pwned\x07\rhidden\u202e"})
    shown = render(tree)
    assert not set(shown) & {"\x1b", "\x07", "\r", "\u202e"}, shown
    assert "boom\\x1b[2J\\x1b]0;pwned\\x07" in shown and "hidden\\u202e" in shown
