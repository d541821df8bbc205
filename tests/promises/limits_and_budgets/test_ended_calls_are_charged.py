"""A model call that was sent is charged however it ends: failing, abandoned mid-stream, or cancelled."""

from __future__ import annotations

import asyncio
import contextlib
import threading
import uuid

import pytest
from helpers.background import wait_for
from helpers.billing import BillingModel
from helpers.graphs import Gated, records, user
from langchain_core.messages import AIMessageChunk, HumanMessage
from langchain_core.outputs import ChatGenerationChunk
from langchain_core.tools import tool

from deep_agent import create_deep_agent
from deep_agent._testing import ScriptedChatModel, tool_call
from subagents import Budget, DelegationSettings
from subagents._metering import LEARNED_SCALE_MARGIN, RunMeter, TaskMeter

PROMPT = "word " * 4000  # ~5,000 tokens


class _Streamer(ScriptedChatModel):
    """Streams an input-usage chunk first (as Anthropic's message_start), then text; ``fail`` mid-stream."""

    fail: bool = False

    def _stream(self, messages, stop=None, run_manager=None, **kwargs):
        n_in = sum(len(m.text) for m in messages) // 4 + 1
        yield ChatGenerationChunk(message=AIMessageChunk(content="", usage_metadata={
            "input_tokens": n_in, "output_tokens": 1, "total_tokens": n_in + 1}))
        for i in range(200):
            if self.fail and i == 20:
                raise ConnectionError("overloaded mid-stream")
            yield ChatGenerationChunk(message=AIMessageChunk(content="token " * 5))


@pytest.mark.parametrize("meter_type", [TaskMeter, RunMeter])
@pytest.mark.parametrize("fail", [False, True], ids=["closed early", "failed mid-stream"])
def test_a_stream_stopped_early_or_failing_is_charged_its_prompt_and_partial_reply(meter_type, fail):
    # Only its reservation was given back: a tool repeating such a stream sent 250,000 prompt tokens under a
    # 300,000 limit, all charged nothing.
    budget = Budget(max_tokens=1_000_000)
    meter = meter_type(budget=budget)
    model = _Streamer(default="unused", model_name="m", fail=fail)
    got = ""
    with pytest.raises(ConnectionError) if fail else contextlib.nullcontext():
        for chunk in model.stream(PROMPT, config={"callbacks": [meter]}):
            got += chunk.text
            if not fail and len(got) > 400:
                break
    assert budget.reserved == 0
    assert budget.tokens >= 5_000 + 100  # the prompt as reported, and ~100 tokens of partial reply


def test_a_call_the_meter_refused_is_charged_nothing():
    budget = Budget(max_tokens=1_000)  # the prompt's hold does not fit
    with pytest.raises(Exception, match="cannot cover"):
        ScriptedChatModel(default="x", model_name="m").invoke(PROMPT, config={"callbacks": [TaskMeter(budget=budget)]})
    assert (budget.tokens, budget.reserved) == (0, 0)


@pytest.mark.parametrize("meter_type", [TaskMeter, RunMeter])
def test_a_cancelled_call_is_charged_its_prompt_and_gives_its_hold_back(meter_type):
    # LangChain reports no end for a call cancelled in its gather: it held its reservation for ever (later calls
    # refused, the next run's too) and its sent prompt was never counted.
    budget = Budget(max_tokens=1_000_000)
    meter = meter_type(budget=budget)
    slow = ScriptedChatModel(default="late answer", model_name="m", latency_s=5.0)

    async def main():
        for _ in range(3):
            task = asyncio.create_task(slow.ainvoke(PROMPT, config={"callbacks": [meter]}))
            while not budget.reserved:  # sent
                await asyncio.sleep(0.01)
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task

    asyncio.run(main())
    assert budget.reserved == 0
    # Each sent prompt, at what it held: 16x its estimate before the model's ratio is learned (a cancelled call
    # may have been billed whole, by a tokenizer that dense).
    held = 5_000 * 16
    assert 3 * held <= budget.tokens < 3 * held * 2


