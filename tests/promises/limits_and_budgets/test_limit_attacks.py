"""Attacks on the shared budget and the per-task limits: parallel siblings, bad usage reports, retries."""

from __future__ import annotations

import time
from typing import Any

import pytest
from helpers.graphs import records, user
from helpers.sync_only_model import LOCK, STATE, SyncOnlyModel, wait_until_idle
from langchain.agents import create_agent
from langchain.agents.middleware import ModelRetryMiddleware
from langchain_core.messages import AIMessage
from langchain_core.tools import tool
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.types import Command
from pydantic import ValidationError

from deep_agent import create_deep_agent
from deep_agent._testing import ScriptedChatModel, tool_call
from subagents import BackgroundRuntime, Budget, CompiledSubagent, RemoteSubagentSpec, SpecError
from subagents._settings import DelegationSettings


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
    agent = create_deep_agent(parent, subagents=specs,
                              settings=DelegationSettings.of(budget=Budget(max_tokens=3000), max_concurrent_tasks=2))
    out = run(agent, user("go"))
    recs = records(out)
    assert len(recs) == 6 and {r["stop_reason"] for r in recs} == {"budget"}
    assert sum(r["model_calls"] for r in recs) == len(child.calls) > 0
    assert out["subagent_usage"]["model_calls"] == len(child.calls)


@pytest.mark.parametrize("field", ["timeout_s", "recursion_limit"])
@pytest.mark.parametrize("value", [True, "5"])
def test_a_compiled_subagent_refuses_a_bool_or_text_limit_naming_the_field(field, value):
    # timeout_s=True was taken for a one-second deadline, "5" for five: a slip, not a limit.
    graph = create_agent(ScriptedChatModel(default="x"))
    with pytest.raises(ValidationError, match=field):
        CompiledSubagent(name="w", description="d", runnable=graph, **{field: value})
    with pytest.raises(SpecError, match=f"field '{field}'"):
        create_deep_agent(ScriptedChatModel(default="x"),
                          subagents=[{"name": "w", "description": "d", "runnable": graph, field: value}])


@pytest.mark.parametrize("field", ["timeout_s", "request_timeout_s", "start_timeout_s"])
@pytest.mark.parametrize("value", [True, "5"])
def test_a_remote_spec_refuses_a_bool_or_text_timeout_naming_the_field(field, value):
    with pytest.raises(ValidationError, match=field):
        RemoteSubagentSpec(name="r", description="d", graph_id="g", url="http://127.0.0.1:9", **{field: value})


@pytest.mark.parametrize("crafted", [{"input_tokens": "x"}, {"tasks": -1000, "input_tokens": -10**9},
                                     {"model_calls": float("nan")}, ["a"], "text",
                                     # the rollup's own shape, which is read without a second look when clean
                                     {"model_calls": -5, "input_tokens": 0, "output_tokens": 0, "tasks": 0,
                                      "cost_usd": -1.0},
                                     {"model_calls": True, "input_tokens": 0, "output_tokens": 0, "tasks": 0,
                                      "cost_usd": float("nan")}])
def test_a_crafted_usage_rollup_in_the_input_neither_fails_the_run_nor_corrupts_the_rollup(run, crafted):
    # Text in the input's rollup failed the delegation's write after the child had run (its record lost);
    # negative or NaN figures made the rollup negative or NaN for the rest of the thread.
    model = ScriptedChatModel(
        rules=[("go", [{"tool_calls": [tool_call("task", description="job", subagent_type="general-purpose")]},
                       "done"])],
        default="child answer",
    )
    out = run(create_deep_agent(model), {**user("go"), "subagent_usage": crafted})
    (record,) = records(out)
    assert record["status"] == "completed"
    rollup = out["subagent_usage"]
    assert rollup["tasks"] == 1 and rollup["model_calls"] == record["model_calls"] == 1
    assert rollup["input_tokens"] == record["input_tokens"] > 0
    assert rollup["output_tokens"] == record["output_tokens"] > 0
    assert rollup["cost_usd"] == 0.0




