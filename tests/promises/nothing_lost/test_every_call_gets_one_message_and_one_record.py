"""Every delegation call, however malformed, gets exactly one ToolMessage and one ledger record.

Calls without an id, ids shared or reused across turns, ids with a lone
surrogate, arguments nested past the limit, unreadable or wrong arguments,
refused delegations, a compiled child's answer in an odd form: each is
answered, recorded and, where it can be, retried.
"""

from __future__ import annotations

from typing import Any

import pytest
from langchain_core.messages import AIMessage
from langgraph.checkpoint.memory import InMemorySaver

from deep_agent import create_deep_agent
from deep_agent._testing import ScriptedChatModel, tool_call
from helpers.attacks import (
    MODES,
    _assert_one_message_and_record_per_call,
    _compiled,
    _invoke,
    _parallel,
    _records,
    _tool_messages,
    _user,
)
from helpers.graphs import records, tool_messages, user
from helpers.odd_children import _create
from middleware._task_tool import MAX_ARGUMENT_DEPTH
from subagents._settings import DelegationSettings


@MODES
def test_a_task_call_without_an_id_still_gets_its_tool_message_and_record(mode):
    """Some OpenAI-compatible servers send tool calls without ids. Today the task's ToolMessage
    gets tool_call_id='' and the tool node rejects it: the parent run dies."""
    model = ScriptedChatModel(
        rules=[("alpha", ["A"]), ("beta", ["B"])],
        responses=[AIMessage("", tool_calls=[
            {"name": "task", "args": {"description": "alpha", "subagent_type": "general-purpose"},
             "id": None, "type": "tool_call"},
            {"name": "task", "args": {"description": "beta", "subagent_type": "general-purpose"},
             "id": None, "type": "tool_call"},
        ]), "parent carried on"],
    )
    out = _invoke(mode, create_deep_agent(model, []), _user())
    _assert_one_message_and_record_per_call(out, 2)


@MODES
def test_two_invalid_task_calls_sharing_an_id_get_a_record_each(mode):
    """Each call gets one ToolMessage and one record; the record id is derived from the call id alone,
    so the second invalid call's record overwrites the first."""
    model = ScriptedChatModel(responses=[AIMessage("", invalid_tool_calls=[
        {"name": "task", "args": "{bad", "id": "same", "error": "bad json", "type": "invalid_tool_call"},
        {"name": "task", "args": "{worse", "id": "same", "error": "bad json", "type": "invalid_tool_call"},
    ]), "parent carried on"])
    out = _invoke(mode, create_deep_agent(model, []), _user())
    _assert_one_message_and_record_per_call(out, 2)


@MODES
def test_invalid_task_calls_in_two_turns_keep_two_records_when_the_model_reuses_call_ids(mode):
    """Valid delegations get ids scoped by thread and checkpoint namespace, but an invalid call's record
    id is a hash of the call id alone: a server that numbers calls per reply ("call_0") makes the second
    turn's record overwrite the first in a checkpointed thread."""

    def bad_call(messages: Any) -> AIMessage:
        return AIMessage("", tool_calls=[{"name": "task", "args": {"description": "job"}, "id": "call_0",
                                          "type": "tool_call"}])

    model = ScriptedChatModel(responses=[bad_call, "parent carried on"])
    agent = create_deep_agent(model, [], checkpointer=InMemorySaver())
    config = {"configurable": {"thread_id": f"reused-ids-{mode}"}}
    _invoke(mode, agent, _user("first"), config)
    out = _invoke(mode, agent, _user("second"), config)
    assert len(_tool_messages(out)) == 2
    assert len(_records(out)) == 2


def test_a_refused_delegation_emits_its_lifecycle_event():
    """The custom stream carries each task's end ("completed" / "error"); a refused task (unknown type,
    budget spent, nested call) gets a record and a ToolMessage but no event, so a live view misses it."""
    model = ScriptedChatModel(rules=[("ok", ["fine"])],
                              responses=_parallel(("ok", "general-purpose"), ("x", "no-such-agent")))
    agent = create_deep_agent(model, [])
    events = [e for e in agent.stream(_user(), stream_mode="custom") if e.get("type") == "subagent_task"]
    assert sorted((e["agent_type"], e["status"]) for e in events if e["status"] != "running") == [
        ("general-purpose", "completed"), ("no-such-agent", "error")]


@MODES
def test_a_compiled_childs_answer_given_as_a_message_dict_is_not_lost(mode):
    """A user's own StateGraph with a plain `messages: list` channel often appends OpenAI-style dicts.
    final_answer only looks at AIMessage objects, so the task 'completes' with an empty answer."""
    model = ScriptedChatModel(responses=_parallel(("x", "c")))
    child = _compiled("c", lambda inp: {**inp, "messages": [*inp["messages"],
                                                            {"role": "assistant", "content": "the answer"}]})
    out = _invoke(mode, create_deep_agent(model, [], subagents=[child]), _user())
    _assert_one_message_and_record_per_call(out, 1)
    assert _tool_messages(out)[0].content == "the answer"


