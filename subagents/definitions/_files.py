"""Finding definitions in an ordered list of directory levels (each one directory, or several that rank equally):
the first level that defines a name wins, a later one's is *shadowed* (reported, not used); two files of one name
within a level is an error naming both; a file reached twice (a symlink) counts once."""

from __future__ import annotations

import dataclasses
import os
import re
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, Generic, Literal, TypeVar

import yaml

from subagents._errors import DefinitionFileError, DuplicateKey, SpecError, YAMLBoundError, brief

# Untrusted YAML (a cloned repository) is loaded within bounds: a file size, a nesting depth checked before the
# composer recurses, and a count of values with aliases expanded, counted while composing (so a "billion laughs"
# bomb costs no more than the cap to refuse). Safe loading only: ``!!python/...`` is refused, never run.

MAX_FILE_BYTES = 1024 * 1024
MAX_DEPTH = 32  # of mappings and lists
MAX_EXPANDED_NODES = 20_000  # YAML values a document may hold once every alias is expanded


def _construct_mapping(loader: BoundedLoader, node: yaml.MappingNode, deep: bool = False) -> Any:
    seen: set[str] = set()
    for key_node, _ in node.value:
        key = loader.construct_object(key_node, deep=deep)
        if not isinstance(key, str):
            continue
        if key in seen:
            raise DuplicateKey(key, key_node.start_mark)
        seen.add(key)
    return loader.construct_mapping(node, deep=deep)


def _construct_int(loader: BoundedLoader, node: yaml.ScalarNode) -> Any:
    try:
        return loader.construct_yaml_int(node)
    except ValueError:  # Python refuses to convert more than sys.get_int_max_str_digits() digits
        raise yaml.constructor.ConstructorError(
            None, None, f"an integer of {len(str(node.value))} characters is too long; "
            "expected a number of usual size (quote it to keep it as text)", node.start_mark,
        ) from None


_BRACKETS = re.compile(r"[\[\]{}]")


class ValueBudget:
    """How many values one file may hold, shared by every YAML document read from it (the lenient fallback's)."""

    def __init__(self, limit: int = MAX_EXPANDED_NODES) -> None:
        self.limit = limit
        self.used = 0  # values so far, each alias counted as a full copy of what it points to
        self.written = 0  # values so far as written, aliases not expanded


class BoundedLoader(yaml.SafeLoader):
    """Safe, refusing duplicate keys; composes within :data:`MAX_DEPTH` and a :class:`ValueBudget`, stopping at the
    first value past either (as nodes are made: PyYAML's composer is pure Python, a 1 MiB flow list takes seconds)."""

    def __init__(self, source: str, budget: ValueBudget) -> None:
        super().__init__(source)
        self.budget = budget
        self._sizes: dict[int, int] = {}  # id(node) -> expanded size, once the node is complete
        self._open = 0
        self._field: tuple[int, str | None] | None = None

    def compose_node(self, parent: yaml.Node | None, index: Any) -> yaml.Node | None:
        if self._open == 1 and isinstance(parent, yaml.MappingNode):  # a top-level key or value
            scalar = isinstance(index, yaml.ScalarNode)
            self._field = (index.start_mark.line, str(index.value)[:60]) if scalar else None
        event = self.peek_event()  # type: ignore[no-untyped-call]
        if isinstance(event, yaml.AliasEvent):
            node = super().compose_node(parent, index)
            size = self._sizes.get(id(node))
            if size is None:  # its anchor's collection is still open: it contains itself
                raise self._error("an alias refers to the collection it is in (a value that "
                                  "never ends); expected plain values", event)
            self._charge(size, event, alias=True)
            return node
        if isinstance(event, yaml.CollectionStartEvent) and self._open >= MAX_DEPTH:
            raise self._error(f"nests deeper than {MAX_DEPTH} levels; expected flat fields", event)
        before = self.budget.used
        self._charge(1, event, alias=False)
        self._open += 1
        try:
            node = super().compose_node(parent, index)
        finally:
            self._open -= 1
        self._sizes[id(node)] = self.budget.used - before
        return node

    def _charge(self, values: int, event: yaml.Event, *, alias: bool) -> None:
        budget = self.budget
        budget.used += values
        budget.written += 0 if alias else 1
        if budget.used <= budget.limit:
            return
        if budget.written == budget.used:
            raise self._error(f"holds more than {budget.limit} values; expected a short definition", event)
        raise self._error(f"its aliases expand to more than {budget.limit} values (an alias bomb?); "
                          "expected plain values", event)

    def _error(self, message: str, event: yaml.Event) -> YAMLBoundError:
        """The error at the top-level field being composed (its key's line), else at ``event``."""
        if self._field is not None:
            return YAMLBoundError(message, *self._field)
        return YAMLBoundError(message, event.start_mark.line if event.start_mark else None)


BoundedLoader.add_constructor(yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG, _construct_mapping)
BoundedLoader.add_constructor("tag:yaml.org,2002:int", _construct_int)


