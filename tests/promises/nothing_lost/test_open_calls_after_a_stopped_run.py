"""A run stopped mid-step leaves no open call behind: the next turn answers each, and each delegation has a record.

A parent stopped in the middle of its tool step (Ctrl-C, a killed process)
keeps the assistant's tool calls without answers. Continued with a new user
message (as ``deep-agent run --thread`` does), those calls stayed open:
providers reject such a history, a ``task`` call had no record, and a
background task that ran to its end was never reported.
"""

from __future__ import annotations

import sqlite3
import threading
import time
from typing import Any

import pytest
from helpers.attacks import _invoke
from helpers.background import wait_for
from langchain_core.messages import AIMessage, ToolMessage
from langchain_core.tools import tool
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.checkpoint.sqlite import SqliteSaver

from deep_agent import create_deep_agent
from deep_agent._testing import ScriptedChatModel, tool_call
from subagents.background._local import call_key, call_key_of
from subagents.background._runtime import BackgroundRuntime
from subagents._transcripts import read_transcript
from subagents._settings import DelegationSettings


def _stopper(saver: Any = None, thread: str | None = None) -> Any:
    """A tool that stops the run (as Ctrl-C would) the first time it is called.

    With ``saver`` and ``thread``, once its sibling's answer is in the checkpoint (the step's pending writes):
    building a child on deepagents' stack can outlast any fixed wait on a loaded machine.
    """
    calls: list[int] = []

    @tool
    def stop_here(x: str) -> str:
        """Stops the run once."""
        if saver is None:
            time.sleep(0.3)  # the sibling delegation has finished by then
        else:
            wait_for(lambda: _sibling_answered(saver, {"configurable": {"thread_id": thread}}), timeout=60)
        if not calls:
            calls.append(1)
            raise KeyboardInterrupt
        return "ran"

    return stop_here


def _sibling_answered(saver: Any, config: dict[str, Any]) -> bool:
    saved = saver.get_tuple(config)
    written = [m for _, channel, value in (saved.pending_writes if saved else ()) if channel == "messages"
               for m in (value if isinstance(value, list) else [value])]
    return any(isinstance(m, ToolMessage) and m.name != "stop_here" for m in written)


def _model(first_tool: str) -> ScriptedChatModel:
    return ScriptedChatModel(
        rules=[("START-JOBS", [{"tool_calls": [tool_call(first_tool, description="job", subagent_type="general-purpose"),
                                              tool_call("stop_here", x="1")]}, "unreachable"]),
               ("WHAT-NOW", ["carried on"]),
               ("PROVIDER-DOWN", [RuntimeError("provider down (HTTP 503)")]),
               ("job", ["child answer"])],
        default="noted",
    )


def _crash(mode: str, agent: Any, config: dict[str, Any]) -> None:
    with pytest.raises(KeyboardInterrupt):
        _invoke(mode, agent, {"messages": [{"role": "user", "content": "START-JOBS"}]}, config)


def _finished(agent: Any, config: dict[str, Any]) -> None:
    """Wait until the background task the stopped turn started has completed.

    Its child's graph is built first, which can take seconds on a loaded
    machine, and the stopped turn no longer waits for the loop: a fixed
    sleep would race the task. Found by its thread and call: a scripted
    model's call ids repeat from test to test, and an earlier test's task,
    long finished, is still in its runtime's table.
    """
    (call_id,) = [c["id"] for m in agent.get_state(config).values["messages"] if isinstance(m, AIMessage)
                  for c in m.tool_calls if c["name"] == "start_async_task"]
    key = call_key(config["configurable"]["thread_id"], call_id)
    task = wait_for(lambda: next((t for rt in BackgroundRuntime.all_open() for t in rt.table.all()
                                  if call_key_of(t.call) == key), None))
    wait_for(lambda: task.fields["status"] == "completed", timeout=60)


def _assert_every_call_answered_in_place(messages: list[Any]) -> None:
    for index, message in enumerate(messages):
        if isinstance(message, AIMessage) and message.tool_calls:
            following = []
            for later in messages[index + 1:]:
                if not isinstance(later, ToolMessage):
                    break
                following.append(later.tool_call_id)
            assert sorted(following) == sorted(c["id"] for c in message.tool_calls), (index, message.tool_calls)


