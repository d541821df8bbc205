"""Skills: folders holding a ``SKILL.md`` (the Agent Skills layout), found in levels like agent files and named
to the agent in an ``<available_skills>`` block; a subagent gets exactly the skills its spec names."""

from __future__ import annotations

import dataclasses
import re
import warnings
from collections.abc import Iterable, Sequence
from pathlib import Path
from xml.sax.saxutils import escape

from subagents._errors import SkillFileError, SkillFolderWarning, SpecError
from subagents.definitions._files import (
    DirLevels,
    Discovery,
    MissingDirPolicy,
    PathLike,
    read_frontmatter,
    scan_levels,
)

SKILL_FILE = "SKILL.md"
SKILL_DIRS: tuple[str, ...] = (".agents/skills", ".claude/skills")
SKILL_NAME = re.compile(r"[a-z0-9]+(-[a-z0-9]+)*")
MAX_NAME, MAX_DESCRIPTION = 64, 1024

SKILLS_PREAMBLE = ("You have the skills below. When a task matches a skill's description, read its "
                   "SKILL.md at <location> first and follow it.")


@dataclasses.dataclass(frozen=True)
class Skill:
    """One skill: its name, when to use it, and the ``SKILL.md`` to read."""

    name: str
    description: str
    path: Path


def parse_skill(path: Path) -> tuple[Skill, list[str]]:
    """``(skill, warnings)`` for a ``SKILL.md`` (or the folder holding one)."""
    if path.is_dir():
        path = path / SKILL_FILE
    fields, _ = read_frontmatter(path, SkillFileError)
    folder = path.parent.name
    name = fields.get("name", folder)
    if not isinstance(name, str) or len(name) > MAX_NAME or not SKILL_NAME.fullmatch(name):
        raise SkillFileError(path, "expected lower-case letters, digits and single hyphens, at most "
                             f"{MAX_NAME} characters, got {name!r}", field="name")
    if name != folder:
        raise SkillFileError(path, f"expected the skill's folder name {folder!r}, got {name!r}", field="name")
    description = fields.get("description")
    if not isinstance(description, str) or not description.strip():
        raise SkillFileError(path,
                             f"required; expected a non-empty string saying when to use the skill, got {description!r}",
                             field="description")
    if len(description) > MAX_DESCRIPTION:
        raise SkillFileError(path, f"expected at most {MAX_DESCRIPTION} characters, got {len(description)}",
                             field="description")
    return Skill(name, " ".join(description.split()), path.resolve()), []


def load_skill(path: PathLike) -> Skill:
    """One skill from its folder or its ``SKILL.md``; problems raise :class:`SkillFileError`."""
    return parse_skill(Path(path))[0]


def available_skills_block(skills: Iterable[Skill]) -> str:
    """The ``<available_skills>`` block (XML-escaped); ``""`` for no skills."""
    rows = [f"<skill>\n<name>{escape(s.name)}</name>\n<description>{escape(s.description)}</description>\n"
            f"<location>{escape(str(s.path))}</location>\n</skill>" for s in skills]
    return "" if not rows else f"{SKILLS_PREAMBLE}\n<available_skills>\n" + "\n".join(rows) + "\n</available_skills>"


class SkillCatalog(dict[str, Skill]):
    """The skills an agent tree may use, by name."""

    def __init__(self, skills: Iterable[Skill] = ()) -> None:
        super().__init__((s.name, s) for s in skills)

    def select(self, names: Sequence[str], *, agent: str) -> list[Skill]:
        """Exactly the named skills, in the order given; an unknown name raises."""
        if unknown := [n for n in names if n not in self]:
            available = ", ".join(self) or "none (pass skills_dirs to find some)"
            raise SpecError(f"subagent {agent!r}: field 'skills' names unknown skill(s) "
                            f"{', '.join(map(repr, unknown))}; available: {available}")
        return [self[n] for n in dict.fromkeys(names)]

    def prompt_block(self, names: Sequence[str] | None = None, *, agent: str = "agent") -> str:
        """The block for ``names`` (``None``: every skill)."""
        return available_skills_block(self.values() if names is None else self.select(names, agent=agent))


def discover_skills(dirs: DirLevels | None = None, *, project_dir: PathLike | None = None, home: PathLike | None = None,
                    missing: MissingDirPolicy | None = None) -> Discovery[Skill]:
    """Scan skill directories (default: project then user level); never raises for a file."""
    return scan_levels(dirs, SKILL_DIRS, project_dir=project_dir, home=home, missing=missing,
                       files_in=lambda d: sorted(p for p in d.glob(f"*/{SKILL_FILE}") if p.is_file()),
                       parse=parse_skill, name_of=lambda skill: skill.name, error=SkillFileError, kind="skill")


def load_skill_dirs(dirs: DirLevels) -> SkillCatalog:
    """A catalog of the winning skills in ``dirs``; any problem raises, naming the file."""
    report = discover_skills(dirs)
    report.raise_for_problems()
    return SkillCatalog(report.values)


_NAME = re.compile(r"[A-Za-z0-9_-]+")


def is_skill_folder(entry: str) -> bool:
    """Whether a ``skills`` entry is a folder path rather than a skill name."""
    return "/" in entry or "\\" in entry or entry.startswith((".", "~"))


def check_skill_entry(entry: str) -> str:
    """Check one entry's spelling (not whether it resolves); raise :class:`SpecError`."""
    if not isinstance(entry, str) or not entry.strip():
        raise SpecError(f"expected a skill name or a skill folder path, got {entry!r}")
    if is_skill_folder(entry) or _NAME.fullmatch(entry):
        return entry
    raise SpecError("expected a skill name (letters, digits, '-' and '_') or a skill folder "
                    f"path such as './skills/' (got {entry!r})")


def skills_for(entries: Sequence[str], catalog: SkillCatalog, *, agent: str) -> list[Skill]:
    """The skills a spec's ``skills`` entries stand for; a bad entry raises ``SpecError``."""
    chosen: dict[str, Skill] = {}
    catalog.select([e for e in entries if not is_skill_folder(e)], agent=agent)  # one error naming every unknown
    for entry in entries:
        for skill in _folder_skills(entry, agent) if is_skill_folder(entry) else [catalog[entry]]:
            chosen.pop(skill.name, None)  # a later entry replaces an earlier skill, in its own place
            chosen[skill.name] = skill
    return list(chosen.values())


def _folder_skills(entry: str, agent: str) -> list[Skill]:
    try:
        folder = Path(entry).expanduser()  # '~nobody/skills' raises RuntimeError
        is_folder = folder.is_dir()
    except (OSError, RuntimeError, ValueError) as exc:  # ValueError: a NUL byte
        raise SpecError(f"subagent {agent!r}: field 'skills': {entry!r} cannot be read as a folder ({exc})") from None
    if not is_folder:
        # deepagents reads these paths from its file backend, where they may be empty: warn, never refuse the agent.
        warnings.warn(f"subagent {agent!r}: field 'skills': {entry!r} is not a folder on the local disk "
                      "(skill folders are read from the disk, relative to the working directory); "
                      "it adds no skills", SkillFolderWarning, stacklevel=2)
        return []
    report = discover_skills([folder])
    try:
        report.raise_for_problems()
    except Exception as exc:  # noqa: BLE001 - reported with the field named
        raise SpecError(f"subagent {agent!r}: field 'skills': {exc}") from exc
    return list(report.values)
