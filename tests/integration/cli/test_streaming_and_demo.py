"""The child is a named subgraph in the parent's lineage; the main job runs offline."""

from __future__ import annotations

import subprocess
import sys

from langgraph.checkpoint.memory import InMemorySaver

from helpers.graphs import user
from deep_agent import create_deep_agent
from deep_agent._testing import ScriptedChatModel, tool_call

from helpers import REPO as ROOT


def _agent(checkpointer=None):
    model = ScriptedChatModel(
        rules=[("child job", ["child answer"])],
        responses=[{"tool_calls": [tool_call("task", description="child job", subagent_type="helper")]}, "done"],
    )
    return create_deep_agent(
        model, subagents=[{"name": "helper", "description": "helps"}], checkpointer=checkpointer
    )


def test_child_events_reach_the_parent_stream_with_subgraphs():
    agent = _agent()
    child_chunks = []
    for namespace, mode, chunk in agent.stream(user("go"), stream_mode=["messages", "updates"], subgraphs=True):
        if namespace:
            child_chunks.append((namespace, mode, chunk))
    assert child_chunks, "the child's own events must be visible in the parent's stream"
    texts = [c[0].content for ns, mode, c in child_chunks if mode == "messages"]
    assert "child answer" in texts
    # The child's messages stream carries its agent name.
    metas = [c[1] for ns, mode, c in child_chunks if mode == "messages"]
    assert any(m.get("lc_agent_name") == "helper" for m in metas)


async def test_child_runs_in_the_parent_checkpoint_lineage():
    saver = InMemorySaver()
    agent = _agent(saver)
    config = {"configurable": {"thread_id": "lineage"}}
    await agent.ainvoke(user("go"), config)
    namespaces = {c.config["configurable"]["checkpoint_ns"] for c in saver.list(None)}
    child_ns = [ns for ns in namespaces if ns]
    assert child_ns and all(ns.startswith("tools:") for ns in child_ns)


def test_python_m_deep_agent_with_arguments_is_the_command_line():
    """With arguments it is ``deep-agent`` (it used to run the demo whatever was asked, ``--help`` too)."""
    result = subprocess.run([sys.executable, "-m", "deep_agent", "--help"], cwd=ROOT, capture_output=True,
                            text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    assert result.stdout.startswith("usage: deep-agent") and "scripted model" not in result.stdout


def test_main_job_runs_offline_and_reports():
    result = subprocess.run(
        [sys.executable, "-m", "deep_agent"], cwd=ROOT, capture_output=True, text=True, timeout=120
    )
    assert result.returncode == 0, result.stderr
    out = result.stdout
    assert "scripted model" in out
    delegations, background = out.split("Background tasks:")
    assert delegations.count("completed") == 2 and delegations.count(" error ") == 1
    assert "upstream model returned HTTP 500" in delegations
    assert "not fatal" in delegations  # the parent answered despite the failure
    assert "writer" in background and "completed" in background
    assert "Final answer: The background report arrived" in out
