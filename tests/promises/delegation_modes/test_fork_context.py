"""Forked context: the child starts from the parent's conversation; every other rule holds."""

from __future__ import annotations

from typing import Annotated, Any, NotRequired, TypedDict

import pytest
from langchain.agents import AgentState, create_agent
from langchain.agents.middleware import ModelCallLimitMiddleware
from langchain_core.messages import AIMessage, HumanMessage, SystemMessage, ToolMessage
from langgraph.graph import END, START, StateGraph
from langgraph.graph.message import add_messages

from helpers.graphs import records, tool_messages
from deep_agent import create_deep_agent
from deep_agent._testing import ScriptedChatModel, tool_call
from middleware import SubAgentMiddleware
from subagents import SpecError, SubagentSpec, coerce_spec
from subagents.definitions._agent_files import load_agent_file
from subagents._boundary import fork_history, forked_input
from subagents._settings import DelegationSettings

HISTORY = [
    HumanMessage("My favourite colour is teal.", id="h1"),
    AIMessage("Noted: teal.", id="a1"),
    HumanMessage("Now get a second opinion on it.", id="h2"),
]


def delegate(*descriptions: str, agent: str = "reviewer") -> list:
    return [
        {"tool_calls": [tool_call("task", description=d, subagent_type=agent) for d in descriptions]},
        "parent done",
    ]


def reviewer(**extra: Any) -> dict[str, Any]:
    return {"name": "reviewer", "description": "reviews what we discussed",
            "system_prompt": "CHILD PROMPT", "context": "fork", **extra}


def child_calls(model: ScriptedChatModel, description: str) -> list[dict[str, Any]]:
    return [c for c in model.calls if any(m.text == description for m in c["messages"])
            and c["messages"][-1].text == description]


def test_a_fork_sees_the_earlier_conversation_but_not_the_call_in_flight(run):
    model = ScriptedChatModel(rules=[("Review the colour", ["teal is fine"])],
                              responses=delegate("Review the colour"))
    agent = create_deep_agent(model, subagents=[reviewer()], system_prompt="SECRET PARENT PROMPT",
    settings=DelegationSettings.of(short_answer_threshold=0))
    out = run(agent, {"messages": list(HISTORY)})
    (child,) = child_calls(model, "Review the colour")
    seen = child["messages"]
    assert isinstance(seen[0], SystemMessage) and seen[0].text == "CHILD PROMPT"
    assert [m.text for m in seen[1:]] == [m.text for m in HISTORY] + ["Review the colour"]
    assert not any(isinstance(m, AIMessage) and m.tool_calls for m in seen)
    assert not any(isinstance(m, ToolMessage) for m in seen)
    assert "SECRET PARENT PROMPT" not in child["system"]
    assert "task" not in child["tools"]  # a fork still cannot delegate
    assert tool_messages(out)[0].content == "teal is fine"
    (record,) = records(out)
    assert record["context"] == "fork" and record["inherited_tokens"] > 0


def test_an_isolated_child_in_the_same_run_still_sees_only_its_task(run):
    model = ScriptedChatModel(
        rules=[("fork job", ["forked"]), ("clean job", ["clean"])],
        responses=[{"tool_calls": [tool_call("task", description="fork job", subagent_type="reviewer"),
                                   tool_call("task", description="clean job", subagent_type="general-purpose")]},
                   "parent done"],
    )
    out = run(create_deep_agent(model, subagents=[reviewer()], settings=DelegationSettings.of(
        short_answer_threshold=0,
    )),
              {"messages": list(HISTORY)})
    (clean,) = child_calls(model, "clean job")
    assert [m.text for m in clean["messages"][1:]] == ["clean job"]
    by_type = {r["agent_type"]: r for r in records(out)}
    assert "inherited_tokens" not in by_type["general-purpose"]


def test_parallel_forks_are_independent(run):
    model = ScriptedChatModel(rules=[("opinion A", ["A says teal"]), ("opinion B", ["B says blue"])],
                              responses=delegate("opinion A", "opinion B"))
    out = run(create_deep_agent(model, subagents=[reviewer()], settings=DelegationSettings.of(
        short_answer_threshold=0,
    )),
              {"messages": list(HISTORY)})
    (a,) = child_calls(model, "opinion A")
    (b,) = child_calls(model, "opinion B")
    assert not any(m.text == "opinion B" for m in a["messages"])
    assert not any(m.text == "opinion A" for m in b["messages"])
    assert sorted(m.content for m in tool_messages(out)) == ["A says teal", "B says blue"]
    assert [m.text for m in out["messages"][:3]] == [m.text for m in HISTORY]  # the parent's own history is intact


