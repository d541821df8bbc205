"""A name is the whole value: a trailing newline is refused, never read as a second, look-alike name.

``re.match`` with ``$`` accepts ``"reviewer\\n"``, since ``$`` also matches
before a final newline; each check here must hold the entire string.
"""

from __future__ import annotations

import pytest

from subagents import AgentFileError, SpecError, coerce_spec, discover_agents, load_agent_file
from subagents._registry import DynamicSubagentError, check_definition
from subagents.definitions._skills import check_skill_entry
from subagents.background import RemoteSubagentSpec
from subagents.definitions import load_skill, normalize_mcp_config
from subagents._errors import SkillFileError
from subagents.definitions._models import check_model_name
from helpers.agent_files import write


def test_an_agent_file_name_with_a_trailing_newline_is_refused_naming_the_field(tmp_path):
    path = write(tmp_path / "a.md", '---\nname: "reviewer\\n"\ndescription: d\n---\nYou review.\n')
    with pytest.raises(AgentFileError) as info:
        load_agent_file(path)
    assert info.value.field == "name"


def test_two_files_cannot_both_look_like_one_name_at_one_level(tmp_path):
    write(tmp_path / "a.md", "---\nname: reviewer\ndescription: the real one\n---\nYou review.\n")
    impostor = write(tmp_path / "b.md", '---\nname: "reviewer\\n"\ndescription: an impostor\n---\nB\n')
    report = discover_agents([tmp_path])
    assert list(report.definitions) == ["reviewer"]
    assert [p.path for p in report.problems] == [impostor]


def test_a_spec_name_with_a_trailing_newline_is_refused():
    with pytest.raises(SpecError, match="field 'name'"):
        coerce_spec({"name": "reviewer\n", "description": "d"})


def test_an_mcp_server_name_with_a_trailing_newline_is_refused():
    with pytest.raises(ValueError, match="expected MCP server names"):
        normalize_mcp_config({"calc\n": {"command": "python3"}})


def test_a_skill_name_with_a_trailing_newline_is_refused(tmp_path):
    write(tmp_path / "good-name" / "SKILL.md", '---\nname: "good-name\\n"\ndescription: d\n---\n# Steps\n')
    with pytest.raises(SkillFileError, match="expected lower-case letters") as info:
        load_skill(tmp_path / "good-name")
    assert info.value.field == "name"


@pytest.mark.parametrize("check", [check_skill_entry, check_model_name], ids=["skill entry", "model"])
def test_a_skill_entry_or_model_name_never_keeps_a_trailing_newline(check):
    value = "openai:gpt-4.1\n" if check is check_model_name else "git-diff\n"
    try:
        kept = check(value)
    except ValueError:
        return
    assert "\n" not in kept


def test_a_dynamic_subagent_name_with_a_trailing_newline_is_refused():
    request = {"name": "sql\n", "description": "d", "system_prompt": "p"}
    with pytest.raises(DynamicSubagentError, match="name: must be a slug"):
        check_definition(request, declared=(), existing={}, parent_tools=(), cap=5)


@pytest.mark.parametrize(
    ("extra", "message"),
    [({"name": "remote\n"}, "name must be a slug"),
     ({"api_key_env": "KEY\n"}, "environment variable name"),
     ({"headers": {"x-team\n": "a"}}, "not a valid HTTP header name")],
    ids=["name", "api_key_env", "header"],
)
def test_remote_spec_names_with_a_trailing_newline_are_refused(extra, message):
    fields = {"name": "remote", "description": "d", "graph_id": "g", "url": "http://localhost:1", **extra}
    with pytest.raises(ValueError, match=message):
        RemoteSubagentSpec(**fields)
