"""Checkpoints read as data: a serializer that never imports or calls what the stored bytes name.

LangGraph's default checkpoint serializer rebuilds objects by importing the
module and calling the name the data gives (``("os", "system", "...")``
runs a command). That is right for a database only the application
writes; it is code execution for a file that came with a cloned folder
(the CLI's ``.deep_agent/state.sqlite``). :class:`DataOnlySerializer`
constructs only LangGraph's own list of safe types (messages, LangGraph's
types, dates, UUIDs, paths...), which is everything this library and its
CLI write, refuses pickled data, and refuses any other constructor with an
:class:`UntrustedDataError` naming the file and the type, before anything
is imported or called.

Example::

    saver = SqliteSaver(conn, serde=DataOnlySerializer(".deep_agent/state.sqlite"))
"""

from __future__ import annotations

import contextvars
from collections.abc import Iterable
from typing import Any

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
