"""Root hooks guard every way of delegating: a guard on `task` also stops background starts,
and SubagentStart/SubagentStop fire for background children as they do for `task`."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest
from langgraph.checkpoint.memory import InMemorySaver

from deep_agent import create_deep_agent
from deep_agent._testing import ScriptedChatModel, tool_call
from helpers.graphs import tool_messages, user
from subagents import wait_for_background
from subagents._settings import DelegationSettings


def script(path: Path, body: str) -> str:
    path.write_text("#!/bin/sh\n" + body, encoding="utf-8")
    path.chmod(0o755)
    return str(path)


def deny(tmp_path: Path, matcher: str) -> dict:
    guard = script(tmp_path / "deny.sh", 'echo "No delegation here." >&2\nexit 2\n')
    return {"PreToolUse": [{"matcher": matcher, "hooks": [{"type": "command", "command": guard}]}]}


def test_a_pre_tool_use_guard_on_task_stops_a_background_start_before_the_child_runs(tmp_path, run):
    model = ScriptedChatModel(rules=[("secret job", ["child ran"])], responses=[
        {"tool_calls": [tool_call("start_async_task", description="secret job", subagent_type="general-purpose")]},
        "done"])
    out = run(create_deep_agent(model, background=True, hooks=deny(tmp_path, "task")), user("go"))
    (answer,) = tool_messages(out)
    assert answer.name == "start_async_task" and answer.status == "error"
    assert answer.content == "No delegation here."
    assert not out.get("async_tasks")  # no task was started, so no child ever ran
    assert out["messages"][-1].text == "done"  # the model read the refusal and went on


def test_a_guard_on_task_also_stops_create_subagent(tmp_path, run):
    model = ScriptedChatModel(responses=[
        {"tool_calls": [tool_call("create_subagent", name="helper", description="Helps.",
                                  system_prompt="You help.")]}, "done"])
    out = run(create_deep_agent(model, hooks=deny(tmp_path, "task"),
    settings=DelegationSettings.of(dynamic_subagents=True)), user("go"))
    (answer,) = tool_messages(out)
    assert answer.name == "create_subagent" and answer.content == "No delegation here."


def test_a_matcher_naming_start_async_task_matches_that_tool_alone(tmp_path, run):
    model = ScriptedChatModel(rules=[("sync job", ["synced."])], responses=[
        {"tool_calls": [tool_call("task", description="sync job", subagent_type="general-purpose")]},
        {"tool_calls": [tool_call("start_async_task", description="bg job", subagent_type="general-purpose")]},
        "done"], default="ok")
    out = run(create_deep_agent(model, background=True, hooks=deny(tmp_path, "start_async_task")), user("go"))
    by_tool = {m.name: m for m in tool_messages(out)}
    assert by_tool["task"].status != "error" and by_tool["task"].content.startswith("synced.")
    assert by_tool["start_async_task"].content == "No delegation here."


@pytest.mark.parametrize("outcome", ["completed", "error"])
def test_subagent_start_and_stop_fire_for_a_background_child_with_its_outcome(tmp_path, outcome):
    log = tmp_path / "hooks.jsonl"
    logger = script(tmp_path / "log.sh", f"cat >> {log}\necho >> {log}\n")
    review = script(tmp_path / "review.sh", 'echo "Check the numbers." >&2\nexit 2\n')
    entry = lambda command: [{"matcher": "general-purpose", "hooks": [{"type": "command", "command": command}]}]  # noqa: E731
    hooks = {"SubagentStart": entry(logger), "SubagentStop": [*entry(logger), *entry(review)]}
    child = ["the sum is 4."] if outcome == "completed" else [RuntimeError("model down")]
    model = ScriptedChatModel(rules=[("sum it", child), ("news?", ["noted"]), ("Background task", ["noted"])],
                              responses=[
        {"tool_calls": [tool_call("start_async_task", description="sum it", subagent_type="general-purpose")]},
        "started"], default="noted")
    agent = create_deep_agent(model, background=True, hooks=hooks, checkpointer=InMemorySaver())
    config = {"configurable": {"thread_id": "bg"}}
    out = agent.invoke(user("go"), config)
    assert wait_for_background(out["async_tasks"], timeout_s=60)
    out = agent.invoke(user("news?"), config)
    (record,) = out["async_tasks"].values()
    events = [json.loads(line) for line in log.read_text().splitlines() if line.strip()]
    assert [e["hook_event_name"] for e in events] == ["SubagentStart", "SubagentStop"]
    assert events[0]["subagent_type"] == "general-purpose" and events[0]["description"] == "sum it"
    assert events[1]["task_id"] == record["id"] and events[1]["status"] == outcome == record["status"]
    assert events[1]["background"] is True
    told = record["result"] if outcome == "completed" else record["error"]
    assert told.endswith("Hook feedback: Check the numbers.")
    assert ("the sum is 4." if outcome == "completed" else "model down") in told


def test_subagent_stop_fires_once_for_a_remote_background_task_when_it_is_seen_ending(tmp_path):
    from helpers.fault_servers import RecordingServer
    from subagents import RemoteSubagentSpec

    server = RecordingServer()  # its runs never finish: the task ends at its timeout_s, as an error
    try:
        log = tmp_path / "hooks.jsonl"
        logger = script(tmp_path / "log.sh", f"cat >> {log}\necho >> {log}\n")
        review = script(tmp_path / "review.sh", 'echo "Try a nearer server." >&2\nexit 2\n')
        entry = lambda command: [{"matcher": "far", "hooks": [{"type": "command", "command": command}]}]  # noqa: E731
        hooks = {"SubagentStart": entry(logger), "SubagentStop": [*entry(logger), *entry(review)]}
        far = RemoteSubagentSpec(name="far", description="Far away.", url=server.url, graph_id="g", timeout_s=1)
        model = ScriptedChatModel(rules=[("news?", ["noted"]), ("Background task", ["noted"])], responses=[
            {"tool_calls": [tool_call("start_async_task", description="far job", subagent_type="far")]},
            "started"], default="noted")
        agent = create_deep_agent(model, hooks=hooks, checkpointer=InMemorySaver(),
        settings=DelegationSettings.of(background_subagents=[far]))
        config = {"configurable": {"thread_id": "remote"}}
        out = agent.invoke(user("go"), config)
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:  # each parent turn polls the server
            (record,) = out["async_tasks"].values()
            if record["status"] == "error":
                break
            time.sleep(0.3)
            out = agent.invoke(user("news?"), config)
        out = agent.invoke(user("news?"), config)  # one poll more: the end is told once
        (record,) = out["async_tasks"].values()
        events = [json.loads(line) for line in log.read_text().splitlines() if line.strip()]
        assert [e["hook_event_name"] for e in events] == ["SubagentStart", "SubagentStop"]
        assert events[1]["task_id"] == record["id"] and events[1]["status"] == "error" == record["status"]
        assert "timed out" in events[1]["result"]
        assert record["error"].endswith("Hook feedback: Try a nearer server.")
    finally:
        server.close()


def test_a_refused_background_start_gets_its_subagent_stop_at_once(tmp_path, run):
    log = tmp_path / "hooks.jsonl"
    logger = script(tmp_path / "log.sh", f"cat >> {log}\necho >> {log}\n")
    hooks = {event: [{"hooks": [{"type": "command", "command": logger}]}] for event in ("SubagentStart", "SubagentStop")}
    model = ScriptedChatModel(responses=[
        {"tool_calls": [tool_call("start_async_task", description="job", subagent_type="nobody")]}, "done"])
    out = run(create_deep_agent(model, background=True, hooks=hooks), user("go"))
    (answer,) = tool_messages(out)
    (record,) = out["async_tasks"].values()  # a start that ran no child is recorded all the same
    assert answer.status == "error" and (record["status"], record["agent_type"]) == ("error", "nobody")
    events = [json.loads(line) for line in log.read_text().splitlines() if line.strip()]
    assert [(e["hook_event_name"], e.get("status")) for e in events] == [("SubagentStart", None), ("SubagentStop", "error")]
    assert events[1]["subagent_type"] == "nobody" and "nobody" in events[1]["result"]
