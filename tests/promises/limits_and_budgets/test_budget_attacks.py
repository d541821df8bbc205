"""Attacks on the shared budget and the per-task limits: parallel siblings, bad usage reports, retries."""

from __future__ import annotations

from langchain_core.tools import tool

from deep_agent import create_deep_agent
from deep_agent.testing import ScriptedChatModel, tool_call
from helpers.graphs import records, user
from subagents import Budget


@tool
def work(x: str) -> str:
    """Do some work."""
    return "ok " * 50


def test_a_call_the_budget_refuses_is_not_counted_as_a_model_call(run):
    # Each child is stopped by the budget at a call that never reaches the model: its record
    # must count only the calls the model answered, or the rollup says more calls were made than were.
    child = ScriptedChatModel(default={"tool_calls": [tool_call("work", x="y" * 400)]})
    parent = ScriptedChatModel(
        responses=[{"tool_calls": [tool_call("task", description=f"job {i}", subagent_type="w")
                                   for i in range(6)]}],
        default="done",
    )
    specs = [{"name": "w", "description": "worker", "model": child, "tools": [work], "max_turns": 50}]
    agent = create_deep_agent(parent, subagents=specs, budget=Budget(max_tokens=3000), max_concurrent_tasks=2)
    out = run(agent, user("go"))
    recs = records(out)
    assert len(recs) == 6 and {r["stop_reason"] for r in recs} == {"budget"}
    assert sum(r["model_calls"] for r in recs) == len(child.calls) > 0
    assert out["subagent_usage"]["model_calls"] == len(child.calls)
