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
import threading
import time
from typing import Any, NotRequired

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from langchain.agents.middleware import AgentMiddleware, AgentState
from langchain.tools import ToolRuntime
from langchain_core.messages import AIMessage, ToolMessage
from langchain_core.tools import StructuredTool

from deep_agent import create_deep_agent
from deep_agent.testing import ScriptedChatModel, tool_call
from subagents import Budget

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

    def tools(self) -> list[Any]:
        def work(x: str, runtime: ToolRuntime) -> str:
            """A step of work: changes the shared facts in place, as a careless tool would."""
            start = time.monotonic()
            with self.lock:
                self.starts.append(start)
                span = self.spans.setdefault(x, [start, start])
            facts = runtime.state.get("facts")
            if isinstance(facts, list):
                facts.append(f"touched by {x}")
            time.sleep(0.02)
            with self.lock:
                span[1] = max(span[1], time.monotonic())
            return f"worked on {x}"

        def nap(x: str) -> str:
            """A step longer than its child's timeout."""
            start = time.monotonic()
            with self.lock:
                self.starts.append(start)
                span = self.spans.setdefault(x, [start, start])
            time.sleep(0.35)
            with self.lock:
                span[1] = max(span[1], time.monotonic())
            return "napped"

        def boom(x: str) -> str:
            """Fails."""
            raise ValueError(f"boom in {x}")

        schema_heavy = "Every field of the work item is described here at length. " * 40
        return [StructuredTool.from_function(work, description="A step of work. " + schema_heavy),
                StructuredTool.from_function(nap), StructuredTool.from_function(boom)]

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
        model, tools, middleware=[_Facts()], max_concurrent_tasks=cap, budget=budget,
        subagents=[{"name": "w", "description": "works", "tools": ["work", "boom"], "max_turns": 6},
                   {"name": "t", "description": "naps", "tools": ["nap", "work"], "timeout_s": 0.15}],
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

    time.sleep(0.4)  # what an abandoned child still runs has ended by now (its longest step is 0.35 s)

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
    # the children's spend <= limit + one call's output per child (the parent's own calls are counted
    # against the budget but never refused by it: they are taken out here)
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

