"""The errors and warnings a subagent or skill definition can raise.

Every message names where the problem is (the agent, or the file), the
field, and what was expected, so a user can fix it without a stack trace.

Example::

    try:
        load_agent_file("agents/reviewer.md")
    except AgentFileError as err:
        print(err.path, err.field)   # agents/reviewer.md  maxTurns
        print(err)                   # agents/reviewer.md: field 'maxTurns': expected ...
"""

from __future__ import annotations

import asyncio
import reprlib
from pathlib import Path
from typing import Any, Literal

_REPR = reprlib.Repr()
_REPR.maxlevel, _REPR.maxdict, _REPR.maxlist, _REPR.maxtuple, _REPR.maxset = 3, 4, 6, 6, 6
_REPR.maxstring, _REPR.maxother, _REPR.maxlong = 60, 60, 40


def brief(value: Any, limit: int = 100) -> str:
    """A short ``repr`` of user data for an error message, bounded in time and length.

    Example::

        brief(list(range(10**6)))   # '[0, 1, 2, 3, 4, 5, ...]'
    """
    try:
        text = _REPR.repr(value)
    except Exception:  # noqa: BLE001 - a hostile __repr__ must not break the message
        text = f"<{type(value).__name__}>"
    return text if len(text) <= limit else text[: limit - 3] + "..."


class SpecError(ValueError):
    """A subagent definition is invalid; the message names the agent and field."""


class DefinitionFileError(SpecError):
    """A markdown definition file is invalid; ``path`` and ``field`` say where.

    ``field`` is the key as the file spells it (``maxTurns``, not
    ``max_turns``), or ``None`` for a problem with the file as a whole.
    """

    def __init__(self, path: str | Path, message: str, *, field: str | None = None) -> None:
        self.path = str(path)
        self.field = field
        self.reason = message
        where = f"{self.path}: field '{field}'" if field else self.path
        super().__init__(f"{where}: {message}")


class AgentFileError(DefinitionFileError):
    """An agent file (``<name>.md`` with YAML frontmatter) is invalid."""


class SkillFileError(DefinitionFileError):
    """A skill folder's ``SKILL.md`` is invalid."""


class DefinitionFileWarning(UserWarning):
    """A definition loaded, but something in it was ignored or is deprecated."""


StopReason = Literal[
    "completed",
    "max_turns",
    "timeout",
    "budget",
    "recursion",
    "cancelled",
    "model_error",
    "tool_error",
    "invalid_call",
    "refused",
    "error",
]
"""Why a delegation ended, as carried in each record's ``stop_reason``.

``error`` is anything not classified more precisely (a child middleware hook
raising, a compiled graph's own failure).
"""


REAL_CANCELLATION = (asyncio.CancelledError, KeyboardInterrupt, SystemExit)
"""What propagates out of a delegation (leaving a ``cancelled`` mark); every other exception is a result."""


def is_real_cancellation(exc: BaseException) -> bool:
    """Whether ``exc`` is real cancellation, judged by its type alone (a hostile ``__class__`` cannot lie)."""
    return issubclass(type(exc), REAL_CANCELLATION)


class SubagentError(Exception):
    """Base of every error the library raises about a running delegation.

    ``stop_reason`` says what kind of stop it is; control flow reads it,
    never the message text.

    Example::

        try:
            ...
        except SubagentError as err:
            record["stop_reason"] = err.stop_reason
    """

    stop_reason: StopReason = "error"

    def __init__(self, message: str = "", *, stop_reason: StopReason | None = None) -> None:
        super().__init__(message)
        if stop_reason is not None:
            self.stop_reason = stop_reason


class TaskTimeout(SubagentError):
    """The library's own deadline (the spec's ``timeout_s``) passed."""

    stop_reason: StopReason = "timeout"


class TaskCancelled(SubagentError):
    """The task was cancelled from outside (a background cancel, a shutdown)."""

    stop_reason: StopReason = "cancelled"


class DelegationRefused(SubagentError):
    """The delegation was refused before a child ran (unknown type, budget spent, nesting)."""

    stop_reason: StopReason = "refused"


class ParentWriteRefused(SubagentError):
    """A child tried to write into the parent's state with ``Command.PARENT``."""

    stop_reason: StopReason = "refused"


_MAX_TEXT = 2_000


def safe_text(value: object, limit: int = _MAX_TEXT) -> str:
    """``str(value)``, bounded, and never raising (a hostile ``__str__`` included)."""
    try:
        text = str(value)
    except BaseException:  # noqa: BLE001 - a hostile __str__ must not break the failure path
        try:
            text = f"<{type(value).__name__} whose message cannot be read>"
        except BaseException:  # noqa: BLE001
            text = "<unreadable>"
    if not isinstance(text, str):
        text = "<unreadable>"
    if len(text) > limit:
        text = f"{text[:limit]}... [{len(text) - limit} more characters]"
    return text
