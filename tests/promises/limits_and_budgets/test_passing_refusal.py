"""A shared budget's refusal that passes (a sibling's call gave back its hold) does not fail a child that went on."""
from __future__ import annotations

from typing import Any

from langchain.agents.middleware import AgentMiddleware
from langchain_core.messages import HumanMessage, ToolMessage

from deep_agent import create_deep_agent
from deep_agent._testing import ScriptedChatModel, tool_call
from subagents import Budget, DelegationSettings
from subagents._errors import BudgetExceeded


def test_a_child_whose_retry_got_through_a_passing_refusal_completes() -> None:
    budget = Budget(max_tokens=100_000)
    refused: list[BudgetExceeded] = []

    class SiblingHoldsThenEnds(AgentMiddleware):  # type: ignore[type-arg]
        # A sibling's running call holds all but one token; it ends while this child retries.
        def wrap_model_call(self, request: Any, handler: Any) -> Any:
            held = budget.reserve(budget.max_tokens - budget.tokens - budget.reserved - 1)  # type: ignore[operator]
            try:
                return handler(request)
            except BudgetExceeded as exc:
                refused.append(exc)
                budget.release(*held)
                return handler(request)

    child = ScriptedChatModel(responses=["The report, in full."])
    parent = ScriptedChatModel(responses=[
        {"tool_calls": [tool_call("task", description="Do X", subagent_type="w")]}, "Done."])
    agent = create_deep_agent(model=parent, settings=DelegationSettings.of(budget=budget), subagents=[{
        "name": "w", "description": "worker", "system_prompt": "work", "model": child, "tools": [],
        "middleware": [SiblingHoldsThenEnds()],
    }])
    out = agent.invoke({"messages": [HumanMessage("go")]})
    assert len(refused) == 1  # the first call was refused, the retry was let through
    answer = next(m for m in out["messages"] if isinstance(m, ToolMessage)).content
    assert answer == "The report, in full."
    records = out["subagent_tasks"]
    (record,) = records.values() if isinstance(records, dict) else records
    assert (record["status"], record["stop_reason"]) == ("completed", "completed")
