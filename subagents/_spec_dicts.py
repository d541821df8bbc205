"""The dict shapes of specs, under deepagents' names, and its spellings translated.

``SubAgent`` and ``AsyncSubAgent`` are ``TypedDict``\\ s for the plain dicts
a caller may pass as specs (type checkers see the fields; at run time they
are ordinary dicts). ``CompiledSubAgent`` is the same class as
:class:`~subagents.CompiledSubagent`, deepagents' spelling.

Example::

    from deep_agent import SubAgent, create_deep_agent

    researcher: SubAgent = {"name": "researcher", "description": "Finds facts.",
                            "system_prompt": "Research.", "tools": [internet_search]}
    agent = create_deep_agent("openai:gpt-5.4", subagents=[researcher])
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any, NotRequired, TypedDict

from subagents._errors import SpecError


class SubAgent(TypedDict):
    """A declarative subagent as a dict (see :class:`~subagents.SubagentSpec` for every field)."""

    name: str
    description: str
    system_prompt: NotRequired[str]
    tools: NotRequired[Sequence[Any | Callable[..., Any] | dict[str, Any] | str]]
    model: NotRequired[Any]
    middleware: NotRequired[Sequence[Any]]
    interrupt_on: NotRequired[Mapping[str, Any]]
    skills: NotRequired[Sequence[str]]
    response_format: NotRequired[Any]
    max_turns: NotRequired[int]
    timeout_s: NotRequired[float]
    short_answer_threshold: NotRequired[int]
    retries: NotRequired[int]


class AsyncSubAgent(TypedDict):
    """A subagent served by a LangGraph Server, run as a background task."""

    name: str
    description: str
    graph_id: str
    url: str
    headers: NotRequired[Mapping[str, str]]


def is_async_spec(value: Any) -> bool:
    """Whether a spec is a remote one for the background tools (deepagents' ``AsyncSubAgent``)."""
    from subagents.background._remote import RemoteSubagentSpec

    return isinstance(value, RemoteSubagentSpec) or (
        isinstance(value, Mapping) and "graph_id" in value and "runnable" not in value
    )


def translate_deepagents_fields(value: Mapping[str, Any], label: str) -> Mapping[str, Any]:
    """A spec dict with deepagents' spellings made ours; an unsupported one raises ``SpecError``.

    ``mode="isolated"`` is the default here, so it is dropped; ``mode="fork"``
    (spelled ``context="fork"`` here) and ``permissions`` are refused with
    what to write instead. ``skills=None`` and ``permissions=None`` or ``[]``
    (deepagents' defaults, spelled out) are dropped.
    """
    if "graph_id" in value and "runnable" not in value:
        raise SpecError(
            f"{label}: an async subagent (with 'graph_id') runs as a background task: pass it in "
            "create_deep_agent(subagents=...) or to BackgroundSubagentMiddleware, not to the task tool"
        )
    # deepagents' own defaults, spelled out, ask for nothing: skills=None, permissions=None or [].
    unset = {k for k in ("skills", "permissions") if k in value and _unset(value[k])}
    if "mode" not in value and "permissions" not in value.keys() - unset and not unset:
        return value
    mode = value.get("mode", "isolated")
    if mode != "isolated":
        raise SpecError(
            f"{label}: field 'mode': {mode!r} is not supported; write context='fork' for a child "
            "that starts from the parent's conversation (without the parent's system prompt), "
            "or drop mode for an isolated one"
        )
    if "permissions" in value and "permissions" not in unset:
        raise SpecError(
            f"{label}: field 'permissions' (deepagents' filesystem rules) is not supported; "
            "limit the child with 'tools'/'disallowed_tools' and ask for approval with "
            "'permission_mode' or 'interrupt_on' (see README.md, 'Migrating from deepagents')"
        )
    return {k: v for k, v in value.items() if k != "mode" and k not in unset}


def _unset(value: Any) -> bool:
    return value is None or (isinstance(value, (list, tuple)) and not value)
