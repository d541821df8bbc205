"""A background notice inside a run is not a user turn: a run that delegated before it is not read as quiet.

The touch at a run's start (``subagents._ledger.touch_if_quiet``) is for
threads that stopped delegating; a thread that delegates every run is left
alone. A notice (a ``HumanMessage`` the background middleware posts inside a
run) cut the scan short, so such a thread was touched every run.
"""

from __future__ import annotations

from typing import Any

from langchain.agents.middleware import ModelRequest
from langchain_core.messages import AIMessage, HumanMessage, ToolMessage

from middleware._background import BackgroundSubagentMiddleware
from middleware._limits import notice_message
from middleware._subagents import SubAgentMiddleware
from subagents._spec import SubagentSpec


def _state(tool: str, ledger_key: str) -> dict[str, Any]:
    call = {"name": tool, "args": {"description": "Go", "subagent_type": "helper"}, "id": "call-1"}
    return {
        "messages": [
            HumanMessage("delegate"),
            AIMessage("", tool_calls=[call]),
            ToolMessage("started", tool_call_id="call-1", name=tool),
            notice_message("Background task updates: call-1 completed."),
            AIMessage("It is done."),
            HumanMessage("next question"),
        ],
        ledger_key: {"t1": {"id": "t1", "status": "completed", "agent_type": "helper", "description": "Go"}},
    }


SPEC = SubagentSpec(name="helper", description="Helps.", system_prompt="Help.")


def test_background_middleware_does_not_touch_after_a_delegating_run_with_a_notice() -> None:
    middleware = BackgroundSubagentMiddleware(subagents=[SPEC])
    try:
        assert middleware.before_agent(_state("start_async_task", "async_tasks"), None) is None  # type: ignore[arg-type]
    finally:
        middleware.runtime.close()


def test_task_middleware_does_not_touch_after_a_delegating_run_with_a_notice() -> None:
    state = _state("task", "subagent_tasks")
    state["messages"][2] = ToolMessage("answer", tool_call_id="call-1", name="task")
    request = ModelRequest(model=None, messages=state["messages"], state=state, runtime=None)  # type: ignore[arg-type]
    assert SubAgentMiddleware(subagents=[SPEC])._at_start(request, [], ()) == (request, {})


def test_a_thread_that_stopped_delegating_is_still_touched() -> None:
    state = _state("start_async_task", "async_tasks")
    state["messages"] = [*state["messages"], AIMessage("An answer."), HumanMessage("and another")]
    middleware = BackgroundSubagentMiddleware(subagents=[SPEC])
    try:
        assert middleware.before_agent(state, None) == {"async_tasks": {}}  # type: ignore[arg-type]
    finally:
        middleware.runtime.close()
