"""The state schema a declarative child is built with.

A child gets the parent's state schema minus the excluded and private keys,
so custom parent keys reach it (as deepagents' ``state_schema`` does), plus
the state every one of its tools declares it needs: a tool whose
``runtime`` parameter is typed ``ToolRuntime[Context, SomeState]`` (as
deepagents' filesystem tools are, with ``files``) brings ``SomeState``'s
keys, reducers included. Without this an inherited ``write_file`` would
fail in the child with ``KeyError: 'files'``.

Example::

    schema = child_state_schema([write_file], parent_schemas=[MyState])
    create_agent(model, [write_file], state_schema=schema)
"""

from __future__ import annotations

import inspect
import types
from collections.abc import Iterable, Sequence
from typing import Any, TypedDict, get_args, get_origin, get_type_hints

from langchain.agents.middleware import AgentState

from subagents._isolation import CORE_EXCLUDED_KEYS, private_state_keys


def tool_state_schema(tool: Any) -> type | None:
    """The state type a tool's ``ToolRuntime`` parameter declares, if any."""
    from langchain.tools import ToolRuntime

    for func in (getattr(tool, "func", None), getattr(tool, "coroutine", None), tool):
        if not callable(func) or isinstance(func, type):
            continue
        try:
            hints = get_type_hints(inspect.unwrap(func), include_extras=True)
        except Exception:  # noqa: BLE001 - an unresolvable hint declares nothing
            continue
        for hint in hints.values():
            origin = get_origin(hint)
            if isinstance(origin, type) and issubclass(origin, ToolRuntime):
                args = get_args(hint)
                if len(args) > 1 and _is_schema(args[1]):
                    return args[1]
    return None


def child_state_schema(
    tools: Iterable[Any], *, parent_schemas: Sequence[Any] = (), excluded: frozenset[str] = frozenset()
) -> type | None:
    """A ``TypedDict`` for the child's graph, or ``None`` when it needs no extra keys."""
    schemas = [s for s in parent_schemas if _is_schema(s)]
    schemas += [s for s in (tool_state_schema(t) for t in tools) if s is not None]
    if not schemas:
        return None
    base = _hints(AgentState)
    blocked = CORE_EXCLUDED_KEYS | excluded | private_state_keys(types.SimpleNamespace(state_schema=s) for s in schemas)
    extra: dict[str, Any] = {}
    for schema in schemas:
        for key, hint in _hints(schema).items():
            if key not in base and key not in blocked:
                extra.setdefault(key, hint)
    if not extra:
        return None
    return TypedDict("SubagentState", {**base, **extra})  # type: ignore[operator]


def _is_schema(value: Any) -> bool:
    return isinstance(value, type) and bool(getattr(value, "__annotations__", None))


def _hints(schema: type) -> dict[str, Any]:
    try:
        return get_type_hints(schema, include_extras=True)
    except Exception:  # noqa: BLE001 - an unresolvable schema adds nothing
        return {}


def parent_state_schemas(state_schema: Any, middleware: Iterable[Any]) -> tuple[Any, ...]:
    """The parent's state schemas: its own ``state_schema`` and each middleware's."""
    found = [state_schema] + [getattr(mw, "state_schema", None) for mw in middleware]
    return tuple(s for s in found if _is_schema(s))
