"""Shared budget overshoot: 10 parallel children loop until a shared token budget stops them.

Each child's model answers every turn with another tool call, so only the
budget ends the run. Prompts are reserved before each model call, so the
overshoot should be at most one call's output per running child; "ours" is
tokens the tree spent past the limit before the parent's closing answer, and the goal is that bound (deepagents has no
shared budget, so there is no peer figure).
"""

from __future__ import annotations

import asyncio
import time
from typing import Any

from langchain_core.runnables import RunnableConfig

from bench.common import record
from deep_agent import create_deep_agent
from deep_agent.testing import ScriptedChatModel, tool_call
from subagents import Budget

NAME = "budget"


def _noop(x: str) -> str:
    """Do nothing."""
    return x


def run(quick: bool) -> list[dict[str, Any]]:
    sizes = {"children": 3 if quick else 10, "max_tokens": 1500 if quick else 20_000}
    out: list[dict[str, Any]] = []
    for mode in ("invoke", "ainvoke"):
        budget = Budget(max_tokens=sizes["max_tokens"])
        loop_call = {"tool_calls": [tool_call("_noop", x="again")]}
        model = ScriptedChatModel(
            rules=[("go", [{"tool_calls": [tool_call("task", description=f"loop {i}", subagent_type="general-purpose")
                                           for i in range(sizes["children"])]}, "parent done"])],
            default=loop_call,
            latency_s=0.002,
        )
        agent = create_deep_agent(model, [_noop], budget=budget)
        inputs = {"messages": [{"role": "user", "content": "go"}]}
        config: RunnableConfig = {"recursion_limit": 100_000}
        began = time.perf_counter()
        state = agent.invoke(inputs, config) if mode == "invoke" else asyncio.run(agent.ainvoke(inputs, config))
        seconds = time.perf_counter() - began
        records = list(state["subagent_tasks"].values())
        biggest_output = max(
            ((m.usage_metadata or {}).get("output_tokens", 0) for m in model_outputs(model)
             if [c["name"] for c in m.tool_calls] == ["_noop"]), default=0)
        bound = sizes["children"] * biggest_output
        # The parent may still answer once the budget is spent; its last call is not the children's.
        last = state["messages"][-1]
        overshoot = budget.tokens - (last.usage_metadata or {}).get("total_tokens", 0) - sizes["max_tokens"]
        out.append(record(
            f"{NAME}.{mode}.overshoot",
            unit="tokens past the limit",
            ours=float(overshoot),
            theirs=None,
            goal=f"<= one call's output per running child ({bound} tokens)",
            met=overshoot <= bound,
            sizes=sizes,
            notes="deepagents has no shared budget",
            detail={"spent": budget.tokens, "children_stopped": sum(r["stop_reason"] == "budget" for r in records),
                    "seconds": seconds},
        ))
    return out


def model_outputs(model: ScriptedChatModel) -> list[Any]:
    """The AI messages the scripted model produced, as later requests carried them."""
    from langchain_core.messages import AIMessage

    produced: list[AIMessage] = []
    for call in model.calls:
        produced.extend(m for m in call["messages"] if isinstance(m, AIMessage))
    return produced
