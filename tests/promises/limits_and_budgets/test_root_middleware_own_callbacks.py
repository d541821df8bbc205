"""A root middleware's own model call given callbacks of its own is charged to the budget, on every run path.

A summariser in ``before_model`` or a critic in ``after_model`` that asked its
model with ``config={"callbacks": [tracer]}`` replaced the callbacks the call
would inherit, the run's meter among them: under a budget, in a metered graph,
none of those calls was charged, nor refused for want of a price, and the run
went on past the limit.
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from helpers.billing import BillingModel
from helpers.graphs import user
from langchain.agents import create_agent
from langchain.agents.middleware import AgentMiddleware
from langchain_core.callbacks import BaseCallbackHandler
from langchain_core.runnables import RunnableLambda
from langchain_core.tools import tool

from deep_agent import create_deep_agent
from deep_agent._testing import tool_call
from middleware import SubAgentMiddleware
from subagents import Budget, BudgetExceeded
from subagents._outcome import stopped_by_limit
from subagents._settings import DelegationSettings

PRICES = {"parent": (1.0, 1.0), "side": (1.0, 1.0)}


@tool
def work(x: str) -> str:
    """A step of work."""
    return f"worked on {x}"


class _Tracer(BaseCallbackHandler):
    """The middleware's own handler: it sees the calls still."""

    run_inline = True

    def __init__(self) -> None:
        self.started = 0

    def on_chat_model_start(self, serialized: Any, messages: Any, **kwargs: Any) -> None:
        self.started += 1


def _through(side: BillingModel, nesting: str, config: Any) -> Any:
    """``side`` as the middleware asks it: with_retry (its child config passed on), with_fallbacks (the caller's
    own config handed to the inner model), or a lambda asking it with the caller's config ``config``."""
    if nesting == "retry":
        return side.with_retry()
    if nesting == "fallbacks":
        return side.with_fallbacks([side])
    return RunnableLambda(lambda p: side.invoke(p, config=config), afunc=lambda p: side.ainvoke(p, config=config))


class _SummariserAndCritic(AgentMiddleware):
    """Asks ``side`` with a tracer of its own before each root model call, and after it through a run of its
    own (the model call nested in it, as ``nesting`` says)."""

    def __init__(self, side: BillingModel, nesting: str = "retry") -> None:
        super().__init__()
        self.side, self.tracer = side, _Tracer()
        self.nested = _through(side, nesting, self._config())
        self.before = True

    def _config(self) -> Any:
        return {"callbacks": [self.tracer]}

    def before_model(self, state: Any, runtime: Any) -> None:
        if self.before:
            self.side.invoke("summarise " + "x" * 400, config=self._config())

    async def abefore_model(self, state: Any, runtime: Any) -> None:
        if self.before:
            await self.side.ainvoke("summarise " + "x" * 400, config=self._config())

    def after_model(self, state: Any, runtime: Any) -> None:
        self.nested.invoke("critique " + "y" * 400, config=self._config())

    async def aafter_model(self, state: Any, runtime: Any) -> None:
        await self.nested.ainvoke("critique " + "y" * 400, config=self._config())


def _agent(how: str, parent: BillingModel, side: BillingModel, budget: Budget,
           nesting: str = "retry") -> tuple[Any, _SummariserAndCritic]:
    critic = _SummariserAndCritic(side, nesting)
    if how == "deep":
        return create_deep_agent(parent, [work], middleware=[critic],
                                 settings=DelegationSettings.of(budget=budget)), critic
    delegation = SubAgentMiddleware([], settings=DelegationSettings.of(budget=budget, general_purpose=False))
    return delegation.metered(create_agent(parent, [work], middleware=[critic, delegation])), critic


def _run(mode: str, graph: Any) -> dict[str, Any]:
    config: Any = {"recursion_limit": 1000}
    if mode == "invoke":
        return graph.invoke(user("go"), config)
    if mode == "ainvoke":
        return asyncio.run(graph.ainvoke(user("go"), config))
    if mode == "stream":
        return list(graph.stream(user("go"), config, stream_mode="values"))[-1]

    async def last() -> Any:
        return [state async for state in graph.astream(user("go"), config, stream_mode="values")][-1]

    return asyncio.run(last())


MODES = ["invoke", "ainvoke", "stream", "astream"]
NESTINGS = ["retry", "fallbacks", "lambda"]


@pytest.mark.parametrize("nesting", NESTINGS)
@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("how", ["deep", "plain"])
def test_a_root_middlewares_call_with_its_own_callbacks_is_charged_once(how, mode, nesting):
    parent = BillingModel(rules=[("go", [{"tool_calls": [tool_call("work", x="1")]}, "parent done"])],
                          model_name="parent")
    side = BillingModel(default="fine", model_name="side")
    budget = Budget(max_tokens=10**9, prices=PRICES)
    graph, critic = _agent(how, parent, side, budget, nesting)
    _run(mode, graph)
    assert len(side.billed) == 4 and critic.tracer.started == 4  # two model calls, each with one before and after
    assert budget.tokens == sum(i + o for model in (parent, side) for i, o in model.billed)


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("how", ["deep", "plain"])
def test_a_run_whose_middleware_spends_the_budget_with_its_own_callbacks_ends_at_the_limit(how, mode):
    # Uncharged, ~2,000 tokens a side call ran on as long as the parent looped on its tool.
    parent = BillingModel(default={"tool_calls": [tool_call("work", x="again")]}, model_name="parent")
    side = BillingModel(default="y" * 8_000, model_name="side")
    budget = Budget(max_tokens=10_000, prices=PRICES)
    graph, _ = _agent(how, parent, side, budget)
    out = _run(mode, graph)
    assert stopped_by_limit(out["messages"][-1]) == "budget"
    assert budget.tokens == sum(i + o for model in (parent, side) for i, o in model.billed)
    # The side calls that crossed the limit before the root's next call ended the run (a before and an after).
    assert budget.tokens <= budget.max_tokens + 2 * max(i + o for i, o in side.billed) + 2 * max(
        i + o for i, o in parent.billed)


