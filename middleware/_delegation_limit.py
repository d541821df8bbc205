"""A cap on how many times the parent delegates in one run.

Children are governed by their own limits; this governs the parent. A run
is counted from the last user (human) message: every ``task`` call the
parent has made since then counts, in order, parallel calls included. Past
``max_delegations``, ``task`` answers with an error telling the model to
finish with what it has (and the ledger records the refusal), and the
``task`` tool is no longer offered to the model for the rest of the run, so
a model that would delegate forever has to answer instead.

Example::

    limit = DelegationLimit(3)
    limit.refusal(state["messages"], "call_4")   # None while under the cap
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import Any

from middleware._ledger import TASK_TOOL_NAME
from subagents import TaskCall, TaskOutcome, TaskRecord, task_id_for
from subagents.settings import DEFAULT_MAX_DELEGATIONS


class DelegationLimit:
    """Counts the parent's ``task`` calls since the last human message.

    Args:
        max_delegations: delegations allowed per run (``None``: no cap).
        tool_name: the delegation tool's name.
    """

    def __init__(self, max_delegations: int | None = DEFAULT_MAX_DELEGATIONS, *,
                 tool_name: str = TASK_TOOL_NAME) -> None:
        if max_delegations is not None and (isinstance(max_delegations, bool) or max_delegations < 1):
            raise ValueError(f"max_delegations must be a positive integer or None (got {max_delegations!r})")
        self.max_delegations = max_delegations
        self.tool_name = tool_name

    def calls_this_run(self, messages: Sequence[Any]) -> list[str]:
        """Ids of the delegation calls made since the last human message, in order."""
        # Read back from the end to the last human message: a long thread costs what its last run holds.
        turns: list[list[str]] = []
        for message in reversed(messages):
            kind = getattr(message, "type", None)
            if kind == "human":
                break
            if kind == "ai":
                turns.append([str(c.get("id")) for c in getattr(message, "tool_calls", ()) or ()
                              if c.get("name") == self.tool_name])
        return [call_id for turn in reversed(turns) for call_id in turn]

    def exhausted(self, messages: Sequence[Any]) -> bool:
        """True once the run has made ``max_delegations`` calls."""
        return self.max_delegations is not None and len(self.calls_this_run(messages)) >= self.max_delegations

    def withdrawn_when_exhausted(self, request: Any) -> Any:
        """The model request, without the delegation tool once the run is out of delegations."""
        if not self.exhausted(request.messages):
            return request
        return request.override(tools=[t for t in request.tools if getattr(t, "name", None) != self.tool_name])

    def refusal(self, messages: Sequence[Any], tool_call_id: str | None) -> str | None:
        """Why this call may not delegate, or ``None`` if it may."""
        if self.max_delegations is None:
            return None
        ids = self.calls_this_run(messages)
        position = ids.index(str(tool_call_id)) if str(tool_call_id) in ids else len(ids)
        if position < self.max_delegations:
            return None
        return (
            f"delegation limit reached (max_delegations={self.max_delegations} per run); "
            "do not call task again: finish now and answer with what you have"
        )


def refused_outcome(call: TaskCall, reason: str) -> TaskOutcome:
    """The outcome of a delegation refused before it started: a record and an error."""
    configurable = call.parent_config.get("configurable") or {}
    now = time.time()
    record = TaskRecord(
        id=task_id_for(configurable.get("thread_id"), configurable.get("checkpoint_ns", ""), call.tool_call_id),
        agent_type=call.subagent_type,
        tool_call_id=call.tool_call_id,
        status="error",
        stop_reason="refused",
        description=call.description,
        error=reason,
        started_at=now,
        finished_at=now,
        duration_ms=0.0,
    ).model_dump()
    return TaskOutcome(record, error=reason)
