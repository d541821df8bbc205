"""Every limit at once, on generated runs: parallel children that answer, fail, loop or overrun their
timeout, under a concurrency cap, a shared budget in tokens (tool schemas billed) or dollars, on
``invoke`` and ``ainvoke``, sometimes cancelled from outside.

After every run: the budget is passed by at most one call's output per child; no more children
than the cap ever work at once (an abandoned child counts until its tool returns); every tool
call has its answer; every delegation has a record and a transcript; the parent's state changes
only by the write-back rule (parallel children changing a plain key in place change nothing);
and after a cancellation no child starts another step.
"""

from __future__ import annotations

import asyncio
import json
import math
import threading
import time
import uuid
from typing import Any, NotRequired

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from langchain.agents.middleware import AgentMiddleware, AgentState
from langchain.tools import ToolRuntime
from langchain_core.messages import AIMessage, HumanMessage, ToolMessage
from langchain_core.outputs import ChatGeneration, LLMResult
from langchain_core.tools import StructuredTool

from deep_agent import create_deep_agent
from deep_agent._testing import ScriptedChatModel, tool_call
from subagents import Budget
from subagents._errors import BudgetExceeded
from subagents._metering import TaskMeter
from subagents._outcome import stopped_by_limit
from subagents._settings import DelegationSettings

PRICES = {"scripted": (1000.0, 2000.0)}  # USD per million tokens
CHILD_OUTPUT_TOKENS = 40  # what one child model call outputs, at most (a tool call or a short answer)


class BillingModel(ScriptedChatModel):
    """Bills input as providers do: the messages and the tool schemas sent with the call."""

    def _respond(self, messages: list[Any], tools: Any) -> Any:
        result = super()._respond(messages, tools)
        message = result.generations[0].message
        usage = dict(message.usage_metadata)
        usage["input_tokens"] = (sum(len(m.text) for m in messages) + len(json.dumps(tools or []))) // 4 + 1
        usage["total_tokens"] = usage["input_tokens"] + usage["output_tokens"]
        message.usage_metadata = usage
        return result


class _FactsState(AgentState):
    facts: NotRequired[list[str]]


class _Facts(AgentMiddleware):
    state_schema = _FactsState


class Trace:
    """When each child's tool calls ran (its working span), from outside the library."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.spans: dict[str, list[float]] = {}
        self.starts: list[float] = []
        self.working = 0  # tool calls running now
        self.last = time.monotonic()  # when one last started or ended

    def tools(self) -> list[Any]:
        def work(x: str, runtime: ToolRuntime) -> str:
            """A step of work: changes the shared facts in place, as a careless tool would."""
            span = self._began(x)
            facts = runtime.state.get("facts")
            if isinstance(facts, list):
                facts.append(f"touched by {x}")
            time.sleep(0.02)
            self._ended(span)
            return f"worked on {x}"

        def nap(x: str) -> str:
            """A step longer than its child's timeout."""
            span = self._began(x)
            time.sleep(0.35)
            self._ended(span)
            return "napped"

        def boom(x: str) -> str:
            """Fails."""
            raise ValueError(f"boom in {x}")

        schema_heavy = "Every field of the work item is described here at length. " * 40
        return [StructuredTool.from_function(work, description="A step of work. " + schema_heavy),
                StructuredTool.from_function(nap), StructuredTool.from_function(boom)]

    def _began(self, x: str) -> list[float]:
        start = time.monotonic()
        with self.lock:
            self.starts.append(start)
            self.working += 1
            self.last = start
            return self.spans.setdefault(x, [start, start])

    def _ended(self, span: list[float]) -> None:
        with self.lock:
            self.working -= 1
            self.last = span[1] = max(span[1], time.monotonic())

    def settle(self, quiet_s: float = 0.15, longest_s: float = 30.0) -> None:
        """Until no child works and none began or ended a step for ``quiet_s``: what an abandoned child
        still runs has ended (its longest step is 0.35 s) and a child that went on would have begun again."""
        end = time.monotonic() + longest_s
        while time.monotonic() < end:
            with self.lock:
                if not self.working and time.monotonic() - self.last >= quiet_s:
                    return
            time.sleep(0.01)

    def peak(self) -> int:
        """The most children working at one instant."""
        edges = sorted([(s, 1) for s, _ in self.spans.values()] + [(e, -1) for _, e in self.spans.values()],
                       key=lambda edge: (edge[0], edge[1]))
        running = peak = 0
        for _, step in edges:
            running += step
            peak = max(peak, running)
        return peak


def _child_script(index: int, kind: str) -> list[Any]:
    name = f"c{index}"
    if kind == "answer":
        return [{"tool_calls": [tool_call("work", x=name)]}, f"{name} answered"]
    if kind == "fail":
        return [{"tool_calls": [tool_call("work", x=name)]}, {"tool_calls": [tool_call("boom", x=name)]}, "after"]
    if kind == "overrun":
        return [{"tool_calls": [tool_call("nap", x=name)]}, {"tool_calls": [tool_call("work", x=name)]}, "late"]
    return [{"tool_calls": [tool_call("work", x=name)]} for _ in range(8)] + [f"{name} looped"]  # "loop"


