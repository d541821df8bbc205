"""The state boundary between a parent and a child, in both directions.

A child receives the parent's state minus the excluded and private keys,
with ``messages`` replaced by one ``HumanMessage`` (the task description).
What comes back is only what the child changed, minus the same keys. Values
are passed by reference: the hot path copies no large state.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from langchain_core.messages import HumanMessage

LEDGER_KEY = "subagent_tasks"
ASYNC_LEDGER_KEY = "async_tasks"
DYNAMIC_SUBAGENTS_KEY = "dynamic_subagents"
"""Parent state key: subagents defined at run time (see subagents/dynamic.py)."""

EXCLUDED_KEYS: frozenset[str] = frozenset(
    {
        "messages",
        "todos",
        "structured_response",
        "jump_to",
        "skills_metadata",
        LEDGER_KEY,
        ASYNC_LEDGER_KEY,
        DYNAMIC_SUBAGENTS_KEY,
    }
)
"""Keys that never cross the boundary, whichever way.

``messages`` is rebuilt for the child and reduced to one ToolMessage on the
way back; todos, the structured response and the ledgers belong to one agent
and have no meaning (or no reducer) in another.
"""


def private_state_keys(middleware: Iterable[Any]) -> frozenset[str]:
    """Keys that the given middleware (instances or classes) mark private.

    LangChain marks a key private with ``PrivateStateAttr`` (omitted from both
    the input and the output schema). Such keys belong to the agent that owns
    the middleware and are stripped at the boundary.

    Example::

        keys = private_state_keys([ModelCallLimitMiddleware(run_limit=5)])
        assert "run_model_call_count" in keys
    """
    from typing import get_type_hints

    from langchain.agents.middleware.types import OmitFromSchema

    keys: set[str] = set()
    for mw in middleware:
        schema = getattr(mw, "state_schema", None)
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


def known_private_state_keys() -> frozenset[str]:
    """Keys marked private by any ``AgentMiddleware`` class loaded in this process.

    A tool sees the parent's whole state, private keys included, and cannot
    ask the parent graph which middleware it runs; private keys are named
    for the middleware that owns them, so treating every loaded class's
    private keys as private is safe and needs no configuration.
    """
    from langchain.agents.middleware import AgentMiddleware

    classes: list[type] = []
    pending = [AgentMiddleware]
    while pending:
        cls = pending.pop()
        classes.append(cls)
        pending.extend(cls.__subclasses__())
    return private_state_keys(classes)


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
    """Keys the child changed, to be written back to the parent."""
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
        return (value == before) is True
    except Exception:  # noqa: BLE001 - an uncomparable value counts as changed
        return False
