"""A thread that only reads its background tasks (list_async_tasks every run) still writes its ledger.

A run that calls a background tool is not touched at its start (see
``subagents._ledger.touch_if_quiet``); if that call wrote nothing either, the
ledger's channel took no update for as long as the thread kept listing, and
each load walked back over every checkpoint since its last snapshot.
"""

from __future__ import annotations

from langgraph.checkpoint.memory import InMemorySaver

from deep_agent import create_deep_agent
from deep_agent._testing import ScriptedChatModel, tool_call
from subagents.background._tasks import wait_for_background


def test_runs_that_list_settled_tasks_each_write_the_ledger() -> None:
    model = ScriptedChatModel(rules=[
        ("delegate", [{"tool_calls": [tool_call("start_async_task", description="Summarise X",
                                                subagent_type="general-purpose")]}, "Started."]),
        ("Summarise", ["A short summary."]),
        ("list", [{"tool_calls": [tool_call("list_async_tasks")]}, "Listed."]),
    ], responses=["Ok."])
    saver = InMemorySaver()
    agent = create_deep_agent(model=model, checkpointer=saver, background=True)
    config = {"configurable": {"thread_id": "lister"}}
    out = agent.invoke({"messages": [{"role": "user", "content": "delegate"}]}, config)
    assert wait_for_background(out["async_tasks"], timeout_s=60)
    agent.invoke({"messages": [{"role": "user", "content": "anything new?"}]}, config)  # takes the notice

    def ledger_version() -> object:
        saved = saver.get_tuple(config)
        assert saved is not None
        return saved.checkpoint["channel_versions"].get("async_tasks")

    for _ in range(3):
        before = ledger_version()
        out = agent.invoke({"messages": [{"role": "user", "content": "list"}]}, config)
        assert [r["status"] for r in out["async_tasks"].values()] == ["completed"]  # kept, not emptied
        assert ledger_version() != before, "a run that only listed settled tasks never wrote the ledger"
