"""Background-task rules: clear errors, isolation, one level, specs, and composing with ``task``."""

from __future__ import annotations

import pytest
from langchain.agents import create_agent
from langchain_core.tools import tool
from langgraph.checkpoint.memory import InMemorySaver

from helpers.background import background, as_json, ledger, start, started_ids, wait_for
from helpers.graphs import tool_messages, user
from deep_agent import create_deep_agent
from deep_agent._testing import ScriptedChatModel, tool_call
from middleware import BackgroundSubagentMiddleware
from middleware import SubAgentMiddleware
from subagents._settings import DelegationSettings


def thread() -> dict:
    import time

    return {"configurable": {"thread_id": f"t-{time.monotonic_ns()}"}}


@tool
def spin() -> str:
    """One small step of work."""
    return "spun"


def test_bad_ids_wrong_states_and_unknown_agents_get_clear_errors(background):
    model = ScriptedChatModel(
        rules=[
            ("quick job", ["quick answer"]),
            ("PARENT start", [start(("quick job", "general-purpose"), ("x", "nobody")), "started"]),
            ("PARENT bad", [{"tool_calls": [tool_call("check_async_task", task_id="nope"),
                                            tool_call("cancel_async_task", task_id="nope")]}, "ok"]),
            ("PARENT wrong", [lambda m: {"tool_calls": [
                tool_call("retry_async_task", task_id=started_ids(m)[0]),
                tool_call("cancel_async_task", task_id=started_ids(m)[0]),
                tool_call("list_async_tasks", status="completed"),
                tool_call("list_async_tasks", status="running"),
                tool_call("list_async_tasks", status="finished"),
            ]}, "ok"]),
        ],
        default="ok",
    )
    # Without notices, so every scripted turn below is the parent's own.
    agent = create_agent(model, middleware=[background(settings=DelegationSettings.of(notify=False))],
                         checkpointer=InMemorySaver())
    config = thread()
    out = agent.invoke(user("PARENT start"), config)
    results = tool_messages(out)
    (task_id,) = started_ids(out["messages"])
    unknown = results[1]
    assert unknown.status == "error" and unknown.content.startswith("Subagent 'nobody' failed:")
    assert "Unknown async subagent type `nobody`. Available types: `general-purpose`" in unknown.content
    (refused,) = (r for r in ledger(out).values() if r["id"] != task_id)  # a start that ran no child is recorded
    assert (refused["agent_type"], refused["stop_reason"], refused["transcript"]) == ("nobody", "invalid_call", "none:")
    wait_for(lambda: background.status(task_id) == "completed")

    out = agent.invoke(user("PARENT bad"), config)
    check, cancel = tool_messages(out)[-2:]
    for message in (check, cancel):
        assert message.status == "error"
        assert message.content == f"No tracked task found for task_id: 'nope'. Known task ids: {task_id}, {refused['id']}."

    out = agent.invoke(user("PARENT wrong"), config)
    retry, cancel, done, running, bogus = tool_messages(out)[-5:]
    assert retry.status == "error" and "completed" in retry.content and "update_async_task" in retry.content
    assert cancel.status == "error" and "already completed" in cancel.content
    assert [row["task_id"] for row in as_json(done)] == [task_id]
    assert running.content == "No background tasks with status 'running'."
    assert bogus.status == "error" and "status" in bogus.content


def test_children_are_isolated_and_one_level(background):
    model = ScriptedChatModel(
        rules=[("isolated job", ["fine"]), ("PARENT start", [start(("isolated job", "general-purpose")), "ok"])],
        default="ok",
    )
    agent = create_agent(model, [spin], system_prompt="PARENT SECRET",
                         middleware=[background()], checkpointer=InMemorySaver())
    out = agent.invoke(user("PARENT start with history"), thread())
    (task_id,) = started_ids(out["messages"])
    wait_for(lambda: background.status(task_id) == "completed")
    child = next(c for c in model.calls if c["messages"][-1].text == "isolated job")
    assert [m.type for m in child["messages"]] == ["system", "human"]
    assert "PARENT SECRET" not in child["system"]
    assert child["tools"] == ["spin"]  # no task or background tools in a child
    parent = model.calls[0]
    assert {"start_async_task", "check_async_task", "update_async_task", "cancel_async_task",
            "list_async_tasks", "retry_async_task"} <= set(parent["tools"])
    assert "- general-purpose: " in parent["system"]


