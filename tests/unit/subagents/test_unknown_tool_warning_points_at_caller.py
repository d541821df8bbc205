"""The warning for a spec naming a tool the parent lacks points at the code that built the child."""

from __future__ import annotations

import warnings

from langchain_core.tools import tool

from deep_agent._testing import ScriptedChatModel
from subagents._builder import build_subagent
from subagents._spec import SubagentSpec


@tool
def search(query: str) -> str:
    """Search."""
    return query


def test_unknown_tool_warning_points_at_the_build_subagent_call() -> None:
    spec = SubagentSpec(name="reader", description="Reads.", system_prompt="Read.", tools=["serch"])
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        build_subagent(spec, parent_model=ScriptedChatModel(replies=["x"]), parent_tools=[search])
    [warning] = [w for w in caught if "field 'tools' names 'serch'" in str(w.message)]
    # Not a line inside the library, which a user can neither find nor filter on.
    assert warning.filename == __file__
