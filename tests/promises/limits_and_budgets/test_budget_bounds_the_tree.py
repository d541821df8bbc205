"""A shared budget bounds the whole tree: from the first parallel wave, and the parent's own loop too.

The bound, as documented: the limit, plus one output per model call running
when it is reached, plus the parent's one last answer once the budget is spent.
"""

from __future__ import annotations

import contextlib
import json
import math
import threading
from typing import Any

import pytest
from helpers.billing import BillingModel
from helpers.graphs import user
from langchain.agents import create_agent
from langchain.agents.middleware import AgentMiddleware, ModelRetryMiddleware, hook_config
from langchain.agents.structured_output import ToolStrategy
from langchain_core.messages import AIMessage, HumanMessage
from langchain_core.runnables.config import ContextThreadPoolExecutor
from langgraph.errors import GraphRecursionError
from pydantic import BaseModel, Field

from bench.budget import ROWS, run_row
from deep_agent import create_deep_agent
from deep_agent._testing import ScriptedChatModel, tool_call
from subagents import Budget, BudgetExceeded
from subagents._metering import prompt_estimate
from subagents._outcome import stopped_by_limit
from subagents._settings import DelegationSettings


class _Verdict(BaseModel):
    verdict: str


def _echo(x: str) -> str:
    """Echo."""
    return x


@pytest.mark.parametrize("mode", ["invoke", "ainvoke"])
@pytest.mark.parametrize("row", list(ROWS))
def test_eight_parallel_children_keep_the_bound_whatever_their_usage_reports(row, mode):
    # The children's model is new to the budget, so their first wave is reserved before any ratio is
    # learned: with a tokenizer 16x denser, 8 children spent 3.5x (invoke) and 4.6x (ainvoke) the limit.
    got = run_row(row, mode, children=8, limit_tokens=2_000)
    assert got["records"] and {r["stop_reason"] for r in got["records"]} == {"budget"}
    assert got["spent"] <= got["limit"] + got["allowed"] + (got["spent"] - got["before_answer"]), got


def test_a_spent_budget_ends_the_parents_own_loop_after_one_last_call_without_tools(run):
    # Delegations were refused and children stopped, but a parent looping on its own tool went on
    # (31 calls, 2.4x the limit).
    parent = BillingModel(default={"tool_calls": [tool_call("_echo", x="again")]}, model_name="scripted")
    budget = Budget(max_tokens=20_000)
    out = run(create_deep_agent(parent, [_echo],
                                settings=DelegationSettings.of(budget=budget)), user("go"), {"recursion_limit": 1000})
    last = out["messages"][-1]
    assert stopped_by_limit(last) == "budget" and "the shared token budget" in last.content
    assert parent.calls[-1]["tools"] == [] and all(call["tools"] for call in parent.calls[:-1])
    one_call = max(i + o for i, o in parent.billed)
    assert budget.tokens <= budget.max_tokens + 2 * one_call  # the call that crossed it, and the last answer


class _InsistsOnFinal(AgentMiddleware):
    """A parent middleware that sends every answer without FINAL back to the model (``speaks``: with an AI
    message of its own before its request, which hid the budget's stop)."""

    def __init__(self, speaks: bool = False) -> None:
        super().__init__()
        self.speaks = speaks

    @hook_config(can_jump_to=["model"])
    def after_model(self, state, runtime):
        last = state["messages"][-1]
        if isinstance(last, AIMessage) and not last.tool_calls and "FINAL" not in last.text:
            said = [AIMessage("guard: please continue")] if self.speaks else []
            return {"messages": [*said, HumanMessage("Include FINAL.")], "jump_to": "model"}
        return None


