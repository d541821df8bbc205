"""A parent killed mid-step keeps what finished: the next message keeps each finished child's answer.

A step with two ``task`` calls and a third tool is cut by ``kill -9`` after
both children answered. Their answers are pending writes of the stopped
step's checkpoint: a resume (``invoke(None)``) applies them, and so must a
new user message, which before reported every open call ``lost``. Only the
call that never finished is ``lost``.
"""

from __future__ import annotations

import os
import signal
import sqlite3
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from langchain.agents import create_agent
from langchain_core.messages import AIMessage, HumanMessage, ToolMessage
from langchain_core.tools import tool
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.checkpoint.sqlite import SqliteSaver

from deep_agent._testing import ScriptedChatModel, tool_call
from middleware import SubAgentMiddleware
from subagents._settings import DelegationSettings

THREAD = {"configurable": {"thread_id": "killed"}}
ANSWER = "child answer: the job is done and every requested detail is in this report."


def parent(saver: Any, die: Any, sessions_dir: Any = None) -> Any:
    model = ScriptedChatModel(rules=[
        ("START", [{"tool_calls": [tool_call("task", description="job one", subagent_type="worker"),
                                   tool_call("task", description="job two", subagent_type="worker"),
                                   tool_call("die")]}, "unreachable"]),
        ("WHAT-NOW", ["carried on"]),
        ("job", [ANSWER]),
    ], default=ANSWER)
    worker = {"name": "worker", "description": "Does one job.", "system_prompt": "Do the job.", "model": model}
    middleware = SubAgentMiddleware([worker], settings=DelegationSettings.of(
        general_purpose=False, sessions_dir=sessions_dir,
    ))
    return create_agent(model, [die], middleware=[middleware], checkpointer=saver)


def _run_until_killed(saver: Any) -> None:
    """In the killed process: run the step, and kill the process once both children's answers are saved."""
    import time

    @tool
    def die() -> str:
        """Ends this process."""
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            saved = saver.get_tuple({"configurable": {**THREAD["configurable"], "checkpoint_ns": ""}})
            answers = [w for w in (saved.pending_writes if saved else ()) if w[1] == "subagent_tasks"]
            if len(answers) == 2:
                os.kill(os.getpid(), signal.SIGKILL)
            time.sleep(0.05)
        return "never killed"

    parent(saver, die).invoke({"messages": [HumanMessage("START")]}, THREAD)


@tool
def die() -> str:
    """Ends this process."""
    return "not here"


def killed(where: str, saver: str) -> None:
    code = f"import sys; sys.path[:0] = {sys.path!r}; from {__name__} import main; main({saver!r}, {where!r})"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300,
                          env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)})
    assert done.returncode == -signal.SIGKILL, done.stderr[-3000:]


def main(saver: str, where: str) -> None:
    if saver == "sqlite":
        _run_until_killed(SqliteSaver(sqlite3.connect(where, check_same_thread=False)))
    else:
        from langgraph.checkpoint.postgres import PostgresSaver

        with PostgresSaver.from_conn_string(where) as postgres:
            _run_until_killed(postgres)


def assert_finished_kept(out: dict[str, Any]) -> None:
    messages = out["messages"]
    stopped = next(m for m in messages if isinstance(m, AIMessage) and m.tool_calls)
    at = messages.index(stopped)
    answers = {m.tool_call_id: m for m in messages[at + 1:at + 4] if isinstance(m, ToolMessage)}
    assert len(answers) == 3, [m.type for m in messages]  # every call answered, right after its message
    tasks = [c["id"] for c in stopped.tool_calls if c["name"] == "task"]
    (died,) = [c["id"] for c in stopped.tool_calls if c["name"] == "die"]
    assert all(ANSWER in answers[call_id].text for call_id in tasks)
    assert answers[died].status == "error" and "lost" in answers[died].text
    records = {r["tool_call_id"]: r for r in out["subagent_tasks"].values()}
    assert sorted(records) == sorted(tasks) and all(records[c]["status"] == "completed" for c in tasks)
    assert out["subagent_usage"], "the finished children's usage is kept too"
    assert messages[-1].content == "carried on"


@pytest.mark.server  # starts a Python process of its own
def test_a_new_message_after_kill_9_keeps_the_answers_of_children_that_finished_on_sqlite(tmp_path: Path) -> None:
    path = str(tmp_path / "state.sqlite")
    killed(path, "sqlite")
    with sqlite3.connect(path, check_same_thread=False) as conn:
        out = parent(SqliteSaver(conn), die).invoke({"messages": [HumanMessage("WHAT-NOW")]}, THREAD)
    assert_finished_kept(out)


@pytest.mark.server
def test_a_new_message_after_kill_9_keeps_the_answers_of_children_that_finished_on_postgres(postgres_url: str) -> None:
    from langgraph.checkpoint.postgres import PostgresSaver

    with PostgresSaver.from_conn_string(postgres_url) as saver:
        saver.setup()
    killed(postgres_url, "postgres")
    with PostgresSaver.from_conn_string(postgres_url) as saver:
        out = parent(saver, die).invoke({"messages": [HumanMessage("WHAT-NOW")]}, THREAD)
    assert_finished_kept(out)


def test_a_task_call_nothing_answered_is_still_recorded_lost() -> None:
    agent = parent(InMemorySaver(), die)
    stopped = AIMessage("", tool_calls=[{"name": "task", "args": {"description": "job one", "subagent_type": "worker"},
                                         "id": "c1", "type": "tool_call"}])
    agent.update_state(THREAD, {"messages": [HumanMessage("START"), stopped]})
    out = agent.invoke({"messages": [HumanMessage("WHAT-NOW")]}, THREAD)
    (record,) = out["subagent_tasks"].values()
    assert record["status"] == "lost" and record["tool_call_id"] == "c1"
    answer = next(m for m in out["messages"] if isinstance(m, ToolMessage))
    assert answer.status == "error" and "lost" in answer.text


def test_a_lost_task_keeps_the_id_and_the_transcript_its_child_began(tmp_path: Path) -> None:
    """A killed child's JSONL file stays (written as it ran), named by the id the stopped step gave the task:
    the lost record keeps that id and points at the file (before: a new id, and ``none:``)."""
    from subagents._transcripts import read_transcript, sink_chooser

    begin = sink_chooser(tmp_path, None)
    for task_id, call_id in (("other-task", "c0"), ("began", "c1")):  # as the killed children left them
        begin(task_id=task_id, agent_type="worker", thread_id="killed", tool_call_id=call_id,
              namespace="", store=None, has_checkpointer=True).add(HumanMessage(f"job of {call_id}", id=call_id))
    agent = parent(InMemorySaver(), die, sessions_dir=tmp_path)
    stopped = AIMessage("", tool_calls=[{"name": "task", "args": {"description": "job one", "subagent_type": "worker"},
                                         "id": "c1", "type": "tool_call"}])
    agent.update_state(THREAD, {"messages": [HumanMessage("START"), stopped]})
    out = agent.invoke({"messages": [HumanMessage("WHAT-NOW")]}, THREAD)
    (record,) = out["subagent_tasks"].values()
    assert (record["id"], record["status"]) == ("began", "lost")
    assert [m.text for m in read_transcript(record, thread_id="killed")] == ["job of c1"]
