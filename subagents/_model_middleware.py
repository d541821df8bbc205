"""Model-level middleware a child takes from its parent, and the child's own retries.

A child that inherits the parent's model also inherits how the parent calls
it: LangChain's ``ModelFallbackMiddleware`` and ``ModelRetryMiddleware`` on
the parent apply to the child's model calls too, whatever their order next
to ``SubAgentMiddleware`` (a middleware class can opt in with a true
``inherited_by_subagents`` attribute). A child with a model of its own
keeps only its own middleware.

``retries`` on a spec adds a ``ModelRetryMiddleware`` that retries transient
provider errors only (rate limits, 5xx, timeouts, lost connections; see
:func:`is_transient`), with exponential backoff. When the retries are spent
the child fails, and the parent's model sees one error result.

Example::

    extra = middleware_for_model(spec, inherits_model=True, own=[], inherited=[fallback])
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from langchain.agents.middleware import ModelFallbackMiddleware, ModelRetryMiddleware

MODEL_LEVEL_MIDDLEWARE: tuple[type, ...] = (ModelFallbackMiddleware, ModelRetryMiddleware)
"""LangChain middleware that changes how the model is called, not what the agent does."""

_TRANSIENT_STATUS = frozenset({408, 409, 425, 429})
_TRANSIENT_NAMES = ("RateLimit", "Timeout", "Overloaded", "ServiceUnavailable",
                    "InternalServerError", "APIConnectionError", "ConnectError")

RETRY_INITIAL_DELAY_S = 1.0
"""The first backoff delay of a spec's ``retries`` (doubled each retry, at most 30 s)."""


def is_model_level(middleware: Any) -> bool:
    """Whether a parent's middleware applies to the model calls of inheriting children."""
    return isinstance(middleware, MODEL_LEVEL_MIDDLEWARE) or bool(
        getattr(middleware, "inherited_by_subagents", False)
    )


def is_transient(exc: BaseException) -> bool:
    """Whether a model error is worth retrying: rate limit, server error, timeout, connection.

    Decided by LangChain's ``ModelError.is_retryable`` when the provider
    raises one, else by the HTTP status the error carries, else by its type.
    """
    from langchain_core.exceptions import ModelError

    if isinstance(exc, ModelError):
        return bool(exc.is_retryable)
    status = _status_code(exc)
    if status is not None:
        return status in _TRANSIENT_STATUS or 500 <= status < 600
    if isinstance(exc, (TimeoutError, ConnectionError)):
        return True
    return any(part in cls.__name__ for cls in type(exc).__mro__ for part in _TRANSIENT_NAMES)


def retry_middleware(retries: int, *, initial_delay: float = RETRY_INITIAL_DELAY_S) -> Any:
    """LangChain's ``ModelRetryMiddleware`` for a spec's ``retries``: transient errors, then fail."""
    return ModelRetryMiddleware(
        max_retries=retries,
        retry_on=is_transient,
        on_failure="error",
        initial_delay=initial_delay,
        max_delay=30.0,
    )


def middleware_for_model(
    spec: Any,
    *,
    inherits_model: bool,
    own: Sequence[Any],
    inherited: Sequence[Any] | Callable[[], Sequence[Any]],
) -> list[Any]:
    """Middleware to put before the child's own: retries, then the parent's model-level ones.

    ``inherited`` may be a callable, called only when the child inherits the model.

    A middleware whose name the child already has is skipped: the child's own wins
    (``create_agent`` refuses two of one name).
    """
    taken = {getattr(mw, "name", None) for mw in own}
    chosen: list[Any] = []
    retries = getattr(spec, "retries", 0) or 0
    if retries and ModelRetryMiddleware.__name__ not in taken:
        taken.add(ModelRetryMiddleware.__name__)
        chosen.append(retry_middleware(retries))
    if inherits_model:
        for mw in inherited() if callable(inherited) else inherited:
            if is_model_level(mw) and getattr(mw, "name", None) not in taken:
                taken.add(mw.name)
                chosen.append(mw)
    return chosen


def _status_code(exc: BaseException) -> int | None:
    for holder in (exc, getattr(exc, "response", None)):
        code = getattr(holder, "status_code", None)
        if isinstance(code, int):
            return code
    return None