@MODES
def test_duplicate_task_call_ids_each_get_a_message_and_record(mode):
    model = ScriptedChatModel(rules=[("alpha", ["A"]), ("beta", ["B"])], responses=[AIMessage("", tool_calls=[
        {"name": "task", "args": {"description": "alpha", "subagent_type": "general-purpose"}, "id": "dup",
         "type": "tool_call"},
        {"name": "task", "args": {"description": "beta", "subagent_type": "general-purpose"}, "id": "dup",
         "type": "tool_call"},
    ]), "parent carried on"])
    out = _invoke(mode, create_deep_agent(model, []), _user())
    _assert_one_message_and_record_per_call(out, 2)


@MODES
@pytest.mark.parametrize("args", [{}, {"description": 5, "subagent_type": "general-purpose"},
                                  {"description": "x", "subagent_type": "general-purpose", "prompt": "y"},
                                  {"description": "x", "subagent_type": "../../etc\x00"}],
                         ids=["missing", "wrong-type", "extra", "traversal-type"])
def test_wrong_task_arguments_get_an_invalid_call_record(mode, args):
    model = ScriptedChatModel(responses=[AIMessage("", tool_calls=[
        {"name": "task", "args": args, "id": "c1", "type": "tool_call"}]), "parent carried on"])
    out = _invoke(mode, create_deep_agent(model, []), _user())
    _assert_one_message_and_record_per_call(out, 1)
    assert _records(out)[0]["stop_reason"] == "invalid_call"


def _nested(depth: int) -> Any:
    value: Any = "x"
    for _ in range(depth):
        value = [value]
    return value


@pytest.fixture
def provider_usage(monkeypatch):
    """Usage as a real provider reports it: the scripted model's own estimate would json.dumps the arguments."""
    import deep_agent._testing as testing

    monkeypatch.setattr(testing, "_usage", lambda *_: testing.UsageMetadata(input_tokens=1, output_tokens=1,
                                                                            total_tokens=2))


def test_task_arguments_nested_past_the_limit_are_answered_and_recorded(run, provider_usage):
    """At about 990 levels (what a provider's JSON parser still reads) LangChain's str() of them recursed too deep."""
    deep = _nested(989)
    message = AIMessage(content="", tool_calls=[{"name": "task", "id": "c1", "type": "tool_call",
                                                 "args": {"description": deep, "subagent_type": "general-purpose"}}])
    agent = create_deep_agent(ScriptedChatModel(responses=[message, "parent carried on"], default="x"))
    out = run(agent, user("go"))
    (answer,) = tool_messages(out)
    (record,) = records(out)
    assert out["messages"][-1].content == "parent carried on"
    assert answer.status == "error" and f"more than {MAX_ARGUMENT_DEPTH} levels" in answer.content
    assert (record["stop_reason"], record["tool_call_id"]) == ("invalid_call", "c1")


def test_arguments_at_the_limit_still_reach_validation(run):
    nested = _nested(MAX_ARGUMENT_DEPTH - 2)
    message = AIMessage(content="", tool_calls=[{"name": "task", "id": "c1", "type": "tool_call",
                                                 "args": {"description": nested, "subagent_type": "general-purpose"}}])
    out = run(create_deep_agent(ScriptedChatModel(responses=[message, "parent carried on"])), user("go"))
    (answer,) = tool_messages(out)
    assert "levels" not in answer.content and "description" in answer.content  # pydantic's own complaint


def test_an_id_less_create_subagent_call_is_answered(run):
    message = AIMessage(content="", tool_calls=[_create("alpha", None)])
    agent = create_deep_agent(ScriptedChatModel(responses=[message, "parent carried on"]),
    settings=DelegationSettings.of(dynamic_subagents=True))
    out = run(agent, user("go"))
    assert out["messages"][-1].content == "parent carried on" and list(out["dynamic_subagents"]) == ["alpha"]


def test_a_call_id_with_a_lone_surrogate_still_delegates(run):
    message = AIMessage(content="", tool_calls=[{"name": "task", "id": "call_\ud800", "type": "tool_call",
                                                 "args": {"description": "job", "subagent_type": "general-purpose"}}])
    agent = create_deep_agent(ScriptedChatModel(rules=[("job", ["child ok"])], responses=[message, "parent carried on"]))
    (record,) = records(run(agent, user("go")))
    assert (record["status"], record["result"]) == ("completed", "child ok")


