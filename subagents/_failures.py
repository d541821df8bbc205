"""Turning whatever a child raised into a stop reason and a sentence a model can act on.

Classification goes by exception type and origin, never by message text, and
the function is total: a hostile exception (a ``__str__`` that raises, a huge
message, non-string arguments) still yields a bounded, readable reason.

Example::

    stop_reason, text = describe_failure(exc, limits=Limits(max_turns=8))
    # ("max_turns", "hit its max_turns limit (8 model calls) before finishing. ...")
"""

from __future__ import annotations

import dataclasses
from typing import Any, cast, get_args

from langgraph.errors import GraphRecursionError

from subagents._errors import StopReason, SubagentError, safe_text

_FAILURE_REASONS = frozenset(get_args(StopReason)) - {"completed"}


@dataclasses.dataclass(frozen=True)
class Limits:
    """The limits a task ran under, for naming the one that stopped it."""

    max_turns: int | None = None
    recursion_limit: int | None = None
    timeout_s: float | None = None


def describe_failure(
    exc: BaseException, *, limits: Limits = Limits(), origin: StopReason | None = None
) -> tuple[StopReason, str]:
    """``(stop_reason, reason)`` for a failed task; never raises.

    ``origin`` is ``model_error`` or ``tool_error`` when the caller knows the
    exception came from a model or a tool call.
    """
    try:
        return _describe(exc, limits, origin)
    except BaseException:  # noqa: BLE001 - the failure path must never raise
        return "error", f"{_type_name(exc)}: (the error could not be described)"


def _describe(exc: BaseException, limits: Limits, origin: StopReason | None) -> tuple[StopReason, str]:
    from langchain.agents.middleware.model_call_limit import ModelCallLimitExceededError

    from subagents._meter import MaxTurnsReached

    if origin in ("model_error", "tool_error") and isinstance(exc, SubagentError):
        # The library's error raised by a child's model or tool (one that itself delegates, say): its
        # stop_reason tells of that tool's inner run, not of this task. The meter's own are never here.
        return origin, f"{_type_name(exc)}: {safe_text(exc).strip() or '(no message)'}"
    if isinstance(exc, MaxTurnsReached):
        return "max_turns", (
            f"hit its max_turns limit ({exc.max_turns} model calls) before finishing. "
            "Split the task into smaller pieces, or raise max_turns."
        )
    if isinstance(exc, ModelCallLimitExceededError) and origin not in ("model_error", "tool_error"):
        return "max_turns", (
            f"was stopped by its own ModelCallLimitMiddleware ({safe_text(exc, 300)}). "
            "Split the task into smaller pieces, or raise that middleware's limit."
        )
    if isinstance(exc, GraphRecursionError) and origin != "tool_error":
        return "recursion", (
            f"hit its recursion limit ({limits.recursion_limit} steps) before finishing. "
            "Split the task into smaller pieces, or raise recursion_limit."
        )
    if isinstance(exc, SubagentError):
        reason = _claimed_reason(exc)
        if reason == "timeout":
            after = f" after {limits.timeout_s:g}s" if isinstance(limits.timeout_s, (int, float)) else ""
            return "timeout", f"timed out{after}. Split the task, or raise timeout_s."
        return reason, safe_text(exc) or reason
    text = safe_text(exc).strip() or "(no message)"
    return origin or "error", f"{_type_name(exc)}: {text}"


def _claimed_reason(exc: SubagentError) -> StopReason:
    """The error's ``stop_reason`` if it is one a failure can have; a subclass's own invention is ``error``."""
    reason: Any = exc.stop_reason
    return cast(StopReason, reason) if type(reason) is str and reason in _FAILURE_REASONS else "error"


def _type_name(exc: BaseException) -> str:
    try:
        return str(type(exc).__name__)
    except BaseException:  # noqa: BLE001
        return "Exception"
