"""Finding definitions in an ordered list of directory levels, with precedence.

A *level* is one directory or a group of directories that rank equally.
Levels are searched in order and the first level that defines a name wins:
a later level's definition of that name is *shadowed* (kept in the report,
not used). Two files defining one name within a level is an error naming
both files. A file reached twice (through a symlink, say) counts once.

The default levels for agents, under the project directory (default: the
current directory) and then the user's home::

    1. <project>/.agents/agents/  <project>/.claude/agents/   (project level)
    2. ~/.agents/agents/          ~/.claude/agents/           (user level)

so a project definition overrides a user one of the same name. In an
agent directory every ``*.md`` file except ``README.md`` is an agent file;
subdirectories are not searched.

Example::

    report = discover_agents()                      # the default levels
    report = discover_agents(["team/agents", "~/agents"])
    report.raise_for_problems()
    specs = report.values                           # winners, in discovery order
"""

from __future__ import annotations

import dataclasses
import os
import warnings
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Generic, Literal, TypeVar

from subagents._errors import AgentFileError, DefinitionFileWarning, SpecError
from subagents._spec import SubagentSpec
from subagents.definitions._agent_file import parse_agent_file

T = TypeVar("T")
PathLike = str | os.PathLike[str]
DirLevels = Sequence[PathLike | Sequence[PathLike]]
MissingDirPolicy = Literal["skip", "error"]

AGENT_DIRS: tuple[str, ...] = (".agents/agents", ".claude/agents")


@dataclasses.dataclass(frozen=True)
class Definition(Generic[T]):
    """One valid definition file: its name, where it is, and what it defines."""

    name: str
    path: Path
    level: int
    value: T


@dataclasses.dataclass(frozen=True)
class FileProblem:
    """A file (or directory) that could not be used, and why."""

    path: Path
    error: SpecError

    @property
    def message(self) -> str:
        return str(self.error)


@dataclasses.dataclass
class Discovery(Generic[T]):
    """What a scan found: winners, shadowed definitions, problems and warnings."""

    definitions: dict[str, Definition[T]] = dataclasses.field(default_factory=dict)
    shadowed: list[tuple[Definition[T], Definition[T]]] = dataclasses.field(default_factory=list)
    loaded: list[Definition[T]] = dataclasses.field(default_factory=list)
    problems: list[FileProblem] = dataclasses.field(default_factory=list)
    notes: list[tuple[Path, str]] = dataclasses.field(default_factory=list)
    scanned: list[Path] = dataclasses.field(default_factory=list)

    @property
    def values(self) -> list[T]:
        """The winning definitions, in discovery order."""
        return [d.value for d in self.definitions.values()]

    @property
    def ok(self) -> bool:
        return not self.problems

    def raise_for_problems(self) -> None:
        """Raise the one problem as is, or one :class:`SpecError` listing them all."""
        if len(self.problems) == 1:
            raise self.problems[0].error
        if self.problems:
            lines = "\n".join(f"  - {p.message}" for p in self.problems)
            raise SpecError(f"{len(self.problems)} invalid definition files:\n{lines}")

    def emit_warnings(self) -> None:
        for _, note in self.notes:
            warnings.warn(DefinitionFileWarning(note), stacklevel=3)


def as_levels(dirs: DirLevels) -> list[list[Path]]:
    """Each entry a level; an entry that is itself a list groups directories of one level."""
    if isinstance(dirs, (str, os.PathLike)):
        dirs = [dirs]
    levels: list[list[Path]] = []
    for entry in dirs:
        group = [entry] if isinstance(entry, (str, os.PathLike)) else list(entry)
        levels.append([Path(os.fspath(d)).expanduser() for d in group])
    return levels


def default_levels(
    subdirs: Sequence[str], project_dir: PathLike | None = None, home: PathLike | None = None
) -> list[list[Path]]:
    """The project level, then the user level, each holding ``subdirs``."""
    project = Path(project_dir) if project_dir is not None else Path.cwd()
    user = Path(home) if home is not None else Path.home()
    return [[project / d for d in subdirs], [user / d for d in subdirs]]


def scan_levels(
    levels: Sequence[Sequence[Path]],
    *,
    files_in: Callable[[Path], list[Path]],
    parse: Callable[[Path], tuple[T, list[str]]],
    name_of: Callable[[T], str],
    error: Callable[[Path, str], SpecError],
    kind: str,
    missing: MissingDirPolicy = "skip",
) -> Discovery[T]:
    """Parse every definition in ``levels`` and apply the precedence rules."""
    report: Discovery[T] = Discovery()
    seen: set[Path] = set()
    for index, dirs in enumerate(levels):
        level: dict[str, Definition[T]] = {}
        for directory in dirs:
            if not directory.is_dir():
                if missing == "error":
                    report.problems.append(
                        FileProblem(directory, error(directory, f"is not a directory of {kind}s"))
                    )
                continue
            for path in files_in(directory):
                real = path.resolve()
                if real in seen:
                    continue
                seen.add(real)
                report.scanned.append(path)
                try:
                    value, notes = parse(path)
                except SpecError as exc:
                    report.problems.append(FileProblem(path, exc))
                    continue
                except Exception as exc:  # noqa: BLE001 - one bad file never stops the scan
                    problem = error(path, f"could not be loaded ({type(exc).__name__})")
                    report.problems.append(FileProblem(path, problem))
                    continue
                report.notes.extend((path, note) for note in notes)
                found = Definition(name_of(value), path, index, value)
                first = level.get(found.name)
                if first is not None:
                    clash = (f"defines {kind} '{found.name}', which {first.path} also "
                             "defines at the same level; rename or remove one")
                    report.problems.append(FileProblem(path, error(path, clash)))
                    continue
                level[found.name] = found
                report.loaded.append(found)
        for name, found in level.items():
            winner = report.definitions.get(name)
            if winner is None:
                report.definitions[name] = found
            else:
                report.shadowed.append((found, winner))
    return report


def agent_files_in(directory: Path) -> list[Path]:
    """Every ``*.md`` file directly in ``directory`` except ``README.md``, sorted."""
    return sorted(
        p for p in directory.glob("*.md") if p.is_file() and p.name.lower() != "readme.md"
    )


def discover_agents(
    dirs: DirLevels | None = None,
    *,
    project_dir: PathLike | None = None,
    home: PathLike | None = None,
    missing: MissingDirPolicy | None = None,
) -> Discovery[SubagentSpec]:
    """Scan agent directories (default: project then user level); never raises for a file.

    Missing directories are skipped for the default levels and an error for
    directories the caller named, unless ``missing`` says otherwise.
    """
    levels = default_levels(AGENT_DIRS, project_dir, home) if dirs is None else as_levels(dirs)
    return scan_levels(
        levels,
        files_in=agent_files_in,
        parse=parse_agent_file,
        name_of=lambda spec: spec.name,
        error=AgentFileError,
        kind="agent",
        missing=missing or ("skip" if dirs is None else "error"),
    )


def load_agent_dirs(dirs: DirLevels) -> list[SubagentSpec]:
    """The winning specs of ``dirs`` (see :func:`as_levels`); any problem raises."""
    report = discover_agents(dirs)
    report.raise_for_problems()
    report.emit_warnings()
    return report.values


def load_agent_dir(path: PathLike) -> list[SubagentSpec]:
    """Every agent file in one directory; any problem raises, naming the file."""
    return load_agent_dirs([path])
