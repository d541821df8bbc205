"""Dynamic subagents: created at run time, then governed like any other."""

from __future__ import annotations

import asyncio
from typing import Annotated, Any, NotRequired, TypedDict

import pytest
from langchain.agents import create_agent
from langchain_core.messages import AIMessage
from langchain_core.tools import tool
from langgraph.graph import END, START, StateGraph
from langgraph.graph.message import add_messages

from helpers.graphs import call, checkpointer, records, tool_messages, user
from deep_agent import create_deep_agent
from deep_agent._testing import ScriptedChatModel, tool_call
from middleware import SubAgentMiddleware
from subagents import TaskRecord
from subagents._settings import DelegationSettings


@tool
def lookup(q: str) -> str:
    """Look something up."""
    return f"found {q}"


@tool
def shell(cmd: str) -> str:
    """Run a command."""
    return "ran"


SQL = {"name": "sql-expert", "description": "Writes SQL queries.", "system_prompt": "You write SQL.",
       "tools": ["lookup"], "max_turns": 5}


def create(**args: Any) -> dict[str, Any]:
    return tool_call("create_subagent", **args)


def delegate(description: str, agent: str) -> dict[str, Any]:
    return tool_call("task", description=description, subagent_type=agent)


def agent_with(model: ScriptedChatModel, settings: DelegationSettings = DelegationSettings.of(short_answer_threshold=0),
               **kwargs: Any) -> Any:
    return create_deep_agent(model, [lookup, shell], settings=settings.updated(dynamic_subagents=True), **kwargs)


def creations(state: dict[str, Any]) -> list[dict[str, Any]]:
    return [r for r in records(state) if r.get("kind") == "create_subagent"]


def test_off_by_default():
    assert [t.name for t in SubAgentMiddleware().tools] == ["task"]
    on = SubAgentMiddleware(settings=DelegationSettings.of(dynamic_subagents=True, general_purpose=False))
    assert [t.name for t in on.tools] == ["task", "create_subagent"]


def test_create_then_delegate_in_one_run(run):
    model = ScriptedChatModel(
        rules=[("Query the orders", [{"tool_calls": [tool_call("lookup", q="orders")]}, "SELECT * FROM orders"])],
        responses=[{"tool_calls": [create(**SQL)]},
                   {"tool_calls": [delegate("Query the orders", "sql-expert")]},
                   "parent done"],
    )
    out = run(agent_with(model), user("go"))
    created, answer = tool_messages(out)
    assert created.status == "success" and "sql-expert" in created.content
    assert answer.status == "success" and answer.content == "SELECT * FROM orders"
    # Listed from the next model call on, never before.
    assert "- sql-expert: " not in model.calls[0]["system"]
    assert "- sql-expert: Writes SQL queries." in model.calls[1]["system"]
    child = [c for c in model.calls if c["messages"][1].text == "Query the orders"]
    assert child[0]["system"] == "You write SQL." and child[0]["tools"] == ["lookup"]
    assert out["dynamic_subagents"]["sql-expert"]["tools"] == ["lookup"]
    (made,) = creations(out)
    assert made["status"] == "completed" and made["agent_type"] == "sql-expert"
    TaskRecord.model_validate(made)
    (task,) = [r for r in records(out) if r.get("kind") is None]
    assert task["agent_type"] == "sql-expert" and task["dynamic"] is True and task["status"] == "completed"


def test_a_created_subagents_max_turns_is_enforced(run):
    model = ScriptedChatModel(
        rules=[("loop", [{"tool_calls": [tool_call("lookup", q="x")]}] * 5)],
        responses=[{"tool_calls": [create(**{**SQL, "max_turns": 1})]},
                   {"tool_calls": [delegate("loop", "sql-expert")]}, "parent done"],
    )
    out = run(agent_with(model), user("go"))
    msg = tool_messages(out)[-1]
    assert msg.status == "error" and "max_turns limit (1 model calls)" in msg.content


def test_without_tools_it_inherits_the_parents_minus_delegation_tools(run):
    model = ScriptedChatModel(
        rules=[("work", ["worked"])],
        responses=[{"tool_calls": [create(name="helper", description="helps", system_prompt="Help.")]},
                   {"tool_calls": [delegate("work", "helper")]}, "parent done"],
    )
    run(agent_with(model), user("go"))
    child = next(c for c in model.calls if c["messages"][1].text == "work")
    assert sorted(child["tools"]) == ["lookup", "shell"]
    assert "create_subagent" in model.calls[0]["tools"]


