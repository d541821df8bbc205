"""The parent state the delegation middlewares own: ledgers, usage, and the one ToolMessage.

* ``subagent_tasks`` -- task id -> record of every synchronous delegation;
* ``async_tasks`` -- task id -> record of every background task;
* ``subagent_usage`` -- the run's rollup of every delegation's usage.

These keys, and deepagents' ``todos`` and ``skills_metadata``, never cross
the boundary into or out of a child.

Cost as a run grows: each ledger record is compact and of fixed size (see
:mod:`middleware._ledger_entry`), and both ledgers live in a
:class:`subagents.LedgerChannel`, whose checkpoints reuse sealed, compressed
chunks of records instead of re-serialising every record. The reducer
still returns a new dict per update (one C-level copy: about 50 µs at 5,000
records) rather than extending the old one in place: LangGraph hands the
same object to channel copies and to ``stream_mode="values"`` consumers, so
a value must not change once published. LangGraph's beta ``DeltaChannel``
would store only deltas, but on ``SqliteSaver`` it rebuilds state by
deserialising every ancestor checkpoint since the last snapshot, so it is
not used.
"""

from __future__ import annotations

import typing
from typing import Annotated, Any, NotRequired

from langchain.agents.middleware import AgentState
from langchain_core.messages import ToolMessage

from subagents import DYNAMIC_SUBAGENTS_KEY, LedgerChannel, SpecError, add_usage, merge_records

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
    :class:`subagents.LedgerChannel`.
    """
    try:
        hints = typing.get_type_hints(state_schema, include_extras=True) if state_schema is not None else {}
    except Exception:  # a schema we cannot read is create_agent's to judge
        return
    for key in (LEDGER_KEY, ASYNC_LEDGER_KEY):
        if key in hints and not any(isinstance(m, LedgerChannel) for m in _metadata(hints[key])):
            raise SpecError(
                f"{argument}: field {key!r} is the delegation ledger; leave it out (the middleware declares "
                f"it) or annotate it with subagents.LedgerChannel, e.g. "
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
