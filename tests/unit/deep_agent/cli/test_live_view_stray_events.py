"""A "subagent_task" event any tool can write, with junk times or ids, is shown, never a crash of the view."""

from __future__ import annotations

import re

import pytest
from rich.console import Console

from deep_agent.cli._live_view import TaskTree


def render(tree: TaskTree) -> str:
    console = Console(width=200, record=True)
    console.print(tree)
    return console.export_text()


@pytest.mark.parametrize("junk", [
    {"duration_ms": "12"},  # str / int: TypeError
    {"started_at": "yesterday"},  # float - str: TypeError
    {"duration_ms": 10**400},  # int too large for a float
    {"started_at": float("nan"), "duration_ms": True},
    {"tool_call_id": ["x"]},  # unhashable: the set of known calls raised
])
def test_a_stray_event_with_junk_fields_is_a_row(junk) -> None:
    tree = TaskTree("root")
    tree.feed((), "custom", {"type": "subagent_task", "task_id": "t1", "agent_type": "worker", **junk})
    text = render(tree)
    # a time, whatever it reads: a running row counts from when it was fed, and a busy machine is slow to draw
    assert re.search(r"worker.*\d+\.\ds", text), text


def test_good_times_are_still_shown() -> None:
    tree = TaskTree("root")
    tree.event({"type": "subagent_task", "task_id": "t1", "agent_type": "worker", "status": "completed",
                "duration_ms": 1500, "tool_call_id": "c1"})
    assert "completed  1.5s" in render(tree)
