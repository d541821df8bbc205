"""Each model call's hold is made once, as it is sent, and its end settles that hold: never another call's.

A call's end is told by its hold, carried in the context that sent it, never by the name its reply gives nor
by its run id alone (a config reused for calls at once shares one). Where LangChain tells the meter nothing
more (streams of one thread or task under one run id), their ends are charged alike: as the dearest of them.
The wrap-up check prices a call as its hold will, and a task's record counts a call it left running as
unsettled only if a report may still come.
"""

from __future__ import annotations

import asyncio
import threading
import uuid
from typing import Any

import pytest
from helpers.graphs import echo, parent_script, records, user
from langchain_core.messages import AIMessageChunk
from langchain_core.outputs import ChatGenerationChunk

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


class _Gated(ScriptedChatModel):
    """Answers once ``gate`` is set."""

    gate: Any = None

    def _generate(self, messages, stop=None, run_manager=None, **kwargs):
        self.gate.wait(60)  # a hang guard only: the test opens the gate
        return super()._generate(messages, stop, run_manager, **kwargs)

    async def _agenerate(self, messages, stop=None, run_manager=None, **kwargs):
        while not self.gate.is_set():
            await asyncio.sleep(0.01)
        return await super()._agenerate(messages, stop, run_manager, **kwargs)


def test_a_call_cancelled_with_its_task_is_not_named_unsettled_one_left_running_is(run):
    # On ainvoke the timed-out child's call is cancelled with its task: nothing more can come of it, yet its record
    # said a later report could charge the budget more. On invoke it runs on in the abandoned thread: one may.
    gate = threading.Event()
    child = _Gated(default="late answer", model_name="child", gate=gate)
    parent = ScriptedChatModel(model_name="parent", responses=parent_script(("job " * 500, "w")))
    budget = Budget(max_tokens=10**7)
    spec = {"name": "w", "description": "w", "model": child, "timeout_s": 1.0}
    try:
        out = run(create_deep_agent(parent, [], subagents=[spec], settings=DelegationSettings.of(budget=budget)), user("go"))
    finally:
        gate.set()
    (record,) = records(out)
    assert record["stop_reason"] == "timeout"
    assert record.get("unsettled_calls") == (1 if run.mode == "sync" else None)


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
def test_the_runs_meter_settles_a_tool_steps_call_and_its_own_by_their_holds_under_one_run_id(mode):
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
    dear_cost = cost_at(call_price(prices, "dear"), short_in, 15_000)
    if mode == "invoke":  # a thread's context is its own: each end is told by its hold
        assert budget.usd == pytest.approx(dear_cost + cost_at(call_price(prices, "cheap"), short_in, 3))
    else:  # the tool's task copied a context carrying the hook's hold: both ends may be either, charged as the dear
        assert budget.usd == pytest.approx(dear_cost + cost_at(call_price(prices, "dear"), short_in, 3))


async def _drain(stream: Any) -> None:
    async for _ in stream:
        pass
