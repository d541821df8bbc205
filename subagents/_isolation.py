"""The state boundary between a parent and a child, in both directions.

A child receives the parent's state minus the blocked keys (the excluded
keys its caller declares, and every private key), with ``messages`` replaced
by one ``HumanMessage`` (the task description). What comes back is only what
the child changed, minus the same keys; :mod:`subagents._writeback` decides
how it lands in the parent. Values are passed by reference: the hot path
copies no large state.
"""

from __future__ import annotations

import functools
from collections.abc import Iterable, Mapping
from typing import Any

from langchain_core.messages import HumanMessage

CORE_EXCLUDED_KEYS: frozenset[str] = frozenset({"messages", "structured_response", "jump_to"})
"""Keys the runner itself owns: rebuilt for the child, never written back."""


def private_state_keys(middleware: Iterable[Any]) -> frozenset[str]:
    """Keys that the given middleware (instances or classes) or state schemas mark private.

    LangChain marks a key private with ``PrivateStateAttr`` (omitted from both
    the input and the output schema). Such keys belong to the agent that owns
    the middleware (or the schema, an agent's own ``state_schema``) and are
    stripped at the boundary.

    Example::

        keys = private_state_keys([ModelCallLimitMiddleware(run_limit=5), MyState])
        assert "run_model_call_count" in keys
    """
    from typing import get_type_hints

    from langchain.agents.middleware.types import OmitFromSchema

    keys: set[str] = set()
    for mw in middleware:
        schema = getattr(mw, "state_schema", None)
        if schema is None and isinstance(mw, type):  # a state schema itself (a TypedDict class)
            schema = mw
        if schema is None:
            continue
        try:
            hints = get_type_hints(schema, include_extras=True)
        except Exception:  # noqa: BLE001 - an unresolvable annotation marks nothing private
            continue
        for key, hint in hints.items():
            for meta in _metadata(hint):
                if isinstance(meta, OmitFromSchema) and meta.input and meta.output:
                    keys.add(key)
    return frozenset(keys)


@functools.cache
def langchain_private_state_keys() -> frozenset[str]:
    """Private keys of LangChain's own middleware classes (the ones it exports).

    A tool sees the parent's whole state, private keys included, and cannot
    ask the parent graph which middleware it runs; these are blocked always,
    and a caller names its own middleware's with ``private_state_keys``.
    """
    import langchain.agents.middleware as lc

    classes = [getattr(lc, name) for name in lc.__all__]
    return private_state_keys(c for c in classes if isinstance(c, type) and hasattr(c, "state_schema"))


def _metadata(hint: Any) -> Iterable[Any]:
    from typing import NotRequired, Required, get_args, get_origin

    # NotRequired[Annotated[T, ...]] keeps the annotations one level down.
    if get_origin(hint) in (NotRequired, Required):
        hint = get_args(hint)[0]
    return getattr(hint, "__metadata__", ())


def child_input(
    parent_state: Mapping[str, Any], description: str, blocked: frozenset[str]
) -> dict[str, Any]:
    """The child's initial state: shared keys by reference, one fresh message."""
    state = {k: v for k, v in parent_state.items() if k not in blocked}
    state["messages"] = [HumanMessage(content=description)]
    return state


def changed_keys(
    child_output: Mapping[str, Any], child_inputs: Mapping[str, Any], blocked: frozenset[str]
) -> dict[str, Any]:
    """Keys the child changed (their final values)."""
    return {
        k: v
        for k, v in child_output.items()
        if k not in blocked and not _unchanged(k, v, child_inputs)
    }


def _unchanged(key: str, value: Any, inputs: Mapping[str, Any]) -> bool:
    if key not in inputs:
        return False
    before = inputs[key]
    if value is before:
        return True
    try:
        # `is True` treats an ambiguous comparison (an array, say) as a change.
        return bool((value == before) is True)
    except Exception:  # noqa: BLE001 - an uncomparable value counts as changed
        return False
