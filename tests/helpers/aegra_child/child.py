"""The child graph the aegra servers of the tests serve: scripted, offline, langgraph alone.

aegra runs in a Python 3.12 venv of its own (``helpers/aegra.py``); the
child needs nothing beyond what ``aegra-api`` installs. It answers
``answer to: <the task's description>`` after ``CHILD_SECONDS`` (a window in
which a server can be killed mid-run); a description that begins ``long``
takes ``LONG_SECONDS`` (tasks that stay live while a parent polls them);
one that begins ``fail`` raises ``RuntimeError("the child failed on purpose")``.
Graph ``approver`` asks for approval (an interrupt) before it answers
``published after: <the decision>``.
"""

from __future__ import annotations

import asyncio
import os
from typing import Annotated, Any, TypedDict

from langgraph.graph import END, START, StateGraph
from langgraph.graph.message import add_messages
from langgraph.types import interrupt

CHILD_SECONDS = float(os.environ.get("AEGRA_CHILD_SECONDS", "1.0"))
LONG_SECONDS = float(os.environ.get("AEGRA_LONG_SECONDS", "600"))


class State(TypedDict):
    messages: Annotated[list[Any], add_messages]


async def work(state: State) -> dict[str, Any]:
    asked = state["messages"][-1].content if state["messages"] else ""
    if str(asked).startswith("fail"):
        raise RuntimeError("the child failed on purpose")
    await asyncio.sleep(LONG_SECONDS if str(asked).startswith("long") else CHILD_SECONDS)
    return {"messages": [{"role": "assistant", "content": f"answer to: {asked}"}]}


builder = StateGraph(State)
builder.add_node("work", work)
builder.add_edge(START, "work")
builder.add_edge("work", END)
graph = builder.compile()


async def ask(state: State) -> dict[str, Any]:
    asked = state["messages"][-1].content if state["messages"] else ""
    decision = interrupt({"action_requests": [{"name": "publish", "args": {"text": asked},
                                               "description": "Publish this?"}],
                          "review_configs": [{"action_name": "publish", "allowed_decisions": ["approve", "reject"]}]})
    return {"messages": [{"role": "assistant", "content": f"published after: {decision}"}]}


asking = StateGraph(State)
asking.add_node("ask", ask)
asking.add_edge(START, "ask")
asking.add_edge("ask", END)
approver = asking.compile()