@pytest.mark.parametrize("speaks", [False, True])
def test_a_middleware_jumping_back_to_the_model_gets_no_call_past_the_last_one(run, speaks):
    # After the budget's last call, a middleware's jump back to the model was taken for a new last call:
    # 200 root calls, 10M tokens of a 100,000 budget (stopped only by max_root_turns).
    parent = BillingModel(default="an answer without the word", model_name="scripted", density=8.0)
    budget = Budget(max_tokens=20_000)
    agent = create_deep_agent(parent, [], middleware=[_InsistsOnFinal(speaks)],
                              settings=DelegationSettings.of(budget=budget))
    with contextlib.suppress(GraphRecursionError):  # the middleware loops on the stop; LangGraph ends it
        run(agent, user("go"), {"recursion_limit": 200})
    assert sum(1 for call in parent.calls if call["tools"] == []) == 1, len(parent.calls)  # the last answer only
    one_call = max(i + o for i, o in parent.billed)
    assert budget.tokens <= budget.max_tokens + 2 * one_call


def test_every_non_ascii_character_is_estimated_at_a_token_at_least():
    # At four characters a token, 3,000 Chinese characters billed 3,000 tokens were reserved as 751.
    from subagents._metering import estimate_tokens

    assert estimate_tokens("漢" * 3000) >= 3000
    assert estimate_tokens(["a" * 400, "é" * 100]) >= 200
    assert estimate_tokens("a" * 400) == 101  # ASCII as before: four characters a token


def test_a_models_learned_ratio_only_rises():
    # Last write won: one light English prompt undid what a dense one had taught, and the next wave of
    # dense prompts was reserved at the light ratio.
    budget = Budget(max_tokens=10**6)
    budget.learn("m", 100, 400)
    dense = budget.learned("m")
    budget.learn("m", 100, 100)
    assert dense is not None and dense >= 4.0 and budget.learned("m") == dense
    budget.learn("m", 100, 800)
    assert budget.learned("m") == pytest.approx(dense * 2)


@pytest.mark.parametrize("quiet", ["absent", "zero"])
def test_a_report_charged_the_estimate_teaches_no_ratio(run, quiet):
    # One child reports no usage (or zeros) and is charged the estimate; the budget learned 1.1x from it, so the
    # next wave on the same model, honest at a tokenizer 16x denser, was held at 1.1x: 85,002 tokens of 40,000.
    quiet_child = BillingModel(default="done", model_name="child-model", usage=quiet)
    dense_child = BillingModel(default={"tool_calls": [tool_call("_echo", x="again")]}, model_name="child-model",
                               density=16.0, latency_s=0.05)  # the wave's calls in flight together
    waves = [{"tool_calls": [tool_call("task", description="first", subagent_type="quiet")]},
             {"tool_calls": [tool_call("task", description=f"loop {i}", subagent_type="dense") for i in range(8)]},
             "parent done"]
    parent = BillingModel(rules=[("go", waves)], default="parent done", model_name="parent-model")
    prompt = "Loop on the tool, with care. " * 80  # ~600 tokens estimated, ~9,600 billed
    specs = [{"name": "quiet", "description": "q", "model": quiet_child, "system_prompt": prompt},
             {"name": "dense", "description": "d", "model": dense_child, "tools": ["_echo"], "max_turns": 1000,
              "system_prompt": prompt}]
    budget = Budget(max_tokens=40_000)  # room for three such calls at 16x, not for eight
    parent.watch = budget
    run(create_deep_agent(parent, [_echo], subagents=specs, settings=DelegationSettings.of(
        budget=budget, max_concurrent_tasks=8,
    )), user("go"))
    assert budget.learned("child-model") is not None  # the honest reports taught it
    output = max(o for _, o in dense_child.billed)
    last_answer = budget.tokens - parent.spent_before_answer
    assert budget.tokens <= budget.max_tokens + 8 * output + last_answer


class _Unreported(BillingModel):
    """Billed as ``density`` says, reporting no usage at all (a stream without its usage chunk)."""

    def _respond(self, messages, tools):
        result = super()._respond(messages, tools)
        result.generations[0].message.usage_metadata = None
        return result


