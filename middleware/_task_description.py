"""The ``task`` tool's description: ours, or the caller's template.

By default the description names the available subagent types (names
only: the full listing with descriptions is in the system prompt's
``<available_agents>`` block and is not paid for twice); past
:data:`~middleware.task_args_schema.ENUM_LIMIT` agents it names none, and
the block is the one listing. A caller's
``task_description`` replaces it; an ``{available_agents}`` placeholder in
it becomes the full listing, one ``- name: description`` line per agent, as
in deepagents. Other braces are left as written.

Example::

    task_tool_description("Delegate.\\n{available_agents}", [("researcher", "Finds facts.")])
    # 'Delegate.\\n- researcher: Finds facts.'
"""

from __future__ import annotations

from collections.abc import Iterable

from middleware._prompts import TASK_TOOL_DESCRIPTION
from middleware._task_args_schema import ENUM_LIMIT

PLACEHOLDER = "{available_agents}"


def task_tool_description(template: str | None, agents: Iterable[tuple[str, str]]) -> str:
    """The description for ``agents`` (``(name, description)`` pairs)."""
    agents = list(agents)
    if template is None:
        if len(agents) > ENUM_LIMIT:
            return TASK_TOOL_DESCRIPTION
        names = ", ".join(name for name, _ in agents)
        return f"{TASK_TOOL_DESCRIPTION}\n\nAvailable subagent types: {names}."
    if not isinstance(template, str) or not template.strip():
        raise ValueError(f"task_description: expected non-empty text, got {template!r}")
    listing = "\n".join(f"- {name}: {description}" for name, description in agents)
    return template.replace(PLACEHOLDER, listing)
