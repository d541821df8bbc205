"""A spec the build refuses for an unknown tool name starts none of its MCP servers."""

from __future__ import annotations

import sys
from pathlib import Path

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


def test_unknown_tool_error_names_the_field_and_starts_no_mcp_server(tmp_path: Path) -> None:
    # The "server" records that it was started, then exits: listing it would fail.
    marker = tmp_path / "started"
    spec = SubagentSpec(
        name="reader", description="Reads.", system_prompt="Read.", tools=["serch"],
        mcp_config={"files": {"command": sys.executable, "args": ["-c", f"open({str(marker)!r}, 'w')"]}},
    )
    with pytest.raises(SpecError, match=r"field 'tools' names 'serch'"):
        build_subagent(spec, parent_model=ScriptedChatModel(replies=["x"]), parent_tools=[search],
                       options=BuildOptions(Definitions(unknown_tools="error")))
    assert not marker.exists()
