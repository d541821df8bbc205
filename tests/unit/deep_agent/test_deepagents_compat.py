"""deepagents' documented subagent patterns, run with only the import changed.

Each example is written once against a library namespace (``lib``) and runs
on ``deep_agent``; where deepagents is installed (the ``bench`` extra) the
same example also runs on deepagents, so a drift between the two is caught.
Every run uses the scripted chat model, offline.
"""

from __future__ import annotations

import contextlib
import importlib
import types
from pathlib import Path
from typing import Any

import pytest
from helpers.compat import (
    ANSWER,
    child_calls,
    delegating,
    delete_file,
    internet_search,
    task_tool_description,
    tool_texts,
)
from helpers.graphs import user
from langchain.agents import create_agent
from langchain.agents.middleware import AgentMiddleware, ToolRetryMiddleware
from langchain_core.messages import SystemMessage
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.types import Command

from deep_agent._testing import ScriptedChatModel, tool_call
from subagents._settings import DelegationSettings

LIBS = ["deep_agent"]
try:
    importlib.import_module("deepagents")
except ImportError:  # pragma: no cover - the bench extra is not installed
    pass
else:
    LIBS.append("deepagents")


@pytest.fixture(params=LIBS)
def lib(request: pytest.FixtureRequest) -> types.ModuleType:
    """``from deepagents import ...`` or ``from deep_agent import ...``: the only difference."""
    return importlib.import_module(request.param)


# -- dict specs with function tools --------------------------------------------


def test_dict_spec_with_a_plain_function_tool_runs(lib, run):
    model = ScriptedChatModel(
        rules=[("research X", [{"tool_calls": [tool_call("internet_search", query="X")]}, ANSWER])],
        responses=delegating(("research X", "research-agent")),
    )
    research_subagent = {
        "name": "research-agent",
        "description": "Used to research more in depth questions",
        "system_prompt": "You are a great researcher",
        "tools": [internet_search],
        "model": model,
    }
    agent = lib.create_deep_agent(model=model, subagents=[research_subagent])
    out = run(agent, user("go"))
    assert tool_texts(out) == [ANSWER.rstrip()] or tool_texts(out) == [ANSWER]
    (last,) = [c for c in child_calls(model, "research X") if c["messages"][-1].type == "tool"]
    assert last["messages"][-1].text == "results for X"
    assert "You are a great researcher" in last["system"]


def test_subagent_spec_typed_dict_is_a_plain_dict(lib, run):
    model = ScriptedChatModel(rules=[("summarise", [ANSWER])], responses=delegating(("summarise", "writer")))
    writer: lib.SubAgent = {"name": "writer", "description": "Writes summaries.", "system_prompt": "Write.",
                            "tools": []}
    out = run(lib.create_deep_agent(model=model, subagents=[writer]), user("go"))
    assert tool_texts(out)[0].strip() == ANSWER.strip()


# -- CompiledSubAgent ----------------------------------------------------------


def test_compiled_subagent_runs_its_own_graph(lib, run):
    model = ScriptedChatModel(
        rules=[("analyse", [ANSWER])], responses=delegating(("analyse", "data-analyzer"))
    )
    custom_graph = create_agent(model=model, tools=[internet_search], system_prompt="You analyse data.")
    analyzer = lib.CompiledSubAgent(
        name="data-analyzer", description="Specialized agent for data analysis", runnable=custom_graph
    )
    out = run(lib.create_deep_agent(model=model, subagents=[analyzer]), user("go"))
    assert tool_texts(out)[0].strip() == ANSWER.strip()
    (child,) = child_calls(model, "analyse")
    assert "You analyse data." in child["system"]


def test_compiled_subagent_as_plain_dict(lib, run):
    model = ScriptedChatModel(rules=[("analyse", [ANSWER])], responses=delegating(("analyse", "analyzer")))
    spec = {"name": "analyzer", "description": "Analyses.", "runnable": create_agent(model, tools=[])}
    out = run(lib.create_deep_agent(model=model, subagents=[spec]), user("go"))
    assert tool_texts(out)[0].strip() == ANSWER.strip()


# -- a spec with middleware, interrupt_on and skills ---------------------------


