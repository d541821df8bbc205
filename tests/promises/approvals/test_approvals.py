"""Approvals inside a child: surface at the root, resume into the child, run once."""

from __future__ import annotations

import pytest
from langchain_core.tools import tool
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.types import Command

from deep_agent import create_deep_agent
from deep_agent._testing import ScriptedChatModel, tool_call
from helpers.attacks import MODES, _assert_one_message_and_record_per_call, _invoke, _parallel, _user
from helpers.graphs import call, checkpointer, tool_messages, user

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


@MODES
def test_an_approval_with_a_failing_and_a_timed_sibling_resumes_once(mode):
    deployed: list[str] = []

    @tool
    def deploy(target: str) -> str:
        """Deploy (needs approval)."""
        deployed.append(target)
        return f"deployed {target}"

    model = ScriptedChatModel(
        rules=[("deploy job", [{"tool_calls": [tool_call("deploy", target="prod")]}, "deploy finished"]),
               ("sibling fails", [ConnectionError("503")]), ("sibling ok", ["fine"])],
        responses=_parallel(("deploy job", "deployer"), ("sibling fails", "general-purpose"),
                            ("sibling ok", "general-purpose")),
    )
    agent = create_deep_agent(model, [deploy], checkpointer=InMemorySaver(), subagents=[
        {"name": "deployer", "description": "d", "tools": ["deploy"], "interrupt_on": {"deploy": True},
         "timeout_s": 30}])
    config = {"configurable": {"thread_id": f"hitl-{mode}"}}
    paused = _invoke(mode, agent, _user(), config)
    assert len(paused["__interrupt__"]) == 1 and deployed == []
    out = _invoke(mode, agent, Command(resume={"decisions": [{"type": "approve"}]}), config)
    _assert_one_message_and_record_per_call(out, 3)
    assert deployed == ["prod"]
    assert sum(any(m.text == "sibling ok" for m in c["messages"]) for c in model.calls) == 1


@MODES
def test_two_parallel_children_paused_for_approval_resume_by_interrupt_id(mode):
    deployed: list[str] = []

    @tool
    def deploy(target: str) -> str:
        """Deploy (needs approval)."""
        deployed.append(target)
        return f"deployed {target}"

    model = ScriptedChatModel(
        rules=[("deploy A", [{"tool_calls": [tool_call("deploy", target="A")]}, "finished A"]),
               ("deploy B", [{"tool_calls": [tool_call("deploy", target="B")]}, "finished B"])],
        responses=_parallel(("deploy A", "deployer"), ("deploy B", "deployer")),
    )
    agent = create_deep_agent(model, [deploy], checkpointer=InMemorySaver(), subagents=[
        {"name": "deployer", "description": "d", "tools": ["deploy"], "interrupt_on": {"deploy": True}}])
    config = {"configurable": {"thread_id": f"two-approvals-{mode}"}}
    paused = _invoke(mode, agent, _user(), config)
    interrupts = paused["__interrupt__"]
    assert len(interrupts) == 2 and len({i.value["subagent"]["task_id"] for i in interrupts}) == 2
    out = _invoke(mode, agent, Command(resume={i.id: {"decisions": [{"type": "approve"}]} for i in interrupts}),
                  config)
    _assert_one_message_and_record_per_call(out, 2)
    assert sorted(deployed) == ["A", "B"]