@pytest.mark.parametrize("failed_turns", [0, 2])
@pytest.mark.parametrize("deepagents_stack", [False, True])
@pytest.mark.parametrize("mode", ["sync", "async"])
def test_a_task_that_finished_before_the_stop_keeps_its_answer_and_record(mode, deepagents_stack, failed_turns):
    """Its answer is a pending write of the stopped step: the next turn keeps it, as a resume would.

    On deepagents' stack too: its patch of unanswered calls (a hook step before the model) answered every
    one "did not complete" first, and on ainvoke pushed the stopped step's checkpoint out of the few read.
    And after turns that failed at their first model call (a provider down): they answered nothing, and
    the one after them read back only to its own input, and reported the finished task lost.
    """
    saver, thread = InMemorySaver(), f"stopped-task-{mode}-{deepagents_stack}-{failed_turns}"
    agent = create_deep_agent(_model("task"), [_stopper(saver, thread)], checkpointer=saver,
    settings=DelegationSettings.of(deepagents_stack=deepagents_stack))
    config = {"configurable": {"thread_id": thread}}
    _crash(mode, agent, config)
    for _ in range(failed_turns):
        with pytest.raises(RuntimeError, match="provider down"):
            _invoke(mode, agent, {"messages": [{"role": "user", "content": "PROVIDER-DOWN"}]}, config)
    out = _invoke(mode, agent, {"messages": [{"role": "user", "content": "WHAT-NOW"}]}, config)
    _assert_every_call_answered_in_place(out["messages"])
    assert out["messages"][-1].content == "carried on"
    first = next(m for m in out["messages"] if isinstance(m, AIMessage) and m.tool_calls)
    task_call = next(c for c in first.tool_calls if c["name"] == "task")
    stop_call = next(c for c in first.tool_calls if c["name"] == "stop_here")
    (record,) = [r for r in out["subagent_tasks"].values() if r["tool_call_id"] == task_call["id"]]
    assert record["status"] == "completed"
    answers = {m.tool_call_id: m for m in out["messages"] if isinstance(m, ToolMessage)}
    assert "child answer" in answers[task_call["id"]].text
    assert answers[stop_call["id"]].status == "error" and "lost" in answers[stop_call["id"]].text


@pytest.mark.parametrize("deepagents_stack", [False, True])
@pytest.mark.parametrize("mode", ["sync", "async"])
def test_a_background_start_left_open_is_answered_and_its_task_reported(mode, deepagents_stack):
    saver, thread = InMemorySaver(), f"stopped-start-{mode}-{deepagents_stack}"
    agent = create_deep_agent(_model("start_async_task"), [_stopper(saver, thread)], checkpointer=saver,
                              background=True, settings=DelegationSettings.of(deepagents_stack=deepagents_stack))
    config = {"configurable": {"thread_id": thread}}
    _crash(mode, agent, config)
    _finished(agent, config)  # the task runs on: it ends while nobody is asking
    out = _invoke(mode, agent, {"messages": [{"role": "user", "content": "WHAT-NOW"}]}, config)
    _assert_every_call_answered_in_place(out["messages"])
    (record,) = out["async_tasks"].values()
    seen = (record, [(m.type, m.text[:200]) for m in out["messages"]])
    assert record["status"] == "completed" and record["result"] == "child answer", seen
    assert any("child answer" in m.text for m in out["messages"] if m.type == "human"), seen  # its notice


def test_a_background_task_finished_before_the_process_ended_is_reported_by_the_next_one(tmp_path):
    """The next process (a new agent on the same SQLite thread) finds the outcome the first one stored."""
    path = tmp_path / "state.sqlite"
    config = {"configurable": {"thread_id": "next-process"}}
    first = create_deep_agent(_model("start_async_task"), [_stopper()], background=True,
                              checkpointer=SqliteSaver(sqlite3.connect(path, check_same_thread=False)))
    _crash("sync", first, config)
    _finished(first, config)  # the first agent is never asked again (its process would have ended)

    second = create_deep_agent(_model("start_async_task"), [_stopper()], background=True,
                               checkpointer=SqliteSaver(sqlite3.connect(path, check_same_thread=False)))
    out = second.invoke({"messages": [{"role": "user", "content": "WHAT-NOW"}]}, config)
    _assert_every_call_answered_in_place(out["messages"])
    (record,) = out["async_tasks"].values()
    assert record["status"] == "completed" and record["result"] == "child answer"


def test_open_calls_are_found_behind_several_new_user_messages_and_calls_without_ids_are_skipped():
    from langchain_core.messages import HumanMessage

    from middleware._task_tool import open_calls

    stopped = AIMessage("", tool_calls=[{"name": "task", "args": {}, "id": "c1", "type": "tool_call"},
                                        {"name": "ls", "args": {}, "id": None, "type": "tool_call"},
                                        {"name": "ls", "args": {}, "id": "c2", "type": "tool_call"}])
    history = [HumanMessage("go"), stopped, ToolMessage("done", tool_call_id="c2"), HumanMessage("a"),
               HumanMessage("b")]
    assert [c["id"] for c in open_calls(history)] == ["c1"]


