"""The root's turn limit holds per run and costs a long thread no checkpoints of its own.

It is checked inside the model call, so a delegating run of
``create_deep_agent`` writes the steps deepagents' writes (seven on the
root: input, start, the open-call check, model, tools, model, the end
hook), not two more per model call; the count starts again every run,
and a caller's own model-call limit still replaces it.
"""

from __future__ import annotations

import pytest
from helpers.graphs import user
from langchain.agents import create_agent
from langchain.agents.middleware import ModelCallLimitMiddleware
from langchain_core.tools import tool
from langgraph.checkpoint.memory import InMemorySaver

from deep_agent import create_deep_agent
from deep_agent._testing import ScriptedChatModel, tool_call
from middleware._root_turn_limit import RootTurnLimit
from subagents._settings import DelegationSettings

ANSWER = "the child's full answer, long enough to be a report of what it did"


def _delegating_model() -> ScriptedChatModel:
    return ScriptedChatModel(rules=[
        ("job", [ANSWER]),
        ("delegate", [{"tool_calls": [tool_call("task", description="job", subagent_type="general-purpose")]},
                      "finished"]),
    ])


def _looping_model() -> ScriptedChatModel:
    """A root that calls a tool at every turn, forever."""
    return ScriptedChatModel(default={"tool_calls": [tool_call("noop_tool")]})


@tool
def noop_tool() -> str:
    """Do nothing."""
    return "ok"


def _root_checkpoints(saver: InMemorySaver, thread: str) -> int:
    return sum(1 for c in saver.list({"configurable": {"thread_id": thread}})
               if not c.config["configurable"].get("checkpoint_ns"))


def test_a_delegating_run_writes_no_checkpoint_for_the_turn_limit(run):
    saver = InMemorySaver()
    agent = create_deep_agent(_delegating_model(), checkpointer=saver, settings=DelegationSettings.of(
        max_root_turns=5,
    ))
    config = {"configurable": {"thread_id": "t"}}
    for _ in range(3):
        out = run(agent, user("please delegate"), config)
    assert out["messages"][-1].text == "finished"
    # Input, start, model, tools, model: 5 steps a run (the delegation middleware adds no node of its own).
    assert _root_checkpoints(saver, "t") == 3 * 5


def test_the_limit_ends_each_run_and_counts_again_from_zero_in_the_next(run):
    model = _looping_model()
    saver = InMemorySaver()
    agent = create_agent(model, [noop_tool], middleware=[RootTurnLimit(3)], checkpointer=saver)
    config = {"configurable": {"thread_id": "t"}, "recursion_limit": 100}
    for expected_calls in (3, 6):
        out = run(agent, user("go"), config)
        assert len(model.calls) == expected_calls
        final = out["messages"][-1]
        assert final.type == "ai" and not final.tool_calls and "max_root_turns=3" in final.text
    # The count is not state a caller sees, nor a value any checkpoint holds.
    assert "run_model_call_count" not in out
    latest = saver.get_tuple({"configurable": {"thread_id": "t"}})
    assert "run_model_call_count" not in latest.checkpoint["channel_values"]


def test_a_callers_model_call_limit_replaces_the_root_turn_limit(run):
    model = _looping_model()
    agent = create_deep_agent(model, tools=[noop_tool],
                              middleware=[ModelCallLimitMiddleware(run_limit=2, exit_behavior="end")],
                              settings=DelegationSettings.of(max_root_turns=50))
    out = run(agent, user("go"), {"recursion_limit": 100})
    assert len(model.calls) == 2 and "Model call limits exceeded" in out["messages"][-1].text


@pytest.mark.parametrize("bad", [0, -1, True, 2.5, "3"])
def test_a_bad_limit_is_refused_naming_the_argument(bad):
    with pytest.raises(ValueError, match="max_root_turns"):
        RootTurnLimit(bad)
