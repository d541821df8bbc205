"""Saved checkpoints read as data: no stored name imported or called, every channel's value rebuilt.

A tool that reads a thread straight from a checkpointer (the CLI's
``tasks``, a test, an operator's script) meets two problems, both solved here.

Safety. LangGraph's default checkpoint serializer rebuilds objects by importing the
module and calling the name the data gives (``("os", "system", "...")``
runs a command). That is right for a database only the application
writes; it is code execution for a file that came with a cloned folder
(the CLI's ``.deep_agent/state.sqlite``). :class:`DataOnlySerializer`
constructs only LangGraph's own list of safe types (messages, LangGraph's
types, dates, UUIDs, paths...), which is everything this library and its
CLI write, refuses pickled data, and refuses any other constructor with an
:class:`UntrustedDataError` naming the file and the type, before anything
is imported or called.

Completeness. A channel stored as deltas is absent from most checkpoints;
:func:`saved_value` rebuilds its value as the graph would (see the last
section).

Example::

    saver = SqliteSaver(conn, serde=DataOnlySerializer(".deep_agent/state.sqlite"))
    saved = saver.get_tuple({"configurable": {"thread_id": "t1", "checkpoint_ns": ""}})
    ledger = saved_value(saver, saved, "subagent_tasks", LedgerChannel(dict, merge_records))
"""

from __future__ import annotations

import contextvars
from collections.abc import Iterable
from typing import Any

from langgraph.channels import DeltaChannel, LastValue
from langgraph.channels.base import BaseChannel
from langgraph.checkpoint.serde.event_hooks import SerdeEvent, register_serde_event_listener
from langgraph.checkpoint.serde.jsonplus import JsonPlusSerializer

from subagents.errors import UntrustedDataError

_BLOCKED_KINDS = frozenset({"msgpack_blocked", "msgpack_method_blocked"})
_refused: contextvars.ContextVar[list[str] | None] = contextvars.ContextVar("data_only_refused", default=None)


def _on_event(event: SerdeEvent) -> None:
    refused = _refused.get()
    if refused is not None and event.get("kind") in _BLOCKED_KINDS:
        name = ".".join(p for p in (event.get("module"), event.get("name"), event.get("method")) if p)
        refused.append(name)


register_serde_event_listener(_on_event)


class DataOnlySerializer(JsonPlusSerializer):
    """LangGraph's checkpoint serializer, restricted to its safe types; anything else is refused.

    Args:
        source: what the data is read from, named in every refusal (a path, a url).
        allowed: more ``(module, name)`` types to construct, for state that holds them.
    """

    def __init__(self, source: str, allowed: Iterable[tuple[str, str]] = ()) -> None:
        extra = tuple(allowed)
        super().__init__(pickle_fallback=False, allowed_json_modules=None,
                         allowed_msgpack_modules=extra or None)
        self.source = source

    def loads_typed(self, data: tuple[str, bytes]) -> Any:
        kind = data[0]
        if kind in ("pickle", "json"):
            # Neither is written here: pickle is code by design, and the legacy JSON form revives by import.
            raise UntrustedDataError(f"{self.source}: holds {kind} data, which a data-only reader does not load; "
                                     "refused (this state was not written by this program)")
        refused: list[str] = []
        token = _refused.set(refused)
        try:
            value = super().loads_typed(data)
        finally:
            _refused.reset(token)
        if refused:
            raise UntrustedDataError(
                f"{self.source}: holds an object of type {refused[0]}, which reading it would import and call; "
                "refused: nothing was run (this state was not written by this program; delete it, or read it "
                "with code you trust)")
        return value


# ----------------------------------------------------------------------------
# A channel's value as a saved checkpoint holds it, read without building the graph.
#
# A reducer channel stored as deltas (LangGraph's ``DeltaChannel``, which the
# ledgers and ``create_deep_agent``'s ``messages`` use) is absent from most
# checkpoints: its value is the nearest snapshot plus the writes since, which
# the saver's ``get_delta_channel_history`` returns. A tool that reads a
# thread straight from a checkpointer (the CLI's ``tasks``, a test, an
# operator's script) rebuilds it here as the graph would.
# ----------------------------------------------------------------------------

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
