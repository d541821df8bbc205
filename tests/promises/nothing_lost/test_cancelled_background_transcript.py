"""A background task cancelled mid-run points at its transcript, as a finished one does.

The runner ends a cancelled child's transcript with a ``cancelled`` mark
(in memory, or the JSONL file of ``sessions_dir``), but the task's record
kept ``transcript: None``: reading it said the task had no transcript,
while its messages sat in the table under the task's id.
"""

from __future__ import annotations

import threading
import time
from typing import Any

from langchain.agents import create_agent
from langchain_core.messages import HumanMessage
from langchain_core.tools import tool
from langgraph.checkpoint.memory import InMemorySaver

from deep_agent._testing import ScriptedChatModel, tool_call
from middleware import BackgroundSubagentMiddleware
from subagents.background._local import known_task
from subagents._transcripts import read_transcript

DEADLINE_S = 30.0


def test_a_cancelled_background_task_keeps_a_readable_transcript() -> None:
    entered, release = threading.Event(), threading.Event()

    @tool
    def slow(x: str) -> str:
        """Work slowly."""
        entered.set()
        release.wait(DEADLINE_S)
        return "slow done"

    parent = ScriptedChatModel(
        rules=[("go", [{"tool_calls": [tool_call("start_async_task", description="do X",
                                                 subagent_type="worker")]}, "started"])],
        default="ok")
    child = ScriptedChatModel(rules=[("do X", [{"tool_calls": [tool_call("slow", x="1")]}, "done"])])
    spec = {"name": "worker", "description": "Works.", "system_prompt": "Work.", "tools": ["slow"], "model": child}
    mw = BackgroundSubagentMiddleware([spec], model=parent, tools=[slow])
    agent = create_agent(parent, tools=[slow], middleware=[mw], checkpointer=InMemorySaver())
    config: Any = {"configurable": {"thread_id": "t1"}}
    try:
        out = agent.invoke({"messages": [HumanMessage("go")]}, config)
        task_id = next(iter(out["async_tasks"]))
        assert entered.wait(DEADLINE_S), "the child never reached its tool"
        record = {**out["async_tasks"][task_id], **known_task(task_id).fields}  # type: ignore[union-attr]
        mw.runtime.run(mw.tasks.cancel(record))
        release.set()

        deadline = time.monotonic() + DEADLINE_S
        while not known_task(task_id).fields.get("transcript"):  # type: ignore[union-attr]
            assert time.monotonic() < deadline, "the cancelled task never pointed at a transcript"
            time.sleep(0.05)

        later = agent.invoke({"messages": [HumanMessage("status?")]}, config)["async_tasks"][task_id]
        assert later["status"] == "cancelled"
        messages = read_transcript(later, thread_id="t1")
        assert [type(m).__name__ for m in messages] == ["HumanMessage", "AIMessage"]
        assert messages[0].text == "do X" and messages[1].tool_calls[0]["name"] == "slow"
    finally:
        release.set()
        mw.close()