def test_a_model_that_reports_no_usage_is_charged_what_its_calls_held(run):
    # Held at 16x its estimate while it ran, such a call was charged 1x: billing 4x the estimate, four children
    # looping on it took the tree to 3.1x the limit.
    child = _Unreported(default={"tool_calls": [tool_call("_echo", x="again")]}, model_name="child-model",
                        density=4.0)
    waves = [{"tool_calls": [tool_call("task", description=f"loop {i}", subagent_type="looper") for i in range(4)]},
             "parent done"]
    parent = BillingModel(rules=[("go", waves)], default="parent done", model_name="parent-model")
    specs = [{"name": "looper", "description": "loops", "model": child, "tools": ["_echo"], "max_turns": 1000,
              "system_prompt": "Loop on the tool, with care. " * 80}]
    budget = Budget(max_tokens=100_000)
    run(create_deep_agent(parent, [_echo], subagents=specs, settings=DelegationSettings.of(
        budget=budget, max_concurrent_tasks=4, deepagents_stack=False,
    )), user("go"), {"recursion_limit": 10_000})
    billed = sum(i + o for i, o in child.billed + parent.billed)
    output = max(o for _, o in child.billed)
    assert billed <= budget.max_tokens + 4 * output + sum(parent.billed[-1]), (billed, len(child.billed))


def test_a_childs_tools_calling_models_in_parallel_pass_the_limit_by_one_output_each_at_most(run):
    # The documented bound said one output per running child; a child's eight parallel tool calls, each asking a
    # model, passed the limit by 5.7 of their outputs. Each such call is a running call of its own.
    # Each call answers only once four are inside the model (admitted, none answered), so they overlap however
    # busy the machine: a slow thread pool once ran them one after another and the limit was passed by one output.
    arrived, together = [0], threading.Condition()

    class Overlapping(BillingModel):
        def _generate(self, *args: Any, **kwargs: Any) -> Any:
            with together:
                arrived[0] += 1
                together.notify_all()
                together.wait_for(lambda: arrived[0] >= 4, timeout=120)  # a hang guard; too few fails the bound
            return super()._generate(*args, **kwargs)

    inner = Overlapping(default="y" * 40_000, model_name="inner-model")  # ~10,000 output tokens

    def summarize(topic: str) -> str:
        """Summarize a topic."""
        return inner.invoke(f"summarize {topic}").text[:20]

    child = BillingModel(responses=[{"tool_calls": [tool_call("summarize", topic=f"t{i}") for i in range(8)]},
                                    "child done"], model_name="child-model")
    parent = BillingModel(rules=[("go", [{"tool_calls": [tool_call("task", description="Do it",
                                                                   subagent_type="worker")]}, "parent done"])],
                          default="parent done", model_name="parent-model")
    specs = [{"name": "worker", "description": "w", "model": child, "tools": ["summarize"]}]
    budget = Budget(max_tokens=30_000)
    parent.watch = budget
    run(create_deep_agent(parent, [summarize], subagents=specs,
                          settings=DelegationSettings.of(budget=budget)), user("go"))
    output, before = max(o for _, o in inner.billed), parent.spent_before_answer
    assert budget.max_tokens + output < before <= budget.max_tokens + len(inner.billed) * output


@pytest.mark.parametrize("through", ["model", "agent", "threads"])
def test_a_root_tools_model_calls_are_refused_once_the_budget_cannot_cover_them(run, through):
    # Counted by the run's meter but never refused: a root tool asking a model ten times spent 52,676 tokens of
    # a 20,000 limit. Refused in the tool, the refusal ends the run, as any error a root tool raises. A tool's
    # own threads are metered when they carry the run's context, as the docs say to start them.
    inner = BillingModel(default="y" * 20_000, model_name="inner-model")  # ~5,000 output tokens a call
    ask = create_agent(inner, []) if through == "agent" else inner  # an agent of its own: its steps in the tool's

    def summarize_all(n: int) -> str:
        """Summarize n documents."""
        if through == "threads":
            with ContextThreadPoolExecutor(1) as pool:  # one at a time: the bound below is one output
                list(pool.map(lambda i: inner.invoke(f"summarize doc {i}"), range(n)))
        for i in range(n if through != "threads" else 0):
            ask.invoke(f"summarize doc {i}" if through == "model" else user(f"summarize doc {i}"))
        return "done"

    parent = BillingModel(responses=[{"tool_calls": [tool_call("summarize_all", n=10)]}, "parent done"],
                          model_name="parent-model")
    budget = Budget(max_tokens=20_000)
    with pytest.raises(BudgetExceeded):
        run(create_deep_agent(parent, [summarize_all], settings=DelegationSettings.of(budget=budget)), user("go"))
    assert len(inner.billed) < 10 and budget.tokens <= budget.max_tokens + max(o for _, o in inner.billed)


