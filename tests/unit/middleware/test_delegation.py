"""The path of one delegation, end to end, on invoke and ainvoke."""

from __future__ import annotations

import json
from typing import Annotated, TypedDict

import pytest
from langchain.agents import create_agent
from langchain_core.messages import AIMessage, HumanMessage
from langchain_core.tools import tool
from langgraph.graph import END, START, StateGraph
from langgraph.graph.message import add_messages
from pydantic import BaseModel

from helpers.graphs import records, tool_messages, user
from deep_agent import create_deep_agent
from deep_agent._testing import ScriptedChatModel, tool_call
from middleware import SubAgentMiddleware
from subagents import TaskRecord
from subagents._settings import DelegationSettings


@tool
def lookup(q: str) -> str:
    """Look something up."""
    return f"found {q}"


def delegate(*calls: tuple[str, str], final: str = "parent done") -> list:
    return [
        {"tool_calls": [tool_call("task", description=d, subagent_type=t) for d, t in calls]},
        final,
    ]


def test_child_answer_becomes_one_tool_message(run):
    model = ScriptedChatModel(
        rules=[("Find A", [{"tool_calls": [tool_call("lookup", q="A")]}, "A is 1"])],
        responses=delegate(("Find A", "general-purpose")),
    )
    out = run(create_deep_agent(model, [lookup]), user("go"))
    (msg,) = tool_messages(out)
    assert msg.content == "A is 1" and msg.status == "success"
    # The child's own tool traffic never enters the parent's history.
    assert [m.type for m in out["messages"]] == ["human", "ai", "tool", "ai"]
    (record,) = records(out)
    assert record["status"] == "completed" and record["result"] == "A is 1"
    assert record["tool_call_id"] == msg.tool_call_id


def test_child_starts_from_a_clean_context(run):
    model = ScriptedChatModel(
        rules=[("child job", ["ok"])],
        responses=delegate(("child job", "general-purpose")),
    )
    run(create_deep_agent(model, system_prompt="SECRET PARENT PROMPT"), user("parent history"))
    child = next(c for c in model.calls if "child job" in c["messages"][-1].text)
    texts = [m.text for m in child["messages"]]
    assert texts[-1] == "child job"
    assert not any("parent history" in t for t in texts)
    assert "SECRET PARENT PROMPT" not in child["system"]
    assert [type(m) for m in child["messages"][1:]] == [HumanMessage]


def test_last_non_empty_ai_text_is_returned():
    graph = _one_step_graph([AIMessage("first"), AIMessage("the answer"), AIMessage("")])
    model = ScriptedChatModel(responses=delegate(("x", "custom")))
    out = create_deep_agent(
        model, subagents=[{"name": "custom", "description": "d", "runnable": graph}]
    ).invoke(user("go"))
    assert tool_messages(out)[0].content == "the answer"


class Verdict(BaseModel):
    verdict: str
    confidence: float


def test_structured_response_is_returned_as_json(run):
    model = ScriptedChatModel(
        rules=[("judge", [{"tool_calls": [tool_call("Verdict", verdict="yes", confidence=0.9)]}])],
        responses=delegate(("judge it", "judge")),
    )
    agent = create_deep_agent(
        model,
        subagents=[{"name": "judge", "description": "judges", "response_format": Verdict}],
    )
    out = run(agent, user("go"))
    assert json.loads(tool_messages(out)[0].content) == {"verdict": "yes", "confidence": 0.9}
    assert "structured_response" not in out


def test_unknown_subagent_type_lists_valid_names(run):
    model = ScriptedChatModel(responses=delegate(("x", "nobody")))
    agent = create_deep_agent(model, subagents=[{"name": "writer", "description": "writes"}])
    out = run(agent, user("go"))
    (msg,) = tool_messages(out)
    assert msg.status == "error"
    assert msg.content.startswith("Subagent 'nobody' failed:")
    assert "general-purpose" in msg.content and "writer" in msg.content
    assert records(out)[0]["status"] == "error"


def test_unknown_task_arguments_are_rejected_with_guidance(run):
    model = ScriptedChatModel(
        responses=[
            {"tool_calls": [tool_call("task", description="label", subagent_type="general-purpose",
                                      prompt="the real instructions")]},
            "gave up",
        ]
    )
    out = run(create_deep_agent(model), user("go"))
    (msg,) = tool_messages(out)
    assert msg.status == "error"
    assert "prompt" in msg.content and "description" in msg.content
    # Nothing is lost: the refused call still leaves a record, marked as an invalid call.
    (record,) = out["subagent_tasks"].values()
    assert record["status"] == "error" and record["stop_reason"] == "invalid_call"
    assert record["tool_call_id"] == msg.tool_call_id
    assert len(model.calls) == 2  # no child ran


def test_system_prompt_lists_agents_by_name_and_description_only(run):
    model = ScriptedChatModel(responses=["no delegation"])
    agent = create_deep_agent(
        model,
        system_prompt="BASE",
        subagents=[{"name": "writer", "description": "Writes <prose> & poems",
                    "system_prompt": "CHILD-ONLY PROMPT"}],
    )
    run(agent, user("hi"))
    system = model.calls[0]["system"]
    assert system.startswith("BASE")
    assert "- writer: Writes &lt;prose&gt; &amp; poems\n" in system
    assert "- general-purpose: " in system
    assert "CHILD-ONLY PROMPT" not in system
    assert "task" in model.calls[0]["tools"]


