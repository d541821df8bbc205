"""A model calling one of deepagents' tools the agent lacks is told where the tool comes from.

Without deepagents' stack (the extra not installed, or ``deepagents_stack=False``)
LangChain answers such a call ``Error: write_file is not a valid tool, try one
of [...]``; the result says too that the tool comes with deepagents' stack and
how to get it, on the root and on a child sharing its model.
"""

from __future__ import annotations

import sys

import pytest
from langchain_core.tools import tool

from deep_agent import create_deep_agent
from deep_agent.testing import ScriptedChatModel, tool_call
from helpers.graphs import user

INSTALL = 'pip install "governed-subagents[deepagents]"'


@pytest.fixture
def without_deepagents(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in [m for m in sys.modules if m == "deepagents" or m.startswith("deepagents.")]:
        monkeypatch.setitem(sys.modules, name, None)  # an import of it now raises ImportError
    monkeypatch.setitem(sys.modules, "deepagents", None)


@tool
def internet_search(query: str) -> str:
    """Search the web."""
    return f"Results for {query}."


def _results(messages: list, name: str) -> list[str]:
    return [m.text for m in messages if m.type == "tool" and m.name == name]


def test_a_child_calling_write_file_is_told_to_install_the_extra(without_deepagents, run):
    model = ScriptedChatModel(
        rules=[("Research LangGraph", [
            {"tool_calls": [tool_call("internet_search", query="LangGraph")]},
            {"tool_calls": [tool_call("write_file", file_path="/notes.md", content="notes")]},
            "I could not write the notes.",
        ])],
        responses=[{"tool_calls": [tool_call("task", description="Research LangGraph", subagent_type="researcher")]},
                   "done"],
    )
    researcher = {"name": "researcher", "description": "Researches.", "system_prompt": "Research.",
                  "tools": [internet_search]}
    run(create_deep_agent(model, [internet_search], subagents=[researcher]), user("notes please"))
    [result] = _results(model.calls[-2]["messages"], "write_file")  # the child's last call saw it
    assert result.startswith("Error: write_file is not a valid tool, try one of [internet_search].")
    assert "deepagents' file tools" in result and INSTALL in result and "tools=" in result


def test_the_root_is_told_for_each_of_deepagents_tools_and_nothing_else_changes(without_deepagents, run):
    calls = [tool_call("ls", path="/"), tool_call("execute", command="pwd"), tool_call("write_todos", todos=[]),
             tool_call("fly", to="moon"), tool_call("internet_search", query="x")]
    model = ScriptedChatModel(responses=[{"tool_calls": calls}, "done"])
    out = run(create_deep_agent(model, [internet_search]), user("go"))
    messages = out["messages"]
    assert INSTALL in _results(messages, "ls")[0]
    assert "backend that runs commands" in _results(messages, "execute")[0]
    assert "middleware=[TodoListMiddleware()]" in _results(messages, "write_todos")[0]
    assert _results(messages, "fly") == ["Error: fly is not a valid tool, try one of [task, internet_search]."]
    assert _results(messages, "internet_search") == ["Results for x."]


def test_with_deepagents_installed_but_its_stack_left_out_the_result_says_so(run):
    pytest.importorskip("deepagents")
    model = ScriptedChatModel(responses=[{"tool_calls": [tool_call("grep", pattern="x")]}, "done"])
    out = run(create_deep_agent(model, [internet_search], deepagents_stack=False), user("go"))
    [result] = _results(out["messages"], "grep")
    assert "create_deep_agent(deepagents_stack=False) leaves its stack out" in result and INSTALL not in result


def test_the_hints_name_every_one_of_deepagents_file_tools():
    deepagents = pytest.importorskip("deepagents")
    from typing import get_args

    from deep_agent._deepagents import missing_tool_hints

    assert set(get_args(deepagents.FsToolName)) | {"write_todos"} == set(missing_tool_hints())
