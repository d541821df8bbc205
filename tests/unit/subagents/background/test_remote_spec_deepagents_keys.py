"""deepagents' ``AsyncSubAgent`` keys ``update_strategy``, ``mode`` and ``notify_parent`` on a remote spec."""

from __future__ import annotations

import pytest

from deep_agent import AsyncSubAgentMiddleware
from subagents import RemoteSubagentSpec, SpecError

BASE = {"name": "far", "description": "d", "graph_id": "g", "url": "http://127.0.0.1:9"}


@pytest.mark.parametrize("key, value", [("update_strategy", "interrupt"), ("mode", "isolated"),
                                        ("notify_parent", True), ("notify_parent", False)])
def test_the_behaviour_this_library_has_is_accepted(key, value):
    AsyncSubAgentMiddleware(async_subagents=[{**BASE, key: value}])
    assert getattr(RemoteSubagentSpec(**{**BASE, key: value}), key) == value


@pytest.mark.parametrize("key, value", [("update_strategy", "enqueue"), ("mode", "fork"),
                                        ("notify_parent", "sometimes")])
def test_another_value_is_an_error_naming_the_field(key, value):
    with pytest.raises(SpecError, match=key):
        AsyncSubAgentMiddleware(async_subagents=[{**BASE, key: value}])


def test_two_remote_specs_of_one_name_are_an_error_not_a_silent_replacement():
    with pytest.raises(SpecError, match="duplicate subagent name 'far'"):
        AsyncSubAgentMiddleware(async_subagents=[BASE, {**BASE, "description": "another"}])


def test_system_prompt_reads_the_text_added_to_the_parents_prompt_as_in_deepagents():
    mw = AsyncSubAgentMiddleware(async_subagents=[{**BASE, "name": "alpha", "description": "Alpha agent"},
                                                  {**BASE, "name": "beta", "description": "Beta agent"}],
                                 system_prompt="Async subagent guidance.")
    assert mw.system_prompt.startswith("Async subagent guidance.")
    assert "alpha: Alpha agent" in mw.system_prompt and "beta: Beta agent" in mw.system_prompt