CHILD_KINDS = st.sampled_from(["answer", "fail", "overrun", "loop"])
CASES = st.fixed_dictionaries({
    "kinds": st.lists(CHILD_KINDS, min_size=1, max_size=4),
    "cap": st.sampled_from([None, 1, 2]),
    "budget": st.sampled_from([None, "tokens", "usd"]),
    "limit": st.integers(min_value=1500, max_value=9000),
    "mode": st.sampled_from(["sync", "async"]),
    "cancel_after": st.one_of(st.none(), st.floats(min_value=0.05, max_value=0.4)),
})


@settings(max_examples=40, deadline=None, derandomize=True, suppress_health_check=list(HealthCheck))
@given(case=CASES)
def test_every_limit_holds_on_generated_runs(case: dict[str, Any]) -> None:
    kinds, cap, mode = case["kinds"], case["cap"], case["mode"]
    cancel_after = case["cancel_after"] if mode == "async" else None
    trace = Trace()
    budget = None
    if case["budget"] == "tokens":
        budget = Budget(max_tokens=case["limit"])
    elif case["budget"] == "usd":
        budget = Budget(max_usd=case["limit"] / 1e6 * 2000.0 / 4, prices=PRICES)

    calls = [tool_call("task", description=f"job c{i} .", subagent_type="t" if kind == "overrun" else "w")
             for i, kind in enumerate(kinds)]
    model = BillingModel(
        rules=[(f"job c{i} .", _child_script(i, kind)) for i, kind in enumerate(kinds)]
        + [("go", [{"tool_calls": calls}, "parent done"])],
        default="parent done",
    )
    tools = trace.tools()
    agent = create_deep_agent(
        model, tools, middleware=[_Facts()],
        subagents=[{"name": "w", "description": "works", "tools": ["work", "boom"], "max_turns": 6},
                   {"name": "t", "description": "naps", "tools": ["nap", "work"], "timeout_s": 0.15}],
                   settings=DelegationSettings.of(budget=budget, max_concurrent_tasks=cap),
    )
    inputs = {"messages": [{"role": "user", "content": "go"}], "facts": ["orig"]}
    config = {"recursion_limit": 500}

    out: dict[str, Any] | None = None
    cancelled_at: float | None = None
    if mode == "sync":
        out = agent.invoke(inputs, config)
    else:
        async def main() -> dict[str, Any] | None:
            nonlocal cancelled_at
            running = asyncio.ensure_future(agent.ainvoke(inputs, config))
            if cancel_after is None:
                return await running
            done, _ = await asyncio.wait({running}, timeout=cancel_after)
            if running in done:
                return running.result()
            running.cancel()
            cancelled_at = time.monotonic()
            try:
                await running
            except asyncio.CancelledError:
                return None
            return None

        out = asyncio.run(main())

    trace.settle()

    # running children <= cap at every instant, an abandoned child counting until its tool returns
    if cap is not None:
        assert trace.peak() <= cap, (case, trace.spans)

    # after a cancellation, no child starts another step (one already begun may finish)
    if cancelled_at is not None:
        late = [s for s in trace.starts if s > cancelled_at + 0.3]  # one handed to a thread just before may start
        assert not late, (case, len(late))
        return

    assert out is not None
    messages = out["messages"]
    if budget is not None and not any(isinstance(m, AIMessage) and m.tool_calls for m in messages):
        # Too small for even the parent's first call: its run ended on the limit's message, nothing started.
        assert stopped_by_limit(messages[-1]) == "budget" and not out.get("subagent_tasks"), case
        return
    # every tool call answered
    answered = {m.tool_call_id for m in messages if isinstance(m, ToolMessage)}
    for message in messages:
        if isinstance(message, AIMessage):
            assert all(c["id"] in answered for c in message.tool_calls), (case, message.tool_calls)
    # every delegation has a record and a transcript
    records = list(out.get("subagent_tasks", {}).values())
    task_calls = [c["id"] for m in messages if isinstance(m, AIMessage) for c in m.tool_calls if c["name"] == "task"]
    assert len(task_calls) == len(kinds) and sorted(r["tool_call_id"] for r in records) == sorted(task_calls), case
    assert all(r["transcript"] for r in records), case
    # the parent changes only by the write-back rule: parallel children cannot write a plain key
    if len(kinds) > 1:
        assert out["facts"] == ["orig"], (case, out["facts"])
    # the children's spend <= limit + one call's output per child (the parent's own calls, its last answer
    # once the budget is spent included, are taken out here)
    if budget is not None:
        parent = [m.usage_metadata or {} for m in messages if isinstance(m, AIMessage)]
        if case["budget"] == "tokens":
            own = sum(int(u.get("input_tokens", 0)) + int(u.get("output_tokens", 0)) for u in parent)
            assert budget.tokens - own <= case["limit"] + len(kinds) * CHILD_OUTPUT_TOKENS, case
        else:
            own_usd = sum(u.get("input_tokens", 0) * PRICES["scripted"][0]
                          + u.get("output_tokens", 0) * PRICES["scripted"][1] for u in parent) / 1e6
            one_output = CHILD_OUTPUT_TOKENS * PRICES["scripted"][1] / 1e6
            assert budget.usd - own_usd <= budget.max_usd + len(kinds) * one_output, case



