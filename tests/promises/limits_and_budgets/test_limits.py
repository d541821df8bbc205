"""Limits: max_turns, timeout_s on both paths, and the concurrency cap."""

from __future__ import annotations

import threading
import time

import pytest
from langchain_core.tools import tool

from helpers.graphs import echo, parent_script, records, tool_messages, user
from deep_agent import create_deep_agent
from deep_agent.testing import ScriptedChatModel, tool_call
from subagents import DEFAULT_MAX_TURNS


def looping_model(*calls):
    return ScriptedChatModel(
        rules=[("go", parent_script(*calls))],
        default={"tool_calls": [tool_call("echo", x="again")]},
    )


def child_calls(model, text):
    return [c for c in model.calls if any(m.text == text for m in c["messages"])]


def test_max_turns_stops_a_runaway_child_with_advice(run):
    model = looping_model(("loop", "looper"))
    agent = create_deep_agent(
        model, [echo], subagents=[{"name": "looper", "description": "l", "tools": ["echo"],
                                   "max_turns": 3}],
    )
    out = run(agent, user("go"), {"recursion_limit": 1000})
    (msg,) = tool_messages(out)
    assert msg.status == "error"
    assert msg.content.startswith("Subagent 'looper' failed: hit its max_turns limit (3 model calls)")
    assert "Split the task" in msg.content
    assert len(child_calls(model, "loop")) == 3
    assert records(out)[0]["model_calls"] == 3


def test_default_max_turns_applies_when_unset(run):
    model = looping_model(("loop", "general-purpose"))
    out = run(create_deep_agent(model, [echo]), user("go"), {"recursion_limit": 10_000})
    assert f"max_turns limit ({DEFAULT_MAX_TURNS} model calls)" in tool_messages(out)[0].content
    assert len(child_calls(model, "loop")) == DEFAULT_MAX_TURNS


def test_timeout_returns_control_early_and_stops_the_child(run):
    slow = ScriptedChatModel(default={"tool_calls": [tool_call("echo", x="again")]}, latency_s=0.3)
    parent = ScriptedChatModel(responses=parent_script(("slow work", "slow"), ("quick", "quick")))
    quick = ScriptedChatModel(default="quick answer")
    agent = create_deep_agent(
        parent,
        [echo],
        subagents=[
            {"name": "slow", "description": "s", "tools": ["echo"], "model": slow,
             "timeout_s": 0.5, "max_turns": 100},
            {"name": "quick", "description": "q", "model": quick},
        ],
    )
    started = time.monotonic()
    out = run(agent, user("go"), {"recursion_limit": 1000})
    elapsed = time.monotonic() - started
    assert elapsed < 2.0
    msgs = {m.content.split(":")[0]: m for m in tool_messages(out)}
    timed_out = msgs["Subagent 'slow' failed"]
    assert timed_out.status == "error" and "timed out after 0.5s" in timed_out.content
    assert "quick answer" in msgs
    calls_at_return = len(slow.calls)
    time.sleep(0.8)
    # The abandoned child stops at its next model call instead of running on.
    assert len(slow.calls) <= calls_at_return + 1


@pytest.mark.parametrize("cap", [2, None])
def test_concurrency_cap_queues_children_and_none_fail(run, cap):
    active, peak, lock = [0], [0], threading.Lock()

    @tool
    def work(x: str) -> str:
        """Work for a while."""
        with lock:
            active[0] += 1
            peak[0] = max(peak[0], active[0])
        time.sleep(0.15)
        with lock:
            active[0] -= 1
        return "worked"

    model = ScriptedChatModel(
        rules=[("job", [{"tool_calls": [tool_call("work", x="1")]}, "job done"])],
        responses=parent_script(*[(f"job {i}", "general-purpose") for i in range(6)]),
    )
    agent = create_deep_agent(model, [work], max_concurrent_tasks=cap)
    out = run(agent, user("go"))
    assert [m.content for m in tool_messages(out)] == ["job done"] * 6
    if cap:
        assert peak[0] == cap
    else:
        assert peak[0] > 2


def test_invalid_cap_is_rejected():
    from middleware import SubAgentMiddleware

    with pytest.raises(ValueError, match="max_concurrent_tasks"):
        SubAgentMiddleware(max_concurrent_tasks=0)


def test_a_generous_max_turns_is_not_cut_short_by_the_inherited_recursion_cap(run):
    model = ScriptedChatModel(
        rules=[("loop", [{"tool_calls": [tool_call("echo", x=str(i))]} for i in range(55)] + ["looped"])],
        responses=parent_script(("loop", "long")),
    )
    agent = create_deep_agent(model, [echo], subagents=[
        {"name": "long", "description": "works long", "tools": ["echo"], "max_turns": 60}])
    out = run(agent, user("go"), {"recursion_limit": 10_000})
    (record,) = records(out)
    assert record["status"] == "completed" and record["model_calls"] == 56
