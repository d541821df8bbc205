"""State-update values that LangGraph's tool node need not deep-copy.

The tool node deep-copies every ``Command`` a tool returns, so that setting
the name on its ``ToolMessage`` cannot change an object the tool kept. The
ledger record and usage rollup of a ``task`` call are built fresh for that
one ``Command`` and held by nothing else, so copying them (a record is some
twenty fields) is pure cost on every delegation; so is copying the whole
update when the child wrote nothing back, since its ``ToolMessage`` and
list are built for it too (written-back values come from the child's
result, so an update that carries them is copied as before).

:class:`Fresh` marks such a value: a ``dict`` whose **first** deep copy (the
tool node's, made before any middleware or stream sees the result; only a
callback handler's ``on_tool_end`` sees it earlier) is itself. That hands
it over, with every ``Fresh`` inside it: any later deep copy (a middleware
keeping an audit copy, a stream consumer) is a real, independent copy, so
editing it never reaches the state. A ``Fresh`` never reaches the state
itself: LangGraph takes an update's items one by one, the ledger and usage
reducers return plain dicts, and a checkpointer stores it as a plain
``dict``.

Example::

    Command(update=Fresh({LEDGER_KEY: Fresh({record["id"]: entry}), "messages": [message]}))
"""

from __future__ import annotations

import copy
from typing import Any


class Fresh(dict[str, Any]):
    """A dict made for one state update, shared with no one: its first deep copy keeps it as is."""

    __slots__ = ("_handed_over",)

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._handed_over = False

    def __deepcopy__(self, memo: dict[int, Any]) -> dict[str, Any]:
        if not self._handed_over:
            self._hand_over()
            return self
        return {key: copy.deepcopy(value, memo) for key, value in self.items()}

    def _hand_over(self) -> None:
        self._handed_over = True
        for value in self.values():
            if isinstance(value, Fresh):
                value._hand_over()