@pytest.mark.parametrize("mode", ["invoke", "ainvoke"])
def test_a_failing_call_is_charged_what_it_held_so_retries_of_a_dense_model_keep_the_bound(mode):
    # A failed call reporting nothing was charged its estimate, though it held 16x: a model billing 16x and then
    # failing, retried, spent 2.15x the limit while the budget counted a fifth of it.
    budget = Budget(max_tokens=1_000_000)
    failing = ScriptedChatModel(default=ConnectionError("cut before the usage chunk"), model_name="new-model")
    for _ in range(3):
        with pytest.raises(ConnectionError):
            call = failing.invoke if mode == "invoke" else lambda *a, **k: asyncio.run(failing.ainvoke(*a, **k))
            call(PROMPT, config={"callbacks": [TaskMeter(budget=budget)]})
    assert budget.reserved == 0 and budget.tokens >= 3 * 16 * 5_000


@pytest.mark.parametrize("meter_type", [TaskMeter, RunMeter])
def test_concurrent_calls_sharing_a_run_id_are_each_charged_and_give_their_holds_back(meter_type):
    # A config reused (its run_id too) for two calls at once: the second's start took the first's place, so the
    # first's hold stayed for good (the child's meter: 16,016 tokens of a budget never freed) or the second was
    # never seen (the run's meter: neither refused nor charged).
    budget = Budget(max_tokens=1_000_000)
    meter = meter_type(budget=budget)
    model = BillingModel(default="answer " * 10, model_name="m")
    config = {"callbacks": [meter], "run_id": uuid.uuid4()}

    async def main():
        await asyncio.gather(model.ainvoke("x" * 4_000, config=config), model.ainvoke("y" * 400, config=config))

    asyncio.run(main())
    assert (budget.reserved, meter.model_calls) == (0, 2)
    # Alike: each read against the longer estimate, the shorter prompt charged at most the longer one more (at the
    # ratio learned, with its margin).
    billed = sum(i + o for i, o in model.billed)
    assert billed <= budget.tokens <= billed + LEARNED_SCALE_MARGIN * max(i for i, _ in model.billed)


@pytest.mark.parametrize("meter_type", [TaskMeter, RunMeter])
@pytest.mark.parametrize("mode", ["sync", "async"])
def test_a_batch_one_of_whose_prompts_is_refused_is_charged_nothing_and_holds_nothing(meter_type, mode):
    # LangChain starts a batch's prompts one by one and sends none once one is refused: the prompts started before
    # it kept their holds for good (sync) or were charged them (async), for calls never made.
    budget = Budget(max_tokens=20_000)  # the small prompt's hold fits, the large one's does not
    meter = meter_type(budget=budget)
    model = ScriptedChatModel(default="x", model_name="m")
    prompts = [[HumanMessage("small " * 100)], [HumanMessage(PROMPT)]]
    with pytest.raises(Exception, match="cannot cover"):
        if mode == "sync":
            model.generate(prompts, callbacks=[meter])
        else:
            asyncio.run(model.agenerate(prompts, callbacks=[meter]))
    assert (budget.tokens, budget.reserved, meter.model_calls, len(model.calls)) == (0, 0, 0, 0)