@pytest.mark.parametrize("mode", ["sync", "async"])
def test_a_stopped_call_without_an_id_does_not_fail_the_next_turn(mode):
    model = ScriptedChatModel(responses=["fine"], default="fine")
    agent = create_deep_agent(model, [], checkpointer=InMemorySaver())
    stopped = AIMessage("", tool_calls=[{"name": "task", "args": {"description": "x", "subagent_type": "w"},
                                         "id": None, "type": "tool_call"}])
    out = _invoke(mode, agent, {"messages": [("user", "go"), stopped, ("user", "again")]},
                  {"configurable": {"thread_id": f"no-id-{mode}"}})
    assert out["messages"][-1].content == "fine"


def test_a_crafted_stored_outcome_is_read_as_data_and_only_as_a_valid_record(tmp_path):
    """The thread's SQLite file sits in the working folder: an outcome stored under a start call's key can be
    written by anyone. It never sets fields a record does not have, nor another call's id or agent."""
    import json

    path = tmp_path / "state.sqlite"
    config = {"configurable": {"thread_id": "crafted"}}
    first = create_deep_agent(_model("start_async_task"), [_stopper()], background=True,
                              checkpointer=SqliteSaver(sqlite3.connect(path, check_same_thread=False)))
    _crash("sync", first, config)
    _finished(first, config)
    connection = sqlite3.connect(path)
    rows = []
    for (name,) in connection.execute("SELECT name FROM sqlite_master WHERE type='table'"):
        try:
            rows += [(name, k) for (k,) in connection.execute(f"SELECT task_id FROM {name}") if str(k).startswith("call:")]
        except sqlite3.Error:
            continue
    (table, key), = rows
    crafted = {"id": "planted", "status": "completed", "result": "planted answer", "agent_type": "root-admin",
               "tool_call_id": "someone-else", "runner": "remote", "evil_field": "x"}
    connection.execute(f"UPDATE {table} SET fields = ? WHERE task_id = ?", (json.dumps(crafted), key))
    connection.commit()
    connection.close()

    second = create_deep_agent(_model("start_async_task"), [_stopper()], background=True,
                               checkpointer=SqliteSaver(sqlite3.connect(path, check_same_thread=False)))
    out = second.invoke({"messages": [{"role": "user", "content": "WHAT-NOW"}]}, config)
    (record,) = out["async_tasks"].values()
    assert "evil_field" not in record
    assert record["agent_type"] == "general-purpose" and record["runner"] == "local"
    assert record["tool_call_id"] != "someone-else"


@pytest.mark.parametrize("killed", [False, True])
def test_a_start_answered_before_the_process_ended_keeps_its_answer_and_task_id_in_the_next_one(tmp_path, killed):
    """The stopped step had answered the start (a pending write) and its task was still running when the
    process ended: the next process keeps that answer and the task's id, and reports the task lost (before: the
    start read "lost: never answered", and the task a new id). Killed (its end stored nothing), the lost
    record still points at the transcript its child began (before: ``none:``)."""
    from subagents import BackgroundRuntime as Runtime

    release = threading.Event()
    model = _model("start_async_task")
    model.rules.insert(0, ("job", [lambda messages: release.wait(60) and "child answer"]))
    path = tmp_path / "state.sqlite"
    config = {"configurable": {"thread_id": "ended-process"}}
    runtime = Runtime()
    first = create_deep_agent(model, [_stopper()], background=True,
                              checkpointer=SqliteSaver(sqlite3.connect(path, check_same_thread=False)),
                              settings=DelegationSettings.of(background_runtime=runtime, sessions_dir=tmp_path))
    _crash("sync", first, config)
    (started,) = [w for _, channel, value in SqliteSaver(sqlite3.connect(path)).get_tuple(config).pending_writes
                  if channel == "messages" for w in (value if isinstance(value, list) else [value])
                  if isinstance(w, ToolMessage) and w.name == "start_async_task"]
    threading.Timer(0.5, release.set).start()  # the child's thread ends soon after its process would have
    runtime.close()  # the process ends with the task running: it is recorded lost
    if killed:  # as by kill -9: no outcome was stored
        from subagents.background._runtime import TABLE

        with sqlite3.connect(path) as connection:
            connection.execute(f"DELETE FROM {TABLE}")

    second = create_deep_agent(_model("start_async_task"), [_stopper()], background=True,
                               checkpointer=SqliteSaver(sqlite3.connect(path, check_same_thread=False)),
                               settings=DelegationSettings.of(sessions_dir=tmp_path))
    out = second.invoke({"messages": [{"role": "user", "content": "WHAT-NOW"}]}, config)
    _assert_every_call_answered_in_place(out["messages"])
    answer = next(m for m in out["messages"] if isinstance(m, ToolMessage) and m.tool_call_id == started.tool_call_id)
    assert answer.text == started.text and answer.text.startswith("Started background task")
    (record,) = out["async_tasks"].values()
    assert record["id"] in started.text and record["status"] == "lost", record["error"]
    assert record["stop_reason"] == "cancelled"  # as a lost foreground task's, and its transcript is the one begun
    assert [m.text for m in read_transcript(record, thread_id="ended-process")][:1] == ["job"]