@pytest.mark.parametrize(
    ("args", "reason"),
    [
        ({**SQL, "name": "general-purpose"}, "declared subagent and cannot be shadowed"),
        ({**SQL, "name": "declared"}, "declared subagent and cannot be shadowed"),
        ({**SQL, "name": "has space"}, "name: must be a slug"),
        ({**SQL, "tools": ["rm_rf"]}, "tools: 'rm_rf' is not one of your tools"),
        ({**SQL, "tools": ["task"]}, "tools: 'task' is a delegation"),
        ({**SQL, "tools": ["create_subagent"]}, "tools: 'create_subagent' is a delegation"),
        ({**SQL, "tools": ["write_todos"]}, "tools: 'write_todos' is a delegation, todo or memory tool"),
        ({**SQL, "max_turns": 26}, "max_turns: can only tighten the default limit: between 1 and 25"),
        ({**SQL, "max_turns": 0}, "max_turns: can only tighten"),
        ({**SQL, "description": "  "}, "description: must not be empty"),
        ({**SQL, "system_prompt": ""}, "system_prompt: must not be empty"),
        ({**SQL, "description": "x" * 1001}, "description: 1001 characters"),
    ],
)
def test_every_rule_is_refused_with_a_clear_error_and_recorded(run, args, reason):
    model = ScriptedChatModel(responses=[{"tool_calls": [create(**args)]}, "parent done"])
    out = run(agent_with(model, subagents=[{"name": "declared", "description": "d"}]), user("go"))
    (msg,) = tool_messages(out)
    assert msg.status == "error" and "was not created" in msg.content and reason in msg.content
    assert not out.get("dynamic_subagents")
    (made,) = creations(out)
    assert made["status"] == "error" and reason in made["error"]


def test_unknown_arguments_are_refused_not_ignored(run):
    model = ScriptedChatModel(responses=[{"tool_calls": [create(**SQL, model="openai:gpt-5")]}, "parent done"])
    out = run(agent_with(model), user("go"))
    (msg,) = tool_messages(out)
    assert msg.status == "error" and "'model'" in msg.content
    assert not out.get("dynamic_subagents")


def test_a_name_cannot_be_created_twice(run):
    model = ScriptedChatModel(responses=[{"tool_calls": [create(**SQL)]},
                                         {"tool_calls": [create(**{**SQL, "system_prompt": "Evil."})]},
                                         "parent done"])
    out = run(agent_with(model), user("go"))
    assert "already created" in tool_messages(out)[1].content
    assert out["dynamic_subagents"]["sql-expert"]["system_prompt"] == "You write SQL."


def test_the_cap_holds_even_for_parallel_calls_in_one_message(run):
    calls = [create(**{**SQL, "name": f"agent-{i}"}) for i in range(3)]
    calls.append(create(**{**SQL, "name": "agent-0"}))  # a duplicate within the same message
    model = ScriptedChatModel(responses=[{"tool_calls": calls}, {"tool_calls": [create(**{**SQL, "name": "late"})]},
                                         "parent done"])
    out = run(agent_with(model, settings=DelegationSettings.of(max_dynamic_subagents=2)), user("go"))
    msgs = {m.tool_call_id: m for m in tool_messages(out)}
    statuses = [m.status for m in tool_messages(out)]
    assert statuses.count("success") == 2
    assert sorted(out["dynamic_subagents"]) == ["agent-0", "agent-1"]
    assert any("limit of 2 created subagents" in m.content for m in msgs.values())
    assert "2 of 2" not in model.calls[1]["system"] and "(0 of 2 left)" in model.calls[1]["system"]
    assert len(creations(out)) == 5


def test_delegating_in_the_same_message_as_the_creation_says_when_to_retry(run):
    model = ScriptedChatModel(responses=[{"tool_calls": [create(**SQL), delegate("q", "sql-expert")]},
                                         "parent done"])
    out = run(agent_with(model), user("go"))
    failed = [m for m in tool_messages(out) if m.status == "error"]
    assert len(failed) == 1 and failed[0].content.startswith("Subagent 'sql-expert' failed:")
    assert "same turn" in failed[0].content and "next turn" in failed[0].content


