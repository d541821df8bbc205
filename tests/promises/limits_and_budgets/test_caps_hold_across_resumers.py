"""A child paused for approval keeps what it spent whoever resumes it: another agent object on the same
checkpointer (a new process, another server worker) continues its counts, as the one that paused it would."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from helpers.billing import BillingModel
from helpers.graphs import call, checkpointer, records, user
from langchain.agents.middleware import AgentMiddleware
from langchain_core.messages import AIMessage
from langchain_core.tools import StructuredTool, tool
from langgraph.types import Command

from deep_agent import create_deep_agent
from deep_agent._testing import ScriptedChatModel, tool_call
from subagents._settings import DelegationSettings


@tool
def lookup(q: str) -> str:
    """Look something up (needs approval)."""
    return "a fact"


def _resumed(mode: str, tmp_path: Any, spec: dict[str, Any], *, kind: str = "memory", thread: str = "t",
             description: str = "dig", prices: dict[str, Any] | None = None) -> dict[str, Any]:
    """The record of a child (``spec``: its model and limits) whose every approval pause a new agent object resumes."""
    def build(saver: Any) -> Any:
        parent = ScriptedChatModel(responses=[{"tool_calls": [tool_call("task", description=description,
                                                                        subagent_type="r")]}], default="done")
        specs = [{"name": "r", "description": "r", "tools": ["lookup"], "wrap_up": False,
                  "interrupt_on": {"lookup": True}, **spec}]
        return create_deep_agent(parent, [lookup], subagents=specs, checkpointer=saver,
                                 settings=DelegationSettings.of(prices=prices))

    async def go() -> dict[str, Any]:
        config = {"configurable": {"thread_id": thread}}
        async with checkpointer(kind, mode, tmp_path) as saver:
            out = await call(mode, build(saver), user("go"), config)
            for _ in range(12):
                if "__interrupt__" not in out:
                    break
                out = await call(mode, build(saver), Command(resume={"decisions": [{"type": "approve"}]}), config)
        assert "__interrupt__" not in out
        (record,) = records(out)
        return record

    return asyncio.run(go())


@pytest.mark.parametrize("kind", ["memory", "sqlite"])
@pytest.mark.parametrize("mode", ["sync", "async"])
def test_caps_and_the_record_hold_when_a_new_agent_object_resumes_each_pause(kind, mode, tmp_path):
    # Each resume by a new agent object started max_turns and max_tokens from zero: a child that never stops
    # asking made a call per resume, and its record counted only the last segment's calls.
    # Its replies name a deployment, not the model they were sent to: what the checkpoint says of a call's
    # model is no price, and an unpriced recovered call was charged $0.
    child = ScriptedChatModel(default={"tool_calls": [tool_call("lookup", q="t")],
                                       "response_metadata": {"model_name": "my-deployment"}})

    def go(limits: dict[str, Any], thread: str) -> dict[str, Any]:
        return _resumed(mode, tmp_path, {"model": child, **limits}, kind=kind, thread=thread,
                        prices={"scripted": (1000.0, 1000.0)})

    record = go({"max_turns": 3}, "turns")
    assert (record["stop_reason"], record["model_calls"], len(child.calls)) == ("max_turns", 3, 3)
    child.calls.clear()
    record = go({"max_turns": 50, "max_tokens": 250}, "tokens")
    assert record["stop_reason"] == "budget" and record["model_calls"] == len(child.calls) < 12
    child.calls.clear()
    record = go({"max_turns": 50, "max_budget_per_run": 0.5}, "dollars")
    assert record["stop_reason"] == "budget" and record["model_calls"] == len(child.calls) < 12


def _named_cheap(messages: Any) -> AIMessage:
    """A lookup call whose reply names a cheap model, whatever it was sent to."""
    turn = sum(isinstance(m, AIMessage) for m in messages)
    return AIMessage("", tool_calls=[{"name": "lookup", "args": {"q": "t"}, "id": f"c{turn}", "type": "tool_call"}],
                     response_metadata={"model_name": "cheap"})


@pytest.mark.parametrize("mode", ["sync", "async"])
def test_a_call_read_back_from_the_checkpoint_is_not_priced_by_its_replys_name(mode, tmp_path):
    # Its reply's name, if priced, was its price: replies naming a model priced 100,000x cheaper than the one
    # they were sent to were recovered at that price, and a new agent object per resume passed a $0.50 cap.
    child = ScriptedChatModel(default=_named_cheap)
    record = _resumed(mode, tmp_path, {"model": child, "max_turns": 50, "max_budget_per_run": 0.5},
                      description="dig " * 1500, prices={"scripted": (100.0, 100.0), "cheap": (0.001, 0.001)})
    assert record["stop_reason"] == "budget" and record["model_calls"] == len(child.calls) <= 3
    assert "cheap" not in record["priced_as"]


MANUAL = StructuredTool.from_function(lambda: "", name="manual", description="rule " * 8_000)  # ~10,000 tokens


class _HouseRules(AgentMiddleware):
    """Adds ~10,000 tokens of rules to every prompt, as a skills block or a policy middleware does."""

    def wrap_model_call(self, request, handler):
        return handler(request.override(system_prompt=f"{request.system_prompt or ''}\n{'rule ' * 8_000}"))

    async def awrap_model_call(self, request, handler):
        return await handler(request.override(system_prompt=f"{request.system_prompt or ''}\n{'rule ' * 8_000}"))


@pytest.mark.parametrize("prefix", [{"system_prompt": "rule " * 8_000}, {"tools": ["lookup", MANUAL]},
                                    {"middleware": [_HouseRules()]}],
                         ids=["system prompt", "tool schemas", "a middleware's prompt"])
@pytest.mark.parametrize("mode", ["sync", "async"])
def test_a_call_read_back_from_the_checkpoint_is_charged_its_system_prompt_and_tool_schemas(mode, prefix, tmp_path):
    # The checkpoint holds neither: each call read back was charged its messages alone, so a child whose calls
    # are mostly a ~10,000-token system prompt or tool schemas counted 24 tokens for three calls; then what a
    # middleware adds (a skills block) was left out still. Its reports are far below its prompts: each call is
    # charged the estimate it was sent with.
    child = BillingModel(default={"tool_calls": [tool_call("lookup", q="t")]}, density=0.001)
    record = _resumed(mode, tmp_path, {"model": child, "max_turns": 3, **prefix})
    assert record["model_calls"] == len(child.calls) == 3
    assert record["charged_input_tokens"] >= 3 * 10_000, record["charged_input_tokens"]


class _OlderCheckpoint(AgentMiddleware):
    """Takes the price key off each reply once the meter wrote it, as a checkpoint written before holds none."""

    def wrap_model_call(self, request, handler):
        return self._unpriced(handler(request))

    async def awrap_model_call(self, request, handler):
        return self._unpriced(await handler(request))

    @staticmethod
    def _unpriced(response):
        for message in response.result:
            message.response_metadata.pop("priced_as", None)
        return response


@pytest.mark.parametrize("mode", ["sync", "async"])
@pytest.mark.parametrize("older", [False, True], ids=["priced when sent", "an older checkpoint"])
def test_a_call_read_back_from_the_checkpoint_is_charged_at_the_price_it_was_sent_at(mode, older, tmp_path):
    # Read back, each call was charged at the table's dearest price, 1000x the one it was sent at. Its reply's
    # own price key (a cheap model's) is no price: the meter writes the one it used over it. A reply without
    # one (a checkpoint written before) is charged at the dearest, as its sent model is not known.
    child = ScriptedChatModel(default={"tool_calls": [tool_call("lookup", q="t")],
                                       "response_metadata": {"priced_as": "cheap"}})
    prices = {"scripted": (1.0, 1.0), "dear": (1000.0, 1000.0), "cheap": (0.001, 0.001)}
    spec = {"model": child, "max_turns": 3, "middleware": [_OlderCheckpoint()] if older else []}
    record = _resumed(mode, tmp_path, spec, prices=prices)
    assert record["model_calls"] == len(child.calls) == 3
    charged = record["charged_input_tokens"] + record["charged_output_tokens"]
    priced_as = "dear" if older else "scripted"  # each call is read back by the agent object resuming the next pause
    assert record["priced_as"] == [priced_as]
    assert record["cost_usd"] == pytest.approx(charged * prices[priced_as][0] / 1e6, abs=1e-6)


class _ForgedEstimate(AgentMiddleware):
    """Puts a tiny estimate on each reply once the meter wrote its own, as a key the meter never wrote would say."""

    def wrap_model_call(self, request, handler):
        return self._forged(handler(request))

    async def awrap_model_call(self, request, handler):
        return self._forged(await handler(request))

    @staticmethod
    def _forged(response):
        for message in response.result:
            message.response_metadata["estimated_input_tokens"] = 1
        return response


@pytest.mark.parametrize("mode", ["sync", "async"])
def test_a_read_back_estimate_is_never_below_the_conversations_own(mode, tmp_path):
    # A reply's estimate key lowered the plausibility check below what its own conversation shows: a read-back
    # call reporting next to nothing was charged 1 token for a ~2,500-token task description.
    child = BillingModel(default={"tool_calls": [tool_call("lookup", q="t")]}, density=0.001)
    record = _resumed(mode, tmp_path, {"model": child, "max_turns": 3, "middleware": [_ForgedEstimate()]},
                      description="dig " * 2_500)
    assert record["model_calls"] == len(child.calls) == 3
    assert record["charged_input_tokens"] >= 3 * 2_500, record["charged_input_tokens"]
