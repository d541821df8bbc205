"""A task paused for approval keeps the work time of every segment, and its waiting time apart."""

from __future__ import annotations

import asyncio
import time

from langchain_core.tools import tool
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.types import Command

from deep_agent import create_deep_agent
from deep_agent._testing import ScriptedChatModel, tool_call
from helpers.attacks import MODES
from helpers.graphs import call, user

LATENCY_S = 0.4
WAIT_S = 0.6


@MODES
async def test_a_task_paused_for_approval_counts_both_segments_and_its_wait_apart(mode):
    @tool
    def deploy(target: str) -> str:
        """Deploy (needs approval)."""
        return f"deployed {target}"

    # Every model call takes LATENCY_S: the child makes one before the pause and one after it.
    model = ScriptedChatModel(
        latency_s=LATENCY_S,
        rules=[("deploy job", [{"tool_calls": [tool_call("deploy", target="prod")]}, "deployed"])],
        responses=[{"tool_calls": [tool_call("task", description="deploy job", subagent_type="deployer")]},
                   "parent finished"],
    )
    agent = create_deep_agent(model, [deploy], checkpointer=InMemorySaver(), subagents=[
        {"name": "deployer", "description": "deploys", "tools": ["deploy"], "interrupt_on": {"deploy": True}}])
    config = {"configurable": {"thread_id": f"timed-{mode}"}}
    paused = await call(mode, agent, user("go"), config)
    paused_at = time.time()
    task_id = paused["__interrupt__"][0].value["subagent"]["task_id"]
    await asyncio.sleep(WAIT_S)  # the person reading the prompt
    done = await call(mode, agent, Command(resume={"decisions": [{"type": "approve"}]}), config)

    record = done["subagent_tasks"][task_id]
    assert record["status"] == "completed"
    # Both model calls are work; the segment before the pause used to be dropped.
    assert record["duration_ms"] >= 2 * LATENCY_S * 1000 * 0.95
    assert record["waiting_ms"] >= WAIT_S * 1000 * 0.95
    assert record["started_at"] < paused_at  # the first segment's start, not the resume's
    assert record["finished_at"] - record["started_at"] >= (record["duration_ms"] + record["waiting_ms"]) / 1000 - 0.01