@pytest.mark.parametrize("bad", [{"name": "r", "description": "d", "graph_id": "g", "url": "ftp://host"},
                                 {"name": "r", "description": "d", "graph_id": "g", "url": "u", "x": 1}])
def test_bad_remote_specs_name_the_field(bad):
    from subagents import SpecError

    with pytest.raises(SpecError, match="remote subagent 'r': field '(url|x)'"):
        BackgroundSubagentMiddleware([bad])


def test_background_tasks_compose_with_the_task_tool_in_create_deep_agent(run, background):
    model = ScriptedChatModel(
        rules=[
            ("sync part", ["sync answer"]),
            ("background part", ["background answer"]),
            ("PARENT go", [{"tool_calls": [
                tool_call("task", description="sync part", subagent_type="general-purpose"),
                tool_call("start_async_task", description="background part", subagent_type="general-purpose"),
            ]}, "both under way"]),
        ],
        default="ok",
    )
    delegation = SubAgentMiddleware()  # lists general-purpose already
    middleware = background(model_middleware=[delegation], settings=DelegationSettings.of(notify=False))
    agent = create_deep_agent(model, middleware=[middleware], checkpointer=InMemorySaver())
    config = thread()
    out = run(agent, user("PARENT go"), config)
    sync_result, started = tool_messages(out)
    assert sync_result.content == "sync answer"
    (task_id,) = started_ids(out["messages"])
    assert list(out["subagent_tasks"]) != [task_id] and list(ledger(out)) == [task_id]
    wait_for(lambda: background.status(task_id) == "completed")
    assert background.task(task_id).fields["result"] == "background answer"
    system = model.calls[0]["system"]
    assert system.count("<available_agents>") == 1
    assert {"task", "start_async_task"} <= set(model.calls[0]["tools"])


def test_the_ledger_reducer_merges_updates_field_by_field():
    from subagents.background import merge_async_records

    left = {"a": {"id": "a", "status": "running", "description": "job"}, "b": {"id": "b", "status": "pending"}}
    merged = merge_async_records(left, {"a": {"status": "completed", "result": "x"}, "c": {"id": "c"}})
    assert merged["a"] == {"id": "a", "status": "completed", "description": "job", "result": "x"}
    assert merged["b"] is left["b"] and merged["c"] == {"id": "c"}
    assert left["a"]["status"] == "running"  # inputs are never mutated
    assert merge_async_records(None, {"a": {"id": "a"}}) == {"a": {"id": "a"}}


def test_approval_messages_become_resume_values():
    from subagents.definitions._permissions import pending_interrupts, resume_for

    batched = pending_interrupts([{"id": "i1", "value": {"action_requests": [{"name": "a"}, {"name": "b"}]}}])
    assert resume_for("Approved.", batched) == {"decisions": [{"type": "approve"}] * 2}
    assert resume_for("no, use staging", batched) == {
        "decisions": [{"type": "reject", "message": "no, use staging"}] * 2
    }
    per_call = pending_interrupts([{"id": "i1", "value": {"type": "tool_approval", "name": "a"}}])
    assert resume_for("yes", per_call) == {"type": "approve"}
    two = pending_interrupts([{"id": "i1", "value": {"type": "tool_approval"}},
                              {"id": "i2", "value": {"type": "tool_approval"}}])
    assert resume_for("ok", two) == {"i1": {"type": "approve"}, "i2": {"type": "approve"}}
    assert resume_for('{"answer": 42}', batched) == {"answer": 42}


def test_a_background_child_leaves_a_transcript_like_a_task_call(tmp_path, background):
    from subagents._transcripts import read_jsonl

    model = ScriptedChatModel(
        rules=[("write it down", ["written " * 40]),
               ("PARENT start", [start(("write it down", "general-purpose")), "ok"])],
        default="ok",
    )
    middleware = background(settings=DelegationSettings.of(sessions_dir=str(tmp_path), notify=False))
    agent = create_agent(model, middleware=[middleware], checkpointer=InMemorySaver())
    out = agent.invoke(user("PARENT start"), thread())
    (task_id,) = started_ids(out["messages"])
    wait_for(lambda: background.status(task_id) == "completed")
    transcript = background.task(task_id).fields["transcript"]
    assert transcript.startswith("jsonl:")
    _header, messages = read_jsonl(transcript.removeprefix("jsonl:"))
    texts = [(m.type, m.text[:13]) for m in messages if m.type != "system"]
    assert texts == [("human", "write it down"), ("ai", "written writt")]


