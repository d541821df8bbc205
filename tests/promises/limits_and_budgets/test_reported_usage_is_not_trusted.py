"""Usage a model or server reports is not trusted: bad counts never crash a run nor give a budget back."""

from __future__ import annotations

import math

import pytest
from helpers.graphs import records, user
from langchain_core.messages import AIMessage
from langchain_core.outputs import ChatGeneration, LLMResult

from deep_agent import create_deep_agent
from deep_agent._testing import ScriptedChatModel, tool_call
from deep_agent.cli._live_view import TaskTree
from subagents import Budget, DelegationSettings
from subagents._metering import TaskMeter, token_count

ANSWER = "A complete answer from the child, long enough to be kept as it is. " * 2


class RaisingCount(int):
    """A count whose conversion and comparisons raise: it made a sent call free (the task ended ``error``)."""

    def _refuse(self, *args: object) -> int:
        raise RuntimeError("no number here")

    __int__ = __index__ = __lt__ = __le__ = __gt__ = __ge__ = _refuse


HOSTILE = [None, "many", -10**6, math.nan, math.inf, [3], 10**400, RaisingCount(5)]


class HostileUsage(ScriptedChatModel):
    """The scripted model, but one side's reports carry ``bad`` as every count (assigned, so unvalidated)."""

    bad: object = None
    who: str = "parent"

    def _respond(self, messages, tools):
        result = super()._respond(messages, tools)
        is_parent = any(t["function"]["name"] == "task" for t in tools or ())
        if (self.who == "parent") == is_parent:
            result.generations[0].message.usage_metadata = {
                "input_tokens": self.bad, "output_tokens": self.bad, "total_tokens": self.bad}
        return result


def _model(bad: object, who: str) -> HostileUsage:
    return HostileUsage(
        bad=bad, who=who, rules=[("Sum", [ANSWER])],
        responses=[{"tool_calls": [tool_call("task", description="Sum it", subagent_type="general-purpose")]},
                   "parent done"])


@pytest.mark.parametrize("bad", HOSTILE, ids=repr)
def test_bad_counts_on_the_parents_own_calls_do_not_crash_it_nor_refund_the_budget(run, bad):
    budget = Budget(max_tokens=10**6)
    out = run(create_deep_agent(_model(bad, "parent"), settings=DelegationSettings.of(budget=budget)), user("go"))
    # A huge count spends the budget: the parent's next call is its last, and the limit says so after it.
    assert out["messages"][-1].content.startswith("parent done")
    assert 0 <= budget.tokens and not math.isnan(budget.usd)
    if bad != 10**400:  # a huge count spends the budget, and the delegation is refused
        assert [r["status"] for r in records(out)] == ["completed"]


@pytest.mark.parametrize("bad", HOSTILE, ids=repr)
def test_bad_counts_on_a_childs_calls_keep_its_answer_and_never_go_negative(run, bad):
    budget = Budget(max_tokens=10**16)
    out = run(create_deep_agent(_model(bad, "child"), settings=DelegationSettings.of(budget=budget)), user("go"))
    (record,) = records(out)
    assert record["status"] == "completed", record["error"]
    assert record["result"].startswith("A complete answer")
    assert record["input_tokens"] >= 0 and record["output_tokens"] >= 0
    assert record["charged_input_tokens"] > 0 and budget.tokens > 0  # whatever it reported, a sent call is charged
    assert out["subagent_usage"]["input_tokens"] >= 0


def test_a_negative_count_cannot_make_room_in_a_spent_budget():
    budget = Budget(max_tokens=100)
    budget.charge("m", 150, 0)
    budget.charge("m", -1000, -1000)
    assert budget.exhausted()


def test_a_meter_reads_a_servers_token_usage_as_reported_and_clamps_it():
    meter = TaskMeter(budget=Budget(max_tokens=10))
    for usage in ({"prompt_tokens": "7", "completion_tokens": None}, {"prompt_tokens": -5, "completion_tokens": "x"},
                  "not a mapping"):
        meter.on_llm_end(LLMResult(generations=[[ChatGeneration(message=AIMessage(""))]],
                                   llm_output={"token_usage": usage, "model_name": ["not", "a", "name"]}))
    # The record keeps what was reported; a reply reported as no output is charged its estimate (1 token each).
    assert (meter.input_tokens, meter.output_tokens, meter.budget.tokens) == (7, 0, 10)
    assert (meter.charged_input_tokens, meter.charged_output_tokens) == (7, 3)


def test_token_count_accepts_numbers_and_digit_strings_only():
    assert [token_count(v) for v in (12, "12", " 7 ", 3.9, True, None, "x", -4, math.nan, math.inf)] == [
        12, 12, 7, 3, 0, 0, 0, 0, 0, 0]
    assert token_count(10**400) == 10**15


def test_the_live_views_root_row_survives_bad_counts():
    tree = TaskTree("root")
    message = AIMessage("hi")
    message.usage_metadata = {"input_tokens": "x", "output_tokens": None, "total_tokens": -1}  # type: ignore[typeddict-item]
    tree.update({"messages": [message]})
    assert tree.root_usage == {"model_calls": 1, "input_tokens": 0, "output_tokens": 0}


@pytest.mark.parametrize("limits", [{"max_tokens": math.nan}, {"max_tokens": "100"}, {"max_tokens": True},
                                    {"max_tokens": 1.5}, {"max_usd": math.nan}, {"max_usd": math.inf},
                                    {"max_usd": "1"}], ids=repr)
def test_a_budget_refuses_limits_that_would_never_stop_or_are_not_numbers(limits):
    field = next(iter(limits))
    with pytest.raises(ValueError, match=f"Budget: {field} must be positive"):
        Budget(**limits, prices={"m": (1.0, 1.0)})


def test_a_reply_reporting_zeros_is_charged_all_it_carries():
    # The estimate read only content and tool_calls: a cut tool call's arguments and reasoning in the extras,
    # ~100,000 tokens under a usage of zeros, were charged 1 token.
    huge = "x" * 200_000
    reply = AIMessage(content="", invalid_tool_calls=[{"name": "write", "args": huge, "id": "c1", "error": "bad json",
                                                       "type": "invalid_tool_call"}],
                      additional_kwargs={"reasoning_content": huge})
    reply.usage_metadata = {"input_tokens": 0, "output_tokens": 0, "total_tokens": 0}
    budget = Budget(max_tokens=10**9)
    meter = TaskMeter(budget=budget)
    meter.on_chat_model_start({}, [[]], run_id="r", invocation_params={"model": "m"})
    meter.on_llm_end(LLMResult(generations=[[ChatGeneration(message=reply)]]), run_id="r")
    assert meter.charged_output_tokens >= 2 * len(huge) // 4
