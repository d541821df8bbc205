"""Steering that arrives while a finished run's end listeners are told is delivered, not dropped.

A task whose run has finished stays ``running`` while its end listeners
(the root's ``SubagentStop`` hooks) are told, which takes as long as they
do. A message sent then was queued ("the task sees it before its next
model call") and never delivered: the task settled ``completed`` over it
and nothing read its inbox again.
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Mapping
from typing import Any

from langchain.agents import create_agent
from langchain_core.messages import BaseMessage, HumanMessage
from langgraph.checkpoint.memory import InMemorySaver

from deep_agent._testing import ScriptedChatModel
from helpers.background import starts_one_worker_task, steer
from middleware import BackgroundSubagentMiddleware
from subagents.background._local import known_task

DEADLINE_S = 30.0


def _answer(messages: list[BaseMessage]) -> str:
    return "answer to: " + " / ".join(m.text for m in messages if isinstance(m, HumanMessage))


def test_a_message_sent_while_end_listeners_run_reaches_the_child() -> None:
    ending, release = threading.Event(), threading.Event()

    async def slow_listener(record: Mapping[str, Any]) -> list[str]:
        ending.set()
        while not release.is_set():  # a hook command that takes its time
            await asyncio.sleep(0.02)
        return []

    parent = starts_one_worker_task()
    child = ScriptedChatModel(default=_answer)  # no tools, no middleware: one model call a run
    spec = {"name": "worker", "description": "Works.", "system_prompt": "Work.", "model": child}
    mw = BackgroundSubagentMiddleware([spec], model=parent)
    mw.tasks.on_end.append(slow_listener)
    agent = create_agent(parent, middleware=[mw], checkpointer=InMemorySaver())
    try:
        out = agent.invoke({"messages": [HumanMessage("go")]}, {"configurable": {"thread_id": "t1"}})
        task_id = next(iter(out["async_tasks"]))
        assert ending.wait(DEADLINE_S), "the task never ended"
        task = known_task(task_id)
        assert task is not None
        assert steer(mw, out, task_id, "Focus on 2024.", parent).startswith("queued")
        ending.clear()
        release.set()

        deadline = time.monotonic() + DEADLINE_S
        while "2024" not in (task.fields.get("result") or "") or task.fields.get("status") != "completed":
            assert time.monotonic() < deadline, f"the message never reached the child: {task.fields}"
            time.sleep(0.05)
        assert task.fields["result"] == "answer to: do X / [Update from your caller] Focus on 2024."
        assert mw.runtime.inboxes.take(task_id) == []
        later = agent.invoke({"messages": [HumanMessage("status?")]}, {"configurable": {"thread_id": "t1"}})
        notices = [m.text for m in later["messages"] if "Background task updates" in m.text]
        assert notices and "Focus on 2024." in notices[-1]  # the parent hears the answer to it
    finally:
        release.set()
        mw.close()
