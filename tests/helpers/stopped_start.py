"""A parent stopped in the step that starts a remote task, then sent a new message: the scripted conversation.

The parent's model answers ``START-JOBS`` with two calls in one step:
``start_async_task`` (``the job``, for :data:`REMOTE_WORKER`) and
``stop_here``, a tool that stops the run the first time it is called (a
``KeyboardInterrupt``, as Ctrl-C would), once ``ready`` is set when one is
given (say, once the start's request has reached the server). It answers
``WHAT-NOW``, the next message, with ``carried on``.

Example::

    out, middleware = stop_then_carry_on("async", server.url, thread_id="t")
    (record,) = ledger(out).values()          # what became of the start
    middleware.close()
"""

from __future__ import annotations

import threading
from typing import Any

import pytest
from langchain.agents import create_agent
from langchain_core.tools import BaseTool, tool
from langgraph.checkpoint.memory import InMemorySaver

from deep_agent._testing import ScriptedChatModel, tool_call
from helpers.attacks import _invoke
from helpers.graphs import user
from middleware import BackgroundSubagentMiddleware
from subagents._settings import DelegationSettings

REMOTE_WORKER = "remote-worker"
READY_TIMEOUT_S = 30


def stop_once(ready: threading.Event | None = None) -> BaseTool:
    """``stop_here``: stops the run (as Ctrl-C would) the first time it is called, once ``ready`` is set."""
    calls: list[int] = []

    @tool
    def stop_here(x: str) -> str:
        """Stops the run once."""
        if not calls:
            calls.append(1)
            assert ready is None or ready.wait(READY_TIMEOUT_S), "the event to stop at never came"
            raise KeyboardInterrupt
        return "ran"

    return stop_here


def stop_then_carry_on(mode: str, url: str, *, thread_id: str, ready: threading.Event | None = None
                       ) -> tuple[dict[str, Any], BackgroundSubagentMiddleware]:
    """Run the conversation (``mode``: ``sync`` or ``async``) against the server at ``url``.

    Returns the state after ``WHAT-NOW`` and the parent's middleware (the
    caller closes it when it has read what it needs).
    """
    spec = {"name": REMOTE_WORKER, "description": "Works remotely.", "graph_id": "g", "url": url}
    model = ScriptedChatModel(
        rules=[("START-JOBS", [{"tool_calls": [tool_call("start_async_task", description="the job",
                                                         subagent_type=REMOTE_WORKER),
                                               tool_call("stop_here", x="1")]}, "unreachable"]),
               ("WHAT-NOW", ["carried on"])],
        default="noted")
    middleware = BackgroundSubagentMiddleware([spec], settings=DelegationSettings.of(general_purpose=False))
    agent = create_agent(model, tools=[stop_once(ready)], checkpointer=InMemorySaver(), middleware=[middleware])
    config = {"configurable": {"thread_id": thread_id}}
    with pytest.raises(KeyboardInterrupt):
        _invoke(mode, agent, user("START-JOBS"), config)
    return _invoke(mode, agent, user("WHAT-NOW"), config), middleware
