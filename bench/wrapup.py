"""Limits end a task with an answer: ``python -m bench --only wrapup``.

Scripted children that loop (a tool call every turn), run slow (a slow tool)
or spend (long replies) run under each limit that can be foreseen: their
``max_turns``, their ``timeout_s``, their own ``max_tokens`` and
``max_budget_per_run``, and a shared ``Budget`` in tokens and in dollars
(four children in parallel), on ``invoke`` and ``ainvoke``. Each child's
model calls a tool whenever tools are offered and answers, from the tool
results it has, when none are: a model can call no tool it is not given.

Two figures per path, with the wrap-up (``ours``) and without it
(``detail.without_wrap_up``: ``wrap_up=False``, every limit an error, as
before; deepagents has no limit of its own to compare, so ``theirs`` is null):

* ``answered``: the share of limit-ended tasks whose ToolMessage carries the
  child's own answer (goal: at least 95%);
* ``overshoot``: the most a shared budget was passed by, in its unit
  (tokens, or millionths of a dollar), over its scenarios; 0 when none was
  passed (goal: no more than without the wrap-up, whose bound is one call's
  output per running call). ``detail.closest`` is how near each came, signed.
"""

from __future__ import annotations

import asyncio
import threading
import time
from typing import Any, cast

from langchain_core.messages import ToolMessage
from langchain_core.runnables import RunnableConfig
from langchain_core.tools import tool
from pydantic import PrivateAttr

from bench.common import record, user
from deep_agent import create_deep_agent
from deep_agent._testing import ScriptedChatModel, tool_call
from subagents import Budget
from subagents._settings import DelegationSettings

NAME = "wrapup"
GOAL_SHARE = 95.0
"""The share of limit-ended tasks (in %) whose ToolMessage must carry the child's own answer."""
FACT = "fact-"
"""What each tool result holds, and what a child's answer repeats: its own words, found by the parent."""
PRICES = {"wrapup-child": (1.0, 1.0), "wrapup-parent": (0.0, 0.0)}
LIMIT_ENDS = frozenset({"max_turns", "timeout", "budget"})


class ToolBoundChild(ScriptedChatModel):
    """Calls its tool while it has tools; with none offered, answers with the facts its tools returned."""

    reply_chars: int = 0
    """Extra characters in each tool call's argument: a child that spends (long replies)."""
    _lock: threading.Lock = PrivateAttr(default_factory=threading.Lock)

    def _respond(self, messages: list[Any], tools: Any) -> Any:
        facts = [m.text for m in messages if isinstance(m, ToolMessage)]
        with self._lock:  # parallel children share the model: its reply is chosen and made as one step
            if tools:
                self.default = {"tool_calls": [tool_call("look", x="more" + "." * self.reply_chars)]}
            else:
                self.default = "Answer from what I found: " + ", ".join(facts or ["nothing yet"])
            return super()._respond(messages, tools)


def _look_tool(sleep_s: float) -> Any:
    counter = iter(range(1_000_000))

    @tool
    def look(x: str) -> str:
        """Look one more thing up."""
        if sleep_s:
            time.sleep(sleep_s)
        return f"{FACT}{next(counter)}"

    return look


def _scenarios(quick: bool, call_tokens: int) -> dict[str, dict[str, Any]]:
    """Scenario -> its child's spec fields, the agent's options, how many children run at once, and the child.

    Token and dollar limits are counted in the child's own calls (``call_tokens``, one call's tokens as
    the stack builds it: deepagents' default stack sends about ten times the prompt this library's own
    does), so each scenario leaves room for a few calls whichever stack ``create_deep_agent`` builds. A
    shared budget also covers the first wave's hold: an unlearned model's call, and the wrap-up it holds
    room for, are held at 16x each (4 children: 128 calls' worth).
    """
    turns, own, shared = (3, 3, 160) if quick else (8, 8, 200)
    usd = 1e-6  # PRICES: a dollar a million tokens
    return {
        "loops under max_turns": {"spec": {"max_turns": turns}},
        "loops under its own max_tokens": {"spec": {"max_tokens": own * call_tokens}},
        "loops under its own max_budget_per_run": {"spec": {"max_budget_per_run": own * call_tokens * usd},
                                                   "options": {"prices": PRICES}},
        "runs slow under timeout_s": {"spec": {"timeout_s": 0.8 if quick else 3.0}, "sleep_s": 0.05 if quick else 0.1,
                                      "latency_s": 0.02},
        "spends a shared token budget": {"budget": lambda: Budget(max_tokens=shared * call_tokens),
                                         "children": 4, "reply_chars": 400},
        "spends a shared dollar budget": {"budget": lambda: Budget(max_usd=shared * call_tokens * usd, prices=PRICES),
                                          "children": 4, "reply_chars": 400},
    }


