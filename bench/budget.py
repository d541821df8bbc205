"""A shared budget against the usage reports it is given: 8 parallel children loop until it stops them.

Each child's model answers every turn with another tool call, so only the
budget ends the run. The children's model reports its usage one way per
row: honestly (four characters a token), not at all, as zeros, as a
tokenizer 4x or 16x denser, or (under a dollar limit) naming itself
``openai/<model>``, a name the price table does not hold. The children run
a model of their own, so their first parallel wave meets a model whose
tokenizer the budget has not learned yet; but in the ``cjk`` row they run
the parent's model, whose ratio the parent's English prompt taught, on
Chinese text billed at a token a character.

``ours`` is the tree's spend over the limit (the parent's last answer
included); the goal is the documented bound: the limit, plus one call's
output per running child, plus the parent's one last answer once the budget
is spent. deepagents has no shared budget, so there is no peer figure.
"""

from __future__ import annotations

import asyncio
import json
import math
import time
from typing import Any, Literal

from langchain_core.messages import AIMessage
from langchain_core.runnables import RunnableConfig
from pydantic import Field

from bench.common import record
from deep_agent import create_deep_agent
from deep_agent._testing import ScriptedChatModel, tool_call
from subagents import Budget
from subagents._settings import DelegationSettings

NAME = "budget"
CHILDREN = 8
PARENT_SHARE = 3_000
"""Tokens of the limit the parent's own calls take (its prompt is about 1,000 tokens)."""
ROWS: dict[str, dict[str, Any]] = {
    "honest": {"usage": "honest", "density": 1.0},
    "absent": {"usage": "absent", "density": 1.0},
    "zero": {"usage": "zero", "density": 1.0},
    "denser4x": {"usage": "honest", "density": 4.0},
    "denser16x": {"usage": "honest", "density": 16.0},
    "renamed": {"usage": "honest", "density": 1.0, "reply_name": "openai/child-model", "usd": True},
    # The children run the parent's model, whose ratio the parent's English prompt taught, on Chinese text
    # billed at a token a character (as common tokenizers bill it).
    "cjk": {"usage": "honest", "density": 1.0, "wide": 1.0, "model": "parent-model",
            "text": "请仔细地循环调用工具。" * 500},
}
PRICES = {"parent-model": (1000.0, 2000.0), "child-model": (1000.0, 2000.0)}  # USD per million tokens


class BillingModel(ScriptedChatModel):
    """A scripted model that reports usage as a provider would, or as a broken one does.

    ``density``: tokens per four characters, as the provider's tokenizer
    counts them (4.0: a tokenizer 4x denser than the estimate); the prompt
    is billed with its tool schemas. ``usage``: ``"honest"``, ``"absent"``
    (no usage at all) or ``"zero"`` (a usage of zeros). ``reply_name``: the
    model name the reply gives (``""``: none).
    """

    density: float = 1.0
    wide: float | None = None
    """Tokens billed for each non-ASCII character (``None``: as ASCII, at ``density``)."""
    usage: Literal["honest", "absent", "zero"] = "honest"
    reply_name: str | None = None
    watch: Any = None
    """A budget whose spend is noted when the model is called with no tools (the parent's last answer)."""
    spent_before_answer: float | None = None
    billed: list[tuple[int, int]] = Field(default_factory=list)
    """The (input, output) tokens each call reported, in order."""

    def _respond(self, messages: list[Any], tools: Any) -> Any:
        if self.watch is not None and not tools and self.spent_before_answer is None:
            self.spent_before_answer = self.watch.usd if self.watch.max_usd is not None else self.watch.tokens
        result = super()._respond(messages, tools)
        message = result.generations[0].message
        assert isinstance(message, AIMessage)  # the scripted model's replies are AI messages
        if self.usage == "absent":
            message.usage_metadata = None
        else:
            # The prompt as billed: its texts, the tool calls in it (name and arguments), the tool schemas.
            prompt = "".join(m.text + "".join(c["name"] + json.dumps(c["args"], ensure_ascii=False)
                                              for c in getattr(m, "tool_calls", None) or ()) for m in messages)
            prompt += json.dumps(tools or [])
            reply = message.text + json.dumps(message.tool_calls)
            billed = [0, 0] if self.usage == "zero" else [self._tokens(text) for text in (prompt, reply)]
            message.usage_metadata = {"input_tokens": billed[0], "output_tokens": billed[1],
                                      "total_tokens": sum(billed)}
            self.billed.append((billed[0], billed[1]))
        if self.reply_name is not None:
            message.response_metadata = {**message.response_metadata, "model_name": self.reply_name or None}
        return result


    def _tokens(self, text: str) -> int:
        wide = 0 if self.wide is None else sum(not char.isascii() for char in text)
        return math.ceil((len(text) - wide) * self.density / 4 + wide * (self.wide or 0)) + 1


