"""Steering queued for a task whose run then fails is named in its error, not dropped unsaid.

The parent is told a message sent to a running task is queued ("the task
sees it before its next model call"). When the run failed first, the task
settled ``error`` and the message stayed in its inbox until a retry
cleared it: nothing said it was never read.
"""

from __future__ import annotations

import asyncio
import threading
import time
from typing import Any

from langchain.agents import create_agent
from langchain_core.messages import HumanMessage
from langgraph.checkpoint.memory import InMemorySaver

from deep_agent._testing import ScriptedChatModel
from helpers.background import starts_one_worker_task, steer
from middleware import BackgroundSubagentMiddleware
from subagents.background._local import known_task

DEADLINE_S = 30.0
CALLING, RELEASE = threading.Event(), threading.Event()


class HeldFailingModel(ScriptedChatModel):
    """Fails its call once the test lets it, without blocking the loop meanwhile."""

    async def _agenerate(self, *args: Any, **kwargs: Any) -> Any:
        CALLING.set()
        deadline = time.monotonic() + DEADLINE_S
        while not RELEASE.is_set() and time.monotonic() < deadline:
            await asyncio.sleep(0.02)
        raise RuntimeError("model down")


def test_a_message_the_failed_run_never_read_is_named_in_its_error() -> None:
    calling, release = CALLING, RELEASE
    parent = starts_one_worker_task()
    child = HeldFailingModel()
    spec = {"name": "worker", "description": "Works.", "system_prompt": "Work.", "model": child}
    mw = BackgroundSubagentMiddleware([spec], model=parent)
    agent = create_agent(parent, middleware=[mw], checkpointer=InMemorySaver())
    try:
        out = agent.invoke({"messages": [HumanMessage("go")]}, {"configurable": {"thread_id": "t1"}})
        task_id = next(iter(out["async_tasks"]))
        assert calling.wait(DEADLINE_S), "the child never called its model"
        task = known_task(task_id)
        assert task is not None
        assert steer(mw, out, task_id, "Focus on 2024.", parent).startswith("queued")
        release.set()

        deadline = time.monotonic() + DEADLINE_S
        while task.fields.get("status") != "error":
            assert time.monotonic() < deadline, f"the task never failed: {task.fields}"
            time.sleep(0.05)
        assert "model down" in task.fields["error"]
        assert "Focus on 2024." in task.fields["error"]
        assert mw.runtime.inboxes.take(task_id) == []
    finally:
        release.set()
        mw.close()
