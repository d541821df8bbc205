"""Shared helpers: every behavioural test runs on both invoke and ainvoke."""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path
from typing import Any

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))


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


@pytest.fixture(params=["sync", "async"])
def run(request: pytest.FixtureRequest) -> Runner:
    return Runner(request.param)


def tool_messages(state: dict[str, Any]) -> list[Any]:
    return [m for m in state["messages"] if m.type == "tool"]


def records(state: dict[str, Any]) -> list[dict[str, Any]]:
    return list(state.get("subagent_tasks", {}).values())
