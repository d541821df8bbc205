"""The parent's policy over every child: which tool calls wait for approval (a mode becomes an ``interrupt_on``
mapping), how an answer resumes them. A child may tighten the parent's approvals and data policy (its
``PIIMiddleware``), never loosen them: unlike deepagents, a cloned folder's ``bypassPermissions`` cannot switch off
the approvals the user asked for; Claude Code's modes map to the closest that never runs a tool Claude would stop."""

from __future__ import annotations

import contextlib
import json
from collections.abc import Iterable, Mapping
from typing import Any, Literal, get_args

from langchain.agents.middleware import PIIMiddleware

from subagents._errors import InvalidArgument, SpecError

PermissionMode = Literal["always_confirm", "confirm_risky", "never_confirm"]
PERMISSION_MODES: tuple[str, ...] = get_args(PermissionMode)

CLAUDE_PERMISSION_MODES: Mapping[str, PermissionMode] = {"default": "confirm_risky", "acceptedits": "confirm_risky",
                                                         "plan": "always_confirm", "dontask": "always_confirm",
                                                         "bypasspermissions": "never_confirm"}
"""Claude Code's ``permissionMode`` values (lower-cased) and what they mean here."""


def normalize_permission_mode(value: Any) -> PermissionMode | None:
    """The canonical mode for ``value``; ``None`` stays ``None`` (inherit)."""
    if value is None:
        return None
    if isinstance(value, str):
        key = value.strip().replace("-", "_")
        if key.lower() in PERMISSION_MODES:
            return key.lower()  # type: ignore[return-value]
        mapped = CLAUDE_PERMISSION_MODES.get(key.replace("_", "").lower())
        if mapped is not None:
            return mapped
    raise SpecError(f"expected one of {', '.join(PERMISSION_MODES)} (or Claude Code's default, "
                    f"acceptEdits, plan, dontAsk, bypassPermissions), got {value!r}")


def approval_rules(mode: PermissionMode | None, tool_names: Iterable[str], *, risky_tools: Iterable[str] = (),
                   interrupt_on: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """The ``interrupt_on`` mapping for a child with these tools; ``{}`` means no approval."""
    risky = set(risky_tools)
    rules: dict[str, Any] = {name: True for name in tool_names
                             if mode == "always_confirm" or (mode == "confirm_risky" and name in risky)}
    rules.update(interrupt_on or {})
    return {name: rule for name, rule in rules.items() if rule}


# Every child gets the parent's PIIMiddleware; a child's own for the same type adds to it, never replaces it.


class ParentPIIMiddleware(PIIMiddleware):
    """The parent's ``PIIMiddleware`` in a child that has its own for the same type: both hold."""


def policy_beside(middleware: PIIMiddleware) -> PIIMiddleware:
    """The parent's PII rule under a name of its own, through ``PIIMiddleware``'s public arguments."""
    if type(middleware) is not PIIMiddleware:  # a subclass's own behaviour cannot be copied
        raise SpecError(f"middleware {middleware.name!r}: the parent's data policy has the same name as a "
                        "child's own middleware; rename one, so that both hold")
    return ParentPIIMiddleware(middleware.pii_type, strategy=middleware.strategy,
                               detector=middleware.detector, apply_to_input=middleware.apply_to_input,
                               apply_to_output=middleware.apply_to_output,
                               apply_to_tool_results=middleware.apply_to_tool_results)


# Answering a background child that waits for approval, from one parent message: JSON is the resume value as
# it is; a message that is *exactly* an approval word approves; anything else rejects, as the reason the child
# sees ("OK, but do NOT publish" is a rejection: an approval runs a tool, so only an unambiguous one counts).

APPROVAL_WORDS: frozenset[str] = frozenset({"approve", "approved", "yes", "y", "ok", "okay", "go ahead", "lgtm",
                                            "accept", "accepted"})
"""The whole messages that approve (after trimming spaces, case and one final ``.``/``!``)."""


def is_approval(message: str) -> bool:
    """Whether ``message`` is, in full, one of :data:`APPROVAL_WORDS`."""
    text = " ".join(message.split()).lower()
    if text[-1:] in {".", "!"}:
        text = text[:-1].rstrip()
    return text in APPROVAL_WORDS


def decided_message(message: str, decision: str | None) -> str:
    """The message carrying ``decision`` unambiguously: the approval word, or a reason never read as approval."""
    if decision is None:
        return message
    if decision == "approve":
        return "approve"
    if decision != "reject":
        raise InvalidArgument(f"decision must be 'approve' or 'reject' (got {decision!r})")
    reason = message.strip()
    return reason if reason and not is_approval(reason) else f"rejected{': ' + reason if reason else ''}"


def pending_interrupts(interrupts: Iterable[Any]) -> list[dict[str, Any]]:
    """JSON-ready ``{"id", "value"}`` pairs from ``Interrupt`` objects or server dicts."""
    pending = []
    for item in interrupts:
        ident, value = ((item.get("id") or item.get("interrupt_id"), item.get("value")) if isinstance(item, Mapping)
                        else (getattr(item, "id", None), getattr(item, "value", None)))
        pending.append({"id": json_ready(ident), "value": json_ready(value)})
    return pending


_JSON_KEYS = (str, int, float, bool, type(None))
_MAX_DEPTH = 32


def json_ready(value: Any, depth: int = 0) -> Any:
    """``value`` as plain JSON data (what the ledger and every checkpointer can hold), never raising:
    what JSON cannot hold (an odd key, an object, a nesting deeper than 32) is kept as text."""
    if isinstance(value, int) and not isinstance(value, bool) and not -(2**63) <= value < 2**64:
        return str(value)  # msgpack (every LangGraph checkpointer's) holds 64 bits
    if isinstance(value, (str, int, float, bool, type(None))):
        return value
    if depth >= _MAX_DEPTH:
        return _text(value)
    try:
        if isinstance(value, Mapping):
            return {(k if isinstance(k, _JSON_KEYS) and json_ready(k) is k else _text(k)): json_ready(v, depth + 1)
                    for k, v in value.items()}
        if isinstance(value, (list, tuple)):
            return [json_ready(v, depth + 1) for v in value]
    except Exception:  # noqa: BLE001 - a mapping that cannot be read through: kept as its text
        pass
    return _text(value)


def _text(value: Any) -> str:
    try:
        text = value.decode("utf-8", "replace") if isinstance(value, bytes) else repr(value)
    except Exception:  # noqa: BLE001 - a hostile __repr__: its type still says what it was
        text = f"<{type(value).__name__}>"
    return text if len(text) <= 2000 else text[:1999] + "…"


def resume_for(message: str, pending: list[dict[str, Any]]) -> Any:
    """The ``Command(resume=...)`` value answering ``pending`` with ``message`` (for several, a mapping by id)."""
    if message.strip().startswith(("{", "[")):
        with contextlib.suppress(ValueError):
            explicit = json.loads(message.strip())
            if explicit is not None:
                return explicit
    answers = {item.get("id"): _decision(message, item.get("value")) for item in pending}
    return next(iter(answers.values())) if len(answers) == 1 else answers


def _decision(message: str, value: Any) -> Any:
    one: dict[str, Any] = ({"type": "approve"} if is_approval(message) else {"type": "reject", "message": message})
    # `per_call` mode asks about one tool call and takes one bare decision.
    if isinstance(value, Mapping) and value.get("type") == "tool_approval":
        return one
    requests = value.get("action_requests") if isinstance(value, Mapping) else None
    count = len(requests) if isinstance(requests, list) and requests else 1
    return {"decisions": [dict(one) for _ in range(count)]}
