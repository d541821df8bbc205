"""Writing a child's changes into the parent, across parallel siblings of one model message.

The rule itself is :func:`subagents.boundary.write_back`. This module gives
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
import time
import typing
import uuid
from collections.abc import Callable, Collection, Mapping, Sequence
from typing import Annotated, Any, NotRequired

from langchain.agents.middleware import AgentState
from langchain.agents.middleware.types import ExtendedModelResponse, ModelResponse
from langchain_core.messages import AIMessage, ToolMessage
from langgraph.constants import CONF, CONFIG_KEY_CHECKPOINTER
from langgraph.types import Command

from subagents import SpecError, TaskOutcome, TaskRecord
from subagents.boundary import parent_channels, write_back
from subagents.errors import is_real_cancellation, safe_text
from subagents.ledger import LedgerChannel
from subagents.outcome import add_usage, merge_records
from subagents.registry import DYNAMIC_SUBAGENTS_KEY
from subagents.transcripts import NO_TRANSCRIPT

# ----------------------------------------------------------------------------
# What one delegation leaves in the ledger: a compact record of fixed size.
#
# Every checkpoint carries the whole ledger ``subagent_tasks``, so a record
# that repeated the task description and the child's full answer (both
# already in the parent's messages) would make each delegation cost more to
# checkpoint than the one before it. The ledger keeps previews instead:
#
# * ``description`` and ``result`` -- at most :data:`PREVIEW_CHARS` characters
#   (a clipped text ends with ``…``), with ``description_chars`` and
#   ``result_chars`` giving the full lengths;
# * ``error`` -- at most :data:`ERROR_PREVIEW_CHARS` characters, with
#   ``error_chars`` (``None`` for a text that is absent).
#
# The full texts stay where they already are: the description in the
# ``task`` call of the parent's AI message, the answer (or
# ``Subagent '<name>' failed: <error>``) in the ToolMessage with the same
# ``tool_call_id``, and every child message in the transcript
# (``record["transcript"]``, see :func:`subagents.get_transcript`).
#
# Example::
#
#     entry = ledger_entry({"id": "t1", "description": "Find X", "result": "A" * 5000, ...})
#     entry["result"][-1], len(entry["result"]), entry["result_chars"]   # ('…', 200, 5000)
# ----------------------------------------------------------------------------



PREVIEW_CHARS = 200
"""Longest ``description`` and ``result`` a ledger record keeps."""

ERROR_PREVIEW_CHARS = 1000
"""Longest ``error`` a ledger record keeps (errors are rarer and worth more words)."""

ELLIPSIS = "…"


def clip(text: str, limit: int) -> str:
    """``text`` when it fits in ``limit`` characters, else its start and ``…`` (``limit`` in all)."""
    return text if len(text) <= limit else text[: max(0, limit - 1)] + ELLIPSIS


def ledger_entry(record: Mapping[str, Any]) -> dict[str, Any]:
    """The compact record the ledger keeps for one delegation's full record.

    Every field is kept except the long texts, which become previews with
    their full lengths; a record already compact comes back unchanged.
    """
    entry = dict(record)
    for key, limit in (("description", PREVIEW_CHARS), ("result", PREVIEW_CHARS), ("error", ERROR_PREVIEW_CHARS)):
        text, length_key = entry.get(key), f"{key}_chars"
        if not isinstance(text, str):
            entry.setdefault(length_key, None)
        elif not (isinstance(entry.get(length_key), int) and len(text) <= limit):
            entry[length_key] = len(text)  # a record already compact keeps the full length it recorded
            entry[key] = clip(text, limit)
    return entry



# ----------------------------------------------------------------------------
# The parent state the delegation middlewares own: ledgers, usage, and the one ToolMessage.
#
# * ``subagent_tasks`` -- task id -> record of every synchronous delegation;
# * ``async_tasks`` -- task id -> record of every background task;
# * ``subagent_usage`` -- the run's rollup of every delegation's usage.
#
# These keys, and deepagents' ``todos`` and ``skills_metadata``, never cross
# the boundary into or out of a child.
#
# Cost as a run grows: each ledger record is compact and of fixed size (see
# :mod:`middleware.state`), and both ledgers live in a
# :class:`subagents.ledger.LedgerChannel`, whose checkpoints reuse sealed, compressed
# chunks of records instead of re-serialising every record. The reducer
# still returns a new dict per update (one C-level copy: about 50 µs at 5,000
# records) rather than extending the old one in place: LangGraph hands the
# same object to channel copies and to ``stream_mode="values"`` consumers, so
# a value must not change once published. LangGraph's beta ``DeltaChannel``
# would store only deltas, but on ``SqliteSaver`` it rebuilds state by
# deserialising every ancestor checkpoint since the last snapshot, so it is
# not used.
# ----------------------------------------------------------------------------



LEDGER_KEY = "subagent_tasks"
ASYNC_LEDGER_KEY = "async_tasks"
USAGE_KEY = "subagent_usage"
TASK_TOOL_NAME = "task"

EXCLUDED_STATE_KEYS: frozenset[str] = frozenset(
    {"messages", "todos", "structured_response", "jump_to", "skills_metadata",
     LEDGER_KEY, ASYNC_LEDGER_KEY, USAGE_KEY, DYNAMIC_SUBAGENTS_KEY}
)
"""Keys that never cross the boundary, whichever way: each belongs to one agent."""


class SubagentLedgerState(AgentState):
    """Parent state with the ledger of synchronous delegations and their usage rollup."""

    subagent_tasks: NotRequired[Annotated[dict[str, dict[str, Any]], LedgerChannel(dict, merge_records)]]
    subagent_usage: NotRequired[Annotated[dict[str, Any], add_usage]]


def check_ledger_fields(state_schema: Any, argument: str) -> None:
    """Refuse a user ``state_schema`` that declares a ledger key with another channel.

    A schema's own annotation wins over the middleware's, so a ledger declared
    with a plain reducer would show a long ledger's packed checkpoint as the
    ledger. Leave the key out (the middleware declares it) or annotate it with
    :class:`subagents.ledger.LedgerChannel`.
    """
    try:
        hints = typing.get_type_hints(state_schema, include_extras=True) if state_schema is not None else {}
    except Exception:  # a schema we cannot read is create_agent's to judge
        return
    for key in (LEDGER_KEY, ASYNC_LEDGER_KEY):
        if key in hints and not any(isinstance(m, LedgerChannel) for m in _metadata(hints[key])):
            raise SpecError(
                f"{argument}: field {key!r} is the delegation ledger; leave it out (the middleware declares "
                f"it) or annotate it with subagents.ledger.LedgerChannel, e.g. "
                f"Annotated[dict[str, dict], LedgerChannel(dict, merge_records)]"
            )


def _metadata(hint: Any) -> tuple[Any, ...]:
    while typing.get_origin(hint) in (NotRequired, typing.Required):
        hint = typing.get_args(hint)[0]
    return getattr(hint, "__metadata__", ())


def tool_message(agent_type: str, tool_call_id: str | None, *, answer: str | None,
                 error: str | None, tool_name: str = TASK_TOOL_NAME) -> ToolMessage:
    """The one message the parent sees: the answer, or ``Subagent '<name>' failed: <reason>``."""
    failed = error is not None
    return ToolMessage(
        content=f"Subagent '{agent_type}' failed: {error}" if failed else (answer or ""),
        tool_call_id=tool_call_id or "",
        name=tool_name,
        status="error" if failed else "success",
    )


def usage_update(record: dict[str, Any]) -> dict[str, Any]:
    return {**{k: record.get(k, 0) for k in ("model_calls", "input_tokens", "output_tokens", "cost_usd")},
            "tasks": 1}


# ----------------------------------------------------------------------------
# Tool calls a model got wrong: answered, recorded, and handed back for a retry.
#
# A provider puts a call whose arguments are not valid JSON in
# ``AIMessage.invalid_tool_calls``; left alone, the agent loop sees no tool
# call and ends silently. :func:`answer_invalid_calls` turns each invalid call
# to one of our tools into a regular call answered at once by an error
# ``ToolMessage`` (same id) that says what was wrong, so the loop goes back to
# the model, which can retry; each gets a ledger record (``invalid_call``).
# ----------------------------------------------------------------------------



RecordSink = Callable[[dict[str, Any]], None]


def answer_invalid_calls(result: list[Any], tool_names: Collection[str]) -> tuple[list[Any], list[dict[str, Any]]]:
    """``(messages, records)``: the model's messages with its invalid calls to ``tool_names`` answered."""
    if not result or not isinstance(result[0], AIMessage):
        return result, []
    message = result[0]
    bad = [c for c in (message.invalid_tool_calls or []) if c.get("name") in tool_names]
    renamed = _needing_ids(message.tool_calls, tool_names)
    if renamed:
        # Some servers send no call id, or number ids per message and repeat them: the tool node needs
        # one per call to answer it, and a call must be told from its siblings (caps, write-backs).
        message = message.model_copy(update={"tool_calls": [
            {**c, "id": f"call_{uuid.uuid4().hex[:16]}"} if i in renamed else c
            for i, c in enumerate(message.tool_calls)]})
        result = [message, *result[1:]]
    if not bad:
        return result, []
    kept = [c for c in message.invalid_tool_calls if c not in bad]
    calls, answers, records = list(message.tool_calls), [], []
    taken = {c.get("id") for c in calls} | {c.get("id") for c in kept}
    for invalid in bad:
        # Its answer must answer it alone: an id a valid call shares would answer (and drop) that call too.
        call_id = invalid.get("id")
        if not call_id or call_id in taken:
            call_id = f"call_invalid_{uuid.uuid4().hex[:12]}"
        taken.add(call_id)
        name = str(invalid.get("name"))
        reason = (
            f"the arguments of this '{name}' call could not be read "
            f"({safe_text(invalid.get('error') or 'not valid JSON', 300)}); "
            f"call it again with valid JSON arguments. Received: {safe_text(invalid.get('args'), 300)}"
        )
        calls.append({"name": name, "args": {}, "id": call_id, "type": "tool_call"})
        answers.append(ToolMessage(content=f"Invalid call: {reason}", tool_call_id=call_id, name=name,
                                   status="error"))
        records.append(invalid_call_record(name, call_id, reason))
    fixed = message.model_copy(update={"tool_calls": calls, "invalid_tool_calls": kept})
    return [fixed, *answers, *result[1:]], records


