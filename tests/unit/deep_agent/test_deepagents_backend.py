"""deepagents' backend, skills, memory and permissions on the root, through deepagents' own middleware.

With the ``deepagents`` extra the root gets deepagents' file tools over the
backend (the ``files`` state key by default); children inherit them by the
same rule as under a plain ``create_agent`` and share ``files`` both ways.
Without the extra, each argument is an error that says what to install.
"""

from __future__ import annotations

import sys
import warnings

import pytest
from langchain.agents import create_agent

from deep_agent import SubAgentMiddleware, create_deep_agent
from deep_agent._factory import MissingExtraError
from deep_agent._testing import ScriptedChatModel, tool_call
from subagents import SpecError
from helpers.graphs import user
from subagents._settings import DelegationSettings

pytest.importorskip("deepagents")
from deepagents.backends import StateBackend  # noqa: E402
from deepagents.backends.utils import create_file_data  # noqa: E402
from deepagents.middleware.filesystem import FilesystemMiddleware  # noqa: E402

def _asked(call: dict) -> str:
    return next(m.text for m in call["messages"] if m.type == "human")


FILE_TOOLS = {"ls", "read_file", "write_file", "edit_file", "glob", "grep"}


def _child_writes_then_parent_reads() -> ScriptedChatModel:
    return ScriptedChatModel(
        rules=[("write the note", [{"tool_calls": [tool_call("write_file", file_path="/note.md", content="from child")]},
                                   "The child wrote /note.md."])],
        responses=[
            {"tool_calls": [tool_call("task", description="write the note", subagent_type="general-purpose")]},
            {"tool_calls": [tool_call("read_file", file_path="/note.md")]},
            "parent done",
        ],
    )


@pytest.mark.parametrize("build", ["create_deep_agent", "create_agent"])
def test_children_inherit_middleware_file_tools_and_share_files_both_ways(build, run):
    model = _child_writes_then_parent_reads()
    if build == "create_deep_agent":
        agent = create_deep_agent(model, middleware=[FilesystemMiddleware()])
    else:
        agent = create_agent(model, [], middleware=[FilesystemMiddleware(), SubAgentMiddleware([])])
    out = run(agent, {**user("go"), "files": {"/seed.md": create_file_data("from parent")}})
    child_call = next(c for c in model.calls if "write the note" in _asked(c))
    assert FILE_TOOLS <= set(child_call["tools"])
    assert out["files"]["/note.md"]["content"] == "from child"
    assert out["files"]["/seed.md"]["content"] == "from parent"  # the child's write kept the parent's files
    read = [m for m in out["messages"] if m.type == "tool" and m.name == "read_file"]
    assert "from child" in read[0].text


@pytest.mark.parametrize("arguments", [
    {"backend": None, "permissions": [{"operations": ["write"], "paths": ["/locked/**"], "mode": "deny"}]},
    {"memory": ["/AGENTS.md"]},
], ids=["permissions", "memory"])
def test_deepagents_arguments_give_the_root_deepagents_file_tools(arguments, run):
    model = ScriptedChatModel(responses=["root done"])
    agent = create_deep_agent(model, settings=DelegationSettings.of(general_purpose=False), **arguments)
    run(agent, {**user("go"), "files": {"/AGENTS.md": create_file_data("Always answer in haiku.")}})
    (call,) = model.calls
    assert FILE_TOOLS <= set(call["tools"])
    if "memory" in arguments:
        assert "Always answer in haiku." in call["system"]


def test_a_deny_rule_binds_the_root_and_the_children_that_inherit_its_tools(run):
    deny = [{"operations": ["write"], "paths": ["/locked/**"], "mode": "deny"}]
    model = ScriptedChatModel(
        rules=[("try the lock", [{"tool_calls": [tool_call("write_file", file_path="/locked/a", content="x")]},
                                 "The child tried."])],
        responses=[
            {"tool_calls": [tool_call("write_file", file_path="/locked/b", content="x")]},
            {"tool_calls": [tool_call("task", description="try the lock", subagent_type="general-purpose")]},
            "parent done",
        ],
    )
    out = run(create_deep_agent(model, permissions=deny), user("go"))
    assert not any(path.startswith("/locked/") for path in out.get("files", {}))
    (child,) = [c for c in model.calls if "try the lock" in _asked(c) and c["messages"][-1].type == "tool"]
    assert "permission denied" in child["messages"][-1].text


