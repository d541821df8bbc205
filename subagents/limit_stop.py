"""A final AI message that a run's limit wrote in place of a model call, marked as such.

A limit that ends a run (the root's ``max_root_turns``) replies with a
message of its own instead of calling the model. That message is not the
model deciding it is done, and nothing should ask the agent to go on from
it: a ``Stop`` hook that blocks would send the run back to a model call the
limit refuses again, round after round, to LangGraph's recursion limit.
The mark, in ``response_metadata`` (which no provider is sent), lets such
code tell the two apart.

Example::

    message = limit_stop("Stopped: ...", "max_root_turns")
    assert stopped_by_limit(message) == "max_root_turns"
"""

from __future__ import annotations

from typing import Any

from langchain_core.messages import AIMessage

LIMIT_STOP_MARK = "stopped_by_limit"


def limit_stop(text: str, limit: str, name: str | None = None) -> AIMessage:
    """The final AI message ``limit`` (its argument's name) ends a run with, signed ``name`` as the agent's are."""
    return AIMessage(content=text, name=name, response_metadata={LIMIT_STOP_MARK: limit})


def stopped_by_limit(message: Any) -> str | None:
    """The limit that wrote ``message``, or ``None`` for a model's own message (or anything else)."""
    if not isinstance(message, AIMessage):
        return None
    limit = (message.response_metadata or {}).get(LIMIT_STOP_MARK)
    return limit if isinstance(limit, str) else None
