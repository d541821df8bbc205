"""Usage in every record, the parent's rollup, per-child caps and a shared budget."""

from __future__ import annotations

import pytest
from helpers.billing import BillingModel
from helpers.graphs import records, tool_messages, user
from langchain_core.tools import tool

from deep_agent import create_deep_agent
from deep_agent._testing import ScriptedChatModel, tool_call
from subagents import Budget, cost_of
from subagents._outcome import stopped_by_limit
from subagents._settings import DelegationSettings

PRICES = {"scripted": (1000.0, 2000.0)}  # USD per million tokens: dear, so budgets bite


@tool
def echo(x: str) -> str:
    """Echo."""
    return x * 50


def test_records_carry_usage_and_cost_and_the_parent_holds_the_rollup(run):
    model = ScriptedChatModel(
        rules=[("job", [{"tool_calls": [tool_call("echo", x="y")]}, "answer " + "z" * 220])],
        responses=[{"tool_calls": [tool_call("task", description=f"job {i}", subagent_type="general-purpose")
                                   for i in range(3)]}, "done"],
    )
    out = run(create_deep_agent(model, [echo], settings=DelegationSettings.of(prices=PRICES)), user("go"))
    recs = records(out)
    assert len(recs) == 3
    for r in recs:
        assert r["model_calls"] == 2 and r["input_tokens"] > 0 and r["output_tokens"] > 0
        expected = (r["input_tokens"] * 1000 + r["output_tokens"] * 2000) / 1e6
        assert r["cost_usd"] == pytest.approx(expected, rel=1e-6)
    rollup = out["subagent_usage"]
    assert rollup["tasks"] == 3
    assert rollup["model_calls"] == 6
    assert rollup["input_tokens"] == sum(r["input_tokens"] for r in recs)
    assert rollup["cost_usd"] == pytest.approx(sum(r["cost_usd"] for r in recs), rel=1e-6)


def looping(*jobs):
    return ScriptedChatModel(
        rules=[("go", [{"tool_calls": [tool_call("task", description=d, subagent_type=t) for d, t in jobs]},
                       "parent done"])],
        default={"tool_calls": [tool_call("echo", x="again")]},
    )


@pytest.mark.parametrize(
    ("limit", "message"),
    [({"max_budget_per_run": 0.5}, "exceeded its max_budget_per_run ($"),
     ({"max_tokens": 400}, "exceeded its max_tokens (")],
)
def test_per_child_caps_stop_that_child_only(run, limit, message):
    model = looping(("loop", "capped"), ("loop", "free"))
    agent = create_deep_agent(
        model, [echo],
        subagents=[{"name": "capped", "description": "c", "tools": ["echo"], "max_turns": 20, **limit},
                   {"name": "free", "description": "f", "tools": ["echo"], "max_turns": 4}],
                   settings=DelegationSettings.of(prices=PRICES),
    )
    out = run(agent, user("go"), {"recursion_limit": 500})
    by_type = {r["agent_type"]: r for r in records(out)}
    capped, free = by_type["capped"], by_type["free"]
    assert capped["status"] == "error" and message in capped["error"]
    assert capped["model_calls"] < 20
    assert "max_turns limit (4 model calls)" in free["error"]
    assert out["messages"][-1].content == "parent done"


def test_shared_budget_stops_running_children_then_the_parent_after_one_last_answer(run):
    budget = Budget(max_tokens=3000)
    model = ScriptedChatModel(
        rules=[
            ("go", [{"tool_calls": [tool_call("task", description=f"loop {i}", subagent_type="general-purpose")
                                    for i in range(3)]},
                    {"tool_calls": [tool_call("task", description="one more", subagent_type="general-purpose")]},
                    "parent done"]),
        ],
        default={"tool_calls": [tool_call("echo", x="again")]},
    )
    # Refusals as they are without a wrap-up: with one, a child stops while room for its last call is left,
    # and the parent may get a call before the budget is spent (test_limits_end_with_an_answer.py).
    agent = create_deep_agent(model, [echo], settings=DelegationSettings.of(budget=budget, wrap_up=False))
    out = run(agent, user("go"), {"recursion_limit": 1000})
    msgs = tool_messages(out)
    assert len(msgs) == 3 and all(m.status == "error" for m in msgs)
    for m in msgs:
        assert "the shared token budget" in m.content
    child_calls = sum(r["model_calls"] for r in records(out))
    assert child_calls < 3 * 25  # far below what the three loops would have made
    # Spent up to the limit, or to where no call of the size the children made fits (a call is refused
    # when it cannot be covered, so spending may stop a little short of the limit).
    assert budget.exhausted() is not None
    # The parent's next call was its last, offered no tool (its "one more" delegation never ran), and the
    # run ended on the limit's message, as at max_root_turns.
    assert model.calls[-1]["tools"] == []
    assert stopped_by_limit(out["messages"][-1]) == "budget"
    assert "Stopped: the shared token budget is spent" in out["messages"][-1].content


