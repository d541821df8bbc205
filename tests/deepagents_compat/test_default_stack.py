"""deepagents' own default stack, with governed subagents in it: a deepagents app changes only its import.

Beside deepagents' own tests (``test_ported_*.py``), the cases a deepagents
app meets first, each written once and run on both libraries (``lib``),
offline on the scripted model: file tools on the root and on every child
whatever its ``tools``, summarisation when the context overflows, multimodal
blocks the model cannot take, harness profiles, deepagents' names from
``deep_agent``, and this library's own stack where asked for.
"""

from __future__ import annotations

import importlib
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest
from langchain_core.exceptions import ContextOverflowError
from langchain_core.messages import HumanMessage
from langchain_core.tools import tool
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.types import Command

from deep_agent._testing import ScriptedChatModel, tool_call
from helpers.graphs import user
from subagents._settings import DelegationSettings

deepagents = pytest.importorskip("deepagents")
from deepagents.backends.utils import create_file_data  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
NOTES = "LangGraph builds agents as graphs."


@pytest.fixture(params=["deepagents", "deep_agent"])
def lib(request: pytest.FixtureRequest) -> Any:
    return importlib.import_module(request.param)


@tool
def internet_search(query: str) -> str:
    """Search the web."""
    return f"Results for {query}: LangGraph is a graph runtime for agents."


def _newcomer_model() -> ScriptedChatModel:
    return ScriptedChatModel(
        rules=[("Research LangGraph", [
            {"tool_calls": [tool_call("internet_search", query="LangGraph")]},
            {"tool_calls": [tool_call("write_file", file_path="/notes.md", content=NOTES)]},
            "I wrote the notes to /notes.md.",
        ])],
        responses=[
            {"tool_calls": [tool_call("task", description="Research LangGraph and save notes to /notes.md",
                                      subagent_type="researcher")]},
            "The notes are in /notes.md.",
        ],
    )


RESEARCHER = {"name": "researcher", "description": "Researches a topic and saves notes.",
              "system_prompt": "Research, then save your notes.", "tools": [internet_search]}


def _child_calls(model: ScriptedChatModel) -> list[dict[str, Any]]:
    return [c for c in model.calls if any(m.type == "human" and "Research LangGraph" in m.text
                                          for m in c["messages"])]


def test_a_child_with_its_own_tools_writes_a_file_with_deepagents_write_file(lib, run):
    model = _newcomer_model()
    agent = lib.create_deep_agent(model, [internet_search], subagents=[RESEARCHER])
    out = run(agent, user("Please get me notes"))
    assert out["files"]["/notes.md"]["content"] == NOTES
    for call in _child_calls(model):
        assert {"internet_search", "write_file", "read_file", "edit_file", "ls"} <= set(call["tools"])
        assert "task" not in call["tools"]


def test_the_parents_approval_of_write_file_reaches_a_child_that_lists_its_own_tools():
    from deep_agent import create_deep_agent

    agent = create_deep_agent(_newcomer_model(), [internet_search], subagents=[RESEARCHER],
                              interrupt_on={"write_file": True}, checkpointer=InMemorySaver())
    config = {"configurable": {"thread_id": "t"}}
    paused = agent.invoke(user("Please get me notes"), config)
    (interrupt,) = paused["__interrupt__"]
    assert [a["name"] for a in interrupt.value["action_requests"]] == ["write_file"]
    assert "/notes.md" not in agent.get_state(config).values.get("files", {})
    out = agent.invoke(Command(resume={"decisions": [{"type": "approve"}]}), config)
    assert out["files"]["/notes.md"]["content"] == NOTES


def _first_call(lib: Any, **arguments: Any) -> tuple[dict[str, Any], Any]:
    model = ScriptedChatModel(responses=["done"])
    agent = lib.create_deep_agent(model, [internet_search], **arguments)
    agent.invoke({**user("hello"), "files": {"/AGENTS.md": create_file_data("Answer briefly."),
                                             "/skills/cite/SKILL.md": create_file_data(
                                                 "---\nname: cite\ndescription: Cite sources.\n---\nCite.\n")}})
    return model.calls[0], agent


STACKS = {
    "defaults": {},
    "memory": {"memory": ["/AGENTS.md"]},
    "skills": {"skills": ["/skills/"]},
    "permissions": {"permissions": "deny writes"},
    "interrupt_on": {"interrupt_on": {"edit_file": True}},
    "own file tools": {"middleware": "ls and read_file only"},
}


def _arguments(name: str) -> dict[str, Any]:
    arguments = dict(STACKS[name])
    if arguments.get("permissions") == "deny writes":
        arguments["permissions"] = [deepagents.FilesystemPermission(operations=["write"], paths=["/**"],
                                                                    mode="deny")]
    if arguments.get("middleware") == "ls and read_file only":
        arguments["middleware"] = [deepagents.FilesystemMiddleware(tools=["ls", "read_file"])]
    return arguments


@pytest.mark.parametrize("stack", list(STACKS))
def test_the_root_gets_deepagents_stack_for_the_same_arguments(stack):
    import deep_agent

    theirs, their_agent = _first_call(deepagents, **_arguments(stack))
    ours, our_agent = _first_call(deep_agent, **_arguments(stack))
    assert sorted(ours["tools"]) == sorted(theirs["tools"])
    assert set(our_agent.get_graph().nodes) >= set(their_agent.get_graph().nodes)
    assert our_agent.config["metadata"]["ls_integration"] == "deepagents"
    for text in ("Answer briefly.", "Cite sources."):  # memory and skills reach the prompt as in deepagents
        assert (text in ours["system"]) == (text in theirs["system"])