def test_general_purpose_can_be_replaced_or_turned_off():
    replaced = SubAgentMiddleware([{"name": "general-purpose", "description": "mine"}])
    assert replaced.registry.spec("general-purpose").description == "mine"
    assert replaced.registry.names == ("general-purpose",)
    off = SubAgentMiddleware([{"name": "w", "description": "d"}], settings=DelegationSettings.of(
        general_purpose=False,
    ))
    assert off.registry.names == ("w",)
    empty = SubAgentMiddleware(settings=DelegationSettings.of(general_purpose=False))
    assert empty.tools == [] and empty.prompt_block == ""


def test_general_purpose_inherits_parent_model_and_tools_in_plain_create_agent(run):
    model = ScriptedChatModel(
        rules=[("use lookup", [{"tool_calls": [tool_call("lookup", q="Z")]}, "Z found"])],
        responses=delegate(("use lookup", "general-purpose")),
    )
    agent = create_agent(model, [lookup], middleware=[SubAgentMiddleware()])
    out = run(agent, user("go"))
    assert tool_messages(out)[0].content == "Z found"
    child_calls = [c for c in model.calls if "use lookup" in c["messages"][1].text]
    assert child_calls and all(c["tools"] == ["lookup"] for c in child_calls)


def test_children_are_built_lazily_and_once(run):
    specs = [{"name": f"agent-{i}", "description": f"agent {i}"} for i in range(100)]
    model = ScriptedChatModel(
        rules=[("job", ["done"])],
        responses=delegate(("job 1", "agent-7"), ("job 2", "agent-7"), ("job 3", "agent-9")),
    )
    mw = SubAgentMiddleware(specs, model=model, tools=[])
    agent = create_agent(model, middleware=[mw])
    assert mw.registry.built == frozenset()
    run(agent, user("go"))
    assert mw.registry.built == {"agent-7", "agent-9"}
    graph = mw.registry.graph("agent-7", parent_model=model, parent_tools=[])
    run(agent, user("again"))
    assert mw.registry.graph("agent-7", parent_model=model, parent_tools=[]) is graph


class CustomState(TypedDict):
    messages: Annotated[list, add_messages]
    notes: str
    untouched: str


def _one_step_graph(messages, **writes):
    def node(state: CustomState) -> dict:
        return {"messages": messages, **writes}

    g = StateGraph(CustomState)
    g.add_node("step", node)
    g.add_edge(START, "step")
    g.add_edge("step", END)
    return g.compile(name="custom")


def test_changed_keys_come_back_and_unchanged_do_not(run):
    from langchain.agents import AgentState

    class PState(AgentState):
        notes: str
        untouched: str

    graph = _one_step_graph([AIMessage("wrote notes")], notes="child notes", untouched="same")
    model = ScriptedChatModel(responses=delegate(("write", "custom")))
    agent = create_agent(
        model,
        state_schema=PState,
        middleware=[SubAgentMiddleware([{"name": "custom", "description": "d", "runnable": graph}])],
    )
    out = run(agent, {**user("go"), "notes": "parent notes", "untouched": "same"})
    assert out["notes"] == "child notes"
    assert out["untouched"] == "same"


def test_record_fields_and_unique_ids_under_parallel_calls(run):
    model = ScriptedChatModel(
        rules=[("job", ["done"])],
        responses=delegate(*[(f"job {i}", "general-purpose") for i in range(6)]),
    )
    out = run(create_deep_agent(model), user("go"))
    recs = [TaskRecord.model_validate(r) for r in records(out)]
    assert len(recs) == 6 and len({r.id for r in recs}) == 6
    assert set(out["subagent_tasks"]) == {r.id for r in recs}
    for r in recs:
        assert r.status == "completed" and r.agent_type == "general-purpose"
        assert r.finished_at >= r.started_at and r.duration_ms >= 0
        # One call: short-answer continuation is opt-in, so a short answer costs nothing more.
        assert r.model_calls == 1 and r.input_tokens > 0 and r.output_tokens > 0
        assert r.stop_reason == "completed"
    assert sorted(r.description for r in recs) == [f"job {i}" for i in range(6)]


def test_ledger_accumulates_across_turns_of_a_thread(run):
    from langgraph.checkpoint.memory import InMemorySaver

    model = ScriptedChatModel(rules=[("job", ["done"])], responses=delegate(("job", "general-purpose")))
    agent = create_deep_agent(model, checkpointer=InMemorySaver())
    config = {"configurable": {"thread_id": "t1"}}
    run(agent, user("first"), config)
    out = run(agent, user("second"), config)
    assert len(records(out)) == 2


@pytest.mark.parametrize("bad", ["has space", ".hidden", "a..b", "", "slash/x", "ünï"])
def test_invalid_names_are_rejected_clearly(bad):
    from subagents import SpecError

    with pytest.raises(SpecError, match="field 'name'"):
        SubAgentMiddleware([{"name": bad, "description": "d"}])


def test_every_record_is_exactly_what_task_record_describes(run):
    """The runner builds records as plain dicts; they must still round-trip through the model."""
    model = ScriptedChatModel(rules=[("job", ["done"]), ("bad", [ValueError("no")])],
                              responses=delegate(("job", "general-purpose"), ("bad", "general-purpose"),
                                                 ("x", "nobody")))
    out = run(create_deep_agent(model), user("go"))
    for raw in records(out):
        assert TaskRecord.model_validate(raw).model_dump() == raw
