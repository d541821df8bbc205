"""The transcript of a compiled subagent whose ``messages`` are checkpointed as deltas.

A ``create_deep_agent`` graph (or a deepagents one) given as a compiled
subagent keeps its ``messages`` in a ``DeltaChannel``: a checkpoint holds
them only at a snapshot, and the rest are the writes since. The parent's
record points at the child's checkpoints (``checkpoint:<ns>``); reading
them must replay those writes, never hand back an empty transcript.
"""

from __future__ import annotations

from langgraph.checkpoint.memory import InMemorySaver

from deep_agent import create_deep_agent
from deep_agent._testing import ScriptedChatModel, tool_call
from subagents import CompiledSubagent, get_transcript
from subagents._settings import DelegationSettings


def test_a_delta_checkpointed_child_reads_back_whole() -> None:
    child = create_deep_agent(ScriptedChatModel(default="Found it."), name="researcher",
    settings=DelegationSettings.of(general_purpose=False))
    model = ScriptedChatModel(responses=[{"tool_calls": [tool_call("task", description="Look it up.",
                                                                   subagent_type="researcher")]}, "Done."])
    agent = create_deep_agent(model, checkpointer=InMemorySaver(),
                              subagents=[CompiledSubagent(name="researcher", description="Finds facts.",
                                                          runnable=child)], settings=DelegationSettings.of(
                                                              general_purpose=False,
                                                          ))
    config = {"configurable": {"thread_id": "delta-child"}}
    state = agent.invoke({"messages": [("user", "Go")]}, config)
    (task_id,) = state["subagent_tasks"]
    record = state["subagent_tasks"][task_id]
    assert record["status"] == "completed" and record["transcript"].startswith("checkpoint:")
    assert [m.content for m in get_transcript(agent, config, task_id)] == ["Look it up.", "Found it."]
