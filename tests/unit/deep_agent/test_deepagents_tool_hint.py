"""A model calling one of deepagents' tools the agent lacks is told where the tool comes from.

Without deepagents' stack (the extra not installed, or ``deepagents_stack=False``)
LangChain answers such a call ``Error: write_file is not a valid tool, try one
of [...]``; the result says too that the tool comes with deepagents' stack and
how to get it, on the root and on every child, whatever its model and tools.
"""

from __future__ import annotations

import sys

import pytest
from langchain_core.tools import tool

from deep_agent import create_deep_agent
from deep_agent._testing import ScriptedChatModel, tool_call
from helpers.graphs import user
from subagents._settings import DelegationSettings

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
    out = run(create_deep_agent(model, [internet_search], settings=DelegationSettings.of(deepagents_stack=False)), user("go"))
    [result] = _results(out["messages"], "grep")
    assert "deepagents_stack=False in create_deep_agent's settings leaves its stack out" in result and INSTALL not in result


def test_the_hints_name_every_one_of_deepagents_file_tools():
    deepagents = pytest.importorskip("deepagents")
    from typing import get_args

    from deep_agent._deepagents import missing_tool_hints

    assert set(get_args(deepagents.FsToolName)) | {"write_todos"} == set(missing_tool_hints())



def test_every_agent_is_told_the_root_and_each_child_whatever_its_model_and_tools(without_deepagents, run):
    def write(): return {"tool_calls": [tool_call("write_file", file_path="/notes.md", content="notes")]}
    own_model = ScriptedChatModel(responses=[write(), "I could not write the notes."])
    model = ScriptedChatModel(
        rules=[(brief, [write(), "I could not write the notes."]) for brief in ("Share the notes", "Bare notes")],
        responses=[{"tool_calls": [tool_call("write_file", file_path="/root.md", content="root"),
                                   *(tool_call("task", description=brief, subagent_type=name) for brief, name in
                                     [("Share the notes", "sharer"), ("Own the notes", "owner"),
                                      ("Bare notes", "bare")])]},
                   "done"],
    )
    specs = [{"name": "sharer", "description": "Shares the root's model and tools.", "system_prompt": "Write."},
             {"name": "owner", "description": "Has its own model.", "system_prompt": "Write.", "model": own_model},
             {"name": "bare", "description": "Has no tools.", "system_prompt": "Write.", "tools": []}]
    out = run(create_deep_agent(model, [internet_search], subagents=specs), user("notes please"))

    def child_saw(brief: str) -> list[str]:  # the write_file result in the child's last call
        return next(_results(c["messages"], "write_file") for c in reversed(model.calls)
                    if any(m.type == "human" and m.text == brief for m in c["messages"]))

    told = {"root": _results(out["messages"], "write_file"), "sharer": child_saw("Share the notes"),
            "owner": _results(own_model.calls[-1]["messages"], "write_file"), "bare": child_saw("Bare notes")}
    for who, [result] in told.items():
        assert result.startswith("Error: write_file is not a valid tool"), who
        assert INSTALL in result, who
