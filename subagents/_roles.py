"""How delegation treats one middleware: a :class:`ChildPolicy`, declared once and read by :func:`policy_of`."""

from __future__ import annotations

import dataclasses
import re
from typing import Any, Literal

from langchain.agents.middleware import (
    AgentMiddleware,
    ModelFallbackMiddleware,
    ModelRetryMiddleware,
    ModelRouterMiddleware,
    PIIMiddleware,
    SummarizationMiddleware,
)


@dataclasses.dataclass(frozen=True)
class ChildPolicy:
    """How delegation treats a middleware: its class's ``child_policy`` (LangChain's own: :data:`KNOWN`).

    Attributes:
        inherited: on a parent, the children that take it as well: ``"every"`` child (a data policy, a middleware that
            explains a tool call's error result), those that inherit the parent's ``"model"`` (how it is called:
            fallbacks, retries, a router), or none (``None``).
        model_call_only: it wraps model calls and does nothing else, so neighbouring ones run as one.
        keeps_model: its model-call wrap never puts another model in a call.
        request_neutral: it never adds a tool or prompt text to a request (a child's guard need not look).
        delegates: it gives its agent a way to delegate: a child never takes it (the one-level rule).

    ``inherited`` and ``delegates`` hold for subclasses and instances too, which may widen them, never narrow them;
    the other three hold for the class's own code only (a subclass says them again, or has none; so does a
    replaced hook).
    """

    inherited: Literal["every", "model"] | None = None
    model_call_only: bool = False
    keeps_model: bool = False
    request_neutral: bool = False
    delegates: bool = False


KNOWN: dict[type, ChildPolicy] = {  # LangChain's middleware, which declares no policy of its own
    PIIMiddleware: ChildPolicy(inherited="every"),
    ModelFallbackMiddleware: ChildPolicy(inherited="model", request_neutral=True),
    ModelRetryMiddleware: ChildPolicy(inherited="model", request_neutral=True),
    # A child routes its own task, whatever the order of the parent's middleware.
    ModelRouterMiddleware: ChildPolicy(inherited="model"),
    SummarizationMiddleware: ChildPolicy(request_neutral=True),
}

HOOKS = tuple(name for name in vars(AgentMiddleware) if re.fullmatch(r"a?(before|after|wrap)_\w+", name))


def policy_of(middleware: Any) -> ChildPolicy:
    """``middleware``'s policy: its instance's ``child_policy``, else its class's (the trust flags hold only
    there, and only while no hook is replaced on the instance); ``inherited`` and ``delegates``, the widest any of
    them or any class of its MRO declares: a subclass or an instance may widen a floor, never lower it."""
    own = getattr(middleware, "__dict__", {})
    instance: ChildPolicy | None = own.get("child_policy") if isinstance(own.get("child_policy"), ChildPolicy) else None
    declared = [p for p in (instance, *map(_declared, type(middleware).__mro__)) if p is not None]
    widest = max((p.inherited for p in declared), key=_WIDTH.index, default=None)
    delegates = any(p.delegates for p in declared)
    if instance is not None:
        return dataclasses.replace(instance, inherited=widest, delegates=delegates)
    if (kind := _declared(type(middleware))) is not None and not any(hook in own for hook in HOOKS):
        return dataclasses.replace(kind, inherited=widest, delegates=delegates)
    return ChildPolicy(inherited=widest, delegates=delegates)


_WIDTH = (None, "model", "every")  # ``inherited`` from the narrowest to the widest


def _declared(kind: type) -> ChildPolicy | None:
    policy = KNOWN.get(kind) or vars(kind).get("child_policy")
    return policy if isinstance(policy, ChildPolicy) else None


def overrides(middleware: Any, hook: str) -> bool:
    """Whether ``middleware`` has a ``hook`` of its own (its class's or its instance's), not AgentMiddleware's."""
    return hook in getattr(middleware, "__dict__", {}) or (
        getattr(type(middleware), hook, None) is not getattr(AgentMiddleware, hook, None))