def test_a_definition_smuggled_into_state_gets_no_more_than_a_created_one(run):
    model = ScriptedChatModel(responses=[{"tool_calls": [delegate("q", "evil")]}, "parent done"])
    smuggled = {"evil": {"name": "evil", "description": "d", "system_prompt": "p", "tools": ["task"]}}
    out = run(agent_with(model), {**user("go"), "dynamic_subagents": smuggled})
    (msg,) = tool_messages(out)
    assert msg.status == "error" and "'task' is a delegation" in msg.content


def test_a_child_cannot_create_subagents(run):
    model = ScriptedChatModel(
        rules=[("sneaky", [{"tool_calls": [create(name="x", description="d", system_prompt="p")]}, "gave up"])],
        responses=[{"tool_calls": [delegate("sneaky", "general-purpose")]}, "parent done"],
    )
    out = run(agent_with(model), user("go"))
    child = next(c for c in model.calls if c["messages"][1].text == "sneaky")
    assert "create_subagent" not in child["tools"] and "task" not in child["tools"]
    assert not out.get("dynamic_subagents")


class WithDefinitions(TypedDict):
    messages: Annotated[list, add_messages]
    dynamic_subagents: NotRequired[dict]


def test_definitions_never_reach_a_child(run):
    seen: list[dict[str, Any]] = []

    def node(state: WithDefinitions) -> dict:
        seen.append(dict(state))
        return {"messages": [AIMessage("ok")], "dynamic_subagents": {"x": {}}}

    g = StateGraph(WithDefinitions)
    g.add_node("n", node)
    g.add_edge(START, "n")
    g.add_edge("n", END)
    model = ScriptedChatModel(responses=[{"tool_calls": [create(**SQL)]},
                                         {"tool_calls": [delegate("q", "graph")]}, "parent done"])
    out = run(agent_with(model, subagents=[{"name": "graph", "description": "d", "runnable": g.compile()}]),
              user("go"))
    assert seen and "dynamic_subagents" not in seen[0]
    assert list(out["dynamic_subagents"]) == ["sql-expert"]


def test_works_in_plain_create_agent_with_an_empty_registry(run):
    model = ScriptedChatModel(
        rules=[("job", ["done"])],
        responses=[{"tool_calls": [create(**SQL)]}, {"tool_calls": [delegate("job", "sql-expert")]}, "parent done"],
    )
    mw = SubAgentMiddleware(settings=DelegationSettings.of(dynamic_subagents=True, general_purpose=False, short_answer_threshold=0))
    out = run(create_agent(model, [lookup], middleware=[mw]), user("go"))
    assert tool_messages(out)[-1].content == "done"
    assert "- sql-expert: " in model.calls[1]["system"]


@pytest.mark.parametrize("bad", [0, -1, True, "8"])
def test_the_cap_argument_is_checked(bad):
    with pytest.raises(ValueError, match="max_dynamic_subagents"):
        SubAgentMiddleware(settings=DelegationSettings.of(dynamic_subagents=True, max_dynamic_subagents=bad))


@pytest.mark.parametrize("mode", ["sync", "async"])
def test_a_created_subagent_survives_a_restart_with_sqlite(mode, tmp_path):
    config = {"configurable": {"thread_id": "t1"}}

    async def first() -> None:
        model = ScriptedChatModel(responses=[{"tool_calls": [create(**SQL)]}, "created it"])
        async with checkpointer("sqlite", mode, tmp_path) as saver:
            await call(mode, agent_with(model, checkpointer=saver), user("make an expert"), config)

    async def second() -> tuple[dict[str, Any], ScriptedChatModel]:
        # A new process would build everything anew: a fresh model, middleware and saver.
        model = ScriptedChatModel(
            rules=[("Query", ["SELECT 1"])],
            responses=[{"tool_calls": [delegate("Query", "sql-expert")]}, "parent done"],
        )
        async with checkpointer("sqlite", mode, tmp_path) as saver:
            out = await call(mode, agent_with(model, checkpointer=saver), user("now use it"), config)
        return out, model

    asyncio.run(first())
    out, model = asyncio.run(second())
    assert "- sql-expert: " in model.calls[0]["system"]
    assert tool_messages(out)[-1].content == "SELECT 1"
    assert [r.get("kind") for r in sorted(records(out), key=lambda r: r["started_at"])] == [
        "create_subagent", None]