class CountingMiddleware(AgentMiddleware):
    def __init__(self) -> None:
        super().__init__()
        self.calls = 0

    def before_model(self, state: Any, runtime: Any) -> None:
        self.calls += 1


def test_spec_with_middleware_interrupt_on_and_skills(lib, run, tmp_path: Path):
    skills = tmp_path / "skills"
    (skills / "cite-sources").mkdir(parents=True)
    (skills / "cite-sources" / "SKILL.md").write_text(
        "---\nname: cite-sources\ndescription: Cite every source.\n---\nCite.\n"
    )
    model = ScriptedChatModel(
        rules=[("research X", [{"tool_calls": [tool_call("internet_search", query="X")]}, ANSWER])],
        responses=delegating(("research X", "research-agent")),
    )
    counting = CountingMiddleware()
    spec = {
        "name": "research-agent",
        "description": "Researches.",
        "system_prompt": "Research.",
        "tools": [internet_search],
        "middleware": [ToolRetryMiddleware(max_retries=3), counting],
        "interrupt_on": {"internet_search": {"allowed_decisions": ["approve", "reject"]}},
        "skills": [f"{skills}/"],
    }
    agent = lib.create_deep_agent(model=model, subagents=[spec], checkpointer=InMemorySaver())
    config = {"configurable": {"thread_id": "t1"}}
    paused = run(agent, user("go"), config)
    (interrupt,) = paused["__interrupt__"]
    (action,) = interrupt.value["action_requests"]
    assert action["name"] == "internet_search"
    assert interrupt.value["review_configs"][0]["allowed_decisions"] == ["approve", "reject"]
    out = run(agent, Command(resume={"decisions": [{"type": "approve"}]}), config)
    assert tool_texts(out)[0].strip() == ANSWER.strip()
    assert counting.calls >= 2


def test_skill_folders_reach_the_childs_prompt(run, tmp_path: Path):
    from deep_agent import create_deep_agent

    for name in ("cite-sources", "git-diff"):
        (tmp_path / "a" / name).mkdir(parents=True)
        (tmp_path / "a" / name / "SKILL.md").write_text(f"---\nname: {name}\ndescription: from a\n---\nx\n")
    (tmp_path / "b" / "git-diff").mkdir(parents=True)
    (tmp_path / "b" / "git-diff" / "SKILL.md").write_text("---\nname: git-diff\ndescription: from b\n---\nx\n")
    model = ScriptedChatModel(rules=[("job", [ANSWER])], responses=delegating(("job", "r")))
    spec = {"name": "r", "description": "R.", "skills": [f"{tmp_path}/a/", f"{tmp_path}/b/"]}
    run(create_deep_agent(model, subagents=[spec]), user("go"))
    (child,) = child_calls(model, "job")
    # Later folders win, as in deepagents.
    assert "cite-sources" in child["system"] and "from b" in child["system"]
    assert child["system"].count("<name>git-diff</name>") == 1


def test_a_missing_skill_folder_warns_and_adds_no_skills(lib, run):
    # deepagents' documented path: on its file backend, often empty; here, not on the disk.
    model = ScriptedChatModel(rules=[("job", [ANSWER])], responses=delegating(("job", "r")))
    spec = {"name": "r", "description": "R.", "tools": [], "skills": ["/skills/research/"]}
    ours = lib.__name__ == "deep_agent"
    warns = pytest.warns(UserWarning, match="'/skills/research/' is not a folder")
    with warns if ours else contextlib.nullcontext():
        out = run(lib.create_deep_agent(model=model, subagents=[spec]), user("go"))
    assert tool_texts(out)[0].strip() == ANSWER.strip()
    if ours:
        (child,) = child_calls(model, "job")
        assert "<available_skills>" not in child["system"]


def test_a_broken_skill_in_a_folder_is_an_error_naming_the_file(tmp_path: Path):
    from deep_agent import create_deep_agent

    (tmp_path / "bad").mkdir()
    (tmp_path / "bad" / "SKILL.md").write_text("no frontmatter here\n")
    spec = {"name": "r", "description": "R.", "skills": [f"{tmp_path}/"]}
    with pytest.raises(Exception, match=r"subagent 'r': field 'skills':.*SKILL.md"):
        create_deep_agent(ScriptedChatModel(), subagents=[spec])


