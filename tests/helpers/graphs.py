"""Scripted parents, and how a test runs a graph and reads its state.

Every behavioural test runs on both invoke and ainvoke: the ``run`` fixture
(registered in ``tests/conftest.py``) is a :class:`Runner` for each.
"""

from __future__ import annotations

import asyncio
import contextlib
from pathlib import Path
from typing import Any

from langchain_core.tools import tool

from deep_agent._testing import ScriptedChatModel, tool_call


@tool
def echo(x: str) -> str:
    """Echo."""
    return x


def parent_script(*calls: tuple[str, str]) -> list[Any]:
    """A parent that delegates ``(description, subagent_type)`` calls in parallel, then ends."""
    return [
        {"tool_calls": [tool_call("task", description=d, subagent_type=t) for d, t in calls]},
        "parent carried on",
    ]


def user(text: str) -> dict[str, Any]:
    return {"messages": [{"role": "user", "content": text}]}


class Runner:
    """Runs a graph with invoke or ainvoke, as the parametrised mode says."""

    def __init__(self, mode: str) -> None:
        self.mode = mode

    def __call__(self, graph: Any, inputs: Any, config: dict[str, Any] | None = None) -> Any:
        if self.mode == "sync":
            return graph.invoke(inputs, config)
        return asyncio.run(graph.ainvoke(inputs, config))

    def __repr__(self) -> str:
        return self.mode


def tool_messages(state: dict[str, Any]) -> list[Any]:
    return [m for m in state["messages"] if m.type == "tool"]


def records(state: dict[str, Any]) -> list[dict[str, Any]]:
    return list(state.get("subagent_tasks", {}).values())


@contextlib.asynccontextmanager
async def checkpointer(kind: str, mode: str, tmp_path: Path):
    """An in-memory or SQLite checkpointer suited to the sync or async path."""
    if kind == "memory":
        from langgraph.checkpoint.memory import InMemorySaver

        yield InMemorySaver()
    elif mode == "sync":
        import sqlite3

        from langgraph.checkpoint.sqlite import SqliteSaver

        conn = sqlite3.connect(tmp_path / "state.sqlite", check_same_thread=False)
        try:
            yield SqliteSaver(conn)
        finally:
            conn.close()
    else:
        from langgraph.checkpoint.sqlite.aio import AsyncSqliteSaver

        async with AsyncSqliteSaver.from_conn_string(str(tmp_path / "state.sqlite")) as saver:
            yield saver


async def call(mode: str, graph: Any, inputs: Any, config: dict[str, Any] | None = None) -> Any:
    """Invoke (on a worker thread) or ainvoke, inside one event loop."""
    if mode == "sync":
        return await asyncio.to_thread(graph.invoke, inputs, config)
    return await graph.ainvoke(inputs, config)


class Gated(ScriptedChatModel):
    """A scripted model that answers once ``gate`` (a ``threading.Event``) is set: a call held running."""

    gate: Any = None

    def _generate(self, messages, stop=None, run_manager=None, **kwargs):
        self.gate.wait(60)  # a hang guard only: the test opens the gate
        return super()._generate(messages, stop, run_manager, **kwargs)

    async def _agenerate(self, messages, stop=None, run_manager=None, **kwargs):
        while not self.gate.is_set():
            await asyncio.sleep(0.01)
        return await super()._agenerate(messages, stop, run_manager, **kwargs)
