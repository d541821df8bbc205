"""The delegation hot path stays lean without losing a promise.

Each trim of the per-``task`` cost keeps a behaviour, tried here the way a
caller would meet it: task ids stay those already stored in checkpoints,
one callback handler still meters and records, a recorder that breaks
costs only its transcript, the ledger update the tool node no longer
copies never reaches the state as anything but a plain dict (nor does an
update without write-backs, copied no more either), the child's
run keeps its subagent's name in traces, and no cap means no waiting.
"""

from __future__ import annotations

import asyncio
import copy
import operator
import threading
import uuid
from typing import Annotated
from unittest import mock

import pytest
from helpers.graphs import Runner, parent_script, records, tool_messages, user
from langchain.agents import AgentState, create_agent
from langchain.agents.middleware import AgentMiddleware
from langchain_core.callbacks import BaseCallbackHandler
from langchain_core.runnables import RunnableLambda
from langgraph.types import Command

import middleware._subagents as delegating
import middleware._task_tool as task_tool
from deep_agent._testing import ScriptedChatModel
from middleware import SubAgentMiddleware
from subagents import get_transcript
from subagents._metering import TaskMeter, TranscriptRecorder
from subagents._outcome import _TASK_ID_NAMESPACE, task_id_for
from subagents._runner import ConcurrencyLimit
from subagents._settings import DelegationSettings

ANSWER = "the child's full answer, long enough to be a report of what it did"


def _agent(settings=DelegationSettings(), **kwargs):
    model = ScriptedChatModel(rules=[("job", [ANSWER])], responses=parent_script(("job", "worker")))
    spec = {"name": "worker", "description": "Does jobs.", "system_prompt": "Work.", "model": model,
            "tools": []}
    return create_agent(model, [], middleware=[SubAgentMiddleware([spec], settings=settings.updated(general_purpose=False), **kwargs)])


@pytest.mark.parametrize("ids", [("t1", "tools:abc", "call_1"), (None, "", None), ("é" * 90, "a|b", "c|d")])
def test_task_ids_are_the_uuid5_ids_already_stored_in_checkpoints(ids):
    thread, namespace, call_id = ids
    expected = uuid.uuid5(_TASK_ID_NAMESPACE, f"{thread}|{namespace}|{call_id}").hex
    assert task_id_for(thread, namespace, call_id) == expected


def test_one_handler_meters_and_records(run):
    seen: list[list[BaseCallbackHandler]] = []

    def child(state, config):
        seen.append(list(config["callbacks"].handlers))
        return {"messages": [*state["messages"], {"role": "assistant", "content": ANSWER}]}

    model = ScriptedChatModel(responses=parent_script(("job", "worker")))
    spec = {"name": "worker", "description": "Does jobs.", "runnable": RunnableLambda(child)}
    agent = create_agent(model, [], middleware=[SubAgentMiddleware([spec], settings=DelegationSettings.of(
        general_purpose=False,
    ))])
    out = run(agent, user("go"))
    assert tool_messages(out)[0].text == ANSWER
    ours = [h for h in seen[0] if isinstance(h, (TaskMeter, TranscriptRecorder))]
    assert len(ours) == 1 and isinstance(ours[0], TaskMeter)


def test_the_record_counts_and_the_transcript_holds_the_child(run):
    out = run(_agent(), user("go"))
    (record,) = records(out)
    assert record["status"] == "completed" and record["model_calls"] == 1
    messages = get_transcript(out, {}, record["id"])
    assert [m.type for m in messages] == ["human", "ai"] and messages[-1].text == ANSWER


def test_a_broken_recorder_costs_the_transcript_not_the_task(run, monkeypatch):
    def broken(self, *args, **kwargs):
        raise RuntimeError("recorder broke")

    monkeypatch.setattr(TranscriptRecorder, "on_chat_model_start", broken)
    monkeypatch.setattr(TranscriptRecorder, "on_llm_end", broken)
    out = run(_agent(), user("go"))
    (record,) = records(out)
    assert record["status"] == "completed" and record["model_calls"] == 1
    assert tool_messages(out)[0].text == ANSWER