def _call_tokens() -> int:
    """One call's tokens for the child as the stack builds it, as a budget charges them (a reply reporting
    far fewer tokens than its prompt's estimate is charged the estimate): a run cut at two turns."""
    budget = Budget(max_tokens=10**12)
    state = _run_state({"spec": {"max_turns": 2}}, "invoke", False, budget)
    (record,) = state["subagent_tasks"].values()
    return max(1, int(budget.tokens) // max(1, int(record["model_calls"]) + 2))  # the parent's two calls too


def _run_scenario(shape: dict[str, Any], mode: str, wrap_up: bool) -> tuple[list[bool], float | None]:
    """One run: for each limit-ended task, whether its ToolMessage carries the child's answer; the overshoot."""
    budget = shape["budget"]() if "budget" in shape else None
    state = _run_state(shape, mode, wrap_up, budget)
    records = {r["tool_call_id"]: r for r in state["subagent_tasks"].values()}
    carried = [FACT in m.text and "Answer from what I found" in m.text
               for m in state["messages"] if isinstance(m, ToolMessage)
               if records.get(m.tool_call_id, {}).get("stop_reason") in LIMIT_ENDS]
    overshoot = None
    if budget is not None:
        overshoot = (budget.tokens - budget.max_tokens if budget.max_tokens is not None
                     else (budget.usd - (budget.max_usd or 0.0)) * 1_000_000)
    return carried, overshoot


def _run_state(shape: dict[str, Any], mode: str, wrap_up: bool, budget: Budget | None = None) -> dict[str, Any]:
    children = shape.get("children", 1)
    child = ToolBoundChild(model_name="wrapup-child", reply_chars=shape.get("reply_chars", 0),
                           latency_s=shape.get("latency_s", 0.0))
    calls = [tool_call("task", description=f"job {i}", subagent_type="worker") for i in range(children)]
    parent = ScriptedChatModel(responses=[{"tool_calls": calls}, "done"], model_name="wrapup-parent")
    spec = {"name": "worker", "description": "works", "model": child, "tools": ["look"], "max_turns": 500,
            **shape.get("spec", {})}
    agent = create_deep_agent(parent, [_look_tool(shape.get("sleep_s", 0.0))], subagents=[spec],
                              settings=DelegationSettings.of(budget=budget, wrap_up=wrap_up, general_purpose=False,
                                                             **shape.get("options", {})))
    config: RunnableConfig = {"recursion_limit": 10_000}
    out = agent.invoke(user("go"), config) if mode == "invoke" else asyncio.run(agent.ainvoke(user("go"), config))
    return cast("dict[str, Any]", out)


def run(quick: bool = False) -> list[dict[str, Any]]:
    call_tokens = _call_tokens()
    scenarios = _scenarios(quick, call_tokens)
    sizes = {"scenarios": list(scenarios), "children_on_shared_budgets": 4, "child_call_tokens": call_tokens}
    out = []
    for mode in ("invoke", "ainvoke"):
        answered: dict[bool, list[bool]] = {True: [], False: []}
        closest: dict[bool, float] = {True: float("-inf"), False: float("-inf")}
        missed: list[str] = []
        for name, shape in scenarios.items():
            for wrap_up in (True, False):
                carried, past = _run_scenario(shape, mode, wrap_up)
                answered[wrap_up] += carried
                if past is not None:
                    closest[wrap_up] = max(closest[wrap_up], past)
                if wrap_up and not all(carried):
                    missed.append(f"{name}: {carried.count(False)} of {len(carried)}")
        share = {w: 100.0 * sum(v) / len(v) if v else 0.0 for w, v in answered.items()}
        notes = (f"without_wrap_up: the same children with wrap_up=False. {len(answered[True])} limit-ended tasks "
                 f"with the wrap-up, {len(answered[False])} without." + (f" Without an answer: {'; '.join(missed)}."
                                                                         if missed else ""))
        out.append(record(f"{NAME}.{mode}.answered", unit="% of limit-ended tasks", ours=share[True], theirs=None,
                          goal=f"ours >= {GOAL_SHARE:g}%", met=share[True] >= GOAL_SHARE, sizes=sizes, notes=notes,
                          detail={"without_wrap_up": share[False]}))
        worst = {w: max(0.0, c) for w, c in closest.items()}
        out.append(record(f"{NAME}.{mode}.overshoot", unit="past a shared limit (tokens or micro-USD)",
                          ours=worst[True], theirs=None, goal="ours <= without the wrap-up (the bound unchanged)",
                          met=worst[True] <= worst[False], sizes=sizes,
                          notes="the most any shared budget was passed by (0: none was)",
                          detail={"without_wrap_up": worst[False], "closest": closest[True],
                                  "closest_without_wrap_up": closest[False]}))
    return out
