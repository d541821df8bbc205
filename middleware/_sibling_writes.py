"""Writing a child's changes into the parent, across parallel siblings of one model message.

The rule itself is :func:`subagents._writeback.write_back`. This module gives
it what only the parent's side knows: whether the ``task`` call has parallel
siblings (any other tool call in the same model message: those run in the
same step and may write the same keys), whether the parent checkpoints, and
what earlier siblings of the same message already wrote to each reducer key,
so each write is tried on top of theirs and no combination can fail the step.

With a checkpointer, what siblings wrote is also read from the step's
pending writes in the checkpoint, so a step resumed in another process (an
approval answered after a restart) still tries a write on top of the
siblings that finished before the pause, and a parent tool of the same
message that finished first is counted too.

Example::

    writes = SiblingWrites()
    update, skipped = writes.apply(runtime, outcome, writes.stored(runtime, outcome))
"""

from __future__ import annotations

import collections
import threading
from collections.abc import Mapping, Sequence
from typing import Any

from langchain_core.messages import AIMessage, ToolMessage
from langgraph.constants import CONF, CONFIG_KEY_CHECKPOINTER

from subagents import TaskOutcome, is_real_cancellation, parent_channels, safe_text, write_back

_GROUPS_KEPT = 256

StoredWrites = Sequence[tuple[str, str, Any]]
"""The step's pending writes in the checkpoint: ``(task id, channel, value)``."""


class SiblingWrites:
    """Per model message, per tool call: the deltas its ``task`` calls have written back so far.

    Kept per call, so a call run again (a time-travel replay of the step) is
    tried on top of its siblings' writes, never on top of its own earlier one.
    """

    def __init__(self) -> None:
        self._groups: collections.OrderedDict[str, dict[str, dict[str, Any]]] = collections.OrderedDict()
        self._lock = threading.Lock()

    def stored(self, runtime: Any, outcome: TaskOutcome) -> StoredWrites:
        """The step's pending writes, when this outcome has changes to try against siblings' (else none)."""
        try:
            where = _step_checkpoint(runtime, outcome)
            return () if where is None else _pending(where[0].get_tuple(where[1]))
        except BaseException as exc:  # noqa: BLE001 - unreadable: the siblings known in this process still count
            if is_real_cancellation(exc):
                raise
            return ()

    async def astored(self, runtime: Any, outcome: TaskOutcome) -> StoredWrites:
        try:
            where = _step_checkpoint(runtime, outcome)
            return () if where is None else _pending(await where[0].aget_tuple(where[1]))
        except BaseException as exc:  # noqa: BLE001
            if is_real_cancellation(exc):
                raise
            return ()

    def apply(self, runtime: Any, outcome: TaskOutcome,
              stored: StoredWrites = ()) -> tuple[dict[str, Any], dict[str, str]]:
        """``(update, skipped)`` for this outcome; never raises (bar real cancellation)."""
        try:
            return self._apply(runtime, outcome, stored)
        except BaseException as exc:  # noqa: BLE001 - the parent's step must not fail over a write-back
            if is_real_cancellation(exc):
                raise
            why = f"could not be written back ({type(exc).__name__})"
            return {}, {safe_text(key, 200): why for key in list(outcome.changes)[:100]}

    def _apply(self, runtime: Any, outcome: TaskOutcome,
               stored: StoredWrites) -> tuple[dict[str, Any], dict[str, str]]:
        call_id = str(runtime.tool_call_id)
        group, parallel = _group_of(runtime.state, runtime.tool_call_id)
        config = runtime.config or {}
        checkpointed = (config.get(CONF) or {}).get(CONFIG_KEY_CHECKPOINTER) is not None
        with self._lock:
            earlier: dict[str, list[Any]] = {}
            known = self._groups.get(group, {}) if group else {}
            for other, writes in known.items():
                if other != call_id:
                    for key, value in writes.items():
                        earlier.setdefault(key, []).append(value)
            own_task = (config.get(CONF) or {}).get("__pregel_task_id")
            for key, value in _unseen(stored, {call_id, *known}, own_task, outcome.changes):
                earlier.setdefault(key, []).append(value)
            update, skipped = write_back(outcome.changes, outcome.inputs, parent_channels(config),
                                         parallel=parallel, earlier=earlier, checkpointed=checkpointed)
            if group and parallel:
                self._groups.setdefault(group, {})[call_id] = dict(update)
                self._groups.move_to_end(group)
                while len(self._groups) > _GROUPS_KEPT:
                    self._groups.popitem(last=False)
        return update, skipped


def _pending(found: Any) -> StoredWrites:
    """Well-formed ``(task id, channel, value)`` pending writes of a checkpoint tuple; others are not siblings'."""
    writes = getattr(found, "pending_writes", None) or ()
    return tuple(w for w in writes if isinstance(w, tuple) and len(w) == 3)


def _step_checkpoint(runtime: Any, outcome: TaskOutcome) -> tuple[Any, dict[str, Any]] | None:
    """The checkpointer and the config of the checkpoint this step runs from, when a write-back needs them."""
    if not outcome.changes:
        return None
    conf = (runtime.config or {}).get(CONF) or {}
    saver = conf.get(CONFIG_KEY_CHECKPOINTER)
    if saver is None:
        return None
    namespace = str(conf.get("checkpoint_ns") or "")
    parent_ns = namespace.rpartition("|")[0]  # the tool's own task namespace ends in "tools:<task id>"
    checkpoint_id = (conf.get("checkpoint_map") or {}).get(parent_ns)
    if checkpoint_id is None or not _group_of(runtime.state, runtime.tool_call_id)[1]:
        return None
    return saver, {CONF: {"thread_id": conf.get("thread_id"), "checkpoint_ns": parent_ns,
                          "checkpoint_id": checkpoint_id}}


def _unseen(stored: StoredWrites, counted: set[str], own_task: Any,
            keys: Mapping[str, Any]) -> list[tuple[str, Any]]:
    """``(key, value)`` that sibling tasks stored for ``keys``, but not those of calls already ``counted``."""
    calls: dict[str, str | None] = {}
    for task, channel, value in stored:
        if channel == "messages":
            for message in value if isinstance(value, list) else [value]:
                if isinstance(message, ToolMessage):
                    calls[task] = message.tool_call_id
    return [(channel, value) for task, channel, value in stored
            if channel in keys and task != own_task and calls.get(task) not in counted]


def _group_of(state: Mapping[str, Any], tool_call_id: str | None) -> tuple[str | None, bool]:
    """The model message that made this call (its id, or its call ids), and whether it made others."""
    for message in reversed(state.get("messages") or ()):
        if isinstance(message, AIMessage) and any(c.get("id") == tool_call_id for c in message.tool_calls):
            group = message.id or "|".join(str(c.get("id")) for c in message.tool_calls)
            return group, len(message.tool_calls) > 1
    return None, True  # unknown: assume siblings, the safe side