class _Dense16(ScriptedChatModel):
    """Bills each prompt at exactly 16x the budget's estimate of it, and reports no usage."""

    billed: list[tuple[int, int]] = Field(default_factory=list)

    def _respond(self, messages, tools):
        result = super()._respond(messages, tools)
        message = result.generations[0].message
        message.usage_metadata = None
        prompt = math.ceil(prompt_estimate(messages, {"tools": tools} if tools else None) * 16)
        self.billed.append((prompt, max(1, (len(message.text) + len(json.dumps(message.tool_calls))) // 4)))
        return result


@pytest.mark.parametrize("stack", [True, False], ids=["deepagents-stack", "plain"])
def test_a_retried_or_replaced_last_call_is_not_a_new_one_and_the_run_ends_on_the_limit(run, stack):
    # The root's tool-less last call failed, and a user's ModelRetryMiddleware (outermost) called the model again:
    # each retry was another last call past the spent budget (6 sent, 2.6x the limit), and the run ended on the
    # retry's error, not the limit's message.
    parent = BillingModel(responses=[{"tool_calls": [tool_call("task", description="big job", subagent_type="r")]}],
                          default=RuntimeError("HTTP 500 from the provider"), model_name="parent-model")
    child = BillingModel(default="child answer " * 400, model_name="child-model")
    budget = Budget(max_tokens=3_000)
    agent = create_deep_agent(parent, [], subagents=[{"name": "r", "description": "d", "model": child}],
                              middleware=[ModelRetryMiddleware(max_retries=5, initial_delay=0.0, jitter=False)],
                              settings=DelegationSettings.of(budget=budget, deepagents_stack=stack))  # inner or outer
    out = run(agent, user("go"))
    assert [call["tools"] for call in parent.calls][1:] == [[]]  # one last call, without tools
    assert stopped_by_limit(out["messages"][-1]) == "budget"


def test_the_last_call_of_a_root_with_structured_output_is_offered_no_tool_either(run):
    # request.override(tools=[]) kept the response format, so LangChain bound its structured-output tool to the
    # "tool-less" last call, and the answer given through it was dropped.
    parent = BillingModel(responses=[{"tool_calls": [tool_call("task", description="big job", subagent_type="r")]},
                                     "the parent's answer in words"], model_name="parent-model")
    child = BillingModel(default="child answer " * 400, model_name="child-model")
    budget = Budget(max_tokens=3_000)
    agent = create_deep_agent(parent, [], subagents=[{"name": "r", "description": "d", "model": child}],
                              settings=DelegationSettings.of(budget=budget),
                              response_format=ToolStrategy(_Verdict))
    out = run(agent, user("go"))
    assert parent.calls[-1]["tools"] == [] and stopped_by_limit(out["messages"][-1]) == "budget"
    assert "the parent's answer in words" in out["messages"][-1].text


def test_a_root_model_that_never_teaches_its_ratio_is_let_in_at_its_estimate_once(run):
    # Every root call made alone was let in at its estimate while its model had no learned ratio: a root model
    # billing 16x and reporting nothing, looping on its own tool, passed the limit by up to 15x a prompt.
    for limit in (120_000, 150_000, 180_000):
        parent = _Dense16(default={"tool_calls": [tool_call("_echo", x="more " * 20)]}, model_name="p")
        run(create_deep_agent(parent, [_echo],
                              settings=DelegationSettings.of(budget=Budget(max_tokens=limit))), user("go"),
            {"recursion_limit": 400})
        billed = sum(i + o for i, o in parent.billed)
        assert billed <= limit + max(o for _, o in parent.billed) + sum(parent.billed[-1]), (limit, parent.billed)
