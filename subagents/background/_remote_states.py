"""How a LangGraph Server's runs and threads read as background task fields.

==========================================  ========================
run ``pending`` / ``running``               ``pending`` / ``running``
run ``success``, thread has interrupts      ``waiting_for_approval``
run ``success``                             ``completed`` (the last AI text)
run ``error``                               ``error`` (the server's message)
run ``timeout``                             ``error``
run ``interrupted`` (cancelled)             ``cancelled``
thread or run unknown to the server         ``lost``
==========================================  ========================

A run of an interrupting graph ends ``success`` while its *thread* is
``interrupted``, so the thread is read too. A cancelled run also leaves its
thread ``interrupted`` (without interrupts), which is why the run's status
decides first.

Example::

    fields = fields_from(run, thread)    # {'status': 'completed', 'result': '...', ...}
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from subagents._budget import token_count
from subagents._errors import brief
from subagents.background._approval import pending_interrupts
from subagents.background._ledger import now


def run_id_of(run: Any) -> str:
    """The ``run_id`` of a run a server answered with; ``ValueError`` saying so when it has none."""
    run_id = run.get("run_id") if isinstance(run, Mapping) else None
    if not isinstance(run_id, str) or not run_id:
        raise ValueError(f"the server answered with a run that has no run_id: {brief(run)}")
    return run_id


def run_status(status: str | None) -> str:
    """A just-created run's task status."""
    return "running" if status == "running" else "pending"


def fields_from(run: Mapping[str, Any], thread: Mapping[str, Any]) -> dict[str, Any]:
    """The task's fields from its run and thread as the server has them."""
    values = thread.get("values") or {}
    fields: dict[str, Any] = {"run_id": run_id_of(run), **usage(values)}
    status = run.get("status")
    if status in ("pending", "running"):
        fields["status"] = status
        return fields
    interrupts = interrupts_of(thread)
    if status == "success" and interrupts:
        fields.update(status="waiting_for_approval", approval_request=pending_interrupts(interrupts))
        return fields
    fields["finished_at"] = now()
    fields["approval_request"] = None
    if status == "success":
        fields.update(status="completed", result=answer(values))
    elif status == "interrupted":
        fields["status"] = "cancelled"
    elif status == "timeout":
        fields.update(status="error", error="the run timed out on the server")
    else:
        problem = thread.get("error") or {}
        message = problem.get("message") if isinstance(problem, Mapping) else problem
        kind = problem.get("error") if isinstance(problem, Mapping) else None
        text = f"{kind}: {message}" if kind and message else (str(message or "") or f"the run ended {status!r}")
        fields.update(status="error", error=text)
    return fields


ENDED_THREAD_STATUSES = frozenset({"idle", "interrupted"})
"""Thread statuses whose values alone say how the task ended (an ``error`` thread needs its run)."""


def fields_from_thread(thread: Mapping[str, Any]) -> dict[str, Any] | None:
    """The task's fields from its thread alone (status, values, interrupts), or ``None`` if it cannot tell.

    ``idle`` means the last run succeeded; ``interrupted`` means it waits
    for approval (with interrupts) or was cancelled (without).
    """
    status = thread.get("status")
    if status not in ENDED_THREAD_STATUSES:
        return None
    values = thread.get("values") or {}
    fields: dict[str, Any] = {**usage(values)}
    interrupts = interrupts_of(thread)
    if status == "interrupted" and interrupts:
        fields.update(status="waiting_for_approval", approval_request=pending_interrupts(interrupts))
        return fields
    fields.update(finished_at=now(), approval_request=None)
    if status == "idle":
        fields.update(status="completed", result=answer(values))
    else:
        fields["status"] = "cancelled"
    return fields


def interrupts_of(thread: Mapping[str, Any]) -> list[Any]:
    """The thread's pending interrupts: the server keeps them by task id (a flat list is read too)."""
    found = thread.get("interrupts") or {}
    groups = found.values() if isinstance(found, Mapping) else [found]
    return [i for items in groups if isinstance(items, list) for i in items]


def _text(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):  # a text block's text, a block that is text: a server's data, so checked
        return "".join(_block_text(b) for b in content if not isinstance(b, Mapping) or b.get("type") in (None, "text"))
    return ""


def _block_text(block: Any) -> str:
    if isinstance(block, Mapping):
        text = block.get("text")
        return text if isinstance(text, str) else ""
    return block if isinstance(block, str) else _json(block)


def _json(value: Any) -> str:
    """``value`` as JSON text; a value nested deeper than Python's recursion limit is named, not raised."""
    try:
        return json.dumps(value, default=str)
    except (RecursionError, ValueError, TypeError) as exc:
        return f"(an answer that cannot be shown as JSON: {type(exc).__name__})"


def answer(values: Mapping[str, Any]) -> str:
    """The child's answer: its structured response as JSON, else its last non-empty AI text.

    A graph whose state is not a mapping (an entrypoint returning text) answers with that value.
    """
    if not isinstance(values, Mapping):
        return values if isinstance(values, str) else _json(values)
    structured = values.get("structured_response")
    if structured is not None:
        return _json(structured)
    messages = values.get("messages")
    for message in reversed(messages if isinstance(messages, list) else []):
        if isinstance(message, Mapping) and message.get("type") in ("ai", "AIMessageChunk"):
            text = _text(message.get("content")).strip()
            if text:
                return text
    return ""


MAX_USAGE = 2**53 - 1
"""The largest count a server's usage is read as: any checkpointer (and JSON) holds it exactly."""


def usage(values: Any) -> dict[str, int]:
    """Model calls and tokens of the child's AI messages.

    A server's numbers are data: each count is read by
    :func:`~subagents.token_count` (not a number, or negative: 0), and each
    total stops at :data:`MAX_USAGE` (a ledger holding more could not be
    checkpointed).
    """
    calls = inp = out = 0
    messages = values.get("messages") if isinstance(values, Mapping) else None
    for message in messages if isinstance(messages, list) else ():
        if isinstance(message, Mapping) and message.get("type") == "ai":
            calls += 1
            meta = message.get("usage_metadata")
            if isinstance(meta, Mapping):
                inp += token_count(meta.get("input_tokens"))
                out += token_count(meta.get("output_tokens"))
    return {"model_calls": min(calls, MAX_USAGE), "input_tokens": min(inp, MAX_USAGE),
            "output_tokens": min(out, MAX_USAGE)}


def answers_for_open_tool_calls(thread: Mapping[str, Any]) -> list[dict[str, Any]]:
    """Tool results for calls a stopped run left unanswered (models reject open calls)."""
    values = thread.get("values")
    messages = values.get("messages") if isinstance(values, Mapping) else None
    messages = messages if isinstance(messages, list) else []
    answered = {m.get("tool_call_id") for m in messages if isinstance(m, Mapping) and m.get("type") == "tool"}
    for message in reversed(messages):
        if isinstance(message, Mapping) and message.get("type") == "ai":
            return [
                {"role": "tool", "tool_call_id": call["id"], "name": call.get("name"),
                 "content": "Not run: the caller stopped this step to send a new instruction."}
                for call in message.get("tool_calls") or []
                if call.get("id") not in answered
            ]
    return []


def status_code(exc: BaseException) -> int | None:
    """The HTTP status of an SDK error, if it has one."""
    response = getattr(exc, "response", None)
    return getattr(response, "status_code", None) or getattr(exc, "status_code", None)


def is_not_found(exc: BaseException) -> bool:
    return status_code(exc) == 404
