"""A spec's ``skills``: skill names from the caller's catalog, or skill folders.

Two spellings meet here. Ours names skills the caller loaded
(``skills=["git-diff"]``, looked up in ``skills_dirs``); deepagents' lists
skill source folders (``skills=["/skills/user/", "./skills/project/"]``),
each holding one folder per skill with a ``SKILL.md``. An entry with a
``/`` (or starting with ``.`` or ``~``) is a folder on the local disk,
relative to the working directory; any other entry is a skill name.

A folder that does not exist adds no skills and raises a
:class:`SkillFolderWarning` (deepagents reads such paths from its file
backend, where they are often empty); a folder holding a broken
``SKILL.md`` is an error naming the file.

Precedence, as in deepagents: entries are read in order and a later entry
replaces an earlier skill of the same name (last one wins). Within one
entry there is only one skill per name.

Example::

    skills_for(["git-diff", "./team-skills/"], catalog, agent="reviewer")
"""

from __future__ import annotations

import re
import warnings
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from subagents._errors import SpecError

if TYPE_CHECKING:  # skills imports the agent-file loader, which imports the spec
    from subagents.definitions._skills import Skill, SkillCatalog

_NAME = re.compile(r"[A-Za-z0-9_-]+")


class SkillFolderWarning(UserWarning):
    """A spec's skill folder does not exist on the local disk: it adds no skills."""


def is_skill_folder(entry: str) -> bool:
    """Whether a ``skills`` entry is a folder path rather than a skill name."""
    return "/" in entry or "\\" in entry or entry.startswith((".", "~"))


def check_skill_entry(entry: str) -> str:
    """Check one entry's spelling (not whether it resolves); raise ``ValueError``."""
    if not isinstance(entry, str) or not entry.strip():
        raise ValueError(f"expected a skill name or a skill folder path, got {entry!r}")
    if is_skill_folder(entry) or _NAME.fullmatch(entry):
        return entry
    raise ValueError(
        "expected a skill name (letters, digits, '-' and '_') or a skill folder "
        f"path such as './skills/' (got {entry!r})"
    )


def skills_for(entries: Sequence[str], catalog: SkillCatalog, *, agent: str) -> list[Skill]:
    """The skills a spec's ``skills`` entries stand for; a bad entry raises ``SpecError``."""
    chosen: dict[str, Skill] = {}
    names = [e for e in entries if not is_skill_folder(e)]
    catalog.select(names, agent=agent)  # one error naming every unknown name
    for entry in entries:
        if is_skill_folder(entry):
            for skill in _folder_skills(entry, agent):
                chosen.pop(skill.name, None)
                chosen[skill.name] = skill
        else:
            chosen.pop(entry, None)
            chosen[entry] = catalog[entry]
    return list(chosen.values())


def _folder_skills(entry: str, agent: str) -> list[Skill]:
    from subagents.definitions._skills import discover_skills

    try:
        folder = Path(entry).expanduser()  # '~nobody/skills' raises RuntimeError
        is_folder = folder.is_dir()
    except (OSError, RuntimeError, ValueError) as exc:  # ValueError: a NUL byte
        raise SpecError(f"subagent {agent!r}: field 'skills': {entry!r} cannot be read as a folder ({exc})") from None
    if not is_folder:
        # deepagents reads these paths from its file backend, where they may simply be
        # empty: warn, as a skill source with no skills, rather than refuse the agent.
        warnings.warn(
            f"subagent {agent!r}: field 'skills': {entry!r} is not a folder on the local disk "
            "(skill folders are read from the disk, relative to the working directory); "
            "it adds no skills",
            SkillFolderWarning,
            stacklevel=2,
        )
        return []
    report = discover_skills([folder])
    try:
        report.raise_for_problems()
    except Exception as exc:  # noqa: BLE001 - reported with the field named
        raise SpecError(f"subagent {agent!r}: field 'skills': {exc}") from exc
    return list(report.values)
