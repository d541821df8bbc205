"""A model call given callbacks of its own is still metered: in a root tool, in a child's tool, on both paths.

LangChain lets an explicit ``callbacks`` list replace the handlers a call
would inherit, and the budget's meter travelled only with them: a tool that
asked another model through ``with_config(callbacks=[...])`` (or
``config={"callbacks": [...]}``) was neither charged nor refused.
"""

from __future__ import annotations

from typing import Any

import pytest
from helpers.billing import BillingModel
from helpers.graphs import records, user
from langchain.agents import create_agent
from langchain_core.callbacks import BaseCallbackHandler
from langchain_core.tools import StructuredTool

from deep_agent import create_deep_agent
from deep_agent._testing import tool_call
from middleware import SubAgentMiddleware
from subagents import Budget, BudgetExceeded
from subagents._settings import DelegationSettings

PRICES = {"parent-model": (1.0, 1.0), "child-model": (1.0, 1.0)}


class _Own(BaseCallbackHandler):
    """The tool's own handler (a tracer, a logger)."""

    # Inline as the meter is: LangChain leaves a non-inline handler's start unawaited (a RuntimeWarning) when
    # an inline one refuses the call, which is LangChain's matter, not this test's.
    run_inline = True


def _asking(other: BillingModel, how: str, prompt: str, times: int, *, inherited: bool = False) -> StructuredTool:
    """A tool asking ``other`` ``times`` times with callbacks of its own (and once as usual, if ``inherited``)."""
    own: tuple[Any, Any] = (other.with_config(callbacks=[_Own()]), None) if how == "with_config" else \
        (other, {"callbacks": [_Own()]})
    calls = [(other, None)] * inherited + [own] * times

    def summarize(x: str) -> str:
        for model, config in calls:
            model.invoke(prompt, config)
        return "ok"

    async def asummarize(x: str) -> str:
        for model, config in calls:
            await model.ainvoke(prompt, config)
        return "ok"

    return StructuredTool.from_function(summarize, coroutine=asummarize, name="summarize",
                                        description="Ask another model.")


def _agent(where: str, tool: StructuredTool, budget: Budget) -> tuple[list[BillingModel], Any]:
    """A parent calling ``summarize`` itself (``root``; ``plain``: a ``create_agent`` graph with the
    delegation middleware, metered), or a child that does (``child``)."""
    if where in ("root", "plain"):
        parent = BillingModel(responses=[{"tool_calls": [tool_call("summarize", x="1")]}, "parent done"],
                              model_name="parent-model")
        if where == "plain":
            delegation = SubAgentMiddleware([], settings=DelegationSettings.of(budget=budget))
            return [parent], delegation.metered(create_agent(parent, [tool], middleware=[delegation]))
        return [parent], create_deep_agent(parent, [tool], settings=DelegationSettings.of(budget=budget))
    child = BillingModel(responses=[{"tool_calls": [tool_call("summarize", x="1")]}, "child done"],
                         model_name="child-model")
    parent = BillingModel(responses=[{"tool_calls": [tool_call("task", description="Do it", subagent_type="worker")]},
                                     "parent done"], model_name="parent-model")
    specs = [{"name": "worker", "description": "w", "model": child, "tools": ["summarize"]}]
    return [parent, child], create_deep_agent(parent, [tool], subagents=specs,
                                              settings=DelegationSettings.of(budget=budget))


@pytest.mark.parametrize("how", ["with_config", "config"])
@pytest.mark.parametrize("where", ["root", "plain", "child"])
def test_an_unpriced_model_asked_with_its_own_callbacks_is_refused_before_it_is_sent(run, where, how):
    # All ten calls were sent, at $0, under a dollar limit that refuses a model it has no price for.
    other = BillingModel(default="y" * 4_000, model_name="secret-model")
    budget = Budget(max_usd=0.05, prices=PRICES)
    _, agent = _agent(where, _asking(other, how, "z" * 2_000, 10), budget)
    if where != "child":
        with pytest.raises(BudgetExceeded, match="no price for model 'secret-model'"):
            run(agent, user("go"))
    else:
        (record,) = records(run(agent, user("go")))
        assert record["stop_reason"] == "budget" and "no price for model 'secret-model'" in record["error"]
    assert other.billed == []


@pytest.mark.parametrize("how", ["with_config", "config"])
@pytest.mark.parametrize("where", ["root", "plain", "child"])
def test_a_model_asked_with_its_own_callbacks_is_charged_and_bounded_by_the_token_budget(run, where, how):
    # Ten calls of ~2,100 tokens each were sent under an 8,000-token budget, which stayed at the parent's
    # few hundred: none of them was charged.
    other = BillingModel(default="y" * 8_000, model_name="other-model")  # ~2,000 output tokens a call
    budget = Budget(max_tokens=8_000, prices=PRICES)
    _, agent = _agent(where, _asking(other, how, "z" * 400, 10), budget)
    try:
        run(agent, user("go"))
    except BudgetExceeded:  # a root tool's refusal ends the run, as any error it raises
        assert where != "child"
    sent = sum(i + o for i, o in other.billed)
    assert 0 < len(other.billed) < 10
    assert sent <= budget.tokens <= budget.max_tokens + max(o for _, o in other.billed) + 2_000  # + the parent's


@pytest.mark.parametrize("how", ["with_config", "config"])
@pytest.mark.parametrize("where", ["root", "plain", "child"])
def test_a_call_is_charged_exactly_once_whether_its_callbacks_are_inherited_or_its_own(run, where, how):
    # The call with its own callbacks was never charged; the meter it keeps must not charge the inherited one twice.
    other = BillingModel(default="y" * 400, model_name="other-model")
    budget = Budget(max_tokens=10**7, prices=PRICES)
    models, agent = _agent(where, _asking(other, how, "z" * 2_000, 1, inherited=True), budget)
    run(agent, user("go"))
    billed = [bill for model in (other, *models) for bill in model.billed]
    assert len(other.billed) == 2
    assert budget.tokens == sum(i + o for i, o in billed)


class _Watching(SubAgentMiddleware):
    """A user's delegation middleware with a tool wrap of its own."""

    wrapped: list[str]

    def wrap_tool_call(self, request: Any, handler: Any) -> Any:
        self.wrapped.append(request.tool_call["name"])
        return handler(request)

    async def awrap_tool_call(self, request: Any, handler: Any) -> Any:
        self.wrapped.append(request.tool_call["name"])
        return await handler(request)


def test_a_subclass_tool_wrap_runs_under_a_budget_and_its_tools_calls_stay_charged(run):
    # The budget's tool wrap replaced the subclass's: it never ran where there was a budget.
    other = BillingModel(default="y" * 400, model_name="other-model")
    parent = BillingModel(responses=[{"tool_calls": [tool_call("summarize", x="1")]},
                                     {"tool_calls": [tool_call("summarize", x="2")]}, "parent done"],
                          model_name="parent-model")
    budget = Budget(max_tokens=10**7, prices=PRICES)
    delegation = _Watching([], settings=DelegationSettings.of(budget=budget, general_purpose=False))
    delegation.wrapped = []
    run(delegation.metered(create_agent(parent, [_asking(other, "config", "z" * 2_000, 1)], middleware=[delegation])),
        user("go"))
    assert delegation.wrapped == ["summarize", "summarize"]
    assert len(other.billed) == 2
    assert budget.tokens == sum(i + o for model in (other, parent) for i, o in model.billed)
