"""The root's conversation is checkpointed as its changes, and reads back exactly as ``add_messages`` builds it."""

from __future__ import annotations

import sqlite3
from functools import reduce
from typing import Any

from helpers.graphs import user
from hypothesis import given
from hypothesis import strategies as st
from langchain_core.messages import AIMessage, AIMessageChunk, HumanMessage, RemoveMessage
from langgraph.checkpoint.serde.jsonplus import JsonPlusSerializer
from langgraph.checkpoint.sqlite import SqliteSaver
from langgraph.graph.message import REMOVE_ALL_MESSAGES, add_messages

from deep_agent import create_deep_agent
from deep_agent.cli._store import read_thread
from deep_agent._factory import SNAPSHOT_EVERY, DeepAgentState, apply_message_writes, saved_messages
from deep_agent._testing import ScriptedChatModel, tool_call
from subagents._settings import DelegationSettings

IDS = st.sampled_from("abcdef")
MESSAGE = st.builds(lambda i, text: AIMessage(text, id=i), IDS, st.text("xyz", max_size=3))


@st.composite
def writes(draw: st.DrawFn, present: set[str]) -> list[Any]:
    """Writes as nodes send them: one message or a list; removals only of ids present (add_messages raises else)."""
    out: list[Any] = []
    for _ in range(draw(st.integers(0, 4))):
        kind = draw(st.sampled_from(["add", "list", "remove", "clear"]))
        if kind == "remove" and present:
            target = draw(st.sampled_from(sorted(present)))
            present.discard(target)
            out.append(RemoveMessage(id=target))
        elif kind == "clear":
            present.clear()
            out.append([RemoveMessage(id=REMOVE_ALL_MESSAGES)])
        else:
            batch = draw(st.lists(MESSAGE, min_size=1, max_size=3 if kind == "list" else 1))
            present.update(m.id for m in batch)
            out.append(batch if kind == "list" else batch[0])
    return out


@st.composite
def histories(draw: st.DrawFn) -> tuple[list[Any], list[Any]]:
    present: set[str] = set()
    first = draw(writes(present))
    return first, draw(writes(present))


def _contents(messages: list[Any]) -> list[tuple[str | None, Any]]:
    return [(m.id, m.content) for m in messages]


@given(histories())
def test_applying_writes_equals_add_messages_one_write_at_a_time(history: tuple[list[Any], list[Any]]) -> None:
    first, second = history
    expected = reduce(add_messages, [*first, *second], [])
    assert _contents(apply_message_writes([], [*first, *second])) == _contents(expected)


@given(histories())
def test_two_batches_applied_in_turn_equal_them_applied_joined(history: tuple[list[Any], list[Any]]) -> None:
    """What LangGraph's delta channel requires: replaying in bigger batches changes nothing."""
    first, second = history
    in_turn = apply_message_writes(apply_message_writes([], first), second)
    assert _contents(in_turn) == _contents(apply_message_writes([], [*first, *second]))


def test_raw_input_and_chunks_become_messages_and_unknown_removals_are_ignored() -> None:
    out = apply_message_writes(None, [[{"role": "user", "content": "hi", "id": "1"}],
                                      AIMessageChunk("partial", id="2"), RemoveMessage(id="nope")])
    assert [(type(m), m.content) for m in out] == [(HumanMessage, "hi"), (AIMessage, "partial")]


def _delegating_agent(checkpointer: Any, settings: DelegationSettings = DelegationSettings(), **kwargs: Any) -> Any:
    model = ScriptedChatModel(rules=[
        ("child job", ["done"]),
        ("please delegate", [{"tool_calls": [tool_call("task", description="child job", subagent_type="worker")]},
                             "finished"]),
    ])
    worker = {"name": "worker", "description": "Does jobs.", "system_prompt": "Work.", "model": model, "tools": []}
    return create_deep_agent(model, [], subagents=[worker], settings=settings.updated(general_purpose=False),
                             checkpointer=checkpointer,
                             **kwargs)


def _delegate_on_one_thread(
    conn: sqlite3.Connection, runs: int, config: dict[str, Any]
) -> tuple[dict[str, Any], int, list[Any]]:
    """``runs`` delegating runs on one SQLite thread.

    Returns the last state, how many root checkpoints hold the whole conversation, and the root checkpoint rows.
    """
    agent = _delegating_agent(SqliteSaver(conn))
    for _ in range(runs):
        last = agent.invoke(user("please delegate"), config)
    serde = JsonPlusSerializer()
    rows = conn.execute("SELECT type, checkpoint FROM checkpoints WHERE checkpoint_ns = ''").fetchall()
    return last, sum("messages" in serde.loads_typed(row)["channel_values"] for row in rows), rows


def test_a_long_thread_stores_its_conversation_as_changes_and_reads_it_back_whole(tmp_path) -> None:
    """Before: every root checkpoint held the whole conversation, so a thread's bytes grew with its square."""
    runs = 30
    path = tmp_path / "threads.sqlite"
    config = {"configurable": {"thread_id": "long"}}
    with sqlite3.connect(path, check_same_thread=False) as conn:
        last, holding, rows = _delegate_on_one_thread(conn, runs, config)
    updates = 3 * runs  # the user's message, the task call with its answer, the final answer
    assert holding <= updates // SNAPSHOT_EVERY + 1, f"{holding} of {len(rows)} checkpoints hold the whole conversation"
    with sqlite3.connect(path, check_same_thread=False) as conn:
        reread = _delegating_agent(SqliteSaver(conn)).get_state(config).values["messages"]
        # Read without the graph, as `deep-agent tasks` does: the deltas are replayed onto the last snapshot.
        saver = SqliteSaver(conn)
        latest = saver.get_tuple({"configurable": {"thread_id": "long", "checkpoint_ns": ""}})
        assert "messages" not in latest.checkpoint["channel_values"]
        assert _contents(saved_messages(saver, latest)) == _contents(reread)
        assert _contents(read_thread(saver, "long")["messages"]) == _contents(reread)
    assert len(reread) == 4 * runs
    assert _contents(reread) == _contents(last["messages"])
    assert [m.text for m in reread[-4:]] == ["please delegate", "", reread[-2].text, "finished"]


def test_a_long_delegating_thread_holds_one_whole_conversation_per_150_updates(tmp_path) -> None:
    """Before: a snapshot every 50 updates, so 40 delegating runs (160 updates) held three whole conversations."""
    runs = 40
    config = {"configurable": {"thread_id": "long"}}
    with sqlite3.connect(tmp_path / "threads.sqlite", check_same_thread=False) as conn:
        last, holding, rows = _delegate_on_one_thread(conn, runs, config)
        # The read replays every write since that one snapshot and still gives the whole conversation.
        reread = _delegating_agent(SqliteSaver(conn)).get_state(config).values["messages"]
    assert holding == 1, f"{holding} of {len(rows)} checkpoints hold the whole conversation"
    assert len(reread) == 4 * runs and _contents(reread) == _contents(last["messages"])


def test_a_state_schema_of_ones_own_keeps_delta_storage_when_it_extends_deep_agent_state() -> None:
    class Notes(DeepAgentState):
        notes: list[str]

    from langgraph.channels import DeltaChannel
    from langgraph.checkpoint.memory import InMemorySaver

    agent = _delegating_agent(InMemorySaver(), state_schema=Notes)
    assert isinstance(agent.channels["messages"], DeltaChannel)
    assert "notes" in agent.channels
    out = agent.invoke(user("please delegate"), {"configurable": {"thread_id": "n"}})
    assert out["messages"][-1].text == "finished"
