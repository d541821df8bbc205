"""The times the command line shows agree: a child's approval wait never reads longer than its parent's.

The root's prompts are timed from question to answer; a child's wait, by the
runner, from its pause to its resume, which also holds the end of the stream
before the prompt and the resume's start after it (before: the child's 19.1 s
against the root's 18.7 s).
"""

from __future__ import annotations

import re
import time

from rich.console import Console

from deep_agent.cli._live_view import TaskTree
from deep_agent.cli._session import summary_table
from deep_agent.cli._store import TaskRow


def shown(renderable: object) -> str:
    console = Console(width=200, record=True, color_system=None)
    console.print(renderable)
    return console.export_text()


def waits(text: str, label: str) -> list[float]:
    return [float(w) for w in re.findall(rf"{re.escape(label)}.*?(\d+\.\d)s waiting", text)]


def test_the_root_shows_at_least_the_longest_wait_of_its_tasks_in_the_tree_and_the_summary():
    tree = TaskTree("deep agent")
    now = time.time()
    tree.event({"type": "subagent_task", "task_id": "a" * 32, "tool_call_id": "c1", "agent_type": "editor",
                "status": "running", "started_at": now - 30})
    tree.event({"type": "subagent_task", "task_id": "b" * 32, "tool_call_id": "c2", "agent_type": "surveyor",
                "status": "running", "started_at": now - 30})
    tree.live["a" * 32]["waited_s"] = 19.1  # the runner's clock: pause to resume
    tree.waiting_s = 18.7  # the prompt's clock: question to answer
    tree.stop_clock()
    frame = shown(tree)
    (root,) = waits(frame.splitlines()[0], "deep agent")
    assert root >= max(waits(frame, "editor")) == 19.1, frame

    rows = [TaskRow(id="a" * 32, kind="task", agent_type="editor", status="completed", duration_s=2.0,
                    waiting_s=19.1),
            TaskRow(id="b" * 32, kind="background", agent_type="surveyor", status="completed", duration_s=1.0,
                    waiting_s=40.0)]  # a background task's pause does not stop the run: not the root's wait
    table = shown(summary_table(rows, {"model_calls": 2}, root_model=None, prices=None, root_seconds=30.0,
                                root_waiting=18.7))
    (root,) = waits(table, "(root)")
    assert root == 19.1 and waits(table, "editor") == [19.1], table