def test_budget_arguments_are_validated():
    with pytest.raises(ValueError, match="max_usd needs a price table"):
        Budget(max_usd=1.0)
    with pytest.raises(ValueError, match="max_tokens must be positive"):
        Budget(max_tokens=0)


def test_parallel_children_overshoot_a_shared_budget_by_at_most_one_call_each(run):
    children, limit = 10, 4000
    budget = Budget(max_tokens=limit)
    model = ScriptedChatModel(
        rules=[("go", [{"tool_calls": [tool_call("task", description=f"loop {i}", subagent_type="general-purpose")
                                       for i in range(children)]}, "parent done"])],
        default={"tool_calls": [tool_call("echo", x="again")]},
        latency_s=0.005,
    )
    agent = create_deep_agent(model, [echo], settings=DelegationSettings.of(budget=budget))
    out = run(agent, user("go"), {"recursion_limit": 1000})
    assert {r["stop_reason"] for r in records(out)} == {"budget"}
    # Prompts are reserved before each call, so only outputs can pass the limit:
    # at most one call's output per running child (a looping echo call is ~25 tokens).
    parent_calls = budget.tokens - sum(r["input_tokens"] + r["output_tokens"] for r in records(out))
    assert budget.tokens - parent_calls <= limit + children * 25


def test_a_childs_summariser_calls_count_against_the_shared_budget(run):
    budget = Budget(max_tokens=1_000_000)
    model = BillingModel(  # usage as billed (tool schemas included), so every report is believed
        rules=[("summar", ["a summary"]),
               ("go", [{"tool_calls": [tool_call("task", description="work a lot", subagent_type="worker")]},
                       "parent done"])],
        default={"tool_calls": [tool_call("echo", x="again " * 40)]},
    )
    spec = {"name": "worker", "description": "w", "tools": ["echo"], "max_turns": 6,
            "condenser": {"trigger": ("tokens", 300), "keep": ("messages", 2)}}
    out = run(create_deep_agent(model, [echo], subagents=[spec],
                                settings=DelegationSettings.of(budget=budget)), user("go"),
              {"recursion_limit": 200})
    (record,) = records(out)
    summaries = [c for c in model.calls if any("summar" in m.text.lower() for m in c["messages"][:1])]
    assert summaries, "the condenser never ran; the test would prove nothing"
    parent_tokens = sum(
        (m.usage_metadata or {}).get("total_tokens", 0) for m in out["messages"] if m.type == "ai")
    assert budget.tokens == record["charged_input_tokens"] + record["charged_output_tokens"] + parent_tokens
    assert (record["charged_input_tokens"], record["charged_output_tokens"]) == (
        record["input_tokens"], record["output_tokens"])


def test_a_malformed_price_table_is_refused_when_the_budget_is_built():
    """Bad input gets a clear error naming the argument. Today Budget(prices={"m": (1,)}) is accepted,
    and the parent's first model call dies with IndexError: tuple index out of range."""
    with pytest.raises(ValueError, match="prices"):
        Budget(max_tokens=1_000, prices={"scripted": (1.0,)})


def test_a_malformed_price_table_is_refused_when_the_agent_is_built():
    """Today create_deep_agent(prices={"m": "cheap"}) is accepted; every child then fails with
    'TypeError: unsupported operand type(s) for /: str and int'."""
    with pytest.raises(ValueError, match="prices"):
        create_deep_agent(ScriptedChatModel(responses=["x"]), [], settings=DelegationSettings.of(
            prices={"scripted": "cheap"},
        ))


def test_the_longest_matching_price_wins():
    prices = {"gpt-4.1": (2.0, 8.0), "gpt-4.1-mini": (0.4, 1.6)}
    assert cost_of(prices, "gpt-4.1-mini-2025-04-14", 1_000_000, 0) == pytest.approx(0.4)
    assert cost_of(prices, "gpt-4.1-2025-04-14", 1_000_000, 0) == pytest.approx(2.0)
