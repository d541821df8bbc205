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

from pathlib import Path


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