# The sync SQLite saver serves the sync path only.
@pytest.mark.parametrize(("mode", "kind"), [("sync", "memory"), ("async", "memory"), ("sync", "sqlite")])
def test_ledger_and_usage_reach_the_state_as_plain_dicts(mode, kind, tmp_path):
    import sqlite3

    from langgraph.checkpoint.memory import InMemorySaver
    from langgraph.checkpoint.sqlite import SqliteSaver

    run = Runner(mode)

    saver = InMemorySaver() if kind == "memory" else SqliteSaver(sqlite3.connect(tmp_path / "s.db",
                                                                                check_same_thread=False))
    model = ScriptedChatModel(rules=[("job", [ANSWER])], responses=parent_script(("job", "worker")))
    spec = {"name": "worker", "description": "Does jobs.", "system_prompt": "Work.", "model": model, "tools": []}
    agent = create_agent(model, [], middleware=[SubAgentMiddleware([spec], settings=DelegationSettings.of(
        general_purpose=False,
    ))],
                         checkpointer=saver)
    config = {"configurable": {"thread_id": f"plain-{kind}"}}
    out = run(agent, user("go"), config)
    saved = agent.get_state(config).values
    for state in (out, saved):
        assert type(state["subagent_tasks"]) is dict and type(state["subagent_usage"]) is dict
        assert all(type(entry) is dict for entry in state["subagent_tasks"].values())
        assert state["subagent_usage"]["tasks"] == 1
    assert saved["subagent_tasks"] == out["subagent_tasks"]


def test_a_middleware_editing_its_deep_copy_of_the_task_result_leaves_the_state_alone(run):
    """An audit copy a middleware makes of the task result is its own: editing it leaves the state alone."""
    copies: list = []

    class Audit(AgentMiddleware):
        def _keep(self, result):
            if isinstance(result, Command):
                copies.append(copy.deepcopy(result))
                copies[-1].update["messages"][0].content = "[redacted]"
                next(iter(copies[-1].update["subagent_tasks"].values()))["result"] = "[redacted]"
            return result

        def wrap_tool_call(self, request, handler):
            return self._keep(handler(request))

        async def awrap_tool_call(self, request, handler):
            return self._keep(await handler(request))

    model = ScriptedChatModel(rules=[("job", [ANSWER])], responses=parent_script(("job", "worker")))
    spec = {"name": "worker", "description": "Does jobs.", "system_prompt": "Work.", "model": model, "tools": []}
    agent = create_agent(model, [], middleware=[SubAgentMiddleware([spec], settings=DelegationSettings.of(
        general_purpose=False,
    )), Audit()])
    out = run(agent, user("go"))
    assert len(copies) == 1 and [m.text for m in tool_messages(out)] == [ANSWER]
    assert records(out)[0]["result"].startswith(ANSWER[:50])


def test_a_stream_consumer_editing_its_deep_copy_of_an_update_leaves_the_state_alone():
    edited = []
    final = None
    for mode, chunk in _agent().stream(user("go"), stream_mode=["updates", "values"]):
        if mode == "values":
            final = chunk
            continue
        for update in copy.deepcopy(chunk).values():
            for record in ((update or {}).get("subagent_tasks") or {}).values():
                record["result"] = "EDITED IN MY COPY"
                edited.append(record)
    assert edited and final is not None
    assert [r["result"][:20] for r in records(final)] == [ANSWER[:20]]


class _NotesState(AgentState):
    notes: Annotated[list[str], operator.add]


