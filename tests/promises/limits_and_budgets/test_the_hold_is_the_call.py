"""Each model call's hold is made once, as it is sent, and its end settles it: never at another call's price.

A call's end is told by its run id, never by the name its reply gives: of calls running at once under one run id
(a config reused), LangChain tells an end nothing that proves which it is, so every end among them is charged alike,
as the dearest of them. The wrap-up check prices a call as its hold will. A call whose end never came (cancelled,
abandoned) is charged what it held and counted as unsettled in its task's record: its provider may bill it whole.
"""

from __future__ import annotations

import asyncio
import re
import threading
import uuid
from typing import Any

import pytest
from helpers.graphs import Gated, echo, parent_script, records, user
from langchain_core.messages import AIMessageChunk
from langchain_core.outputs import ChatGenerationChunk
from langchain_core.runnables.config import ContextThreadPoolExecutor
from langgraph.checkpoint.memory import InMemorySaver

from deep_agent import create_deep_agent
from deep_agent._testing import ScriptedChatModel, tool_call
from subagents import Budget, DelegationSettings
from subagents._metering import WRAP_UP_PROMPT, RunMeter, TaskMeter, call_price, cost_at, estimate_tokens

PROMPTS = {"long": "x" * 40_000, "short": "y" * 400}  # ~10,000 and ~100 tokens


class _Streamer(ScriptedChatModel):
    """Streams its usage first (its model named as it ``says``), then three chunks of ``words`` words."""

    says: str | None = None
    words: int = 1

    def _chunks(self, messages: Any) -> list[ChatGenerationChunk]:
        n_in, n_out = estimate_tokens(messages), self.words * 3 * 5 // 4
        usage = {"input_tokens": n_in, "output_tokens": n_out, "total_tokens": n_in + n_out}
        meta = {"model_name": self.says or self.model_name}
        return [ChatGenerationChunk(message=AIMessageChunk(content="", usage_metadata=usage, response_metadata=meta)),
                *(ChatGenerationChunk(message=AIMessageChunk(content="word " * self.words)) for _ in range(3))]

    def _stream(self, messages, stop=None, run_manager=None, **kwargs):
        yield from self._chunks(messages)

    async def _astream(self, messages, stop=None, run_manager=None, **kwargs):
        for chunk in self._chunks(messages):
            yield chunk


def _read_in_turns(mode: str, meter: TaskMeter, calls: list[tuple[_Streamer, str]], order: list[int]) -> None:
    """Streams of one thread (or asyncio task) under one run id: each started, then each read out in ``order``."""
    config = {"callbacks": [meter], "run_id": uuid.uuid4()}
    if mode == "invoke":
        streams = [model.stream(PROMPTS[prompt], config=config) for model, prompt in calls]
        for stream in streams:
            next(stream)
        for i in order:
            list(streams[i])
    else:
        async def main() -> None:
            streams = [model.astream(PROMPTS[prompt], config=config) for model, prompt in calls]
            for stream in streams:
                await anext(stream)
            for i in order:
                [chunk async for chunk in streams[i]]

        asyncio.run(main())


@pytest.mark.parametrize("order", [[0, 1], [1, 0]], ids=["long ends first", "short ends first"])
@pytest.mark.parametrize("meter_type", [TaskMeter, RunMeter])
@pytest.mark.parametrize("mode", ["invoke", "ainvoke"])
def test_streams_to_one_model_under_one_run_id_never_trade_estimates(mode, meter_type, order):
    # The long call's end took the short call's hold (the last sent): its estimate, 100 tokens, taught the budget a
    # ratio of 100x (clamped to 16x), and the short call, read against the long one's estimate, was charged
    # 16x 10,000 tokens; the long reply carried the short estimate for a checkpoint's read-back.
    budget = Budget(max_tokens=10**7)
    meter = meter_type(budget=budget)
    model = _Streamer(default="", model_name="m")
    _read_in_turns(mode, meter, [(model, "long"), (model, "short")], order)
    long_in, short_in = (estimate_tokens(PROMPTS[p]) for p in ("long", "short"))
    assert (budget.reserved, meter.model_calls) == (0, 2)
    # The two ends cannot be told apart: each is read against the larger estimate, and teaches no ratio.
    assert long_in + short_in + 6 <= budget.tokens <= 2 * (long_in + 3)
    assert budget.learned("m") is None


@pytest.mark.parametrize("meter_type", [TaskMeter, RunMeter])
@pytest.mark.parametrize("mode", ["invoke", "ainvoke"])
def test_a_reply_naming_another_running_calls_model_does_not_move_its_charge(mode, meter_type):
    # The dear call's reply named the cheap model: its end took the cheap call's hold, so its long answer was
    # charged at the cheap price, and the cheap call's short one at the dear price.
    prices = {"dear": (100.0, 100.0), "cheap": (0.01, 0.01)}
    budget = Budget(max_usd=1_000.0, prices=prices)
    meter = meter_type(budget=budget)
    dear = _Streamer(default="", model_name="dear", says="cheap", words=4_000)
    cheap = _Streamer(default="", model_name="cheap")
    _read_in_turns(mode, meter, [(dear, "short"), (cheap, "short")], [0, 1])
    short_in = estimate_tokens(PROMPTS["short"])
    assert budget.reserved == 0 and meter.model_calls == 2
    assert budget.usd >= cost_at(call_price(prices, "dear"), short_in, 15_000)  # the dear call at its price at least


