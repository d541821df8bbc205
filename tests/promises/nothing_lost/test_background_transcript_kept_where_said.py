"""A background task's transcript: where it is kept, and what a read says once the table dropped it.

A background child runs after the parent's step, off the parent's
checkpointer, so with a checkpointer (and no ``sessions_dir``) its
transcript still goes to the bounded in-process table. Once newer
transcripts push it out, the read must say so and name what keeps it
(``sessions_dir=``), not advise a checkpointer the parent already has.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from langgraph.checkpoint.memory import InMemorySaver

from deep_agent import create_deep_agent
from deep_agent._testing import ScriptedChatModel, tool_call
from subagents import get_transcript
from subagents.background import wait_for_background
from subagents._transcripts import MEMORY
from subagents._settings import DelegationSettings

SPECS = [{"name": "researcher", "description": "Finds facts.", "system_prompt": "Answer."}]


@pytest.fixture
def small_table() -> Iterator[None]:
    before = MEMORY.max_bytes
    yield
    MEMORY.max_bytes = before


def _finished_task(agent: object, config: dict[str, object]) -> str:
    out = agent.invoke({"messages": [("user", "Go")]}, config)  # type: ignore[attr-defined]
    assert wait_for_background(out["async_tasks"], 60)
    agent.invoke({"messages": [("user", "And?")]}, config)  # type: ignore[attr-defined]  # the ledger catches up
    (task_id,) = out["async_tasks"]
    return str(task_id)


def _agent(settings: DelegationSettings = DelegationSettings(), **kwargs: object) -> object:
    start = {"tool_calls": [tool_call("start_async_task", description="Look it up.", subagent_type="researcher")]}
    # A child that ends before the parent's next call brings its notice in as a new human turn mid-run:
    # the parent answers it too, rather than starting the script (and the task) again.
    model = ScriptedChatModel(rules=[("Look it up", ["Found it."]), ("Background task updates", ["Started."])],
                              responses=[start, "Started."], default="Ok.")
    return create_deep_agent(model, subagents=SPECS, background=True, settings=settings.updated(general_purpose=False), **kwargs)


def test_a_dropped_background_transcript_names_what_keeps_it(small_table: None) -> None:
    agent = _agent(checkpointer=InMemorySaver())
    config = {"configurable": {"thread_id": "bg-transcript"}}
    task_id = _finished_task(agent, config)
    assert [m.content for m in get_transcript(agent, config, task_id)] == ["Look it up.", "Found it."]

    MEMORY.max_bytes = 0
    MEMORY.put("a-newer-transcript", [])  # pushes every older one out
    with pytest.raises(LookupError) as caught:
        get_transcript(agent, config, task_id)
    message = str(caught.value)
    assert task_id in message and "gone" in message
    # The parent has a checkpointer: the read must not offer one as the remedy, but name the one that works.
    assert "background" in message and "sessions_dir=" in message
    assert "a checkpointer, sessions_dir= or transcript_store= keeps every transcript" not in message


def test_with_sessions_dir_a_background_transcript_outlives_the_table(small_table: None, tmp_path: Path) -> None:
    agent = _agent(checkpointer=InMemorySaver(), settings=DelegationSettings.of(sessions_dir=str(tmp_path)))
    config = {"configurable": {"thread_id": "bg-jsonl"}}
    task_id = _finished_task(agent, config)
    MEMORY.max_bytes = 0
    MEMORY.put("a-newer-transcript", [])
    assert [m.content for m in get_transcript(agent, config, task_id)] == ["Look it up.", "Found it."]
