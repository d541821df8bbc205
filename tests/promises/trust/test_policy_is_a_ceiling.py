"""The user's policy bounds every file's: an agent file may ask for more approvals, never fewer."""

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
from subagents._settings import DelegationSettings

DETAIL = " Details: " + "every step was checked and recorded. " * 6
APPROVE = Command(resume={"decisions": [{"type": "approve"}]})


def build(folder: Path, file_mode: str, user_mode: str | None, child_tool: str) -> tuple[Any, list[str]]:
    ran: list[str] = []

    @tool
    def Bash(command: str) -> str:  # noqa: N802 - Claude Code's tool name
        """Run a shell command."""
        ran.append(command)
        return "ok"

    @tool
    def read_file(path: str) -> str:
        """Read a file."""
        ran.append(f"read {path}")
        return "contents"

    (folder / "worker.md").write_text(
        f"---\ndescription: does things\npermissionMode: {file_mode}\n---\nWork.\n", encoding="utf-8"
    )
    args = {"command": "touch pwned"} if child_tool == "Bash" else {"path": "a.txt"}
    model = ScriptedChatModel(
        rules=[("Do it", [{"tool_calls": [tool_call(child_tool, **args)]}, "Done." + DETAIL])],
        responses=[{"tool_calls": [tool_call("task", description="Do it", subagent_type="worker")]},
                   "parent done"],
    )
    agent = create_deep_agent(
        model, [Bash, read_file],
        checkpointer=InMemorySaver(),
        settings=DelegationSettings.of(permission_mode=user_mode, agents_dirs=[folder], general_purpose=False,
                                       risky_tools={"Bash"}),
    )
    return agent, ran


@pytest.mark.parametrize(("file_mode", "user_mode"), [
    ("bypassPermissions", "always_confirm"),
    ("bypassPermissions", "confirm_risky"),
    ("acceptEdits", "always_confirm"),
    ("never_confirm", "confirm_risky"),
])
def test_a_looser_file_mode_cannot_switch_off_the_users_approvals(tmp_path, run, file_mode, user_mode):
    agent, ran = build(tmp_path, file_mode, user_mode, "Bash")
    config = {"configurable": {"thread_id": "t"}}
    out = run(agent, user("go"), config)
    (interrupt,) = out["__interrupt__"]
    assert interrupt.value["action_requests"][0]["args"] == {"command": "touch pwned"}
    assert ran == []  # paused before the command ran
    out = run(agent, APPROVE, config)
    assert ran == ["touch pwned"]  # a person approved it: it runs
    assert tool_messages(out)[0].content.startswith("Done.")


def test_a_stricter_file_mode_applies(tmp_path, run):
    agent, ran = build(tmp_path, "plan", "confirm_risky", "read_file")  # plan = always_confirm
    out = run(agent, user("go"), {"configurable": {"thread_id": "t"}})
    assert out["__interrupt__"][0].value["action_requests"][0]["name"] == "read_file"
    assert ran == []


@pytest.mark.parametrize("user_mode", ["never_confirm", None])
def test_bypass_from_a_file_is_honoured_when_the_user_allows_it(tmp_path, run, user_mode):
    agent, ran = build(tmp_path, "bypassPermissions", user_mode, "Bash")
    out = run(agent, user("go"), {"configurable": {"thread_id": "t"}})
    assert "__interrupt__" not in out
    assert ran == ["touch pwned"]
