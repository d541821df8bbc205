"""The parent's approvals are a floor: a child may add gates or change how a gated tool is reviewed, never un-gate one.

The parent gates ``danger`` with ``interrupt_on=`` or its permission mode.
Each case below is a way a child's own settings could lower that: its
``interrupt_on`` saying ``False`` or nothing (in a spec or an agent file),
or its own ``HumanInTheLoopMiddleware`` for another tool (LangChain refuses
two of one name, so it once replaced the parent's). In each, the child's
call to ``danger`` pauses the run and ``danger`` has not run. This differs
from deepagents, where a subagent's ``interrupt_on`` replaces the parent's.
"""

from __future__ import annotations

import itertools
from pathlib import Path
from typing import Any

import pytest
from langchain.agents.middleware import HumanInTheLoopMiddleware
from langchain_core.tools import tool
from langgraph.checkpoint.memory import InMemorySaver

from deep_agent import create_deep_agent
from deep_agent.testing import ScriptedChatModel, tool_call

RAN: list[str] = []
_threads = itertools.count()


@tool
def danger(x: str) -> str:
    """Dangerous."""
    RAN.append(f"danger {x}")
    return "done"


@tool
def harmless(x: str) -> str:
    """Harmless."""
    RAN.append(f"harmless {x}")
    return "ok"


HELPER = {"name": "helper", "description": "helps", "system_prompt": "Help.", "tools": ["danger", "harmless"]}
BY_INTERRUPT_ON: dict[str, Any] = {"interrupt_on": {"danger": True}}
BY_MODE: dict[str, Any] = {"permission_mode": "confirm_risky", "risky_tools": ["danger"]}


@pytest.fixture(autouse=True)
def _clean() -> None:
    RAN.clear()


def run_child_calling(child_tool: str, parent: dict[str, Any], **kwargs: Any) -> dict[str, Any]:
    """The parent delegates to ``helper``, whose model calls ``child_tool``; the run's result."""
    model = ScriptedChatModel(
        rules=[("DO IT", [{"tool_calls": [tool_call(child_tool, x="child")]}, "child done"])],
        responses=[{"tool_calls": [tool_call("task", description="DO IT", subagent_type="helper")]},
                   "parent done"])
    agent = create_deep_agent(model, [danger, harmless], checkpointer=InMemorySaver(), **parent, **kwargs)
    config = {"configurable": {"thread_id": f"floor-{next(_threads)}"}}
    return agent.invoke({"messages": [{"role": "user", "content": "go"}]}, config=config)


def asked_for(result: dict[str, Any]) -> list[str]:
    """The tool names the run paused on."""
    return [r["name"] for i in result.get("__interrupt__", ()) for r in i.value["action_requests"]]


@pytest.mark.parametrize("parent", [BY_INTERRUPT_ON, BY_MODE], ids=["interrupt_on", "permission_mode"])
@pytest.mark.parametrize("child", [
    {"interrupt_on": {"danger": False}},
    {"interrupt_on": {}},
    {"interrupt_on": {"harmless": True}},
    {"middleware": [HumanInTheLoopMiddleware(interrupt_on={"harmless": True})]},
    {"middleware": [HumanInTheLoopMiddleware(interrupt_on={"danger": False})]},
    {"permission_mode": "bypassPermissions"},
], ids=["interrupt_on-false", "interrupt_on-empty", "interrupt_on-other-tool", "own-middleware-other-tool",
        "own-middleware-false", "bypass"])
def test_no_child_setting_runs_a_tool_the_parent_gates_unasked(parent, child):
    result = run_child_calling("danger", parent, subagents=[{**HELPER, **child}])
    assert RAN == []
    assert asked_for(result) == ["danger"]


def test_an_agent_file_saying_false_does_not_un_gate_the_parents_tool(tmp_path: Path):
    (tmp_path / "helper.md").write_text(
        "---\nname: helper\ndescription: helps\ninterrupt_on:\n  danger: false\n---\nHelp.\n", encoding="utf-8")
    result = run_child_calling("danger", BY_INTERRUPT_ON, agents_dirs=[str(tmp_path)])
    assert RAN == []
    assert asked_for(result) == ["danger"]


@pytest.mark.parametrize("child", [
    {"interrupt_on": {"harmless": True}},
    {"middleware": [HumanInTheLoopMiddleware(interrupt_on={"harmless": True})]},
], ids=["interrupt_on", "own-middleware"])
def test_a_child_may_add_a_gate_of_its_own(child):
    result = run_child_calling("harmless", BY_INTERRUPT_ON, subagents=[{**HELPER, **child}])
    assert RAN == []
    assert asked_for(result) == ["harmless"]


def test_a_child_may_change_how_a_gated_tool_is_reviewed_but_not_skip_the_question():
    review = {"allowed_decisions": ["approve", "reject"], "when": lambda *_: False}
    result = run_child_calling("danger", BY_INTERRUPT_ON,
                               subagents=[{**HELPER, "interrupt_on": {"danger": review}}])
    assert RAN == []
    assert result["__interrupt__"][0].value["review_configs"][0]["allowed_decisions"] == ["approve", "reject"]
