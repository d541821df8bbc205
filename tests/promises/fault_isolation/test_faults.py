"""Fault isolation: nothing a child does crashes the parent; interrupts pass through."""

from __future__ import annotations

import pytest
from langchain_core.tools import tool
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.types import Command

from helpers.graphs import echo, parent_script, records, tool_messages, user
from deep_agent import create_deep_agent
from deep_agent._testing import ScriptedChatModel, tool_call


@tool
def explode(x: str) -> str:
    """A tool that always fails."""
    raise ValueError(f"disk on fire while handling {x}")


def by_id(out):
    return {m.tool_call_id: m for m in tool_messages(out)}


def test_model_error_tool_error_and_bad_output_fail_alone_while_siblings_succeed(run):
    model = ScriptedChatModel(
        rules=[
            ("model fails", [ConnectionError("upstream 503")]),
            ("tool fails", [{"tool_calls": [tool_call("explode", x="y")]}]),
            ("bad output", [{"tool_calls": [tool_call("Report", wrong_field=1)]}] * 3),
            ("healthy", ["healthy answer"]),
        ],
        responses=parent_script(
            ("model fails", "worker"),
            ("tool fails", "worker"),
            ("healthy", "worker"),
            ("bad output", "reporter"),
        ),
    )
    from pydantic import BaseModel

    class Report(BaseModel):
        summary: str

    from langchain.agents.structured_output import ToolStrategy

    agent = create_deep_agent(
        model,
        [explode],
        subagents=[
            {"name": "worker", "description": "works", "tools": ["explode"]},
            {"name": "reporter", "description": "reports",
             "response_format": ToolStrategy(Report, handle_errors=False)},
        ],
    )
    out = run(agent, user("go"))
    assert out["messages"][-1].content == "parent carried on"
    msgs = tool_messages(out)
    contents = sorted(m.content for m in msgs)
    assert len(msgs) == 4
    assert "healthy answer" in contents
    errors = [m for m in msgs if m.status == "error"]
    assert len(errors) == 3
    joined = "\n".join(m.content for m in errors)
    assert all(m.content.startswith(("Subagent 'worker' failed:", "Subagent 'reporter' failed:")) for m in errors)
    assert "upstream 503" in joined
    assert "disk on fire" in joined
    assert "Report" in joined  # the invalid structured output is named
    assert sorted(r["status"] for r in records(out)) == ["completed", "error", "error", "error"]


def test_recursion_limit_is_a_readable_error_not_a_crash(run):
    model = ScriptedChatModel(
        rules=[("loop", [])],
        default={"tool_calls": [tool_call("echo", x="again")]},
        responses=parent_script(("loop", "looper")),
    )
    # The parent's own scripted turns run out: give them explicitly.
    model.rules.insert(0, ("go", parent_script(("loop forever", "looper"))))
    agent = create_deep_agent(
        model, [echo], subagents=[{"name": "looper", "description": "loops", "tools": ["echo"],
                                   "recursion_limit": 7, "max_turns": 1000}],
    )
    out = run(agent, user("go"))
    (msg,) = tool_messages(out)
    assert msg.status == "error"
    assert msg.content.startswith("Subagent 'looper' failed: hit its recursion limit (7 steps)")
    assert "Split the task" in msg.content
    assert out["messages"][-1].content == "parent carried on"


def test_child_recursion_limit_defaults_to_the_parents_not_a_huge_constant(run):
    model = ScriptedChatModel(
        rules=[("go", parent_script(("loop forever", "looper")))],
        default={"tool_calls": [tool_call("echo", x="again")]},
    )
    agent = create_deep_agent(
        model, [echo], subagents=[{"name": "looper", "description": "loops", "tools": ["echo"],
                                   "max_turns": 10_000}],
    )
    out = run(agent, user("go"), {"recursion_limit": 30})
    (msg,) = tool_messages(out)
    assert "recursion limit (30 steps)" in msg.content
    child_calls = [c for c in model.calls if any(m.text == "loop forever" for m in c["messages"])]
    assert 5 <= len(child_calls) <= 15  # about two steps a turn within 30 steps


def test_interrupt_in_child_pauses_the_root_and_resumes_into_the_child(run):
    side_effects = []

    @tool
    def deploy(target: str) -> str:
        """Deploy (needs approval)."""
        side_effects.append(target)
        return f"deployed {target}"

    model = ScriptedChatModel(
        rules=[
            ("ship it", [{"tool_calls": [tool_call("deploy", target="prod")]}, "shipped"]),
            ("go", parent_script(("ship it", "deployer"))),
        ],
    )
    agent = create_deep_agent(
        model,
        [deploy],
        subagents=[{"name": "deployer", "description": "deploys", "tools": ["deploy"],
                    "interrupt_on": {"deploy": True}}],
        checkpointer=InMemorySaver(),
    )
    config = {"configurable": {"thread_id": f"approve-{run.mode}"}}
    paused = run(agent, user("go"), config)
    assert "__interrupt__" in paused and side_effects == []
    assert not records(paused)
    done = run(agent, Command(resume={"decisions": [{"type": "approve"}]}), config)
    assert side_effects == ["prod"]
    (msg,) = tool_messages(done)
    assert msg.content == "shipped" and msg.status == "success"
    assert done["messages"][-1].content == "parent carried on"
