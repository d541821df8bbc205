"""A finished delegation is freed at once: nothing of it waits in a reference cycle for the collector.

The meter once held the delegation's bound ``progress`` method while the
delegation held the meter; that cycle kept the child's whole run (its
Pregel loop, channels, messages, transcript recorder: about 170 objects)
alive until the next garbage collection, on every delegation.
"""

from __future__ import annotations

import gc
from collections.abc import Iterator
from typing import Any

import pytest
from langchain.agents import create_agent

from deep_agent.testing import ScriptedChatModel, tool_call
from helpers.graphs import user
from middleware import SubAgentMiddleware


@pytest.fixture
def unreachable() -> Iterator[list[Any]]:
    """What the collector finds unreachable after the test body (it keeps it, for the test to look at)."""
    gc.collect()
    gc.set_debug(gc.DEBUG_SAVEALL)
    found: list[Any] = []
    try:
        yield found
    finally:
        gc.set_debug(0)
        gc.garbage.clear()


def _agent(**options: Any) -> Any:
    model = ScriptedChatModel(rules=[
        ("child job", ["done"]),
        ("go", [{"tool_calls": [tool_call("task", description="child job", subagent_type="worker")]}, "finished"]),
    ])
    worker = {"name": "worker", "description": "Works.", "system_prompt": "Work.", "model": model}
    return create_agent(model, [], middleware=[SubAgentMiddleware([worker], general_purpose=False, **options)])


OURS = ("subagents", "middleware", "deep_agent")


def _types(objects: list[Any], packages: tuple[str, ...]) -> list[str]:
    return sorted({type(o).__qualname__ for o in objects if type(o).__module__.startswith(packages)})


@pytest.mark.parametrize("stream", [False, True], ids=["invoke", "stream-custom"])
def test_a_finished_delegation_leaves_nothing_for_the_collector(unreachable: list[Any], stream: bool) -> None:
    agent = _agent()
    for _ in range(2):  # caches filled once (the child is built on first use) are not the delegation's
        agent.invoke(user("go"))
    gc.collect()
    gc.garbage.clear()
    if stream:  # progress events reach a stream consumer: the emitter must not close a cycle either
        events = [c for c in agent.stream(user("go"), stream_mode="custom")]
        assert any(e.get("type") == "subagent_task" for e in events)
    else:
        assert agent.invoke(user("go"))["messages"][-1].text == "finished"
    gc.collect()
    unreachable.extend(gc.garbage)
    assert _types(unreachable, OURS) == []
    if not stream:  # LangGraph's own stream() leaves a cycle of its tasks, with or without a delegation
        assert _types(unreachable, ("langgraph",)) == []  # the child's run went with the delegation