@pytest.mark.parametrize("mode", ["sync", "async"])
def test_calls_the_runs_meter_is_handed_twice_are_charged_once_a_run_id_shared_or_not(mode):
    # A call given the node's callbacks, the run's meter among them, reaches it directly and through the handler
    # following metered nodes: each is one call, whatever run id it shares with another running at once.
    from langchain_core.runnables.config import var_child_runnable_config

    budget = Budget(max_tokens=1_000_000)
    meter = RunMeter(budget)
    model = BillingModel(default="answer " * 10, model_name="m")
    shared = {"callbacks": [meter], "run_id": uuid.uuid4()}

    async def main():
        await model.ainvoke("z" * 400, config={"callbacks": [meter]})
        await asyncio.gather(model.ainvoke("x" * 4_000, config=shared), model.ainvoke("y" * 400, config=shared))

    token = var_child_runnable_config.set({"callbacks": [meter]})  # a metered node's
    try:
        if mode == "sync":
            model.invoke("z" * 400, config={"callbacks": [meter]})
        asyncio.run(main())
    finally:
        var_child_runnable_config.reset(token)
    assert (budget.reserved, meter.model_calls) == (0, len(model.billed))
    billed = sum(i + o for i, o in model.billed)  # the two at once alike, as in the test above
    assert billed <= budget.tokens <= billed + LEARNED_SCALE_MARGIN * max(i for i, _ in model.billed)


def test_a_call_running_when_its_task_times_out_is_in_the_tasks_record_as_the_budget_charged_it(run):
    # The budget was charged for it (at cancellation on ainvoke, when it ended in its abandoned thread on invoke),
    # but the record, made as the task ended, showed 0 charged tokens: the record and the budget disagreed.
    gate = threading.Event()
    child = Gated(default="late answer", model_name="child", gate=gate)
    parent = ScriptedChatModel(model_name="parent", responses=[
        {"tool_calls": [tool_call("task", description="job " * 500, subagent_type="w")]}, "done"])
    # The parent's calls cost nothing: the budget's dollars are the child's, a dollar a million tokens.
    budget = Budget(max_tokens=10**7, prices={"parent": (0.0, 0.0), "child": (1.0, 1.0)})
    spec = {"name": "w", "description": "w", "model": child, "timeout_s": 1.0}
    try:
        out = run(create_deep_agent(parent, [], subagents=[spec],
                                    settings=DelegationSettings.of(budget=budget)), user("go"))
        at_return = budget.usd
    finally:
        gate.set()
    (record,) = records(out)
    for thread in threading.enumerate():  # the abandoned child's (invoke): its call ends, then its next is refused
        if thread.name == f"subagent-{record['id'][:8]}":
            thread.join(60)
    assert record["stop_reason"] == "timeout" and record["charged_input_tokens"] > 0
    charged = record["charged_input_tokens"] + record["charged_output_tokens"]
    assert round(at_return * 1e6) == round(budget.usd * 1e6) == round(record["cost_usd"] * 1e6) == charged
    assert budget.reserved == 0



def test_a_call_reporting_more_after_its_task_timed_out_is_named_in_the_record(run):
    # A child's tool asking a model outlives the task's timeout_s (its thread cannot be stopped, on invoke or
    # ainvoke): the call ends after the record was made, and its report beyond what it held went to the budget
    # alone, while nothing in the record said any could come.
    gate = threading.Event()
    slow = Gated(default="late answer " * 8_000, model_name="child", gate=gate)  # ~24,000 tokens: past its bound

    @tool
    def ask(q: str) -> str:
        """Ask the slow model."""
        return slow.invoke(q).text

    child = ScriptedChatModel(model_name="child", responses=[{"tool_calls": [tool_call("ask", q="x")]}], default="ok")
    parent = ScriptedChatModel(model_name="parent", responses=[
        {"tool_calls": [tool_call("task", description="job", subagent_type="w")]}, "done"])
    budget = Budget(max_tokens=10**7, prices={"parent": (0.0, 0.0), "child": (1.0, 1.0)})
    spec = {"name": "w", "description": "w", "model": child, "tools": [ask], "timeout_s": 1.0}
    try:
        out = run(create_deep_agent(parent, [], subagents=[spec],
                                    settings=DelegationSettings.of(budget=budget)), user("go"))
    finally:
        gate.set()
    (record,) = records(out)
    wait_for(lambda: budget.reserved == 0 and budget.usd > record["cost_usd"] + 1e-9)  # the late report came
    assert record["stop_reason"] == "timeout" and record["unsettled_calls"] == 1
