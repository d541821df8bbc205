"""Approvals inside a child: surface at the root, resume into the child, run once."""

from __future__ import annotations

import pytest
from langchain_core.tools import tool
from langgraph.types import Command

from helpers.graphs import call, checkpointer, tool_messages, user
from deep_agent import create_deep_agent
from deep_agent.testing import ScriptedChatModel, tool_call

LONG = "sibling answer " + "s" * 220


def scenario():
    deployed = []

    @tool
    def deploy(target: str) -> str:
        """Deploy (needs approval)."""
        deployed.append(target)
        return f"deployed {target}"

    def after_review(messages):
        last = messages[-1]
        if last.type == "tool" and last.status == "error":
            return "Deployment was rejected by the reviewer: " + last.text + " " + "r" * 200
        return "Deployment finished: " + last.text + " " + "d" * 200

    model = ScriptedChatModel(
        rules=[
            ("deploy job", [{"tool_calls": [tool_call("deploy", target="prod")]}, after_review]),
            ("sibling job", [LONG]),
        ],
        responses=[
            {"tool_calls": [tool_call("task", description="deploy job", subagent_type="deployer"),
                            tool_call("task", description="sibling job", subagent_type="general-purpose")]},
            "parent finished",
        ],
    )
    return model, deploy, deployed


def sibling_calls(model):
    return [c for c in model.calls if any(m.text == "sibling job" for m in c["messages"])]


@pytest.mark.parametrize("mode", ["sync", "async"])
@pytest.mark.parametrize("kind", ["memory", "sqlite"])
@pytest.mark.parametrize("decision", ["approve", "reject"])
async def test_approval_inside_a_child(mode, kind, decision, tmp_path):
    model, deploy, deployed = scenario()
    async with checkpointer(kind, mode, tmp_path) as saver:
        agent = create_deep_agent(
            model,
            [deploy],
            subagents=[{"name": "deployer", "description": "deploys", "tools": ["deploy"],
                        "interrupt_on": {"deploy": True}}],
            checkpointer=saver,
        )
        config = {"configurable": {"thread_id": f"{mode}-{kind}-{decision}"}}
        paused = await call(mode, agent, user("go"), config)

        (interrupt,) = paused["__interrupt__"]
        about = interrupt.value["subagent"]
        assert about["agent_type"] == "deployer" and about["task_id"] and about["tool_call_id"]
        assert interrupt.value["action_requests"][0]["name"] == "deploy"
        assert deployed == []
        assert len(sibling_calls(model)) == 1

        resume = {"type": "approve"} if decision == "approve" else {"type": "reject", "message": "not today"}
        done = await call(mode, agent, Command(resume={"decisions": [resume]}), config)

    assert len(sibling_calls(model)) == 1, "a finished sibling must not run again"
    contents = [m.content for m in tool_messages(done)]
    assert len(contents) == 2 and LONG in contents
    (child,) = [c for c in contents if c != LONG]
    if decision == "approve":
        assert deployed == ["prod"]
        assert child.startswith("Deployment finished: deployed prod")
    else:
        assert deployed == []
        assert child.startswith("Deployment was rejected by the reviewer")
        assert "not today" in child
    assert done["messages"][-1].content == "parent finished"
    records = done["subagent_tasks"]
    assert len(records) == 2 and {r["status"] for r in records.values()} == {"completed"}
    assert about["task_id"] in records  # the paused task kept its id across the resume
    # The model call made before the pause counts in the record, with the one after it.
    assert records[about["task_id"]]["model_calls"] == 2
