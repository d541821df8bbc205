"""Tool calls a model got wrong: answered, recorded, and handed back for a retry.

A provider puts a call whose arguments are not valid JSON in
``AIMessage.invalid_tool_calls``; left alone, the agent loop sees no tool
call and ends silently. :func:`answer_invalid_calls` turns each invalid call
to one of our tools into a regular call answered at once by an error
``ToolMessage`` (same id) that says what was wrong, so the loop goes back to
the model, which can retry; each gets a ledger record (``invalid_call``).
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable, Collection
from typing import Any

from langchain.agents.middleware.types import ExtendedModelResponse, ModelResponse
from langchain_core.messages import AIMessage, ToolMessage
from langgraph.types import Command

from subagents import NO_TRANSCRIPT, TaskRecord, safe_text

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
