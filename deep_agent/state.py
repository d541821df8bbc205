"""The root agent's state: the conversation is checkpointed as its changes, not copied whole at every step.

LangGraph's default ``messages`` channel writes the whole list into every
checkpoint, so a thread of ``n`` steps stores ``O(n²)`` message bytes (a
thousand delegations on one ``SqliteSaver`` thread wrote 3.9 GB). A
:class:`~langgraph.channels.DeltaChannel` stores only each step's writes and
a full snapshot every :data:`SNAPSHOT_EVERY` updates; reading a checkpoint
replays at most that many writes onto the last snapshot. deepagents stores
its root's messages the same way, snapshotting every 50 updates.

Ours snapshots every 150: the snapshots are what a long thread's bytes grow
with (each holds the whole conversation), and a read of a thread with
ledgers walks back to the last ledger snapshot (50 delegations, some 300
message updates back), decoding every whole conversation it passes on the
way. At 50, a read passed about six; at 150, two, and it replays at most 150
small writes.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Annotated, Any, Required, cast

from langchain.agents import AgentState
from langchain_core.messages import (
    AnyMessage,
    BaseMessage,
    BaseMessageChunk,
    RemoveMessage,
    convert_to_messages,
    message_chunk_to_message,
)
from langgraph.channels import DeltaChannel
from langgraph.graph.message import REMOVE_ALL_MESSAGES

from subagents.ledger import saved_value

SNAPSHOT_EVERY = 150
"""Updates of ``messages`` between full snapshots: what one read replays at most."""


def apply_message_writes(state: Sequence[Any] | None, writes: Sequence[Any]) -> list[AnyMessage]:
    """``state`` after ``writes``, in order, as LangGraph's ``add_messages`` would apply them one by one.

    A write is one message or a list of them (objects, dicts, tuples or
    strings). A message whose id is already present replaces it in place;
    ``RemoveMessage(id)`` drops it (an unknown id is ignored: replaying an old
    thread must not fail); ``RemoveMessage(REMOVE_ALL_MESSAGES)`` clears all
    before it. Applying two batches in turn equals applying them joined, as
    :class:`~langgraph.channels.DeltaChannel` requires.

    Example::

        >>> from langchain_core.messages import HumanMessage, AIMessage
        >>> [m.content for m in apply_message_writes([HumanMessage("hi", id="1")],
        ...                                          [[AIMessage("hello", id="2")], AIMessage("hey", id="2")])]
        ['hi', 'hey']
    """
    flat: list[Any] = []
    for write in writes:
        flat.extend(write) if isinstance(write, list) else flat.append(write)
    # The channel's own value is already messages; only raw input (dicts from a client) needs converting.
    current = list(state or ())
    if current and not all(isinstance(m, BaseMessage) for m in current):
        current = list(convert_to_messages(current))
    incoming = [message_chunk_to_message(m) if isinstance(m, BaseMessageChunk) else m
                for m in convert_to_messages(flat)]
    cleared = [i for i, m in enumerate(incoming) if isinstance(m, RemoveMessage) and m.id == REMOVE_ALL_MESSAGES]
    if cleared:
        current, incoming = [], incoming[cleared[-1] + 1:]
    merged: list[BaseMessage | None] = list(current)
    where = {m.id: i for i, m in enumerate(current) if m.id is not None}
    for message in incoming:
        if message.id is None:
            merged.append(message)
        elif isinstance(message, RemoveMessage):
            if (index := where.pop(message.id, None)) is not None:
                merged[index] = None
        elif (index := where.get(message.id)) is not None:
            merged[index] = message
        else:
            where[message.id] = len(merged)
            merged.append(message)
    return cast("list[AnyMessage]", [m for m in merged if m is not None])


class DeepAgentState(AgentState[Any]):
    """The state :func:`deep_agent.create_deep_agent` uses unless given ``state_schema``.

    Subclass it to add keys and keep the conversation stored as deltas::

        class MyState(DeepAgentState):
            notes: list[str]

        agent = create_deep_agent(model, state_schema=MyState)
    """

    messages: Required[Annotated[
        list[AnyMessage], DeltaChannel(apply_message_writes, snapshot_frequency=SNAPSHOT_EVERY)
    ]]


def saved_messages(saver: Any, saved: Any) -> list[AnyMessage]:
    """The ``messages`` of a saved checkpoint tuple, whether stored whole or as deltas.

    A checkpoint of a :class:`DeepAgentState` thread holds ``messages`` only
    at a snapshot; in between, the value is the last snapshot plus the writes
    since, which the saver's ``get_delta_channel_history`` returns. Use this to
    read a thread straight from a checkpointer, without building the graph::

        saved = saver.get_tuple({"configurable": {"thread_id": "t1", "checkpoint_ns": ""}})
        messages = saved_messages(saver, saved)
    """
    channel = DeltaChannel(apply_message_writes, list, snapshot_frequency=SNAPSHOT_EVERY)
    return list(saved_value(saver, saved, "messages", channel) or [])