class ForkState(TypedDict):
    messages: Annotated[list, add_messages]
    notes: NotRequired[str]
    todos: NotRequired[list]
    run_model_call_count: NotRequired[int]


SEEN: dict[str, Any] = {}


def _recording_graph():
    def node(state: ForkState) -> dict:
        SEEN.clear()
        SEEN.update(state)
        return {"messages": [AIMessage("compiled fork done")]}

    g = StateGraph(ForkState)
    g.add_node("n", node)
    g.add_edge(START, "n")
    g.add_edge("n", END)
    return g.compile()


class ParentState(AgentState):
    notes: NotRequired[str]
    todos: NotRequired[list]


def test_a_compiled_fork_gets_the_history_and_shared_keys_but_no_private_ones(run):
    model = ScriptedChatModel(responses=delegate("look back", agent="recorder"))
    agent = create_agent(
        model,
        state_schema=ParentState,
        middleware=[
            ModelCallLimitMiddleware(run_limit=50),
            SubAgentMiddleware([{"name": "recorder", "description": "d", "runnable": _recording_graph(),
                                 "context": "fork"}], settings=DelegationSettings.of(short_answer_threshold=0)),
        ],
    )
    out = run(agent, {"messages": list(HISTORY), "notes": "shared", "todos": ["private plan"]})
    assert [m.text for m in SEEN["messages"]] == [m.text for m in HISTORY] + ["look back"]
    assert SEEN.get("notes") == "shared"
    assert "todos" not in SEEN and "run_model_call_count" not in SEEN
    assert "subagent_tasks" not in SEEN
    assert tool_messages(out)[0].content == "compiled fork done"


def test_fork_history_cuts_at_the_message_holding_the_call():
    pending = AIMessage("", tool_calls=[{"name": "task", "args": {}, "id": "c1"},
                                        {"name": "echo", "args": {}, "id": "c2"}])
    history = fork_history([SystemMessage("sys"), *HISTORY, pending], "c1")
    assert [m.text for m in history] == [m.text for m in HISTORY]
    # Without a matching id, a trailing assistant message with unanswered calls is still dropped.
    assert [m.text for m in fork_history([*HISTORY, pending], None)] == [m.text for m in HISTORY]


def test_a_fork_never_shares_message_objects_with_the_parent():
    state = {"messages": list(HISTORY), "notes": "x"}
    inputs, tokens = forked_input(state, "task", frozenset({"messages"}), None)
    assert all(a is not b for a, b in zip(inputs["messages"], HISTORY))
    assert inputs["notes"] is state["notes"] and tokens > 0
    assert forked_input({"messages": []}, "task", frozenset(), None)[1] == 0


def test_context_is_validated_and_read_from_agent_files(tmp_path):
    with pytest.raises(SpecError, match="field 'context'"):
        coerce_spec({"name": "a", "description": "d", "context": "forked"})
    path = tmp_path / "reviewer.md"
    path.write_text("---\nname: reviewer\ndescription: Reviews.\ncontext: fork\n---\nReview it.\n")
    assert load_agent_file(path).context == "fork"
    path.write_text("---\nname: reviewer\ndescription: Reviews.\ncontext: everything\n---\nReview it.\n")
    with pytest.raises(SpecError, match="context"):
        load_agent_file(path)
    assert SubagentSpec(name="a", description="d").context == "isolated"



def test_a_background_task_can_fork_too():
    from langgraph.checkpoint.memory import InMemorySaver

    from helpers.background import start, started_ids, wait_for
    from middleware import BackgroundSubagentMiddleware
    from subagents.background._local import known_task

    model = ScriptedChatModel(rules=[("review in background", ["reviewed " * 40]),
                                     ("second opinion", [start(("review in background", "reviewer")), "started"])],
                              default="ok")
    agent = create_agent(model, middleware=[BackgroundSubagentMiddleware([reviewer()])],
                         checkpointer=InMemorySaver())
    out = agent.invoke({"messages": list(HISTORY)}, {"configurable": {"thread_id": "fork-bg"}})
    (task_id,) = started_ids(out["messages"])
    wait_for(lambda: known_task(task_id).fields["status"] == "completed")
    (child,) = child_calls(model, "review in background")
    assert [m.text for m in child["messages"][1:]] == [m.text for m in HISTORY] + ["review in background"]
