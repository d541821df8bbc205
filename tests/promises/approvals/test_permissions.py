"""Permission modes: which child tool calls pause the root run for human approval."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from helpers.graphs import tool_messages, user
from langchain_core.tools import tool
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.types import Command

from deep_agent import create_deep_agent
from deep_agent._testing import ScriptedChatModel, tool_call
from subagents import SpecError
from subagents._settings import DelegationSettings
from subagents.definitions import normalize_permission_mode

DETAIL = " Details: " + "every step was checked and recorded. " * 6
APPROVE = Command(resume={"decisions": [{"type": "approve"}]})


class Workspace:
    """Two tools, one of them risky, and a log of what actually ran."""

    def __init__(self) -> None:
        self.ran: list[str] = []

        @tool
        def read_file(path: str) -> str:
            """Read a file."""
            self.ran.append(f"read {path}")
            return f"contents of {path}"

        @tool
        def write_file(path: str) -> str:
            """Write a file."""
            self.ran.append(f"write {path}")
            return f"wrote {path}"

        self.tools = [read_file, write_file]


def delegation(child_tool: str) -> ScriptedChatModel:
    return ScriptedChatModel(
        rules=[("Handle a.txt", [{"tool_calls": [tool_call(child_tool, path="a.txt")]},
                                 "Handled a.txt." + DETAIL])],
        responses=[{"tool_calls": [tool_call("task", description="Handle a.txt", subagent_type="worker")]},
                   "parent done"],
    )


def build(
    child_tool: str, *, own: str | None, parent: str | None, spec_extra: dict[str, Any] | None = None
) -> tuple[Any, Workspace, dict[str, Any], ScriptedChatModel]:
    workspace = Workspace()
    model = delegation(child_tool)
    spec: dict[str, Any] = {"name": "worker", "description": "handles files", "system_prompt": "Work."}
    if own is not None:
        spec["permission_mode"] = own
    spec.update(spec_extra or {})
    agent = create_deep_agent(
        model, workspace.tools, subagents=[spec],
        checkpointer=InMemorySaver(),
        settings=DelegationSettings.of(permission_mode=parent, general_purpose=False, risky_tools={"write_file"}),
    )
    return agent, workspace, {"configurable": {"thread_id": "t"}}, model


CASES = [
    # own mode, parent policy, tool the child calls, pauses?
    ("always_confirm", None, "read_file", True),
    ("confirm_risky", None, "write_file", True),
    ("confirm_risky", None, "read_file", False),
    ("never_confirm", "always_confirm", "write_file", True),  # the parent's policy is a ceiling
    ("always_confirm", "confirm_risky", "read_file", True),  # a stricter own mode applies
    (None, "always_confirm", "read_file", True),  # omitted: the parent's policy
    (None, "confirm_risky", "write_file", True),
    (None, "confirm_risky", "read_file", False),
    (None, None, "write_file", False),
    ("plan", None, "read_file", True),  # Claude Code's values
    ("acceptEdits", None, "write_file", True),
    ("bypassPermissions", "always_confirm", "write_file", True),
    ("bypassPermissions", "never_confirm", "write_file", False),  # the user allowed it
]


@pytest.mark.parametrize(("own", "parent", "child_tool", "pauses"), CASES)
def test_mode_decides_whether_a_child_tool_call_pauses(run, own, parent, child_tool, pauses):
    agent, workspace, config, _ = build(child_tool, own=own, parent=parent)
    out = run(agent, user("go"), config)
    verb = child_tool.split("_")[0]
    if not pauses:
        assert "__interrupt__" not in out
        assert workspace.ran == [f"{verb} a.txt"]
        assert tool_messages(out)[0].content.startswith("Handled a.txt.")
        return
    (interrupt,) = out["__interrupt__"]
    (request,) = interrupt.value["action_requests"]
    assert request["name"] == child_tool and request["args"] == {"path": "a.txt"}
    assert workspace.ran == []  # paused before the tool ran
    state = agent.get_state(config)
    assert state.next and state.interrupts
    out = run(agent, APPROVE, config)
    assert workspace.ran == [f"{verb} a.txt"]
    assert tool_messages(out)[0].content.startswith("Handled a.txt.")
    assert out["messages"][-1].content == "parent done"


def test_rejected_call_never_runs_and_the_child_hears_why(run):
    agent, workspace, config, model = build("write_file", own="always_confirm", parent=None)
    run(agent, user("go"), config)
    reject = Command(resume={"decisions": [{"type": "reject", "message": "not on a Friday"}]})
    out = run(agent, reject, config)
    assert workspace.ran == []
    last_child_call = [c for c in model.calls if c["messages"][1].text == "Handle a.txt"][-1]
    assert "not on a Friday" in last_child_call["messages"][-1].text
    assert tool_messages(out)[0].content.startswith("Handled a.txt.")
    assert out["messages"][-1].content == "parent done"


def test_explicit_interrupt_on_wins_per_tool_over_the_mode(run):
    agent, workspace, config, _ = build(
        "read_file", own="never_confirm", parent=None, spec_extra={"interrupt_on": {"read_file": True}}
    )
    out = run(agent, user("go"), config)
    assert out["__interrupt__"][0].value["action_requests"][0]["name"] == "read_file"
    assert workspace.ran == []


def test_agent_file_mode_reaches_the_child(tmp_path: Path, run):
    (tmp_path / "worker.md").write_text(
        "---\ndescription: handles files\npermissionMode: default\n---\nWork.\n", encoding="utf-8"
    )
    workspace = Workspace()
    agent = create_deep_agent(
        delegation("write_file"), workspace.tools, checkpointer=InMemorySaver(), settings=DelegationSettings.of(
            agents_dirs=[tmp_path], general_purpose=False, risky_tools={"write_file"},
        ),
    )
    config = {"configurable": {"thread_id": "file"}}
    out = run(agent, user("go"), config)
    assert out["__interrupt__"][0].value["action_requests"][0]["name"] == "write_file"
    assert workspace.ran == []


@pytest.mark.parametrize(("tool_name", "pauses"), [("write_file", True), ("read_file", False)])
def test_the_parents_own_tools_follow_its_policy(run, tool_name, pauses):
    workspace = Workspace()
    model = ScriptedChatModel(responses=[{"tool_calls": [tool_call(tool_name, path="p.txt")]}, "done"])
    agent = create_deep_agent(
        model, workspace.tools, checkpointer=InMemorySaver(),
        settings=DelegationSettings.of(permission_mode="confirm_risky", risky_tools={"write_file"}),
    )
    out = run(agent, user("go"), {"configurable": {"thread_id": "root"}})
    assert ("__interrupt__" in out) is pauses
    assert (workspace.ran == []) is pauses


@pytest.mark.parametrize(
    ("value", "mode"),
    [("always_confirm", "always_confirm"), ("Never-Confirm", "never_confirm"), ("default", "confirm_risky"),
     ("acceptEdits", "confirm_risky"), ("plan", "always_confirm"), ("dontAsk", "always_confirm"),
     ("bypassPermissions", "never_confirm"), (None, None)],
)
def test_permission_values_normalise(value, mode):
    assert normalize_permission_mode(value) == mode


def test_bad_parent_policy_is_a_clear_error():
    with pytest.raises(SpecError, match="permission_mode: expected one of always_confirm"):
        create_deep_agent(ScriptedChatModel(), settings=DelegationSettings.of(permission_mode="sometimes"))
    with pytest.raises(SpecError, match="risky_tools: expected a set of tool names"):
        create_deep_agent(ScriptedChatModel(), settings=DelegationSettings.of(risky_tools="write_file"))