def load_bounded(source: str, budget: ValueBudget | None = None) -> Any:
    """``source`` loaded safely within bounds (``budget``: the file's, when several documents share one)."""
    # Brackets nesting far deeper than MAX_DEPTH are refused on the raw text before the scanner runs, which slows
    # with the square of the flow depth (twice the depth: brackets in strings).
    depth = 0
    for match in _BRACKETS.finditer(source):
        depth += 1 if match.group() in "[{" else -1
        if depth > 2 * MAX_DEPTH:
            line = source.count("\n", 0, match.start())
            raise YAMLBoundError(f"nests deeper than {MAX_DEPTH} levels; expected flat fields", line)
    loader = BoundedLoader(source, budget if budget is not None else ValueBudget())
    try:
        node = loader.get_single_node()
        return None if node is None else loader.construct_document(node)
    finally:
        loader.dispose()


# Markdown with YAML frontmatter. Many published agent files have an unquoted colon in a one-line value, which
# strict YAML rejects and the tools people use accept: then each top-level ``key: value`` line is read alone, the
# rest of the line as text, with a warning (a value that looks like YAML but does not parse stays an error).

DELIMITER = "---"

_TOP_LEVEL_KEY = re.compile(r"^([A-Za-z_][A-Za-z0-9_.-]*)[ \t]*:(?:[ \t]+(.*))?$")
_YAML_LOOKING = tuple("[{\"'|>&*!%@`")


def _as_error(exc: yaml.YAMLError, path: Path, error: type[DefinitionFileError], source: str) -> DefinitionFileError:
    """One readable error for any YAML problem, naming the frontmatter line."""
    if isinstance(exc, yaml.reader.ReaderError):  # a character YAML refuses (NUL, ESC...): only its offset is given
        at = source.count("\n", 0, exc.position)
        code = exc.character if isinstance(exc.character, int) else ord(str(exc.character)[:1] or "\0")
        kind = "a control character" if code < 0x20 or 0x7F <= code <= 0x9F else "not printable"
        escape = f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"
        # The field is the top-level key whose block holds the line (its own line or one below it).
        keys = (m[1][:60] for text in reversed(source.split("\n")[: at + 1]) if (m := _TOP_LEVEL_KEY.match(text)))
        return error(path, f"frontmatter line {at + 2}: the character U+{code:04X} ({kind}) is not allowed in YAML; "
                     f'expected printable text (or the escape "{escape}" inside a double-quoted string)',
                     field=next(keys, None))
    if isinstance(exc, DuplicateKey):
        return error(path, f"given twice (frontmatter line {_line(exc)}); expected each field once", field=exc.key)
    if isinstance(exc, YAMLBoundError):
        line = exc.line + 2 if exc.line is not None else "?"
        return error(path, f"frontmatter line {line}: {exc.message}", field=exc.field)
    if isinstance(exc, yaml.constructor.ConstructorError):
        problem = exc.problem or "cannot be constructed"
        if "constructor" in problem:
            tag = problem.split(" for the tag ")[-1].replace("tag:yaml.org,2002:", "!!")
            problem = f"the tag {tag[:80]} is not allowed; expected plain YAML data (safe loading only)"
        return error(path, f"frontmatter line {_line(exc)}: {problem}")
    problem = getattr(exc, "problem", None) or "cannot be parsed"
    return error(path, f"frontmatter line {_line(exc)}: invalid YAML: {problem}")


def _line_by_line(source: str) -> dict[str, Any] | None:
    """Each top-level ``key:`` with its block, a one-line value YAML rejects kept as text (``None``: no way)."""
    blocks: list[tuple[str, str | None, list[str], int]] = []
    for number, line in enumerate(source.split("\n")):
        match = _TOP_LEVEL_KEY.match(line)
        if match:
            blocks.append((match.group(1), match.group(2), [line], number))
        elif blocks and (not line.strip() or line[0] in " \t-" or line.lstrip().startswith("#")):
            blocks[-1][2].append(line)
        elif line.strip() and not line.lstrip().startswith("#"):
            return None
    fields: dict[str, Any] = {}
    budget = ValueBudget()  # one for the file: each field alone under the cap must not add up past it
    for key, rest, lines, first in blocks:
        if key in fields:
            return None
        try:
            value = load_bounded("\n".join(lines), budget)
        except YAMLBoundError as exc:
            exc.line = first + (exc.line or 0)
            raise
        except (yaml.scanner.ScannerError, yaml.parser.ParserError):
            tail = [ln for ln in lines[1:] if ln.strip() and not ln.lstrip().startswith("#")]
            text = (rest or "").strip()
            if tail or not text or text.startswith(_YAML_LOOKING):
                return None
            fields[key] = text
            continue
        except yaml.YAMLError:
            return None
        if not isinstance(value, dict) or list(value) != [key]:
            return None
        fields[key] = value[key]
    return fields


