"""Writing a child's changes into the parent, across parallel siblings of one model message.

The rule itself is :func:`subagents._writeback.write_back`. This module gives
it what only the parent's side knows: whether the ``task`` call has parallel
siblings (any other tool call in the same model message: those run in the
same step and may write the same keys), whether the parent checkpoints, and
what earlier siblings of the same message already wrote to each reducer key,
so each write is tried on top of theirs and no combination can fail the step.

Example::

    writes = SiblingWrites()
    update, skipped = writes.apply(runtime, outcome)
"""

from __future__ import annotations

import collections
import threading
from collections.abc import Mapping
from typing import Any

from langchain_core.messages import AIMessage
from langgraph.constants import CONF, CONFIG_KEY_CHECKPOINTER

from subagents import TaskOutcome, parent_channels, write_back

_GROUPS_KEPT = 256


class SiblingWrites:
    """Per model message: the deltas its tool calls have written back so far."""

    def __init__(self) -> None:
        self._groups: collections.OrderedDict[str, dict[str, list[Any]]] = collections.OrderedDict()
        self._lock = threading.Lock()

    def apply(self, runtime: Any, outcome: TaskOutcome) -> tuple[dict[str, Any], dict[str, str]]:
        """``(update, skipped)`` for this outcome; never raises."""
        group, parallel = _group_of(runtime.state, runtime.tool_call_id)
        config = runtime.config or {}
        checkpointed = (config.get(CONF) or {}).get(CONFIG_KEY_CHECKPOINTER) is not None
        with self._lock:
            earlier = self._groups.get(group, {}) if group else {}
            update, skipped = write_back(outcome.changes, outcome.inputs, parent_channels(config),
                                         parallel=parallel, earlier=earlier, checkpointed=checkpointed)
            if group and parallel and update:
                kept = self._groups.setdefault(group, {})
                for key, value in update.items():
                    kept.setdefault(key, []).append(value)
                self._groups.move_to_end(group)
                while len(self._groups) > _GROUPS_KEPT:
                    self._groups.popitem(last=False)
        return update, skipped


def _group_of(state: Mapping[str, Any], tool_call_id: str | None) -> tuple[str | None, bool]:
    """The model message that made this call (its id, or its call ids), and whether it made others."""
    for message in reversed(state.get("messages") or ()):
        if isinstance(message, AIMessage) and any(c.get("id") == tool_call_id for c in message.tool_calls):
            group = message.id or "|".join(str(c.get("id")) for c in message.tool_calls)
            return group, len(message.tool_calls) > 1
    return None, True  # unknown: assume siblings, the safe side
