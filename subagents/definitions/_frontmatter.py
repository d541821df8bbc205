"""Reading a markdown file that opens with YAML frontmatter, defensively.

Accepted: UTF-8 with or without a byte-order mark, LF, CRLF or CR line
ends, and YAML loaded safely (plain data only: a ``!!python/...`` tag is an
error, never an object). Rejected with one error naming the file: bytes
that are not UTF-8, a missing or unterminated ``---`` block, YAML syntax
errors (with the line), a character YAML refuses (NUL, ESC...: with its
line and code), a frontmatter that is not a mapping, non-string or
duplicate keys, and hostile input (files over 1 MiB, nesting deeper than 32
levels, more than 20,000 values with aliases expanded; see :mod:`subagents.definitions._safe_yaml`).

Lenient fallback: many published agent files have an unquoted colon in a
one-line value (``description: Use when ... Triggers on: 'x'``), which
strict YAML rejects and the tools people use accept. When strict YAML
fails, each top-level ``key: value`` line is read on its own, the rest of
the line as a plain string; block lists and multi-line values are still
read as YAML. The file then loads with a warning naming the line, never
silently; a value that looks like YAML (``[``, ``{``, quotes, ``|``...) but
does not parse stays an error. Its fields share one value budget, so the
20,000-value bound holds per file there too.

Example::

    notes = []
    fields, body = read_frontmatter(Path("agents/reviewer.md"), AgentFileError, notes)
    fields["description"], body   # ('Reviews diffs.', 'You review code...')
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import yaml

from subagents._errors import DefinitionFileError, brief
from subagents.definitions._safe_yaml import (
    MAX_FILE_BYTES,
    DuplicateKey,
    ValueBudget,
    YAMLBoundError,
    load_bounded,
)

DELIMITER = "---"

_TOP_LEVEL_KEY = re.compile(r"^([A-Za-z_][A-Za-z0-9_.-]*)[ \t]*:(?:[ \t]+(.*))?$")
_YAML_LOOKING = tuple("[{\"'|>&*!%@`")


def read_text(path: Path, error: type[DefinitionFileError]) -> str:
    """The file's text, BOM dropped and line ends made ``\\n``; at most 1 MiB."""
    try:
        with path.open("rb") as handle:
            raw = handle.read(MAX_FILE_BYTES + 1)
    except OSError as exc:
        raise error(path, f"cannot be read ({exc.strerror or exc})") from None
    if len(raw) > MAX_FILE_BYTES:
        raise error(path, f"is larger than {MAX_FILE_BYTES} bytes; expected a small definition file")
    try:
        text = raw.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise error(
            path, f"is not valid UTF-8 (byte 0x{raw[exc.start]:02x} at offset {exc.start})"
        ) from None
    return text.replace("\r\n", "\n").replace("\r", "\n")


def split_frontmatter(text: str, path: Path, error: type[DefinitionFileError]) -> tuple[str, str]:
    """``(yaml text, body)``; the file must open with a ``---`` line and close one."""
    lines = text.split("\n")
    if not text.strip():
        raise error(path, "is empty; expected a '---' line, YAML fields, a '---' line, then the body")
    if lines[0].strip() != DELIMITER:
        raise error(
            path,
            f"has no frontmatter; expected the first line to be '{DELIMITER}', "
            f"got {brief(lines[0][:40])}",
        )
    for i, line in enumerate(lines[1:], start=1):
        if line.rstrip() == DELIMITER:
            return "\n".join(lines[1:i]), "\n".join(lines[i + 1 :])
    raise error(path, f"has unterminated frontmatter; expected a closing '{DELIMITER}' line")


def parse_yaml(
    source: str, path: Path, error: type[DefinitionFileError], notes: list[str] | None = None
) -> dict[str, Any]:
    """The frontmatter as a dict of string keys (an empty block is ``{}``).

    Strict YAML first; on a syntax error, the line-by-line fallback (its
    warning appended to ``notes``) or, if that fails too, the strict error.
    """
    try:
        try:
            data = load_bounded(source)
        except (yaml.scanner.ScannerError, yaml.parser.ParserError) as exc:
            data = _lenient(source, exc, path, error, notes)
    except yaml.YAMLError as exc:
        raise _as_error(exc, path, error, source) from None
    except RecursionError:  # belt and braces: the loader's depth bound should make this unreachable
        raise error(path, "frontmatter nests too deeply; expected flat fields") from None
    if data is None:
        return {}
    if not isinstance(data, dict):
        raise error(path, f"frontmatter must be a mapping of fields, got a {type(data).__name__}")
    bad = [k for k in data if not isinstance(k, str)]
    if bad:
        raise error(path, f"frontmatter keys must be strings, got {brief(bad[0])}")
    return data


def _lenient(
    source: str, exc: yaml.YAMLError, path: Path, error: type[DefinitionFileError], notes: list[str] | None
) -> dict[str, Any]:
    """The fallback's fields, its warning in ``notes``; the strict error ``exc`` if it fails too.

    A bound the fallback's fields break together (:class:`YAMLBoundError`)
    is raised as it is: it is the file's problem, not the syntax error's.
    """
    fields = _line_by_line(source)
    if fields is None:
        raise exc
    if notes is not None:
        notes.append(
            f"{path}: frontmatter line {_line(exc)} is not strict YAML "
            f"({getattr(exc, 'problem', None) or 'syntax error'}); read each top-level "
            "'key: value' line with the rest of the line as its value (quote the value to silence this)"
        )
    return fields


def _as_error(
    exc: yaml.YAMLError, path: Path, error: type[DefinitionFileError], source: str
) -> DefinitionFileError:
    """One readable error for any YAML problem, naming the frontmatter line."""
    if isinstance(exc, yaml.reader.ReaderError):
        return _unprintable(exc, path, error, source)
    if isinstance(exc, DuplicateKey):
        return error(
            path, f"given twice (frontmatter line {_line(exc)}); expected each field once",
            field=exc.key,
        )
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


def _unprintable(
    exc: yaml.reader.ReaderError, path: Path, error: type[DefinitionFileError], source: str
) -> DefinitionFileError:
    """A character YAML refuses (NUL, ESC...): the reader gives only its offset, so find the line."""
    line = source.count("\n", 0, exc.position)
    code = exc.character if isinstance(exc.character, int) else ord(str(exc.character)[:1] or "\0")
    kind = "a control character" if code < 0x20 or 0x7F <= code <= 0x9F else "not printable"
    escape = f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"
    return error(
        path,
        f"frontmatter line {line + 2}: the character U+{code:04X} ({kind}) is not allowed in YAML; "
        f'expected printable text (or the escape "{escape}" inside a double-quoted string)',
        field=_field_at(source, line),
    )


def _field_at(source: str, line: int) -> str | None:
    """The top-level key whose block holds 0-based ``line`` (its own line or one below it)."""
    for text in reversed(source.split("\n")[: line + 1]):
        match = _TOP_LEVEL_KEY.match(text)
        if match:
            return match.group(1)[:60]
    return None


def _line_by_line(source: str) -> dict[str, Any] | None:
    """Each top-level ``key:`` with its block; a one-line value YAML rejects is kept as text.

    ``None`` when some part cannot be read this way either.
    """
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
    """``(fields, body)`` of a frontmatter file; the body is stripped.

    Warnings (the lenient fallback) are appended to ``notes`` when given.
    """
    yaml_text, body = split_frontmatter(read_text(path, error), path, error)
    return parse_yaml(yaml_text, path, error, notes), body.strip()
