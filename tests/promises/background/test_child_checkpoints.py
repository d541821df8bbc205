"""A background child's conversation is written once per run, not after each of its steps, and still continues."""

from __future__ import annotations

import time

from langchain.agents import create_agent
from langchain_core.tools import tool
from langgraph.checkpoint.memory import InMemorySaver

from helpers.background import (  # noqa: F401 - background is a fixture
    background,
    NOTICE,
    ledger,
    on_task,
    start,
    started_ids,
    wait_for,
)
from helpers.graphs import user
from deep_agent._testing import ScriptedChatModel, tool_call
from subagents._settings import DelegationSettings


@tool
def look(x: str) -> str:
    """Look something up."""
    return f"looked at {x}"


def _checkpoints(task) -> int:
    config = {"configurable": {"thread_id": task.session.thread_id}}
    return len(list(task.session.saver.list(config)))


def test_each_run_of_a_child_writes_its_conversation_once_and_a_follow_up_continues_it(run, background):
    model = ScriptedChatModel(
        rules=[
            (NOTICE, ["noted"]),
            ("first question", [{"tool_calls": [tool_call("look", x="a")]},
                                {"tool_calls": [tool_call("look", x="b")]}, "first answer"]),
            ("second question", [lambda m: f"second answer, after {m[-2].text!r}"]),
            ("PARENT start", [start(("first question", "looker")), "started"]),
            ("PARENT follow", [on_task("update_async_task", message="second question"), "sent"]),
        ],
        default="ok",
    )
    looker = {"name": "looker", "description": "Looks things up.", "tools": [look]}
    agent = create_agent(model, middleware=[background([looker], settings=DelegationSettings.of(
        general_purpose=False,
    ))],
                         checkpointer=InMemorySaver())
    config = {"configurable": {"thread_id": f"t-{time.monotonic_ns()}"}}
    out = run(agent, user("PARENT start"), config)
    (task_id,) = started_ids(out["messages"])
    wait_for(lambda: background.status(task_id) in ("completed", "error"))
    task = background.task(task_id)
    assert task.fields["status"] == "completed", task.fields
    # Five steps (model, tools, model, tools, model) used to leave a checkpoint each, and more.
    assert _checkpoints(task) == 1

    run(agent, user("PARENT news"), config)  # the parent learns it completed: a follow-up, not steering
    run(agent, user("PARENT follow"), config)
    wait_for(lambda: background.status(task_id) == "completed" and background.task(task_id).fields["turns"] == 2)
    assert _checkpoints(task) == 2
    out = run(agent, user("PARENT news"), config)
    assert ledger(out)[task_id]["result"] == "second answer, after 'first answer'"
