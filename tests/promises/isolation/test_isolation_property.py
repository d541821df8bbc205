"""Property tests: excluded and private keys never cross; unchanged keys are not written back."""

from __future__ import annotations

import operator
from typing import Annotated, Any, NotRequired, TypedDict

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from langchain.agents import AgentState, create_agent
from langchain.agents.middleware import ModelCallLimitMiddleware
from langchain_core.messages import AIMessage
from langgraph.graph import END, START, StateGraph
from langgraph.graph.message import add_messages

from deep_agent._testing import ScriptedChatModel, tool_call
from middleware import SubAgentMiddleware
from middleware._task_tool import EXCLUDED_STATE_KEYS as EXCLUDED_KEYS
from subagents._boundary import changed_keys, child_input, langchain_private_state_keys
from subagents._settings import DelegationSettings

PRIVATE = langchain_private_state_keys()
BLOCKED = EXCLUDED_KEYS | PRIVATE
keys = st.one_of(
    st.sampled_from(sorted(BLOCKED)), st.text("abcdefgh_", min_size=1, max_size=6)
)
values = st.one_of(st.integers(), st.text(max_size=5), st.lists(st.integers(), max_size=3))


@given(state=st.dictionaries(keys, values), description=st.text(max_size=20))
def test_child_input_never_carries_blocked_keys(state, description):
    child = child_input(state, description, BLOCKED)
    assert set(child) - {"messages"} == {k for k in state if k not in BLOCKED}
    assert [m.content for m in child["messages"]] == [description]
    for k in child:
        if k != "messages":
            assert child[k] is state[k]  # shared by reference, never deep-copied


@given(inputs=st.dictionaries(keys, values), output=st.dictionaries(keys, values))
def test_write_back_is_only_changed_unblocked_keys(inputs, output):
    merged = {**inputs, **output}
    back = changed_keys(merged, inputs, BLOCKED)
    assert not set(back) & BLOCKED
    for k, v in back.items():
        assert k not in inputs or inputs[k] != v
    for k, v in merged.items():
        if k not in BLOCKED and (k not in inputs or inputs[k] != v):
            assert back[k] == v


class Shared(TypedDict):
    messages: Annotated[list, add_messages]
    todos: NotRequired[list]
    run_model_call_count: NotRequired[int]
    notes: NotRequired[str]
    log: NotRequired[Annotated[list, operator.add]]


class ParentState(AgentState):
    todos: NotRequired[list]
    notes: NotRequired[str]
    log: NotRequired[Annotated[list, operator.add]]


PLAN: dict[str, Any] = {}
SEEN: dict[str, Any] = {}


def child_node(state: Shared) -> dict:
    SEEN.clear()
    SEEN.update(state)
    writes: dict[str, Any] = {"messages": [AIMessage("child done")]}
    for key, action in PLAN.items():
        if action == "same" and key in state:
            writes[key] = state[key] if key != "log" else []
        elif action == "change":
            writes[key] = ["changed"] if key in ("log", "todos") else 999 if key == "run_model_call_count" else "changed"
    return writes


def _child():
    g = StateGraph(Shared)
    g.add_node("n", child_node)
    g.add_edge(START, "n")
    g.add_edge("n", END)
    return g.compile(name="mutator")


PARENT_MODEL = ScriptedChatModel(
    responses=[{"tool_calls": [tool_call("task", description="mutate", subagent_type="mutator")]}, "ok"]
)
AGENT = create_agent(
    PARENT_MODEL,
    state_schema=ParentState,
    middleware=[
        ModelCallLimitMiddleware(run_limit=50),
        SubAgentMiddleware(
            [{"name": "mutator", "description": "d", "runnable": _child()}], settings=DelegationSettings.of(
                short_answer_threshold=0,
            )
        ),
    ],
)


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    plan=st.fixed_dictionaries(
        {k: st.sampled_from(["skip", "same", "change"]) for k in ("todos", "run_model_call_count", "notes")}
    ),
    todos=st.lists(st.text(max_size=3), max_size=2),
    notes=st.text(max_size=5),
    log=st.lists(st.integers(), max_size=3),
)
def test_end_to_end_boundary_in_both_directions(plan, todos, notes, log):
    PLAN.clear()
    PLAN.update(plan)
    PLAN["log"] = "same"
    out = AGENT.invoke(
        {"messages": [{"role": "user", "content": "go"}], "todos": todos, "notes": notes, "log": log}
    )
    # In: the child saw shared keys only, and one fresh message.
    assert "todos" not in SEEN and "run_model_call_count" not in SEEN
    assert [m.content for m in SEEN["messages"]] == ["mutate"]
    assert SEEN.get("notes") == notes and SEEN.get("log") == log
    # Out: excluded and private keys never come back.
    assert out["todos"] == todos
    # An additive key the child returned unchanged is not added twice.
    assert out["log"] == log
    assert out["notes"] == ("changed" if plan["notes"] == "change" else notes)