def test_a_call_cancelled_with_its_task_is_unsettled_as_one_left_running_is(run):
    # On ainvoke the timed-out child's call is cancelled with its task: only the awaiting side stops (a model whose
    # async call runs its SDK in a thread, a provider generating on after a disconnect), yet its record said no more
    # could come of it, and a task cut short on each call spent 3x the limit. On invoke it runs on in its thread.
    gate = threading.Event()
    child = Gated(default="late answer", model_name="child", gate=gate)
    parent = ScriptedChatModel(model_name="parent", responses=parent_script(("job " * 500, "w")))
    budget = Budget(max_tokens=10**7)
    spec = {"name": "w", "description": "w", "model": child, "timeout_s": 1.0}
    try:
        out = run(create_deep_agent(parent, [], subagents=[spec], settings=DelegationSettings.of(budget=budget)), user("go"))
    finally:
        gate.set()
    (record,) = records(out)
    assert record["stop_reason"] == "timeout"
    # Charged what it held: 16x its prompt (the job's ~500 tokens at least), the model's ratio unlearned.
    assert record.get("unsettled_calls") == 1 and record["charged_input_tokens"] >= 16 * 500


SNAPSHOT_PRICES = {"scripted": (1.0, 1.0), "scripted-2025-01-01": (40.0, 40.0)}  # a reply may name the dear snapshot
ANSWER = "Found so far: fact A."


def _loops_until_told(messages: Any) -> Any:
    """A child's reply: a tool call on every call, an answer only when asked for its last one."""
    if messages[-1].type == "human" and messages[-1].text == WRAP_UP_PROMPT:
        return ANSWER
    return {"tool_calls": [tool_call("echo", x="again")]}


def test_the_wrap_up_check_prices_a_call_as_its_hold_does(run):
    # The check priced the coming call and its wrap-up at the sent name's price, the hold at the dearest snapshot
    # a reply may name (40x): it saw room for both, the hold found none, and the child ended on an error, unanswered.
    model = ScriptedChatModel(rules=[("go", parent_script(("loop", "looper")))], default=_loops_until_told)
    spec = {"name": "looper", "description": "l", "tools": ["echo"], "max_turns": 200}
    budget = Budget(max_usd=0.5, prices=SNAPSHOT_PRICES)  # the first call and its wrap-up, held at 40x, pass it
    out = run(create_deep_agent(model, [echo], subagents=[spec], settings=DelegationSettings.of(budget=budget)), user("go"), {"recursion_limit": 1000})
    (record,) = records(out)
    assert (record["status"], record["stop_reason"], record["partial"], record["result"]) == (
        "completed", "budget", True, ANSWER)
    assert budget.usd <= budget.max_usd




@pytest.mark.parametrize("mode", ["invoke", "ainvoke"])
def test_the_runs_meter_charges_a_tool_steps_call_and_its_own_under_one_run_id_at_the_dearest(mode):
    # A root tool's call and a root hook's call at once under one run id: the tool step's end was settled by the run
    # id on the run's own meter, taking the hook's call (cheap) for it, so the tool's long answer went at its price.
    prices = {"dear": (100.0, 100.0), "cheap": (0.01, 0.01)}
    budget = Budget(max_usd=1_000.0, prices=prices)
    meter = RunMeter(budget)
    dear = _Streamer(default="", model_name="dear", words=4_000)
    cheap = _Streamer(default="", model_name="cheap")
    rid, in_tools = uuid.uuid4(), {"langgraph_checkpoint_ns": "tools:1"}
    configs = [{"callbacks": [meter], "run_id": rid, "metadata": in_tools}, {"callbacks": [meter], "run_id": rid}]
    if mode == "invoke":  # the tool's stream in a thread of its own, read out while the hook's is open
        hook = cheap.stream(PROMPTS["short"], config=configs[1])
        next(hook)
        thread = threading.Thread(target=lambda: list(dear.stream(PROMPTS["short"], config=configs[0])))
        thread.start()
        thread.join()
        list(hook)
    else:
        async def main() -> None:
            hook = cheap.astream(PROMPTS["short"], config=configs[1])
            await anext(hook)
            await asyncio.create_task(_drain(dear.astream(PROMPTS["short"], config=configs[0])))
            await _drain(hook)

        asyncio.run(main())
    short_in = estimate_tokens(PROMPTS["short"])
    assert budget.reserved == 0 and (meter.model_calls, meter.in_tools.model_calls) == (1, 1)
    # Running at once under one run id, the two ends may be either: both are charged as the dear one.
    dear_cost = cost_at(call_price(prices, "dear"), short_in, 15_000)
    assert budget.usd == pytest.approx(dear_cost + cost_at(call_price(prices, "dear"), short_in, 3))


