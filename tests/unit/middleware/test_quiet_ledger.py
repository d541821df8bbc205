"""A thread that stops delegating: each load walks back only about fifty runs for its ledger.

A ledger is checkpointed as deltas and snapshotted every 50 updates; a thread
that no longer writes it walked back to its last snapshot on every load until
LangGraph's bound of 5,000 steps (about 1,000 runs). The middleware now
touches such a ledger once a run (an empty update, in the step of the run's
first model call), so its snapshot stays within about fifty runs.
"""

from __future__ import annotations

from typing import Any

from langchain_core.messages import AIMessage, HumanMessage, ToolMessage
from langgraph.checkpoint.memory import InMemorySaver

from deep_agent import create_deep_agent
from deep_agent._testing import ScriptedChatModel, tool_call
from subagents.background import wait_for_background
from subagents._ledger import touch_if_quiet
from subagents._settings import DelegationSettings

QUIET_RUNS = 150
"""Runs without a delegation after the one that delegated: about 750 steps, 15 of the 50-update cadence."""


def _steps_since_snapshot(saver: InMemorySaver, config: dict[str, Any], key: str) -> int:
    metadata = saver.get_tuple(config).metadata  # type: ignore[union-attr]
    # A channel snapshotted at this very checkpoint has no counter in it.
    return int(metadata.get("counters_since_delta_snapshot", {}).get(key, (0, 0))[1])


def test_a_thread_that_stopped_delegating_keeps_its_ledger_snapshot_near() -> None:
    model = ScriptedChatModel(
        rules=[("delegate", [{"tool_calls": [tool_call("task", description="Look it up.",
                                                     subagent_type="general-purpose")]}, "Done."]),
               ("Look it up", ["Found."])],
        default="Ok.")
    saver = InMemorySaver()
    agent = create_deep_agent(model, checkpointer=saver, settings=DelegationSettings.of(max_root_turns=None))
    config: dict[str, Any] = {"configurable": {"thread_id": "quiet"}}
    ledger = agent.invoke({"messages": [("user", "delegate")]}, config)["subagent_tasks"]
    for _ in range(QUIET_RUNS):
        out = agent.invoke({"messages": [("user", "hi")]}, config)
    assert out["subagent_tasks"] == ledger  # touched, never changed
    # Before, this was every step since the delegation (over 700); a load walked back that far.
    assert _steps_since_snapshot(saver, config, "subagent_tasks") < 60 * 7


def test_a_background_ledger_the_thread_stopped_writing_keeps_its_snapshot_near() -> None:
    start = {"tool_calls": [tool_call("start_async_task", description="Look it up.", subagent_type="researcher")]}
    model = ScriptedChatModel(rules=[("delegate", [start, "Started."]), ("Look it up", ["Found."])], default="Ok.")
    saver = InMemorySaver()
    agent = create_deep_agent(model, checkpointer=saver, background=True,
                              subagents=[{"name": "researcher", "description": "d", "system_prompt": "p"}],
                              settings=DelegationSettings.of(max_root_turns=None, general_purpose=False))
    config: dict[str, Any] = {"configurable": {"thread_id": "quiet-background"}}
    out = agent.invoke({"messages": [("user", "delegate")]}, config)
    assert wait_for_background(out["async_tasks"], 60)
    for _ in range(QUIET_RUNS):
        out = agent.invoke({"messages": [("user", "hi")]}, config)
    assert [r["status"] for r in out["async_tasks"].values()] == ["completed"]
    assert _steps_since_snapshot(saver, config, "async_tasks") < 60 * 7


def _run(*messages: Any) -> dict[str, Any]:
    return {"subagent_tasks": {"t1": {"id": "t1"}}, "messages": list(messages)}


def test_only_a_ledger_the_previous_run_left_alone_is_touched() -> None:
    delegated = AIMessage("", tool_calls=[{"name": "task", "args": {}, "id": "c1"}])
    answered = ToolMessage("ok", tool_call_id="c1")
    # The previous run (between the last two human messages) delegated: its own write keeps the cadence.
    assert touch_if_quiet(_run(HumanMessage("a"), delegated, answered, AIMessage("done"), HumanMessage("b")),
                          "subagent_tasks", {"task"}) is None
    # It did not (an older run did): touched.
    assert touch_if_quiet(_run(HumanMessage("a"), delegated, answered, AIMessage("done"), HumanMessage("b"),
                               AIMessage("plain"), HumanMessage("c")), "subagent_tasks", {"task"}) == {
        "subagent_tasks": {}}
    # No ledger yet: nothing to walk back for.
    assert touch_if_quiet({"messages": [HumanMessage("a"), AIMessage("x"), HumanMessage("b")]},
                          "subagent_tasks", {"task"}) is None
