"""A ``task`` transcript kept as child checkpoints, after a parent run with ``durability="exit"``.

LangGraph writes no checkpoints of the child subgraphs of a run made with
``durability="exit"``, so the record's ``checkpoint:<ns>`` points at nothing.
Reading it must say why and what keeps it, not only that nothing is there.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from langgraph.checkpoint.memory import InMemorySaver

from deep_agent import create_deep_agent
from deep_agent._testing import ScriptedChatModel, tool_call
from subagents import get_transcript
from subagents._settings import DelegationSettings


def _model() -> ScriptedChatModel:
    return ScriptedChatModel(rules=[("Look it up", ["Found it."])],
                             responses=[{"tool_calls": [tool_call("task", description="Look it up.",
                                                                  subagent_type="general-purpose")]}, "Done."])


def test_a_transcript_an_exit_durability_run_never_kept_says_why() -> None:
    agent = create_deep_agent(_model(), checkpointer=InMemorySaver())
    config = {"configurable": {"thread_id": "exit-run"}}
    state = agent.invoke({"messages": [("user", "Go")]}, config, durability="exit")
    (task_id,) = state["subagent_tasks"]
    assert state["subagent_tasks"][task_id]["transcript"].startswith("checkpoint:")
    with pytest.raises(LookupError) as caught:
        get_transcript(agent, config, task_id)
    message = str(caught.value)
    assert task_id in message and 'durability="exit"' in message and "sessions_dir=" in message


def test_with_sessions_dir_an_exit_durability_run_keeps_the_transcript(tmp_path: Path) -> None:
    agent = create_deep_agent(_model(), checkpointer=InMemorySaver(), settings=DelegationSettings.of(
        sessions_dir=str(tmp_path),
    ))
    config = {"configurable": {"thread_id": "exit-run-jsonl"}}
    state = agent.invoke({"messages": [("user", "Go")]}, config, durability="exit")
    (task_id,) = state["subagent_tasks"]
    assert [m.content for m in get_transcript(agent, config, task_id)] == ["Look it up.", "Found it."]


def test_a_checkpointed_transcript_read_from_the_state_alone_says_what_to_pass() -> None:
    agent = create_deep_agent(_model(), checkpointer=InMemorySaver())
    config = {"configurable": {"thread_id": "state-only"}}
    state = agent.invoke({"messages": [("user", "Go")]}, config)
    (task_id,) = state["subagent_tasks"]
    assert [m.content for m in get_transcript(agent, config, task_id)] == ["Look it up.", "Found it."]
    with pytest.raises(LookupError) as caught:
        get_transcript(state, config, task_id)  # the state has no checkpointer to read the child's checkpoints
    assert "pass the parent graph" in str(caught.value)
