"""A channel's value as a saved checkpoint holds it, read without building the graph.

A reducer channel stored as deltas (LangGraph's ``DeltaChannel``, which the
ledgers and ``create_deep_agent``'s ``messages`` use) is absent from most
checkpoints: its value is the nearest snapshot plus the writes since, which
the saver's ``get_delta_channel_history`` returns. A tool that reads a
thread straight from a checkpointer (the CLI's ``tasks``, a test, an
operator's script) rebuilds it here as the graph would.
"""

from __future__ import annotations

from typing import Any

from langgraph.channels import DeltaChannel, LastValue
from langgraph.channels.base import BaseChannel

_MISSING = LastValue(object).value  # LangGraph's "no value" sentinel, which it does not export


def saved_value(saver: Any, saved: Any, key: str, channel: BaseChannel[Any, Any, Any]) -> Any:
    """The value of channel ``key`` at ``saved`` (a ``CheckpointTuple`` of ``saver``), or ``None`` if never written.

    ``channel`` is the key's channel as the graph declares it (it decodes what
    the checkpoint stored and replays the writes since)::

        saved = saver.get_tuple({"configurable": {"thread_id": "t1", "checkpoint_ns": ""}})
        ledger = saved_value(saver, saved, "subagent_tasks", LedgerChannel(dict, merge_records))
    """
    if saved is None:
        return None
    stored = saved.checkpoint["channel_values"].get(key, _MISSING)
    if stored is not _MISSING:
        restored = channel.from_checkpoint(stored)
        return restored.get() if restored.is_available() else None
    if not isinstance(channel, DeltaChannel) or key not in saved.checkpoint.get("channel_versions", {}):
        return None
    history = saver.get_delta_channel_history(config=saved.config, channels=[key])[key]
    replayed = channel.from_checkpoint(history.get("seed", _MISSING))
    replayed.replay_writes(history["writes"])
    return replayed.get() if replayed.is_available() else None
