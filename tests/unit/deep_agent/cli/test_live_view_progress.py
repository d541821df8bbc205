"""The live tree says what each running child is doing (its turn and tool) and what the root is doing."""

from __future__ import annotations

from langchain_core.messages import AIMessage, ToolMessage
from langchain_core.tools import tool
from langgraph.checkpoint.memory import InMemorySaver
from rich.console import Console

from deep_agent import create_deep_agent
from deep_agent.cli._live_view import TaskTree
from deep_agent._testing import ScriptedChatModel, tool_call


def render(tree: TaskTree) -> str:
    console = Console(width=200, record=True)
    console.print(tree)
    return console.export_text()


async def test_a_running_child_shows_its_turn_and_its_current_tool():
    @tool
    def Read(file_path: str) -> str:  # noqa: N802 - Claude Code's tool name
        """Read a file."""
        return "print('hello')"

    model = ScriptedChatModel(
        rules=[("Review the app", [{"tool_calls": [tool_call("Read", file_path="src/app.py")]}, "Looks fine."])],
        responses=[{"tool_calls": [tool_call("task", description="Review the app", subagent_type="reviewer")]},
                   "Done."],
    )
    agent = create_deep_agent(model, [Read], checkpointer=InMemorySaver(), subagents=[
        {"name": "reviewer", "description": "reviews", "tools": ["Read"]}])
    tree = TaskTree("deep agent")
    shown: list[str] = []
    async for namespace, mode, chunk in agent.astream(
            {"messages": [{"role": "user", "content": "go"}]}, {"configurable": {"thread_id": "t"}},
            stream_mode=["custom", "updates"], subgraphs=True):
        tree.feed(namespace, mode, chunk)
        shown.append(render(tree))
    reviewer = [line for text in shown for line in text.splitlines() if "reviewer" in line]
    assert any("running" in line and "turn 1 · thinking" in line for line in reviewer), reviewer
    assert any("turn 1 · Read src/app.py" in line for line in reviewer), reviewer
    assert any("turn 2 · thinking" in line and "tokens" in line for line in reviewer), reviewer  # spent so far
    assert "turn" not in reviewer[-1]  # once it has ended, the line shows its outcome only


def test_the_roots_own_model_call_and_tools_show_while_there_are_no_tasks_yet():
    tree = TaskTree("deep agent")
    first = render(tree)
    assert "thinking 0." in first and "no tasks yet" not in first
    tree.feed((), "updates", {"model": {"messages": [
        AIMessage(content="", tool_calls=[{"name": "Read", "args": {"file_path": "notes.txt"}, "id": "c1"}])]}})
    assert "Read notes.txt 0." in render(tree)
    tree.feed((), "updates", {"tools": {"messages": [ToolMessage(content="notes", tool_call_id="c1")]}})
    assert "thinking 0." in render(tree)
    tree.stop_clock()
    assert "no tasks in this turn" in render(tree) and "thinking" not in render(tree)


def test_once_the_root_has_answered_it_is_not_shown_thinking_while_background_tasks_run():
    tree = TaskTree("deep agent")
    tree.feed((), "updates", {"model": {"messages": [AIMessage(content="Here is the answer.")]}})
    text = render(tree)
    assert "thinking" not in text and "answered; waiting for background tasks" in text


def test_an_event_cannot_set_the_trees_own_waiting_clock():
    tree = TaskTree("deep agent")
    task = {"type": "subagent_task", "task_id": "a" * 32, "agent_type": "editor"}
    tree.event({**task, "status": "waiting_for_approval"})
    tree.event({**task, "status": "waiting_for_approval", "paused_since": "soon", "waited_s": "x"})
    tree.event({**task, "status": "running"})  # ends the pause: must not do arithmetic on a tool's text
    assert "editor" in render(tree)
