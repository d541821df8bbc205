"""The parent's model pipeline: which middleware wraps its model calls.

``create_agent`` composes every middleware's ``wrap_model_call`` into one
chain. A child that inherits the parent's model should also get the
parent's model-level middleware (model fallback, model retry), wherever
``SubAgentMiddleware`` sits in that chain. :func:`chain_middleware` finds
the chain a middleware belongs to by reading LangChain's composed handlers
(their closures), which no public API exposes; if that shape changes it
finds nothing, and children simply get no inherited middleware.

Example::

    middleware = chain_middleware(subagent_middleware)   # [ModelFallbackMiddleware(...), ...]
"""

from __future__ import annotations

import functools
import gc
import types
import weakref
from typing import Any

from langchain.agents.middleware import AgentMiddleware

_COMPOSER_MODULE = "langchain.agents.factory"
_MAX_DEPTH = 64


def chain_middleware(member: AgentMiddleware) -> list[AgentMiddleware]:
    """Every middleware of the longest model-call chain holding ``member``, outermost first.

    ``[]`` when ``member`` is in no composed chain (it is the only middleware
    wrapping model calls) or the chain cannot be read. Scans live objects:
    call it once per graph, not per model call.
    """
    best: list[AgentMiddleware] = []
    try:
        for obj in gc.get_objects():
            if (
                type(obj) is not types.FunctionType
                or obj.__code__.co_name != "composed"
                or obj.__module__ != _COMPOSER_MODULE
            ):
                continue
            found: list[AgentMiddleware] = []
            _collect(obj, found, 0)
            if any(mw is member for mw in found) and len(found) > len(best):
                best = found
    except Exception:  # noqa: BLE001 - discovery is best effort, never a failure
        return []
    return list(dict.fromkeys(best))


def _collect(handler: Any, found: list[AgentMiddleware], depth: int) -> None:
    if handler is None or depth > _MAX_DEPTH:
        return
    owner = getattr(handler, "__self__", None)
    if isinstance(owner, AgentMiddleware):
        found.append(owner)
        return
    wrapped = getattr(handler, "__wrapped__", None)
    if wrapped is not None:
        _collect(wrapped, found, depth + 1)
        return
    code = getattr(handler, "__code__", None)
    if code is None:
        return
    cells = dict(zip(code.co_freevars, getattr(handler, "__closure__", None) or (), strict=False))
    for name in ("outer", "inner"):
        if name in cells:
            try:
                _collect(cells[name].cell_contents, found, depth + 1)
            except ValueError:  # an empty cell
                continue


def configured_model(owner: Any, request: Any) -> Any:
    """The model the parent is configured with, as ``owner`` sees it in ``request``.

    Only the first attempt of each parent model call counts: a fallback
    middleware wrapping ``owner`` retries the same call (same state) with
    another model, and that one is not what the parent is configured with.
    ``owner.registry`` also learns where to find the parent's model-level
    middleware (read when an inheriting child is first built).
    """
    state_id = id(request.state)
    seen = getattr(owner, "_seen_state_id", None)
    model = getattr(owner, "_seen_model", None)
    if seen != state_id or model is None:
        owner._seen_state_id = state_id
        model = request.model
    registry = getattr(owner, "registry", None)
    if registry is not None and not registry.inherited_middleware:
        # Read only when an inheriting child is first built: the scan is not free.
        # A weak reference: background tasks keep the registry alive, never the middleware.
        registry.inherited_middleware = functools.partial(_inherited, weakref.ref(owner))
    return model


def _inherited(owner_ref: Any) -> list[Any]:
    owner = owner_ref()
    return [] if owner is None else [mw for mw in chain_middleware(owner) if mw is not owner]