def test_a_child_abandoned_mid_model_call_keeps_its_place_and_its_call_is_charged(run):
    # On ainvoke the cancelled child stopped waiting for a call LangChain runs on a thread: its place
    # under max_concurrent_tasks=1 went to the next child while the call still ran (two calls at once),
    # and the 10,000 tokens the call was billed never reached the budget.
    STATE.update(running=0, peak=0, calls=0)
    child = SyncOnlyModel(default="an answer")
    parent = ScriptedChatModel(
        responses=[{"tool_calls": [tool_call("task", description=f"job {i}", subagent_type="w") for i in range(2)]}],
        default="done",
    )
    budget = Budget(max_tokens=10**9)
    specs = [{"name": "w", "description": "worker", "model": child, "timeout_s": 0.5}]
    out = run(create_deep_agent(parent, subagents=specs, settings=DelegationSettings.of(
        budget=budget, max_concurrent_tasks=1,
    )), user("go"))
    recs = records(out)
    assert [r["stop_reason"] for r in recs].count("timeout") >= 1
    wait_until_idle()
    assert STATE["peak"] == 1
    assert budget.tokens >= 10_000 * STATE["calls"] == 20_000


@pytest.mark.parametrize("limit", ["max_turns", "budget"])
def test_a_retry_middleware_in_the_child_does_not_turn_a_limit_into_a_completed_task(run, limit):
    # ModelRetryMiddleware catches every error, the meter's stops included, and once its retries fail it
    # answers with "Model call failed after 3 attempts ...": the task was recorded completed with that answer.
    child = ScriptedChatModel(default={"tool_calls": [tool_call("work", x="y" * 400)]})
    parent = ScriptedChatModel(
        responses=[{"tool_calls": [tool_call("task", description="job", subagent_type="w")]}], default="done")
    retry = ModelRetryMiddleware(max_retries=2, initial_delay=0.0, jitter=False)
    specs = [{"name": "w", "description": "worker", "model": child, "tools": [work], "middleware": [retry],
              "max_turns": 4 if limit == "max_turns" else 50}]
    budget = Budget(max_tokens=1500 if limit == "budget" else 10**9)
    out = run(create_deep_agent(parent, subagents=specs, settings=DelegationSettings.of(budget=budget)), user("go"))
    (record,) = records(out)
    assert (record["status"], record["stop_reason"]) == ("error", limit)
    assert record["result"] is None and "failed after" not in (record["error"] or "")
    assert record["model_calls"] == len(child.calls)


@tool
def slow_step(x: str) -> str:
    """A step of work that takes half a second."""
    time.sleep(0.5)
    return "step done"


def test_timeout_s_bounds_the_whole_task_across_approval_pauses(run):
    # Each resume after an approval started a fresh timeout_s: five approved steps of 0.5 s each (2.5 s of
    # work, the waits for the person not counted) completed under timeout_s=1.5.
    child = ScriptedChatModel(responses=[{"tool_calls": [tool_call("slow_step", x=str(i))]} for i in range(5)]
                              + ["all steps done"])
    parent = ScriptedChatModel(
        responses=[{"tool_calls": [tool_call("task", description="job", subagent_type="w")]}], default="done")
    specs = [{"name": "w", "description": "worker", "model": child, "tools": [slow_step], "timeout_s": 1.5,
              "interrupt_on": {"slow_step": True}}]
    agent = create_deep_agent(parent, subagents=specs, checkpointer=InMemorySaver())
    config = {"configurable": {"thread_id": "approvals-and-timeout"}}
    inputs: Any = user("go")
    for _ in range(10):
        out = run(agent, inputs, config)
        if "__interrupt__" not in out:
            break
        time.sleep(0.3)  # the person reads the request: waiting, which timeout_s does not count
        inputs = Command(resume={"decisions": [{"type": "approve"}]})
    (record,) = records(out)
    assert (record["status"], record["stop_reason"]) == ("error", "timeout")


class NoUsageModel(ScriptedChatModel):
    """A model (or server) that reports no token usage at all."""

    def _respond(self, messages, tools):  # type: ignore[no-untyped-def]
        result = super()._respond(messages, tools)
        result.generations[0].message.usage_metadata = None
        return result


