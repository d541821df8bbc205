"""Arguments deepagents takes that this library does not, and what to write instead.

A deepagents user who switches the import should either keep working or be
told exactly what to change: never a silent accept of an argument that
would be ignored. :func:`refuse_deepagents_arguments` raises a
``TypeError`` naming each such argument, with the replacement and a pointer
to the README's migration section.

Example::

    refuse_deepagents_arguments("SubAgentMiddleware", {"backend": StateBackend()})
    # TypeError: SubAgentMiddleware() got deepagents' argument 'backend': ...
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

MIGRATION_SECTION = "README.md, 'Migrating from deepagents'"

_INSTEAD: dict[str, dict[str, str]] = {
    "SubAgentMiddleware": {
        "backend": (
            "there is no file backend here: give the parent the tools it should share "
            "(children inherit them, with the state those tools need); drop backend="
        ),
        "state_schema": (
            "children derive their state from the parent's tools; for custom keys pass "
            "build_options=BuildOptions(state_schemas=(MyState,))"
        ),
    },
    "create_deep_agent": {
        "backend": (
            "there is no file backend here: pass the file tools you want in tools= "
            "(children inherit them); drop backend="
        ),
        "memory": (
            "memory files are not loaded into the prompt: read them yourself and add "
            "the text to system_prompt="
        ),
        "permissions": (
            "use permission_mode= and risky_tools= (or interrupt_on=) for approvals, and "
            "a spec's tools/disallowed_tools to limit what a child can reach"
        ),
        "skills": (
            "pass skill folders as skills_dirs=[...] (first folder wins per name); a "
            "subagent spec's own skills= accepts folders and names"
        ),
    },
}


def refuse_deepagents_arguments(where: str, given: Mapping[str, Any]) -> None:
    """Raise ``TypeError`` for any keyword in ``given``: known deepagents ones with a fix.

    An empty ``given`` returns quietly, and so does a deepagents argument left
    unset (``None``, deepagents' own default, or an empty list): it asks for
    nothing, so code written for deepagents that passes it still runs.
    """
    known = _INSTEAD.get(where, {})
    given = {k: v for k, v in given.items() if k not in known or not is_unset(v)}
    if not given:
        return
    parts = []
    for name in given:
        if name in known:
            parts.append(f"deepagents' argument {name!r} is not supported: {known[name]}")
        else:
            parts.append(f"unexpected keyword argument {name!r}")
    raise TypeError(f"{where}(): " + "; ".join(parts) + f" (see {MIGRATION_SECTION})")


def deepagents_only(where: str, kwargs: Mapping[str, Any]) -> dict[str, Any]:
    """The keywords in ``kwargs`` that are deepagents' arguments unsupported by ``where``."""
    known = _INSTEAD.get(where, {})
    return {k: v for k, v in kwargs.items() if k in known}


def is_unset(value: Any) -> bool:
    """``None`` or an empty list, tuple or set: a deepagents argument that asks for nothing."""
    return value is None or (isinstance(value, (list, tuple, set, frozenset)) and not value)
