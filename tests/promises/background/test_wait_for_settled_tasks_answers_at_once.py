"""``wait_for_background`` on tasks that have all settled answers ``True`` at once, even with no time left.

A zero timeout is a poll ("are they done?"). The wait makes one round trip
to the runtime's loop for a start it may not have taken yet; a ledger whose
tasks the runtime already shows settled needs none, and a poll must not
time out on it and read finished tasks as unfinished.
"""

from __future__ import annotations

from langgraph.checkpoint.memory import InMemorySaver

from deep_agent import create_deep_agent
from deep_agent._testing import ScriptedChatModel, tool_call
from subagents.background import wait_for_background
from subagents._settings import DelegationSettings


def test_a_poll_of_settled_tasks_says_they_settled() -> None:
    start = {"tool_calls": [tool_call("start_async_task", description="Look it up.", subagent_type="researcher")]}
    model = ScriptedChatModel(rules=[("Look it up", ["Found it."]), ("Go", [start, "Started."])], default="Ok.")
    agent = create_deep_agent(model, checkpointer=InMemorySaver(), background=True,
                              subagents=[{"name": "researcher", "description": "Finds facts.",
                                          "system_prompt": "Answer."}], settings=DelegationSettings.of(
                                              general_purpose=False,
                                          ))
    config = {"configurable": {"thread_id": "poll"}}
    out = agent.invoke({"messages": [("user", "Go")]}, config)
    assert wait_for_background(out["async_tasks"], 60)
    out = agent.invoke({"messages": [("user", "And?")]}, config)
    assert [r["status"] for r in out["async_tasks"].values()] == ["completed"]
    # Before, each of these made the loop round trip with no time left and answered False.
    assert all(wait_for_background(out["async_tasks"], 0) for _ in range(5))