def _run_and_see(child_writes: bool):
    def child(state):
        out = {"messages": [*state["messages"], {"role": "assistant", "content": ANSWER}]}
        return {**out, "notes": [*state.get("notes", []), "from the child"]} if child_writes else out

    # Each Command the ``task`` tool built, kept before the tool node copies any.
    built: list[Command] = []
    command_of = task_tool.outcome_command

    def keeping(*args, **kwargs):
        built.append(command_of(*args, **kwargs))
        return built[-1]

    model = ScriptedChatModel(responses=parent_script(("job", "worker")))
    spec = {"name": "worker", "description": "Does jobs.", "runnable": RunnableLambda(child)}
    middleware = SubAgentMiddleware([spec], settings=DelegationSettings.of(general_purpose=False))
    agent = create_agent(model, [], state_schema=_NotesState, middleware=[middleware])
    with mock.patch.object(delegating, "outcome_command", keeping):
        out = agent.invoke({**user("go"), "notes": ["the parent's"]})
    (command,) = built
    return command, out


def test_an_update_without_write_backs_lands_whole_as_a_copy_the_tool_kept_no_handle_on():
    command, out = _run_and_see(child_writes=False)
    (message,) = tool_messages(out)
    # The tool node deep-copies every Command, ours included: nothing the tool kept can change the state.
    kept = command.update["messages"][0]
    assert message is not kept and message.text == ANSWER
    # Its dicts are copies too: the tool's handle on them reaches nothing in the state.
    kept.additional_kwargs["edited"] = kept.response_metadata["edited"] = True
    assert not message.additional_kwargs and not message.response_metadata
    assert type(out["messages"]) is list and type(out["subagent_tasks"]) is dict
    assert list(out["subagent_tasks"]) == list(command.update["subagent_tasks"])
    assert out["notes"] == ["the parent's"]


def test_an_update_with_write_backs_keeps_its_deep_copy():
    command, out = _run_and_see(child_writes=True)
    (message,) = tool_messages(out)
    assert message is not command.update["messages"][0] and message.text == ANSWER  # copied by the tool node
    assert out["notes"] == ["the parent's", "from the child"]


def test_the_child_run_keeps_its_subagents_name_in_traces():
    names: list[str] = []

    class Names(BaseCallbackHandler):
        def on_chain_start(self, serialized, inputs, *, name=None, **kwargs):
            names.append(name or "")

    _agent().invoke(user("go"), {"callbacks": [Names()]})
    assert "worker" in names