def test_a_valid_call_sharing_its_id_with_an_unreadable_one_still_runs(run):
    message = AIMessage(content="", tool_calls=[
        {"name": "task", "args": {"description": "job one", "subagent_type": "general-purpose"}, "id": "0",
         "type": "tool_call"}], invalid_tool_calls=[
        {"name": "task", "args": '{"description": "job two", ', "id": "0", "error": "bad json",
         "type": "invalid_tool_call"}])
    agent = create_deep_agent(ScriptedChatModel(rules=[("job", ["child did it"])],
                                                responses=[message, "parent carried on"]))
    out = run(agent, user("go"))
    by_reason = {r["stop_reason"]: r for r in records(out)}
    assert by_reason["completed"]["result"] == "child did it" and "invalid_call" in by_reason
    assert len({m.tool_call_id for m in tool_messages(out)}) == 2


def test_create_subagent_arguments_nested_past_the_limit_are_answered(run, provider_usage):
    deep = _nested(989)
    message = AIMessage(content="", tool_calls=[{"name": "create_subagent", "id": "c1", "type": "tool_call", "args": {
        "name": "helper", "description": "d", "system_prompt": "p", "tools": deep}}])
    agent = create_deep_agent(ScriptedChatModel(responses=[message, "parent carried on"]),
    settings=DelegationSettings.of(dynamic_subagents=True))
    out = run(agent, user("go"))
    (answer,) = tool_messages(out)
    assert out["messages"][-1].content == "parent carried on"
    assert answer.status == "error" and f"more than {MAX_ARGUMENT_DEPTH} levels" in answer.content


def test_unreadable_task_arguments_are_answered_recorded_and_retried(run):
    broken = AIMessage(content="Delegating.", invalid_tool_calls=[
        {"name": "task", "args": '{"description": "find', "id": "call_bad", "error": "Unterminated string",
         "type": "invalid_tool_call"}])
    model = ScriptedChatModel(
        rules=[("find X", ["X found"])],
        responses=[broken,
                   {"tool_calls": [tool_call("task", description="find X", subagent_type="general-purpose")]},
                   "parent answer"],
    )
    out = run(create_deep_agent(model), user("go"))
    first = next(m for m in tool_messages(out) if m.tool_call_id == "call_bad")
    assert first.status == "error" and "valid JSON" in first.content
    # The model saw the error and retried; the loop did not end silently.
    assert out["messages"][-1].text == "parent answer"
    stops = sorted(r["stop_reason"] for r in records(out))
    assert stops == ["completed", "invalid_call"]


def test_unreadable_background_call_arguments_are_answered_recorded_and_retried(run):
    broken = AIMessage(content="Starting.", invalid_tool_calls=[
        {"name": "start_async_task", "args": '{"description": "wri', "id": "call_bg_bad",
         "error": "Unterminated string", "type": "invalid_tool_call"}])
    model = ScriptedChatModel(responses=[broken, "parent answer"])
    out = run(create_deep_agent(model, background=True), user("go"))
    answer = next(m for m in tool_messages(out) if m.tool_call_id == "call_bg_bad")
    assert answer.status == "error" and "valid JSON" in answer.content
    assert out["messages"][-1].text == "parent answer"
    (record,) = out["async_tasks"].values()
    assert record["status"] == "error" and record["stop_reason"] == "invalid_call"


def test_every_background_start_that_runs_no_child_is_recorded_with_an_empty_transcript(run):
    # Starts refused by max_delegations or naming an unknown agent had an error message and no record; a
    # refused task call's record, and an invalid start's, had no transcript reference.
    start = [tool_call("start_async_task", description=f"d{i}", subagent_type="general-purpose") for i in range(2)]
    model = ScriptedChatModel(responses=[
        {"tool_calls": [tool_call("start_async_task", description="x", subagent_type="nobody"),
                        tool_call("task", description="t", subagent_type="general-purpose"), *start,
                        tool_call("start_async_task", description="", subagent_type="general-purpose"),
                        tool_call("task", description="u", subagent_type="general-purpose")]},
        "parent answer"], default="child answer")
    agent = create_deep_agent(model, background=True, settings=DelegationSettings.of(max_delegations=2))
    out = run(agent, user("go"))
    ids = {c["id"] for m in out["messages"] if isinstance(m, AIMessage) for c in m.tool_calls}
    ids.update(c["id"] for m in out["messages"] if isinstance(m, AIMessage) for c in m.invalid_tool_calls)
    recorded = [*records(out), *out["async_tasks"].values()]
    assert sorted(r["tool_call_id"] for r in recorded) == sorted(ids)
    refused = sorted((r["stop_reason"], r["transcript"]) for r in recorded if r["status"] == "error")
    assert refused == [("invalid_call", "none:")] * 2 + [("refused", "none:")] * 3
