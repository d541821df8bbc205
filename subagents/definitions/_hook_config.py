"""The ``hooks`` field: Claude Code's hook format, checked when it is loaded.

::

    hooks:
      PreToolUse:
        - matcher: Bash               # a tool name or a regex (Edit|Write); omit or "*" for all
          hooks:
            - type: command
              command: ./hooks/check-bash.sh
              timeout: 30             # seconds; default 60
      PostToolUse: [...]
      Stop: [...]                     # the agent is about to finish

A subagent's hooks take ``PreToolUse``, ``PostToolUse`` and ``Stop``
(``SubagentStop`` in a subagent's own file means its ``Stop``, as in Claude
Code). The root (``create_deep_agent(hooks=...)``) also takes
``SubagentStart`` and ``SubagentStop``, run around each delegation, whose
matcher is matched against the subagent type. Any other event name is an
error naming the event: a hook that is accepted runs.

Example::

    normalize_hooks({"PreToolUse": [{"matcher": "Bash", "hooks": [{"type": "command", "command": "x"}]}]})
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from subagents._errors import brief

DEFAULT_HOOK_TIMEOUT_S = 60.0
SUBAGENT_EVENTS = ("PreToolUse", "PostToolUse", "Stop")
ROOT_EVENTS = (*SUBAGENT_EVENTS, "SubagentStart", "SubagentStop")
HookScope = Literal["subagent", "root"]


class HookCommand(BaseModel):
    """One command to run: it reads the event as JSON on stdin."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    type: Literal["command"] = "command"
    command: str = Field(min_length=1)
    timeout: float = Field(default=DEFAULT_HOOK_TIMEOUT_S, gt=0, le=3600)


class HookMatcher(BaseModel):
    """Commands that run for the tools (or subagent types) ``matcher`` matches."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    matcher: str = "*"
    hooks: tuple[HookCommand, ...]

    @field_validator("matcher", mode="before")
    @classmethod
    def _regex(cls, value: Any) -> Any:
        if value is None:
            return "*"
        if isinstance(value, str) and value not in ("", "*"):
            try:
                re.compile(value)
            # re.compile raises more than re.error: OverflowError for a{99999999999},
            # RecursionError for groups nested hundreds deep.
            except (re.error, OverflowError, RecursionError) as exc:
                reason = "it nests too deeply" if isinstance(exc, RecursionError) else str(exc)
                raise ValueError(f"matcher {brief(value)} is not a valid pattern ({reason})") from None
        return value

    def matches(self, name: str) -> bool:
        if self.matcher in ("", "*"):
            return True
        return name == self.matcher or re.fullmatch(self.matcher, name) is not None


def normalize_hooks(value: Any, scope: HookScope = "subagent") -> dict[str, list[dict[str, Any]]] | None:
    """``{event: [matcher dicts]}`` with every field checked; ``ValueError`` names the event."""
    if value is None:
        return None
    if not isinstance(value, Mapping):
        raise ValueError(f"expected a mapping of hook event names (e.g. PreToolUse) to lists, got {brief(value)}")
    events = ROOT_EVENTS if scope == "root" else SUBAGENT_EVENTS
    hooks: dict[str, list[dict[str, Any]]] = {}
    for event, entries in value.items():
        name = "Stop" if scope == "subagent" and event == "SubagentStop" else event
        if name not in events:
            raise ValueError(
                f"unknown hook event {brief(event)}; expected one of {', '.join(events)}"
                + (" (SubagentStart is a root event: create_deep_agent(hooks=...))"
                   if event == "SubagentStart" else "")
            )
        if not isinstance(entries, list):
            raise ValueError(f"event {name}: expected a list of {{matcher, hooks}}, got {brief(entries)}")
        try:
            parsed = [HookMatcher.model_validate(entry).model_dump() for entry in entries]
        except ValidationError as exc:
            err = exc.errors()[0]
            where = ".".join(str(p) for p in err["loc"])
            message = str(err["msg"]).removeprefix("Value error, ")
            raise ValueError(f"event {name}: {where or 'entry'}: {message}") from None
        hooks.setdefault(name, []).extend(parsed)
    return hooks


def matchers(hooks: Mapping[str, Any] | None, event: str) -> list[HookMatcher]:
    """The parsed matchers of one event."""
    return [HookMatcher.model_validate(entry) for entry in (hooks or {}).get(event, ())]
