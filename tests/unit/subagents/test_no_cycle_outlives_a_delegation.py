"""A finished delegation is freed at once: nothing of it waits in a reference cycle for the collector.

The meter once held the delegation's bound ``progress`` method while the
delegation held the meter; that cycle kept the child's whole run (its
Pregel loop, channels, messages, transcript recorder: about 170 objects)
alive until the next garbage collection, on every delegation.

Each case runs in a fresh interpreter: in a worker that ran other tests
first, what those tests left behind (a pending task of a closed loop, say)
can become garbage during the window this test looks at, and be counted.
"""

from __future__ import annotations

import gc
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from subagents._settings import DelegationSettings

TESTS = Path(__file__).resolve().parents[2]
REPO = TESTS.parent
OURS = ("subagents", "middleware", "deep_agent")


def _types(objects: list[Any], packages: tuple[str, ...]) -> list[str]:
    return sorted({type(o).__qualname__ for o in objects if type(o).__module__.startswith(packages)})


def left_for_the_collector(stream: bool) -> dict[str, list[str]]:
    """Run a third delegation and name the types of ours and LangGraph's that only the collector frees."""
    from helpers.graphs import user
    from langchain.agents import create_agent

    from deep_agent._testing import ScriptedChatModel, tool_call
    from middleware import SubAgentMiddleware

    model = ScriptedChatModel(rules=[
        ("child job", ["done"]),
        ("go", [{"tool_calls": [tool_call("task", description="child job", subagent_type="worker")]}, "finished"]),
    ])
    worker = {"name": "worker", "description": "Works.", "system_prompt": "Work.", "model": model}
    agent = create_agent(model, [], middleware=[SubAgentMiddleware([worker], settings=DelegationSettings.of(
        general_purpose=False,
    ))])
    for _ in range(2):  # caches filled once (the child is built on first use) are not the delegation's
        agent.invoke(user("go"))
    gc.collect()
    gc.set_debug(gc.DEBUG_SAVEALL)
    try:
        if stream:  # progress events reach a stream consumer: the emitter must not close a cycle either
            events = list(agent.stream(user("go"), stream_mode="custom"))
            assert any(e.get("type") == "subagent_task" for e in events)
        else:
            assert agent.invoke(user("go"))["messages"][-1].text == "finished"
        gc.collect()
        found = list(gc.garbage)
    finally:
        gc.set_debug(0)
        gc.garbage.clear()
    return {"ours": _types(found, OURS), "langgraph": _types(found, ("langgraph",))}


@pytest.mark.parametrize("stream", [False, True], ids=["invoke", "stream-custom"])
def test_a_finished_delegation_leaves_nothing_for_the_collector(stream: bool) -> None:
    path = os.pathsep.join(p for p in (str(REPO), str(TESTS), os.environ.get("PYTHONPATH")) if p)
    env = {**os.environ, "PYTHONPATH": path}
    done = subprocess.run([sys.executable, __file__, "stream" if stream else "invoke"], cwd=REPO, env=env,
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-3000:]
    left = json.loads(done.stdout.strip().splitlines()[-1])
    assert left["ours"] == []
    if not stream:  # LangGraph's own stream() leaves a cycle of its tasks, with or without a delegation
        assert left["langgraph"] == []  # the child's run went with the delegation


if __name__ == "__main__":
    print(json.dumps(left_for_the_collector(sys.argv[1] == "stream")))