def answered_response(response: Any, tool_names: Collection[str], ledger_key: str,
                      as_record: Callable[[dict[str, Any]], dict[str, Any]] = dict) -> Any:
    """A model response with its invalid calls to ``tool_names`` answered, their records under ``ledger_key``."""
    if not isinstance(response, ModelResponse):
        return response
    result, records = answer_invalid_calls(response.result, tool_names)
    if result is response.result:
        return response
    fixed = ModelResponse(result=result, structured_response=response.structured_response)
    if not records:
        return fixed
    ledger = {r["id"]: as_record(r) for r in records}
    return ExtendedModelResponse(model_response=fixed, command=Command(update={ledger_key: ledger}))


def _needing_ids(calls: list[Any], tool_names: Collection[str]) -> set[int]:
    """Positions of calls to ``tool_names`` with no id, or with one an earlier call of the message has."""
    seen: set[Any] = set()
    renamed = set()
    for index, call in enumerate(calls):
        call_id = call.get("id")
        if call.get("name") in tool_names and (not call_id or call_id in seen):
            renamed.add(index)
        seen.add(call_id)
    return renamed


def invalid_call_record(tool_name: str, tool_call_id: str, reason: str,
                        agent_type: str | None = None) -> dict[str, Any]:
    """The ledger record of a delegation call that never ran because its arguments were wrong."""
    now = time.time()
    return TaskRecord(
        # Never derived from the call id alone: models reuse ids across turns and calls.
        id=uuid.uuid4().hex,
        agent_type=agent_type or "(unknown)",
        tool_call_id=tool_call_id,
        status="error",
        stop_reason="invalid_call",
        description=f"(invalid {tool_name} call)",
        error=reason,
        started_at=now,
        finished_at=now,
        duration_ms=0.0,
        transcript=NO_TRANSCRIPT,  # no child ran: an empty transcript, as for a refused delegation
    ).model_dump()


def as_background_record(record: dict[str, Any]) -> dict[str, Any]:
    """An invalid background-tool call's record, in the ``async_tasks`` ledger's shape."""
    return {
        "id": record["id"], "agent_type": record["agent_type"], "runner": "local", "status": "error",
        "stop_reason": "invalid_call", "description": record["description"],
        "tool_call_id": record["tool_call_id"], "created_at": record["started_at"],
        "updated_at": record["finished_at"], "finished_at": record["finished_at"],
        "error": record["error"], "announced": True, "attempt": 1,
    }


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
