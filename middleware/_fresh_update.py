"""State-update values that LangGraph's tool node need not deep-copy.

The tool node deep-copies every ``Command`` a tool returns, so that setting
the name on its ``ToolMessage`` cannot change an object the tool kept. The
ledger record and usage rollup of a ``task`` call are built fresh for that
one ``Command`` and held by nothing else, so copying them (a record is some
twenty fields) is pure cost on every delegation; so is copying the whole
update when the child wrote nothing back, since its ``ToolMessage`` and
list are built for it too (written-back values come from the child's
result, so an update that carries them is copied as before).
:class:`Fresh` marks such a value: a ``dict`` whose deep copy is itself. It
never reaches the state as such: LangGraph takes an update's items one by
one, the ledger and usage reducers return plain dicts, and a checkpointer
stores it as a plain ``dict``.

Example::

    Command(update=Fresh({LEDGER_KEY: Fresh({record["id"]: entry}), "messages": [message]}))
"""

from __future__ import annotations

from typing import Any


class Fresh(dict[str, Any]):
    """A dict made for one state update and shared with no one: deep copies keep it as is."""

    __slots__ = ()

    def __deepcopy__(self, memo: dict[int, Any]) -> Fresh:
        return self