def _noop(x: str) -> str:
    """Do nothing."""
    return x


def run_row(row: str, mode: str, *, children: int = CHILDREN, limit_tokens: int = 2_000) -> dict[str, Any]:
    """One run: the budget, the tree's spend, and the bound it must keep (in the budget's unit)."""
    shape = ROWS[row]
    density = shape["density"]
    usd = bool(shape.get("usd"))
    # The parent bills honestly: its share is fixed (a few of its calls). The children's share is the same
    # in every row, room for a few of their calls at the densest tokenizer.
    limit = PARENT_SHARE + limit_tokens * 16
    budget = (Budget(max_usd=limit * PRICES["child-model"][0] / 1e6, prices=PRICES) if usd
              else Budget(max_tokens=math.ceil(limit)))
    # A little latency, so the children's calls overlap as a provider's do (a first wave in flight together).
    child = BillingModel(default={"tool_calls": [tool_call("_noop", x="again")]},
                         model_name=shape.get("model", "child-model"), density=density, wide=shape.get("wide"),
                         usage=shape["usage"], reply_name=shape.get("reply_name"), latency_s=0.005)
    parent = BillingModel(
        rules=[("go", [{"tool_calls": [tool_call("task", description=f"loop {i}", subagent_type="looper")
                                       for i in range(children)]}, "parent done"])],
        default="parent done", model_name="parent-model",
    )
    # A long prompt and a short reply, as most calls are: a misestimated prompt is what can pass a limit.
    spec = {"name": "looper", "description": "loops", "model": child, "tools": ["_noop"], "max_turns": 10_000,
            "system_prompt": shape.get("text", "Loop on the tool, with care. " * 80)}
    parent.watch = budget
    # This library's own stack: deepagents' adds ~2k tokens of file-tool schemas to each child's prompt, whose
    # 16x hold on a new model does not fit the children's share, so the first wave would only wrap up.
    agent = create_deep_agent(parent, [_noop], subagents=[spec], settings=DelegationSettings.of(
        budget=budget, max_concurrent_tasks=children, deepagents_stack=False,
    ))
    inputs = {"messages": [{"role": "user", "content": "go"}]}
    config: RunnableConfig = {"recursion_limit": 100_000}
    began = time.perf_counter()
    state = agent.invoke(inputs, config) if mode == "invoke" else asyncio.run(agent.ainvoke(inputs, config))
    seconds = time.perf_counter() - began
    records = list(state["subagent_tasks"].values())
    usd_per_output = PRICES["child-model"][1] / 1e6
    # One call's output, charged: every looping call of a child is the same tool call.
    output = max((math.ceil(r["charged_output_tokens"] / r["model_calls"]) for r in records if r["model_calls"]),
                 default=0)
    spent = budget.usd if usd else budget.tokens
    before = parent.spent_before_answer if parent.spent_before_answer is not None else spent
    overshoot_allowed = children * output * (usd_per_output if usd else 1)
    return {"spent": spent, "limit": budget.max_usd if usd else budget.max_tokens, "before_answer": before,
            "allowed": overshoot_allowed, "seconds": seconds, "records": records}


def run(quick: bool) -> list[dict[str, Any]]:
    sizes = {"children": 3 if quick else CHILDREN, "children_share_at_16x": 1_000 if quick else 2_000}
    out: list[dict[str, Any]] = []
    for row in ROWS:
        for mode in ("invoke", "ainvoke"):
            got = run_row(row, mode, children=sizes["children"], limit_tokens=sizes["children_share_at_16x"])
            last_answer = got["spent"] - got["before_answer"]
            bound = got["limit"] + got["allowed"] + last_answer
            out.append(record(
                f"{NAME}.{row}.{mode}",
                unit="tree spend / limit",
                ours=got["spent"] / got["limit"],
                theirs=None,
                goal=f"<= {bound / got['limit']:.3f}: the limit, one call's output per child, the parent's last answer",
                met=got["spent"] <= bound,
                sizes={**sizes, "usage": row},
                notes="deepagents has no shared budget",
                detail={"spent": got["spent"], "limit": got["limit"], "last_answer": last_answer,
                        "seconds": round(got["seconds"], 3),
                        "children_stopped": sum(r["stop_reason"] == "budget" for r in got["records"])},
            ))
    return out