def test_a_model_that_reports_no_usage_cannot_run_past_the_budget(run):
    # Nothing was charged for a call without usage: the child looped to max_turns under a spent budget.
    child = NoUsageModel(default={"tool_calls": [tool_call("work", x="y" * 400)]})
    parent = ScriptedChatModel(
        responses=[{"tool_calls": [tool_call("task", description="job", subagent_type="w")]}], default="done")
    specs = [{"name": "w", "description": "worker", "model": child, "tools": [work], "max_turns": 40}]
    budget = Budget(max_tokens=2000)
    out = run(create_deep_agent(parent, subagents=specs, settings=DelegationSettings.of(budget=budget)), user("go"))
    (record,) = records(out)
    assert record["stop_reason"] == "budget"
    assert len(child.calls) < 10
    assert record["input_tokens"] == 0  # the record keeps what was reported


def test_a_dollar_budget_refuses_a_child_model_it_has_no_price_for(run):
    # An unpriced model's calls counted $0 against max_usd: the child ran to max_turns under the budget.
    child = ScriptedChatModel(default={"tool_calls": [tool_call("work", x="y")]}, model_name="unpriced-model")
    parent = ScriptedChatModel(
        responses=[{"tool_calls": [tool_call("task", description="job", subagent_type="w")]}], default="done")
    specs = [{"name": "w", "description": "worker", "model": child, "tools": [work], "max_turns": 30}]
    budget = Budget(max_usd=1.0, prices={"scripted": (1000.0, 1000.0)})
    out = run(create_deep_agent(parent, subagents=specs, settings=DelegationSettings.of(budget=budget)), user("go"))
    (record,) = records(out)
    assert record["stop_reason"] == "budget" and "unpriced-model" in record["error"]
    assert child.calls == []


class BlockingGraph:
    """A compiled subagent with only ``invoke``: on ``ainvoke`` it runs on a thread, which nothing can stop."""

    def invoke(self, inputs: Any, config: Any = None) -> Any:
        with LOCK:
            STATE["running"] += 1
            STATE["peak"] = max(STATE["peak"], STATE["running"])
        try:
            time.sleep(1.0)
        finally:
            with LOCK:
                STATE["running"] -= 1
        return {"messages": [*inputs["messages"], AIMessage("done")]}


def test_a_compiled_subagent_on_a_thread_keeps_its_place_after_its_timeout(run):
    # On ainvoke the thread running an invoke-only graph outlived the cancelled child, which gave its place
    # back at once: three such children ran together under max_concurrent_tasks=1.
    STATE.update(running=0, peak=0, calls=0)
    parent = ScriptedChatModel(
        responses=[{"tool_calls": [tool_call("task", description=f"job {i}", subagent_type="b") for i in range(3)]}],
        default="done",
    )
    spec = CompiledSubagent(name="b", description="blocks", runnable=BlockingGraph(), timeout_s=0.3)
    out = run(create_deep_agent(parent, subagents=[spec], settings=DelegationSettings.of(max_concurrent_tasks=1)), user("go"))
    assert [r["stop_reason"] for r in records(out)] == ["timeout"] * 3
    wait_until_idle()
    assert STATE["peak"] == 1


def test_a_timed_out_background_task_keeps_its_place_while_its_model_call_runs(run):
    # A background task's place under max_background_tasks was freed at its timeout while its sync-only
    # model call still ran on a thread: three such calls ran together under max_background_tasks=1.
    STATE.update(running=0, peak=0, calls=0)
    child = SyncOnlyModel(default="an answer")
    parent = ScriptedChatModel(rules=[("go", [{"tool_calls": [
        tool_call("start_async_task", description=f"job {i}", subagent_type="w") for i in range(3)]}, "started"])],
        default="ok")
    specs = [{"name": "w", "description": "worker", "model": child, "timeout_s": 0.3}]
    with BackgroundRuntime() as runtime:
        agent = create_deep_agent(parent, subagents=specs, background=True, settings=DelegationSettings.of(
            max_background_tasks=1, background_runtime=runtime,
        ))
        run(agent, user("go"))
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and not (STATE["calls"] == 3 and STATE["running"] == 0):
            time.sleep(0.05)
    assert STATE["calls"] == 3
    assert STATE["peak"] == 1