@pytest.mark.parametrize("nesting", NESTINGS)
@pytest.mark.parametrize("mode", MODES)
def test_under_a_dollar_limit_a_call_with_its_own_callbacks_to_an_unpriced_model_is_refused(mode, nesting):
    parent = BillingModel(default="parent done", model_name="parent")
    side = BillingModel(default="fine", model_name="unpriced-model")
    graph, critic = _agent("deep", parent, side, Budget(max_usd=1.0, prices=PRICES), nesting)
    critic.before = False  # the nested call in after_model is the one refused
    out = _run(mode, graph)
    assert stopped_by_limit(out["messages"][-1]) == "budget" and "unpriced-model" in out["messages"][-1].text
    assert side.billed == []


class _Sampler(AgentMiddleware):
    """Asks ``side`` ten times in one before_model (a critic sampling opinions), catching the refusal or not."""

    def __init__(self, side: BillingModel, catches: bool) -> None:
        super().__init__()
        self.side, self.catches, self.refused = side, catches, 0

    def before_model(self, state: Any, runtime: Any) -> None:
        try:
            for i in range(10):
                self.side.invoke(f"opinion {i}: " + "c" * 20_000)
        except BudgetExceeded:
            if not self.catches:
                raise
            self.refused += 1

    async def abefore_model(self, state: Any, runtime: Any) -> None:
        try:
            for i in range(10):
                await self.side.ainvoke(f"opinion {i}: " + "c" * 20_000)
        except BudgetExceeded:
            if not self.catches:
                raise
            self.refused += 1


@pytest.mark.parametrize("catches", [False, True])
@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("how", ["deep", "plain"])
def test_a_root_middlewares_loop_of_calls_is_refused_within_the_limit_and_the_run_ends_on_its_message(
        how, mode, catches):
    # Never refused, ten ~5k-token calls in one hook spent 2.5x a 20k limit before the root's next call.
    parent = BillingModel(default="parent done", model_name="parent")
    side = BillingModel(default="looks fine " * 20, model_name="side")
    budget = Budget(max_tokens=20_000, prices=PRICES)
    sampler = _Sampler(side, catches)
    if how == "deep":
        graph = create_deep_agent(parent, [work], middleware=[sampler], settings=DelegationSettings.of(budget=budget))
    else:
        delegation = SubAgentMiddleware([], settings=DelegationSettings.of(budget=budget, general_purpose=False))
        graph = delegation.metered(create_agent(parent, [work], middleware=[sampler, delegation]))
    out = _run(mode, graph)
    assert stopped_by_limit(out["messages"][-1]) == "budget" and 0 < len(side.billed) < 10
    assert budget.tokens == sum(i + o for model in (parent, side) for i, o in model.billed)
    assert budget.tokens <= budget.max_tokens + max(o for _, o in side.billed)
    assert sampler.refused == catches  # raised into the middleware, which may catch it


def test_a_call_in_a_run_opened_before_thousands_of_others_is_charged_still():
    # Past 4,096 runs open at once, the oldest was forgotten, and a model call made in it went uncharged.
    from uuid import uuid4

    from langchain_core.messages import AIMessage
    from langchain_core.outputs import ChatGeneration, LLMResult

    from subagents._metering import RunMeter, _NodeMeter

    node_meter, budget = _NodeMeter(), Budget(max_tokens=10**9)
    node_meter._runs[node := uuid4()] = RunMeter(budget)
    node_meter.on_chain_start({}, {}, run_id=(oldest := uuid4()), parent_run_id=node)
    parent = oldest
    for run in [uuid4() for _ in range(5_000)]:  # each nested in the one before, none ended yet
        node_meter.on_chain_start({}, {}, run_id=run, parent_run_id=parent)
        parent = run
    call, reply = uuid4(), AIMessage("ok", usage_metadata={"input_tokens": 70, "output_tokens": 5, "total_tokens": 75})
    node_meter.on_chat_model_start({}, [[]], run_id=call, parent_run_id=oldest)
    node_meter.on_llm_end(LLMResult(generations=[[ChatGeneration(message=reply)]]), run_id=call, parent_run_id=oldest)
    assert budget.tokens == 75


def test_runs_followed_leave_as_they_end_cancelled_or_streamed_unread():
    # Kept until their end, never evicted: every run's end comes, a cancelled one's and an unread stream's too.
    import gc

    from langchain_core.runnables.config import var_child_runnable_config

    from subagents._metering import _ONE_NODE_METER, RunMeter

    async def slow(x: str) -> str:
        await asyncio.sleep(60)
        return x

    def pieces(text: str) -> Any:
        yield from text

    own = {"callbacks": [_Tracer()]}
    chain, streamed = RunnableLambda(str) | RunnableLambda(slow), RunnableLambda(str) | RunnableLambda(pieces)

    async def cancelled() -> None:
        task = asyncio.ensure_future(chain.ainvoke("a", config=own))
        while not _ONE_NODE_METER._runs:
            await asyncio.sleep(0)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task

    token = var_child_runnable_config.set({"callbacks": [RunMeter(Budget(max_tokens=10**9))]})  # a metered node's
    try:
        asyncio.run(cancelled())
        stream = streamed.stream("ab", config=own)
        next(stream)
        assert _ONE_NODE_METER._runs
        del stream
        gc.collect()
    finally:
        var_child_runnable_config.reset(token)
    assert not _ONE_NODE_METER._runs