# -- top-level interrupt_on ----------------------------------------------------


def test_top_level_interrupt_on_pauses_the_root_tool(lib, run):
    model = ScriptedChatModel(
        responses=[{"tool_calls": [tool_call("delete_file", path="a.txt")]}, "root done"]
    )
    agent = lib.create_deep_agent(
        model=model,
        tools=[delete_file],
        interrupt_on={"delete_file": {"allowed_decisions": ["approve", "reject"]}},
        checkpointer=InMemorySaver(),
    )
    config = {"configurable": {"thread_id": "t"}}
    paused = run(agent, user("go"), config)
    (interrupt,) = paused["__interrupt__"]
    assert interrupt.value["action_requests"][0]["name"] == "delete_file"
    out = run(agent, Command(resume={"decisions": [{"type": "reject", "message": "no"}]}), config)
    assert out["messages"][-1].text == "root done"


def test_top_level_interrupt_on_is_inherited_by_a_child_using_the_tool(lib, run):
    model = ScriptedChatModel(
        rules=[("clean up", [{"tool_calls": [tool_call("delete_file", path="a.txt")]}, ANSWER])],
        responses=delegating(("clean up", "general-purpose")),
    )
    agent = lib.create_deep_agent(
        model=model, tools=[delete_file], interrupt_on={"delete_file": True}, checkpointer=InMemorySaver()
    )
    config = {"configurable": {"thread_id": "t"}}
    paused = run(agent, user("go"), config)
    (interrupt,) = paused["__interrupt__"]
    assert interrupt.value["action_requests"][0]["name"] == "delete_file"
    out = run(agent, Command(resume={"decisions": [{"type": "approve"}]}), config)
    assert tool_texts(out)[0].strip() == ANSWER.strip()


# -- async specs, bare model names, general-purpose override, task description -


def test_async_spec_in_subagents_gets_the_background_tools(lib, run):
    remote = {
        "name": "remote-researcher",
        "description": "Researches on a server.",
        "graph_id": "researcher",
        "url": "http://127.0.0.1:9",
        "headers": {"x-api-key": "k"},
    }
    model = ScriptedChatModel(responses=["hi"])
    agent = lib.create_deep_agent(model=model, subagents=[remote])
    tools = agent.nodes["tools"].bound.tools_by_name
    assert {"start_async_task", "check_async_task", "cancel_async_task"} <= set(tools)
    run(agent, user("go"))
    # The parent is told about it: in the tool descriptions (deepagents) or the prompt (ours).
    told = model.calls[0]["system"] + "".join(str(t.description) for t in tools.values())
    assert "remote-researcher" in told