def _window_of_3000_characters(messages: list[Any]) -> Any:
    """The provider refuses a conversation over 3,000 characters; a summary request is answered."""
    if any("Context Extraction Assistant" in m.text for m in messages):
        return "A summary of the conversation so far."
    if sum(len(m.text) for m in messages if m.type != "system") > 3000:
        return ContextOverflowError("prompt is too long")
    return "the final answer"


def test_a_context_overflow_is_summarised_and_the_run_goes_on(lib, run):
    model = ScriptedChatModel(responses=[_window_of_3000_characters])
    history = [HumanMessage(f"Earlier question {i}: " + "words " * 30) for i in range(30)]
    out = run(lib.create_deep_agent(model), {"messages": [*history, HumanMessage("and now?")]})
    assert out["messages"][-1].text == "the final answer"
    assert any(p.startswith("/conversation_history/") for p in out.get("files", {}))


def test_an_image_the_model_cannot_take_is_replaced_before_the_call(lib, run):
    model = ScriptedChatModel(responses=["I cannot see images."], profile={"image_inputs": False})
    agent = lib.create_deep_agent(model)
    image = {"type": "image", "base64": "iVBORw0KGgo=", "mime_type": "image/png"}
    run(agent, {"messages": [HumanMessage(content_blocks=[{"type": "text", "text": "What is this?"}, image])]})
    sent = [b for m in model.calls[0]["messages"] for b in m.content_blocks]
    assert not any(b.get("type") == "image" for b in sent)
    assert any(b.get("type") == "text" and "What is this?" in b["text"] for b in sent)


class ProfiledModel(ScriptedChatModel):
    """A provider of its own, so the profile registered below reaches no other test's model."""

    def _get_ls_params(self, **kwargs: Any) -> Any:
        return {**super()._get_ls_params(**kwargs), "ls_provider": "profiledscripted"}


def test_a_harness_profile_registered_through_deep_agent_shapes_the_agent(lib):
    from deepagents.profiles.harness.harness_profiles import _HARNESS_PROFILES  # to leave the registry as found

    from deep_agent import HarnessProfile, register_harness_profile

    saved = dict(_HARNESS_PROFILES)
    try:
        register_harness_profile("profiledscripted", HarnessProfile(system_prompt_suffix="Always cite.",
                                                                    excluded_tools=frozenset({"grep"})))
        model = ProfiledModel(responses=["done"])
        lib.create_deep_agent(model).invoke(user("hello"))
    finally:
        _HARNESS_PROFILES.clear()
        _HARNESS_PROFILES.update(saved)
    assert "Always cite." in model.calls[0]["system"]
    assert "grep" not in model.calls[0]["tools"] and "glob" in model.calls[0]["tools"]


def test_every_name_of_deepagents_all_is_importable_from_deep_agent():
    import deep_agent

    for name in [*deepagents.__all__, "backends"]:
        ours = getattr(deep_agent, name)
        if name not in deep_agent.__all__:
            assert ours is getattr(deepagents, name), name  # deepagents' own object, not a copy


def _without_deepagents(code: str) -> subprocess.CompletedProcess[str]:
    blocker = textwrap.dedent("""
        import sys
        class NoDeepagents:
            def find_spec(self, name, path=None, target=None):
                if name == "deepagents" or name.startswith("deepagents."):
                    raise ImportError(f"No module named {name!r}")
        sys.meta_path.insert(0, NoDeepagents())
    """)
    return subprocess.run([sys.executable, "-c", blocker + textwrap.dedent(code)], capture_output=True, text=True,
                          cwd=ROOT, timeout=120)


def test_without_the_extra_deepagents_names_and_arguments_say_what_to_install():
    out = _without_deepagents("""
        import deep_agent
        assert "deepagents" not in sys.modules
        from deep_agent import create_deep_agent
        from deep_agent._testing import ScriptedChatModel
        for name in ("FilesystemPermission", "register_harness_profile", "__version__", "backends"):
            try:
                exec(f"from deep_agent import {name}")
            except ImportError as exc:
                print("name", name, exc)
        try:
            create_deep_agent(ScriptedChatModel(), memory=["/AGENTS.md"])
        except ImportError as exc:
            print("argument", exc)
        from subagents import DelegationSettings
        agent = create_deep_agent(ScriptedChatModel(responses=["done"]),
                                  settings=DelegationSettings.of(general_purpose=False))
        print("built", agent.invoke({"messages": [("user", "hi")]})["messages"][-1].content)
    """)
    assert out.returncode == 0, out.stderr
    lines = out.stdout.splitlines()
    assert len([line for line in lines if line.startswith("name ")]) == 4
    assert len([line for line in lines if line.startswith("argument ")]) == 1
    for line in lines[:-1]:
        assert 'pip install "governed-subagents[deepagents]"' in line and 'pip install -e ".[deepagents]"' in line
    assert "'memory'" in lines[4]
    assert lines[-1] == "built done"


def test_deepagents_stack_false_keeps_this_librarys_own_stack_and_refuses_deepagents_arguments():
    from deep_agent import create_deep_agent

    model = ScriptedChatModel(responses=["done"])
    create_deep_agent(model, [internet_search], settings=DelegationSettings.of(deepagents_stack=False)).invoke(user("hello"))
    assert sorted(model.calls[0]["tools"]) == ["internet_search", "task"]
    with pytest.raises(ValueError, match=r"argument 'memory' is deepagents'.*deepagents_stack=False"):
        create_deep_agent(model, memory=["/AGENTS.md"], settings=DelegationSettings.of(deepagents_stack=False))


def test_importing_deep_agent_loads_no_deepagents():
    out = subprocess.run([sys.executable, "-c", "import sys, deep_agent; print('deepagents' in sys.modules)"],
                         capture_output=True, text=True, cwd=ROOT, timeout=120)
    assert out.stdout.strip() == "False", out.stderr