def test_a_specs_permissions_replace_the_parents_for_that_child(run):
    # The root may write anywhere; the reviewer only under /notes/, as deepagents' spec permissions say.
    reviewer = {"name": "reviewer", "description": "Reviews.", "system_prompt": "Review.",
                "permissions": [{"operations": ["write"], "paths": ["/notes/**"], "mode": "allow"},
                                {"operations": ["write"], "paths": ["/**"], "mode": "deny"}]}
    model = ScriptedChatModel(
        rules=[("review it", [{"tool_calls": [tool_call("write_file", file_path="/notes/r.md", content="ok"),
                                              tool_call("write_file", file_path="/report.md", content="no")]},
                              "Reviewed."])],
        responses=[
            {"tool_calls": [tool_call("write_file", file_path="/root.md", content="root")]},
            {"tool_calls": [tool_call("task", description="review it", subagent_type="reviewer")]},
            "parent done",
        ],
    )
    out = run(create_deep_agent(model, backend=StateBackend(), subagents=[reviewer]), user("go"))
    assert sorted(out["files"]) == ["/notes/r.md", "/root.md"]  # the child's allowed write came back
    (child,) = [c for c in model.calls if "review it" in _asked(c) and c["messages"][-1].type == "tool"]
    results = {m.tool_call_id: m.text for m in child["messages"] if m.type == "tool"}
    assert sum("permission denied" in text for text in results.values()) == 1


def test_a_specs_permissions_need_a_backend_and_a_bad_rule_names_the_spec():
    spec = {"name": "reviewer", "description": "Reviews.", "system_prompt": "Review.",
            "permissions": [{"operations": ["write"], "paths": ["/**"], "mode": "interrupt"}]}
    with pytest.raises(SpecError, match=r"subagent 'reviewer': field 'permissions', item 0: mode 'interrupt'"):
        create_deep_agent(ScriptedChatModel(), backend=StateBackend(), subagents=[spec])
    with pytest.raises(SpecError, match=r"'permissions'.*backend="):
        create_deep_agent(ScriptedChatModel(), subagents=[{**spec, "permissions": [
            {"operations": ["write"], "paths": ["/**"], "mode": "deny"}]}])


def test_skills_on_the_backend_reach_the_roots_prompt(run):
    skill = "---\nname: haiku-writing\ndescription: Writes haiku on demand.\n---\nCount syllables.\n"
    model = ScriptedChatModel(responses=["root done"])
    agent = create_deep_agent(model, skills=["/skills/"], settings=DelegationSettings.of(general_purpose=False))
    run(agent, {**user("go"), "files": {"/skills/haiku-writing/SKILL.md": create_file_data(skill)}})
    assert "haiku-writing" in model.calls[0]["system"]


def test_an_interrupt_rule_is_refused_with_what_to_write():
    rule = {"operations": ["write"], "paths": ["/x/**"], "mode": "interrupt"}
    with pytest.raises(ValueError, match=r"argument 'permissions', item 0: mode 'interrupt'.*interrupt_on="):
        create_deep_agent(ScriptedChatModel(), permissions=[rule])


def test_a_malformed_rule_names_the_item():
    with pytest.raises(ValueError, match=r"argument 'permissions', item 1: .*must start with '/'"):
        create_deep_agent(ScriptedChatModel(), permissions=[
            {"operations": ["read"], "paths": ["/a"]}, {"operations": ["write"], "paths": ["relative"]}])


@pytest.mark.parametrize("argument, value", [
    ("backend", object()), ("skills", ["/skills/"]), ("memory", ["/AGENTS.md"]),
    ("permissions", [{"operations": ["write"], "paths": ["/**"], "mode": "deny"}]),
], ids=["backend", "skills", "memory", "permissions"])
def test_without_the_extra_each_argument_says_what_to_install(argument, value, monkeypatch):
    for name in [m for m in sys.modules if m == "deepagents" or m.startswith("deepagents.")]:
        monkeypatch.setitem(sys.modules, name, None)  # an import of it now raises ImportError
    monkeypatch.setitem(sys.modules, "deepagents", None)
    with pytest.raises(MissingExtraError, match=rf"argument '{argument}' .*pip install \"governed-subagents\[deepagents\]\""):
        create_deep_agent(ScriptedChatModel(), **{argument: value})


def test_model_none_is_deepagents_default_with_its_warning():
    pytest.importorskip("langchain_anthropic")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        agent = create_deep_agent(settings=DelegationSettings.of(general_purpose=False))
    assert any(issubclass(w.category, DeprecationWarning) and "model=None" in str(w.message) for w in caught)
    assert agent is not None