async def _drain(stream: Any) -> None:
    async for _ in stream:
        pass


@pytest.mark.parametrize("meter_type", [TaskMeter, RunMeter])
@pytest.mark.parametrize("mode", ["invoke", "ainvoke"])
def test_an_end_reported_in_a_context_carrying_another_calls_hold_is_charged_at_the_dearest(mode, meter_type):
    # A cheap call sent, then a dear one under the same run id, its first chunk read in a copied context (a pool's
    # thread, a task), its rest where the cheap one was sent: the dear end, in a context carrying the cheap hold,
    # settled it with the dear reply at the cheap price (a tool asking two models spent $4.02 of a $0.50 budget).
    prices = {"dear": (100.0, 100.0), "cheap": (0.01, 0.01)}
    budget = Budget(max_usd=1_000.0, prices=prices)
    meter = meter_type(budget=budget)
    dear = _Streamer(default="", model_name="dear", words=4_000)
    cheap = _Streamer(default="", model_name="cheap")
    config = {"callbacks": [meter], "run_id": uuid.uuid4()}
    if mode == "invoke":
        first = cheap.stream(PROMPTS["short"], config=config)
        next(first)
        second = dear.stream(PROMPTS["short"], config=config)
        with ContextThreadPoolExecutor(1) as pool:
            pool.submit(next, second).result()
        list(second)
        list(first)
    else:
        async def main() -> None:
            first = cheap.astream(PROMPTS["short"], config=config)
            await anext(first)
            second = dear.astream(PROMPTS["short"], config=config)
            await asyncio.create_task(anext(second))
            await _drain(second)
            await _drain(first)

        asyncio.run(main())
    assert budget.reserved == 0 and meter.model_calls == 2
    assert budget.usd >= cost_at(call_price(prices, "dear"), estimate_tokens(PROMPTS["short"]), 15_000)


def test_a_stream_sent_from_a_task_that_ends_before_it_is_charged_once():
    # Its first chunk read in a short-lived task (asyncio.gather(anext(stream))): it was taken for abandoned as that
    # task ended, charged what it held, then charged again at its real end as a call never seen, at the dearest price.
    prices = {"m": (1.0, 1.0), "dear": (100.0, 100.0)}
    budget = Budget(max_usd=1_000.0, prices=prices)
    model = _Streamer(default="", model_name="m")

    async def main() -> None:
        stream = model.astream(PROMPTS["long"], config={"callbacks": [TaskMeter(budget=budget)]})
        await asyncio.gather(anext(stream))
        await _drain(stream)

    asyncio.run(main())
    # What it held (its model's ratio unlearned) and the default output bound: its report showed no more than that.
    charged = 16 * estimate_tokens(PROMPTS["long"]) + 16_384
    assert budget.reserved == 0 and charged <= budget.tokens <= charged + 10


def test_a_background_task_cancelled_mid_call_records_the_call_as_charged_and_unsettled():
    # Cancelled while its child's call ran, the task's record said cost_usd 0.0 and nothing unsettled: the call's
    # provider, a thread the cancel does not stop, billed it whole.
    gate, sent = threading.Event(), threading.Event()

    class Child(Gated):
        async def _agenerate(self, messages, stop=None, run_manager=None, **kwargs):
            sent.set()
            return await super()._agenerate(messages, stop, run_manager, **kwargs)

    def parent_turn(messages: Any) -> Any:
        last = messages[-1]
        if last.type == "tool" and last.name == "start_async_task":
            sent.wait(60)  # a hang guard only: the child's call is sent
            return {"tool_calls": [tool_call("cancel_async_task", task_id=re.search(r"task (\w+)", last.text)[1])]}
        return "done" if last.type == "tool" else {"tool_calls": [tool_call(
            "start_async_task", description="job " * 500, subagent_type="w")]}

    budget = Budget(max_tokens=10**7, prices={"parent": (0.0, 0.0), "child": (1.0, 1.0)})
    spec = {"name": "w", "description": "w", "model": Child(default="late", model_name="child", gate=gate)}
    agent = create_deep_agent(ScriptedChatModel(model_name="parent", default=parent_turn), [], subagents=[spec],
                              background=True, checkpointer=InMemorySaver(),
                              settings=DelegationSettings.of(budget=budget))
    config = {"configurable": {"thread_id": "t"}}
    try:
        agent.invoke(user("go"), config)
    finally:
        gate.set()
    (record,) = agent.get_state(config).values["async_tasks"].values()
    assert record["status"] == "cancelled" and record.get("unsettled_calls") == 1
    assert record["charged_input_tokens"] >= 500 and record["cost_usd"] > 0
