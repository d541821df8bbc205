"""What the command line prints about a run: usage counted once, errors with what to do, cuts at words."""

from __future__ import annotations

from langchain.agents import create_agent
from langchain.agents.middleware import HumanInTheLoopMiddleware
from langchain_core.tools import tool
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.types import Command

from deep_agent.cli._approvals import describe_call
from deep_agent.cli._errors import CONTEXT_HINT, with_hint
from deep_agent.cli._live_view import TaskTree, clipped
from deep_agent._testing import ScriptedChatModel, tool_call


@tool
def Bash(command: str) -> str:  # noqa: N802 - the CLI's tool name
    """Run a command."""
    return "ran"


def test_an_approvals_resume_counts_the_roots_model_call_once():
    model = ScriptedChatModel(responses=[{"tool_calls": [tool_call("Bash", command="ls")]}, "done"])
    agent = create_agent(model, [Bash], middleware=[HumanInTheLoopMiddleware(interrupt_on={"Bash": True})],
                         checkpointer=InMemorySaver())
    config = {"configurable": {"thread_id": "t"}}
    tree = TaskTree("root")
    for inputs in ({"messages": [{"role": "user", "content": "go"}]},
                   Command(resume={"decisions": [{"type": "approve"}]})):
        for chunk in agent.stream(inputs, config, stream_mode="updates"):
            for update in chunk.values():
                if isinstance(update, dict):
                    tree.update(update)
    assert tree.root_usage["model_calls"] == len(model.calls) == 2


def test_a_prompt_over_the_context_window_says_what_to_do():
    llama = "Error code: 400 - request (1470 tokens) exceeds the available context size (1024 tokens)"
    assert with_hint(llama) == f"{llama} ({CONTEXT_HINT})"
    assert "--context" in CONTEXT_HINT
    assert with_hint("something else") == "something else" and with_hint(None) is None
    assert with_hint(with_hint(llama)) == with_hint(llama)  # once


def test_a_long_text_is_cut_at_a_word_and_says_where_the_rest_is():
    text = "word " * 40
    cut = clipped(text.strip(), 50)
    assert cut.endswith("... (deep-agent tasks --full)") and cut.split("...")[0].endswith("word")
    assert clipped("short", 50) == "short"


def test_the_approval_text_holds_every_argument_whole():
    command = "echo " + "x" * 5000 + "; rm -rf build"
    assert describe_call("root", "Bash", {"command": command}).endswith("; rm -rf build")


def test_the_summary_counts_the_roots_delegations_and_each_task_once():
    from rich.console import Console

    from deep_agent.cli._session import summary_table
    from deep_agent.cli._store import TaskRow

    rows = [TaskRow(id="a", kind="task", agent_type="editor", status="completed", model_calls=2),
            TaskRow(id="b", kind="task", agent_type="editor", status="error", model_calls=1),
            TaskRow(id="c", kind="background", agent_type="surveyor", status="completed", model_calls=1)]
    table = summary_table(rows, {"model_calls": 3}, root_model=None, prices=None, root_seconds=1.0)
    console = Console(width=120, record=True)
    console.print(table)
    lines = {line.split()[1]: line.split()[3] for line in console.export_text().splitlines()
             if line.startswith("│")}
    assert lines == {"(root)": "3", "editor": "2", "surveyor": "1", "total": "3"}  # root: was 0; total: was 3 too