def _line(exc: yaml.YAMLError) -> int | str:
    mark = getattr(exc, "problem_mark", None) or getattr(exc, "context_mark", None)
    # +2: the opening '---' is line 1 and marks count from 0.
    return mark.line + 2 if mark is not None else "?"


def read_frontmatter(
    path: Path, error: type[DefinitionFileError], notes: list[str] | None = None
) -> tuple[dict[str, Any], str]:
    """``(fields, body)`` of a frontmatter file (opening with a ``---`` line and closing one), the body stripped;
    warnings are appended to ``notes``. At most 1 MiB of UTF-8 (a BOM dropped, line ends made ``\\n``)."""
    try:
        with path.open("rb") as handle:
            raw = handle.read(MAX_FILE_BYTES + 1)
    except OSError as exc:
        raise error(path, f"cannot be read ({exc.strerror or exc})") from None
    if len(raw) > MAX_FILE_BYTES:
        raise error(path, f"is larger than {MAX_FILE_BYTES} bytes; expected a small definition file")
    try:
        text = raw.decode("utf-8-sig").replace("\r\n", "\n").replace("\r", "\n")
    except UnicodeDecodeError as exc:
        raise error(path, f"is not valid UTF-8 (byte 0x{raw[exc.start]:02x} at offset {exc.start})") from None
    lines = text.split("\n")
    if not text.strip():
        raise error(path, "is empty; expected a '---' line, YAML fields, a '---' line, then the body")
    if lines[0].strip() != DELIMITER:
        raise error(path, f"has no frontmatter; expected the first line to be '{DELIMITER}', "
                    f"got {brief(lines[0][:40])}")
    end = next((i for i, line in enumerate(lines[1:], start=1) if line.rstrip() == DELIMITER), None)
    if end is None:
        raise error(path, f"has unterminated frontmatter; expected a closing '{DELIMITER}' line")
    source = "\n".join(lines[1:end])
    try:  # strict YAML, else the line-by-line fallback (warning in ``notes``), else the error
        try:
            data = load_bounded(source)
        except (yaml.scanner.ScannerError, yaml.parser.ParserError) as exc:
            data = _line_by_line(source)
            if data is None:
                raise
            if notes is not None:
                notes.append(f"{path}: frontmatter line {_line(exc)} is not strict YAML "
                             f"({getattr(exc, 'problem', None) or 'syntax error'}); read each top-level 'key: value' "
                             "line with the rest of the line as its value (quote the value to silence this)")
    except yaml.YAMLError as exc:
        raise _as_error(exc, path, error, source) from None
    except RecursionError:  # belt and braces: the loader's depth bound should make this unreachable
        raise error(path, "frontmatter nests too deeply; expected flat fields") from None
    if data is not None and not isinstance(data, dict):
        raise error(path, f"frontmatter must be a mapping of fields, got a {type(data).__name__}")
    if bad := [k for k in data or {} if not isinstance(k, str)]:
        raise error(path, f"frontmatter keys must be strings, got {brief(bad[0])}")
    return data or {}, "\n".join(lines[end + 1 :]).strip()


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


def as_levels(dirs: DirLevels) -> list[list[Path]]:
    """Each entry a level; an entry that is itself a list groups directories of one level."""
    if isinstance(dirs, (str, os.PathLike)):
        dirs = [dirs]
    return [[Path(os.fspath(d)).expanduser() for d in ([entry] if isinstance(entry, (str, os.PathLike)) else entry)]
            for entry in dirs]


def default_levels(
    subdirs: Sequence[str], project_dir: PathLike | None = None, home: PathLike | None = None
) -> list[list[Path]]:
    """The project level, then the user level, each holding ``subdirs``."""
    project = Path(project_dir) if project_dir is not None else Path.cwd()
    user = Path(home) if home is not None else Path.home()
    return [[project / d for d in subdirs], [user / d for d in subdirs]]


def scan_levels(dirs: DirLevels | None, subdirs: Sequence[str], *, project_dir: PathLike | None, home: PathLike | None,
                files_in: Callable[[Path], list[Path]], parse: Callable[[Path], tuple[T, list[str]]],
                name_of: Callable[[T], str], error: Callable[[Path, str], SpecError], kind: str,
                missing: MissingDirPolicy | None) -> Discovery[T]:
    """Parse every definition in ``dirs`` (``None``: ``subdirs`` at the project, then the user level) by the precedence
    rules; a missing directory is skipped at the default levels, an error if named, unless ``missing`` says."""
    levels = default_levels(subdirs, project_dir, home) if dirs is None else as_levels(dirs)
    missing = missing or ("skip" if dirs is None else "error")
    report: Discovery[T] = Discovery()
    seen: set[Path] = set()
    for index, dirs in enumerate(levels):
        level: dict[str, Definition[T]] = {}
        for directory in dirs:
            if not directory.is_dir():
                if missing == "error":
                    report.problems.append(FileProblem(directory, error(directory, f"is not a directory of {kind}s")))
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