# -- the shared budget against any usage report, on any interleaving of parallel calls ---------------------
#
# Parallel children's model calls start and end in any order, through their meters as LangChain calls
# them, each reporting its usage one way: honestly, not at all, as zeros, as a tokenizer 4x or 16x
# denser than the estimate, or naming another model. After every step what the calls truly cost (as the
# provider bills them, at the price of the model they were sent to) is past the limit by at most one
# call's output per child; the budget holds nothing once every call has ended, and no call to an
# unpriced model was let through under a dollar limit.

USAGES = ["honest", "none", "zero", "denser4x", "denser16x", "renamed", "unpriced"]
ODD_PRICES = {f"m-{usage}": (1000.0, 2000.0) for usage in USAGES if usage != "unpriced"}
DENSITY = {"denser4x": 4.0, "denser16x": 16.0}

INTERLEAVINGS = st.fixed_dictionaries({
    "unit": st.sampled_from(["tokens", "usd"]),
    "limit": st.integers(min_value=2_000, max_value=60_000),
    "children": st.lists(st.tuples(st.sampled_from(USAGES), st.integers(min_value=1, max_value=6),
                                   st.integers(min_value=40, max_value=4_000)), min_size=1, max_size=8),
    "steps": st.lists(st.integers(min_value=0, max_value=7), min_size=0, max_size=120),
})


def _billed(usage: str, prompt_chars: int, text: str) -> list[int]:
    """What the provider truly bills a call: (input, output) tokens at its tokenizer's density."""
    density = DENSITY.get(usage, 1.0)
    return [math.ceil(prompt_chars * density / 4) + 1, math.ceil(len(text) * density / 4) + 1]


def _reply(usage: str, prompt_chars: int, text: str) -> LLMResult:
    message = AIMessage(content=text)
    if usage not in ("none", "zero"):
        tokens = _billed(usage, prompt_chars, text)
        message.usage_metadata = {"input_tokens": tokens[0], "output_tokens": tokens[1], "total_tokens": sum(tokens)}
    elif usage == "zero":
        message.usage_metadata = {"input_tokens": 0, "output_tokens": 0, "total_tokens": 0}
    message.response_metadata = {"model_name": "openai/gpt-4.1" if usage == "renamed" else f"m-{usage}"}
    return LLMResult(generations=[[ChatGeneration(message=message)]])


@settings(max_examples=500, deadline=None, derandomize=True, suppress_health_check=list(HealthCheck))
@given(case=INTERLEAVINGS)
def test_a_shared_budget_holds_on_any_interleaving_of_calls_whatever_their_usage_says(case: dict[str, Any]) -> None:
    limit = case["limit"]
    budget = (Budget(max_tokens=limit) if case["unit"] == "tokens"
              else Budget(max_usd=limit * 1000.0 / 1e6, prices=ODD_PRICES))
    meters = [TaskMeter(budget=budget) for _ in case["children"]]
    left = [calls for _, calls, _ in case["children"]]
    running: dict[int, Any] = {}
    biggest_output = [0.0] * len(meters)
    text = "an answer of some length " * 3
    sent_unpriced = 0
    true_spent = 0.0
    per_token = (1.0, 1.0) if case["unit"] == "tokens" else (1000.0 / 1e6, 2000.0 / 1e6)

    def step(index: int) -> None:
        nonlocal sent_unpriced, true_spent
        usage, _, prompt_chars = case["children"][index]
        meter = meters[index]
        if index in running:
            run_id = running.pop(index)
            meter.on_llm_end(_reply(usage, prompt_chars, text), run_id=run_id)
            billed_in, billed_out = _billed(usage, prompt_chars, text)
            true_spent += billed_in * per_token[0] + billed_out * per_token[1]
            biggest_output[index] = max(biggest_output[index], billed_out * per_token[1])
        elif left[index] > 0:
            left[index] -= 1
            run_id = uuid.uuid4()
            try:
                meter.on_chat_model_start({}, [[HumanMessage("x" * prompt_chars)]], run_id=run_id,
                                          invocation_params={"model": f"m-{usage}"})
            except BudgetExceeded:
                left[index] = 0  # the child stops at a refused call
                return
            sent_unpriced += usage == "unpriced" and case["unit"] == "usd"
            running[index] = run_id

    def spent() -> float:
        return true_spent

    for pick in case["steps"]:
        step(pick % len(meters))
        assert spent() <= (budget.max_tokens or budget.max_usd or 0) + sum(biggest_output) + 1e-9, case
    while running or any(left):  # every child runs to its end, in turn
        for index in range(len(meters)):
            step(index)
            assert spent() <= (budget.max_tokens or budget.max_usd or 0) + sum(biggest_output) + 1e-9, case
    assert budget.reserved == 0 and budget.reserved_usd == pytest.approx(0.0, abs=1e-9), case
    assert sent_unpriced == 0, case
