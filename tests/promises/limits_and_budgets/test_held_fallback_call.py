"""A sync-only fallback model's call, abandoned at timeout_s on ainvoke, keeps the task's place and is charged."""
from __future__ import annotations

import asyncio
from typing import Any

from helpers.sync_only_model import STATE, SyncOnlyModel, wait_until_idle
from langchain.agents.middleware import ModelFallbackMiddleware
from langchain_core.messages import HumanMessage

from deep_agent import create_deep_agent
from deep_agent._testing import ScriptedChatModel, tool_call
from subagents import Budget
from subagents._settings import DelegationSettings


class ProviderDown(ScriptedChatModel):
    """An async primary model whose provider is down: every call fails, so the fallback answers."""

    def _generate(self, *args: Any, **kwargs: Any) -> Any:
        raise RuntimeError("provider down")

    async def _agenerate(self, *args: Any, **kwargs: Any) -> Any:
        raise RuntimeError("provider down")


def test_a_fallback_call_on_a_thread_keeps_the_place_and_is_charged() -> None:
    # The child's own model is async, so only its fallback runs on a thread: before, the child got no
    # hold on such calls, so two ran at once under a cap of 1 and the abandoned one was never charged.
    STATE.update(running=0, peak=0, calls=0)
    parent = ScriptedChatModel(
        responses=[{"tool_calls": [tool_call("task", description=f"job {i}", subagent_type="w") for i in range(2)]}],
        default="done",
    )
    budget = Budget(max_tokens=10**9)
    specs = [{"name": "w", "description": "worker", "model": ProviderDown(default="x"), "timeout_s": 0.5,
              "middleware": [ModelFallbackMiddleware(SyncOnlyModel(default="an answer"))]}]
    agent = create_deep_agent(parent, subagents=specs, settings=DelegationSettings.of(
        budget=budget, max_concurrent_tasks=1,
    ))
    out = asyncio.run(agent.ainvoke({"messages": [HumanMessage("go")]}))
    records = out["subagent_tasks"]
    stops = [r["stop_reason"] for r in (records.values() if isinstance(records, dict) else records)]
    assert stops.count("timeout") == 1
    wait_until_idle()
    assert STATE["peak"] == 1
    assert budget.tokens >= 10_000 * STATE["calls"] == 20_000
