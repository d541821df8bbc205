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
from langchain.agents.middleware import HumanInTheLoopMiddleware, PIIMiddleware
from langchain_core.tools import tool
from langgraph.checkpoint.memory import InMemorySaver

from deep_agent import create_deep_agent
from deep_agent._testing import ScriptedChatModel, tool_call
from subagents._settings import DelegationSettings

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
BY_MODE: dict[str, Any] = {"settings": DelegationSettings.of(permission_mode="confirm_risky", risky_tools=["danger"])}


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
    result = run_child_calling("danger", BY_INTERRUPT_ON, settings=DelegationSettings.of(
        agents_dirs=[str(tmp_path)],
    ))
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


EMAIL = "bob@example.com"


def test_a_childs_own_pii_rule_for_the_same_type_adds_to_the_parents_never_replaces_it():
    model = ScriptedChatModel(
        rules=[("mail bob", ["child done"])],
        responses=[{"tool_calls": [tool_call("task", description=f"mail bob at {EMAIL}", subagent_type="helper")]},
                   "parent done"])
    parents = PIIMiddleware("email", strategy="redact", apply_to_input=True)
    childs = PIIMiddleware("email", strategy="redact", apply_to_input=False, apply_to_output=True)
    agent = create_deep_agent(model, [danger], checkpointer=InMemorySaver(), middleware=[parents],
                              subagents=[{**HELPER, "tools": ["danger"], "middleware": [childs]}])
    agent.invoke({"messages": [{"role": "user", "content": "go"}]},
                 config={"configurable": {"thread_id": f"floor-{next(_threads)}"}})
    childs_calls = [c for c in model.calls if any("mail bob" in str(m.content) for m in c["messages"])]
    assert childs_calls, "the child's model was never called"
    texts = " ".join(str(m.content) for c in childs_calls for m in c["messages"])
    assert EMAIL not in texts and "[REDACTED_EMAIL]" in texts


def test_a_child_middleware_sharing_the_parents_data_policy_name_is_an_error_naming_it():
    class MyPII(PIIMiddleware):
        """The parent's own kind of redaction."""

    model = ScriptedChatModel(responses=[{"tool_calls": [tool_call("task", description="x", subagent_type="helper")]},
                                         "parent done"])
    agent = create_deep_agent(model, [danger], checkpointer=InMemorySaver(), middleware=[MyPII("email")],
                              subagents=[{**HELPER, "tools": ["danger"], "middleware": [MyPII("email")]}])
    result = agent.invoke({"messages": [{"role": "user", "content": "go"}]},
                          config={"configurable": {"thread_id": f"floor-{next(_threads)}"}})
    answer = [m for m in result["messages"] if m.type == "tool"][0]
    assert "MyPII[email]" in str(answer.content) and "rename one" in str(answer.content)
