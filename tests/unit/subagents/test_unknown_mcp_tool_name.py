"""A spec's ``tools`` naming an MCP tool no server of its ``mcp_config`` lists is reported like any unknown name."""

from __future__ import annotations

import warnings

import pytest
from langchain_core.tools import tool

from deep_agent._testing import ScriptedChatModel
from subagents._builder import BuildOptions, build_subagent
from subagents._errors import SpecError
from subagents._settings import Definitions
from subagents._spec import SubagentSpec


@tool
def search(query: str) -> str:
    """Search."""
    return query


def _spec() -> SubagentSpec:
    # Claude Code's form for a tool of a server this spec never configures: the child cannot have it.
    return SubagentSpec(name="triager", description="Triages.", system_prompt="Triage.",
                        tools=["search", "mcp__github__create_issue"])


def test_unknown_mcp_tool_name_is_an_error_naming_the_field() -> None:
    with pytest.raises(SpecError, match=r"field 'tools' names 'mcp__github__create_issue'.*mcp_config"):
        build_subagent(_spec(), parent_model=ScriptedChatModel(replies=["x"]), parent_tools=[search],
                       options=BuildOptions(Definitions(unknown_tools="error")))


def test_unknown_mcp_tool_name_warns_and_the_rest_is_kept() -> None:
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        graph = build_subagent(_spec(), parent_model=ScriptedChatModel(replies=["x"]), parent_tools=[search])
    assert any("mcp__github__create_issue" in str(w.message) for w in caught)
    assert set(graph.get_graph().nodes) >= {"tools"}  # search is still the child's


def test_ignore_says_nothing() -> None:
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        build_subagent(_spec(), parent_model=ScriptedChatModel(replies=["x"]), parent_tools=[search],
                       options=BuildOptions(Definitions(unknown_tools="ignore")))
    assert not [w for w in caught if "mcp__github" in str(w.message)]


def test_a_parent_tool_named_like_an_mcp_tool_is_no_unknown_name() -> None:
    @tool("mcp__github__create_issue")
    def create_issue(title: str) -> str:
        """Create an issue (the parent's own, from its MCP client)."""
        return title

    build_subagent(_spec(), parent_model=ScriptedChatModel(replies=["x"]), parent_tools=[search, create_issue],
                   options=BuildOptions(Definitions(unknown_tools="error")))  # no SpecError: the parent has it
