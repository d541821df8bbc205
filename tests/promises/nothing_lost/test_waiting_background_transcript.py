"""A background task waiting for approval points at its transcript so far, and keeps it if cancelled.

The paused run's transcript is written (the conversation up to the request)
but the record said ``transcript: None`` while the task waited, and still
after it was cancelled there: the person deciding could not read what the
child had done, and a cancelled task's record had nothing to read.
"""

from __future__ import annotations

from typing import Any

from langchain.agents import create_agent
from langchain_core.messages import HumanMessage
from langchain_core.tools import tool
from langgraph.checkpoint.memory import InMemorySaver

from deep_agent._testing import ScriptedChatModel, tool_call
from middleware import BackgroundSubagentMiddleware
from subagents import wait_for_background
from subagents._transcripts import read_transcript


@tool
def write_file(path: str, content: str) -> str:
    """Write a file."""
    return f"wrote {path}"


def test_a_waiting_then_cancelled_task_points_at_its_transcript() -> None:
    parent = ScriptedChatModel(
        rules=[("go", [{"tool_calls": [tool_call("start_async_task", description="do X",
                                                 subagent_type="worker")]}, "started"])],
        default="ok")
    child = ScriptedChatModel(rules=[("do X", [{"tool_calls": [tool_call("write_file", path="a", content="A")]},
                                               "wrote it"])])
    spec = {"name": "worker", "description": "Works.", "system_prompt": "Work.", "tools": ["write_file"],
            "interrupt_on": {"write_file": True}, "model": child}
    mw = BackgroundSubagentMiddleware([spec], model=parent, tools=[write_file])
    agent = create_agent(parent, tools=[write_file], middleware=[mw], checkpointer=InMemorySaver())
    config: Any = {"configurable": {"thread_id": "t1"}}
    try:
        out = agent.invoke({"messages": [HumanMessage("go")]}, config)
        assert wait_for_background(out["async_tasks"], 30)
        task_id = next(iter(out["async_tasks"]))
        waiting = agent.invoke({"messages": [HumanMessage("status?")]}, config)["async_tasks"][task_id]
        assert waiting["status"] == "waiting_for_approval"
        so_far = read_transcript(waiting, thread_id="t1")
        assert [type(m).__name__ for m in so_far] == ["HumanMessage", "AIMessage"]
        assert so_far[1].tool_calls[0]["name"] == "write_file"

        mw.runtime.run(mw.tasks.cancel(waiting))
        cancelled = agent.invoke({"messages": [HumanMessage("status?")]}, config)["async_tasks"][task_id]
        assert cancelled["status"] == "cancelled"
        assert read_transcript(cancelled, thread_id="t1") == so_far
    finally:
        mw.close()