def test_an_unknown_id_is_answered_in_bounded_words_however_long_it_and_the_ledger_are(background):
    records = {f"t{i:03d}": {"id": f"t{i:03d}", "agent_type": "general-purpose", "runner": "local",
                             "status": "completed", "description": f"old job {i}", "created_at": 1000.0 + i,
                             "finished_at": 1001.0 + i, "result": "done", "announced": True}
               for i in range(300)}
    huge = "x" * 2_000_000
    model = ScriptedChatModel(responses=[{"tool_calls": [tool_call("check_async_task", task_id=huge)]}, "ok"])
    agent = create_agent(model, middleware=[background(settings=DelegationSettings.of(notify=False))], checkpointer=InMemorySaver())
    config = thread()
    agent.update_state(config, {"messages": [{"role": "user", "content": "hi"}], "async_tasks": records})
    answer = tool_messages(agent.invoke(user("PARENT check"), config))[-1]
    assert answer.status == "error" and answer.content.startswith("No tracked task found for task_id: 'xxx")
    assert len(answer.content) < 3_000
    assert "the newest 20 of 300" in answer.content and "t299" in answer.content and "t000" not in answer.content


@pytest.mark.parametrize("message", ["", " \n\t", "\u200b\u2800", "\u3164\ufe0f"],
                         ids=["empty", "whitespace", "zero-width-and-blank-braille", "filler-and-selector"])
def test_a_follow_up_that_shows_nothing_is_refused_and_the_task_runs_no_turn_on_it(background, message):
    """``task`` refuses a description of invisible characters; a follow-up of them ran the finished task again."""
    child = ScriptedChatModel(default="done")
    model = ScriptedChatModel(rules=[
        ("PARENT start", [start(("first job", "worker")), "started"]),
        ("PARENT again", [lambda m: {"tool_calls": [tool_call("update_async_task", task_id=started_ids(m)[0],
                                                              message=message)]}, "ok"]),
    ], default="ok")
    agent = create_agent(model, middleware=[background([{"name": "worker", "description": "w", "model": child}],
                                                       settings=DelegationSettings.of(notify=False))],
                         checkpointer=InMemorySaver())
    config = thread()
    (task_id,) = started_ids(agent.invoke(user("PARENT start"), config)["messages"])
    wait_for(lambda: background.status(task_id) == "completed")
    turns = len(child.calls)
    update = tool_messages(agent.invoke(user("PARENT again"), config))[-1]
    assert update.status == "error" and "message must not be empty" in update.content
    assert background.status(task_id) == "completed" and len(child.calls) == turns


@pytest.mark.parametrize("description", [" ", "\u3164", "\U000e0041\U000e0042"],
                         ids=["space", "hangul-filler", "tag-characters"])
def test_a_blank_start_is_an_invalid_call_with_a_record_and_starts_no_child(run, background, description):
    """A blank start was refused and started no child, but left no record: ``task``'s call of it has one."""
    child = ScriptedChatModel(default="done")
    model = ScriptedChatModel(rules=[("PARENT go", [start((description, "worker")), "parent done"])], default="ok")
    agent = create_agent(model, middleware=[background([{"name": "worker", "description": "w", "model": child}],
                                                       settings=DelegationSettings.of(notify=False))],
                         checkpointer=InMemorySaver())
    out = run(agent, user("PARENT go"), thread())
    (msg,) = tool_messages(out)
    assert msg.status == "error" and "`description` is empty" in msg.content
    (record,) = ledger(out).values()
    assert (record["status"], record["stop_reason"], record["agent_type"], record["tool_call_id"]) == (
        "error", "invalid_call", "worker", msg.tool_call_id)
    assert child.calls == [] and out["messages"][-1].content == "parent done"
