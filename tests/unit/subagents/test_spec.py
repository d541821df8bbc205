"""Spec validation: dicts accepted, bad input named, duplicates refused."""

from __future__ import annotations

import pytest
from langchain_core.messages import AIMessage

from deep_agent import create_deep_agent
from deep_agent._testing import ScriptedChatModel
from subagents import CompiledSubagent, SpecError, SubagentSpec, coerce_spec, coerce_specs
from subagents._settings import DelegationSettings


def test_plain_dict_becomes_a_spec_and_runnable_dict_a_compiled_subagent():
    spec = coerce_spec({"name": "a", "description": "does a", "max_turns": 3})
    assert isinstance(spec, SubagentSpec) and spec.max_turns == 3 and spec.tools is None
    graph = create_deep_agent(ScriptedChatModel(default="x"), settings=DelegationSettings.of(general_purpose=False))
    compiled = coerce_spec({"name": "b", "description": "does b", "runnable": graph})
    assert isinstance(compiled, CompiledSubagent) and compiled.runnable is graph


@pytest.mark.parametrize(
    ("value", "message"),
    [
        ({"description": "no name"}, "field 'name': Field required"),
        ({"name": "a"}, "field 'description': Field required"),
        ({"name": "a", "description": "  "}, "field 'description': description must not be empty"),
        ({"name": "a", "description": "d", "max_turns": 0}, "field 'max_turns'"),
        ({"name": "a", "description": "d", "timeout_s": -1}, "field 'timeout_s'"),
        ({"name": "a", "description": "d", "tools": "search"}, "field 'tools'"),
        ({"name": "a", "description": "d", "middleware": ["nope"]}, "field 'middleware'"),
        ({"name": "a", "description": "d", "colour": "red"}, "field 'colour': unknown field"),
        ({"name": "a b", "description": "d"}, "field 'name': name must be letters, digits"),
        ({"name": "a", "description": "d", "runnable": object()}, "field 'runnable'"),
    ],
)
def test_bad_specs_name_the_agent_and_field(value, message):
    with pytest.raises(SpecError) as info:
        coerce_spec(value)
    assert message in str(info.value)
    assert "subagent" in str(info.value)


def test_non_mapping_is_rejected():
    with pytest.raises(SpecError, match="expected a SubagentSpec"):
        coerce_spec(["not", "a", "spec"])


def test_duplicate_names_are_an_error():
    with pytest.raises(SpecError, match="duplicate subagent name 'a'"):
        coerce_specs([{"name": "a", "description": "1"}, {"name": "a", "description": "2"}])
    with pytest.raises(SpecError, match="duplicate"):
        create_deep_agent(
            ScriptedChatModel(default="x"),
            subagents=[{"name": "a", "description": "1"}, SubagentSpec(name="a", description="2")],
        )


def test_model_strings_resolve_through_init_chat_model_on_first_use():
    from subagents.definitions import resolve_model

    parent = ScriptedChatModel(default="x")
    assert resolve_model(None, parent, agent="a") is parent
    assert resolve_model("inherit", parent, agent="a") is parent
    with pytest.raises(SpecError, match="subagent 'a': field 'model' 'nosuchprovider:m'"):
        resolve_model("nosuchprovider:m", parent, agent="a")
    own = ScriptedChatModel(default=AIMessage("own"))
    assert resolve_model(own, parent, agent="a") is own
