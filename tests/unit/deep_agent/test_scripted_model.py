"""The public scripted chat model: tool calling, rules, latency, usage, determinism."""

from __future__ import annotations

import asyncio
import time
from concurrent.futures import ThreadPoolExecutor
from types import SimpleNamespace

import pytest
from langchain_core.messages import AIMessage, HumanMessage
from langchain_core.tools import tool

from deep_agent._testing import ScriptExhausted, ScriptedChatModel, tool_call

pytestmark = pytest.mark.busy  # .ci/run runs it again with every core hogged


@tool
def search(q: str) -> str:
    """Search."""
    return q


def test_binds_tools_and_emits_tool_calls_with_usage():
    model = ScriptedChatModel(responses=[{"tool_calls": [tool_call("search", q="x")]}, "done"])
    bound = model.bind_tools([search])
    first = bound.invoke([HumanMessage("hi")])
    assert first.tool_calls[0]["name"] == "search" and first.tool_calls[0]["args"] == {"q": "x"}
    assert first.tool_calls[0]["id"]
    assert first.usage_metadata["input_tokens"] > 0 and first.usage_metadata["output_tokens"] > 0
    assert model.calls[0]["tools"] == ["search"]
    second = bound.invoke([HumanMessage("hi"), first])
    assert second.content == "done"


def test_rules_pick_a_script_by_the_last_human_message():
    model = ScriptedChatModel(rules=[("alpha", ["A"]), (lambda p: p.endswith("!"), ["BANG"])], default="D")
    assert model.invoke("tell me alpha").content == "A"
    assert model.invoke("hey!").content == "BANG"
    assert model.invoke("other").content == "D"


def test_exhausted_script_raises_and_exceptions_are_raised():
    with pytest.raises(ScriptExhausted):
        ScriptedChatModel(responses=[]).invoke("x")
    with pytest.raises(ConnectionError, match="down"):
        ScriptedChatModel(responses=[ConnectionError("down")]).invoke("x")


def test_callable_replies_see_the_messages():
    model = ScriptedChatModel(responses=[lambda msgs: f"saw {len(msgs)}"])
    assert model.invoke([HumanMessage("a")]).content == "saw 1"


def test_latency_on_both_paths(monkeypatch):
    model = ScriptedChatModel(default="x", latency_s=0.3)
    for call in (lambda: model.invoke("a"), lambda: asyncio.run(model.ainvoke("b"))):
        t = time.monotonic()
        call()
        assert time.monotonic() - t >= 0.3

    # Concurrent async calls wait out their latency together: the third to fall asleep wakes all three. Calls
    # that waited in turn (or blocked the loop) never would: the hang guard, not a budget, catches that.
    asleep, all_in = [], asyncio.Event()

    async def sleep(seconds: float) -> None:
        asleep.append(seconds)
        if len(asleep) == 3:
            all_in.set()
        await all_in.wait()

    monkeypatch.setattr("deep_agent._testing.asyncio", SimpleNamespace(sleep=sleep))

    async def three():
        await asyncio.wait_for(asyncio.gather(*(model.ainvoke(f"{i}") for i in range(3))), 60)

    asyncio.run(three())
    assert asleep == [0.3] * 3


def test_deterministic_when_shared_by_parallel_conversations():
    model = ScriptedChatModel(rules=[(f"<job {i}>", [f"answer {i}"]) for i in range(20)], latency_s=0.01)

    def ask(i):
        return model.invoke([HumanMessage(f"<job {i}>")]).content

    with ThreadPoolExecutor(8) as pool:
        answers = list(pool.map(ask, range(20)))
    assert answers == [f"answer {i}" for i in range(20)]


def test_turn_counts_ai_messages_since_the_last_human_message():
    model = ScriptedChatModel(responses=["first", "second"])
    history = [HumanMessage("q1"), AIMessage("first"), HumanMessage("q2")]
    assert model.invoke(history).content == "first"
    assert model.invoke([*history, AIMessage("first")]).content == "second"