def test_no_cap_never_waits_and_a_cap_still_holds():
    free = ConcurrencyLimit(None)
    with free.hold():
        with free.hold():
            pass

    async def nested() -> None:
        async with free.ahold():
            async with free.ahold():
                pass

    asyncio.run(nested())
    capped, running, peak, lock = ConcurrencyLimit(1), [0], [0], threading.Lock()

    def work() -> None:
        with capped.hold():
            with lock:
                running[0] += 1
                peak[0] = max(peak[0], running[0])
            threading.Event().wait(0.01)
            with lock:
                running[0] -= 1

    threads = [threading.Thread(target=work) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert peak[0] == 1


def test_the_delegation_cap_counts_only_the_current_run_in_order():
    from langchain_core.messages import AIMessage, HumanMessage, ToolMessage

    from middleware._limits import DelegationLimit

    def calls(*ids, name="task"):
        return AIMessage("", tool_calls=[{"name": name, "args": {}, "id": i, "type": "tool_call"} for i in ids])

    earlier = [HumanMessage("old"), calls("old1", "old2"), ToolMessage("r", tool_call_id="old1")] * 500
    thread = [*earlier, HumanMessage("now"), calls("a", "b"), calls("x", name="other"),
              ToolMessage("r", tool_call_id="a"), calls("c")]
    limit = DelegationLimit(2)
    assert limit.calls_this_run(thread) == ["a", "b", "c"]
    assert limit.refusal(thread, "b") is None and "delegation limit" in (limit.refusal(thread, "c") or "")
    assert limit.calls_this_run([*thread, HumanMessage("next")]) == []
    assert limit.calls_this_run([calls("first")]) == ["first"]  # no human message at all


def test_the_task_tools_hints_are_plain_classes_langchain_resolves_cheaply():
    """LangChain resolves a tool function's hints on every call: strings and unions cost several times more."""
    import types
    import typing

    tool = next(t for t in SubAgentMiddleware([{"name": "w", "description": "d", "system_prompt": "p"}]).tools
                if t.name == "task")
    for function in (tool.func, tool.coroutine):
        assert not any(isinstance(hint, str) for hint in function.__annotations__.values())
        hints = typing.get_type_hints(function)
        assert hints and not any(isinstance(h, (types.UnionType, types.GenericAlias)) or typing.get_origin(h)
                                 for h in hints.values()), hints


def test_no_hook_wraps_the_parents_other_tool_calls_and_a_bad_task_call_still_gets_its_record(run):
    """LangChain runs a wrap_tool_call hook (in a LangSmith span) around every tool call; ``task`` records its own."""
    from langchain.agents.middleware import AgentMiddleware
    from langchain_core.messages import AIMessage
    from langchain_core.tools import tool

    assert SubAgentMiddleware.wrap_tool_call is AgentMiddleware.wrap_tool_call
    assert SubAgentMiddleware.awrap_tool_call is AgentMiddleware.awrap_tool_call

    @tool
    def lookup(key: str) -> str:
        """Look a key up."""
        return f"value of {key}"

    calls = [{"name": "task", "args": {"subagent_type": "worker", "runtime": "x"}, "id": "bad", "type": "tool_call"},
             {"name": "lookup", "args": {"key": "k"}, "id": "plain", "type": "tool_call"}]
    model = ScriptedChatModel(responses=[AIMessage("", tool_calls=calls), "carried on"])
    spec = {"name": "worker", "description": "Does jobs.", "system_prompt": "Work.", "model": model}
    out = run(create_agent(model, [lookup], middleware=[SubAgentMiddleware([spec],
    settings=DelegationSettings.of(general_purpose=False))]),
              user("go"))
    by_id = {m.tool_call_id: m for m in tool_messages(out)}
    assert by_id["plain"].text == "value of k" and by_id["plain"].status == "success"
    bad = by_id["bad"]
    assert bad.status == "error" and "description: Field required" in bad.text and "runtime" not in bad.text
    (record,) = out["subagent_tasks"].values()
    assert record["stop_reason"] == "invalid_call" and record["tool_call_id"] == "bad"
    assert record["agent_type"] == "worker"


def test_the_task_tool_raises_bad_arguments_that_are_no_models_tool_call():
    from pydantic import ValidationError

    (task,) = [t for t in SubAgentMiddleware([{"name": "w", "description": "d", "system_prompt": "p"}]).tools
               if t.name == "task"]
    with pytest.raises(ValidationError):
        task.invoke({"subagent_type": "w"})
    with pytest.raises(ValidationError):
        asyncio.run(task.ainvoke({"subagent_type": "w"}))


def test_a_bad_task_call_whose_record_cannot_be_built_is_still_answered_and_the_parent_goes_on(run, monkeypatch):
    from langchain_core.messages import AIMessage

    import middleware._task_tool as recorded

    def broken(*args, **kwargs):
        raise KeyError("record store broke")

    monkeypatch.setattr(recorded, "invalid_call_record", broken)
    calls = [{"name": "task", "args": {"subagent_type": "worker"}, "id": "bad", "type": "tool_call"}]
    model = ScriptedChatModel(responses=[AIMessage("", tool_calls=calls), "carried on"])
    spec = {"name": "worker", "description": "Does jobs.", "system_prompt": "Work.", "model": model}
    out = run(create_agent(model, [], middleware=[SubAgentMiddleware([spec], settings=DelegationSettings.of(
        general_purpose=False,
    ))]), user("go"))
    (bad,) = tool_messages(out)
    assert bad.status == "error" and "description: Field required" in bad.text
    assert out["messages"][-1].text == "carried on"
