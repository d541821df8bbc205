"""A call abandoned mid-way is charged the most output it may write: its provider may go on, billing it unseen."""

from __future__ import annotations

import asyncio
import functools
import threading
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest
from helpers.graphs import user
from langchain_core.messages import AIMessage
from langchain_core.outputs import ChatGeneration, ChatResult

from deep_agent import create_deep_agent
from deep_agent._testing import ScriptedChatModel, tool_call
from subagents import Budget, DelegationSettings

PRICES = {"dear": (0.1, 100.0), "scripted": (0.0, 0.0)}
CAP = 5_000  # the child model's max_tokens: $0.50 of output at its price
DEFAULT_BOUND = 16_384  # an abandoned call's output, charged when no cap is known (docs/ledger-and-budgets.md)
CAP_USD = CAP * PRICES["dear"][1] / 1_000_000


class _ThreadedSdk(ScriptedChatModel):
    """A provider SDK that is sync only, its async path a thread (a common wrapper): cancelling the child stops
    only the side awaiting it. Each call waits until the test ends, then bills its whole output cap."""

    max_tokens: int | None = CAP
    billed: Any = None  # an event per call, set as the test ends

    @property
    def _identifying_params(self) -> dict[str, Any]:  # in the parameters its calls are sent with, as a provider's
        return {"model_name": self.model_name, **({"max_tokens": self.max_tokens} if self.max_tokens else {})}

    def _generate(self, messages, stop=None, run_manager=None, **kwargs):
        self.billed.append(released := threading.Event())
        released.wait(60)  # a hang guard only
        usage = {"input_tokens": 3_000, "output_tokens": CAP, "total_tokens": 3_000 + CAP}
        return ChatResult(generations=[ChatGeneration(message=AIMessage("q", usage_metadata=usage))])

    async def _agenerate(self, messages, stop=None, run_manager=None, **kwargs):
        # Its own threads, as asyncio.to_thread's, but that asyncio.run does not wait for before the test opens them.
        call = functools.partial(self._generate, messages, stop, None, **kwargs)
        return await asyncio.get_running_loop().run_in_executor(_SDK_THREADS, call)


_SDK_THREADS = ThreadPoolExecutor(max_workers=8)


@pytest.mark.parametrize("cap", [CAP, None], ids=["max_tokens", "no cap"])
def test_a_child_timing_out_mid_call_is_charged_its_output_cap_so_the_budget_refuses_further_delegations(run, cap):
    # Charged their prompts alone, six such children were billed $3.00 under a $1.00 limit while the budget counted
    # $0.03; under $0.01, delegations were refused only after five.
    billed: list[threading.Event] = []
    child = _ThreadedSdk(model_name="dear", default="unused", billed=billed, max_tokens=cap)
    bound = (cap or DEFAULT_BOUND) * PRICES["dear"][1] / 1_000_000  # without one: a stated default
    parent = ScriptedChatModel(responses=[{"tool_calls": [tool_call("task", description=f"job {i}",
                                                                    subagent_type="w")]} for i in range(6)] + ["Done."])
    budget = Budget(max_usd=1.0, prices=PRICES)
    spec = {"name": "w", "description": "Works.", "timeout_s": 0.3, "model": child}
    try:
        run(create_deep_agent(parent, [], subagents=[spec], settings=DelegationSettings.of(budget=budget)), user("go"))
    finally:
        for released in billed:
            released.set()
    assert budget.reserved_usd == 0
    # Each abandoned call: its hold plus its whole cap at its price.
    assert len(billed) * bound <= budget.usd < len(billed) * (bound + 0.01)
    assert len(billed) == (2 if cap else 1)  # the charge reached the limit: the other delegations were refused
    assert len(billed) * CAP_USD <= 1.0 + CAP_USD  # what the provider billed: the limit, plus one call's output