def test_bare_model_names_resolve(lib, monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-test")
    spec = {"name": "r", "description": "R.", "model": "gpt-5.4", "tools": []}
    agent = lib.create_deep_agent(model="claude-sonnet-4-6", subagents=[spec])
    assert "task" in agent.nodes["tools"].bound.tools_by_name


def test_bare_and_provider_model_names_build_the_named_model():
    from subagents.definitions import resolve_model

    for name, cls, model in [
        ("gpt-5.4", "ChatOpenAI", "gpt-5.4"),
        ("claude-sonnet-4-6", "ChatAnthropic", "claude-sonnet-4-6"),
        ("openai:gpt-4.1-mini", "ChatOpenAI", "gpt-4.1-mini"),
    ]:
        with pytest.MonkeyPatch.context() as mp:
            mp.setenv("OPENAI_API_KEY", "sk-test")
            mp.setenv("ANTHROPIC_API_KEY", "sk-test")
            built = resolve_model(name, None, agent="r")
        assert type(built).__name__ == cls
        assert getattr(built, "model_name", None) == model or getattr(built, "model", None) == model


def test_general_purpose_can_be_overridden(lib, run):
    model = ScriptedChatModel(rules=[("job", [ANSWER])], responses=delegating(("job", "general-purpose")))
    mine = {
        "name": "general-purpose",
        "description": "My general agent.",
        "system_prompt": "CUSTOM GP PROMPT",
        "tools": [internet_search],
    }
    out = run(lib.create_deep_agent(model=model, subagents=[mine]), user("go"))
    assert tool_texts(out)[0].strip() == ANSWER.strip()
    (child,) = child_calls(model, "job")
    assert "CUSTOM GP PROMPT" in child["system"]
    assert child["tools"] == ["internet_search"] or "internet_search" in child["tools"]


def test_the_model_is_told_the_agents_names(lib):
    """deepagents names them in the ``task`` tool's description; we name them once, in the system prompt's
    ``<available_agents>`` block (with the enum of a small registry), so the description does not repeat them."""
    specs = [
        {"name": "researcher", "description": "Finds facts.", "tools": []},
        {"name": "writer", "description": "Writes reports.", "tools": []},
    ]
    model = ScriptedChatModel(default="ok")
    agent = lib.create_deep_agent(model=model, subagents=specs)
    agent.invoke(user("hello"))
    (call,) = model.calls
    seen = task_tool_description(agent) + "".join(m.text for m in call["messages"] if m.type == "system")
    for name in ("general-purpose", "researcher", "writer"):
        assert name in seen


def test_task_description_template_gets_the_full_listing():
    from deep_agent import SubAgentMiddleware

    mw = SubAgentMiddleware(
        [{"name": "researcher", "description": "Finds facts.", "tools": []}],
        task_description="Delegate work. {available_agents} Use braces {like this}.",
        settings=DelegationSettings.of(general_purpose=False),
    )
    assert mw.tools[0].description == "Delegate work. - researcher: Finds facts. Use braces {like this}."


def test_system_message_prompt_is_kept(lib, run):
    model = ScriptedChatModel(responses=["hi"])
    run(lib.create_deep_agent(model=model, system_prompt=SystemMessage(content="ROOT RULES")), user("go"))
    assert "ROOT RULES" in model.calls[0]["system"]


@pytest.mark.parametrize("path, asks", [("/tmp/a.txt", False), ("/etc/hosts", True)])
def test_the_parents_when_predicate_holds_in_a_child_that_inherits_its_rule(lib, run, path, asks):
    """deepagents' docs: ``when`` gates only the calls it picks. The general-purpose child inherits the
    parent's rule, predicate and all, on both libraries (here it once asked for every call)."""
    model = ScriptedChatModel(
        rules=[("clean up", [{"tool_calls": [tool_call("delete_file", path=path)]}, ANSWER])],
        responses=delegating(("clean up", "general-purpose")),
    )
    rule = {"allowed_decisions": ["approve", "reject"], "when": lambda request: request.tool_call["args"]["path"]
            .startswith("/etc")}
    agent = lib.create_deep_agent(model=model, tools=[delete_file], interrupt_on={"delete_file": rule},
                                  checkpointer=InMemorySaver())
    out = run(agent, user("go"), {"configurable": {"thread_id": "t"}})
    assert ("__interrupt__" in out) == asks


def test_a_specs_own_interrupt_on_replaces_the_parents_in_deepagents_and_cannot_lower_it_here(lib, run):
    """deepagents lets a subagent's ``interrupt_on: {}`` drop the parent's gate; here the parent's is a floor
    (docs/migrating.md says so): the child still asks before ``delete_file``."""
    model = ScriptedChatModel(
        rules=[("clean up", [{"tool_calls": [tool_call("delete_file", path="a.txt")]}, ANSWER])],
        responses=delegating(("clean up", "cleaner")),
    )
    cleaner = {"name": "cleaner", "description": "Cleans.", "tools": [delete_file], "interrupt_on": {}}
    agent = lib.create_deep_agent(
        model=model, tools=[delete_file], subagents=[cleaner],
        interrupt_on={"delete_file": True}, checkpointer=InMemorySaver(),
    )
    out = run(agent, user("go"), {"configurable": {"thread_id": "t"}})
    if lib.__name__.startswith("deepagents"):
        assert "__interrupt__" not in out
        assert tool_texts(out)[0].strip() == ANSWER.strip()
    else:
        assert "__interrupt__" in out
