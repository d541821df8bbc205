"""Reading a markdown file that opens with YAML frontmatter, defensively.

Accepted: UTF-8 with or without a byte-order mark, LF, CRLF or CR line
ends, and YAML loaded safely (plain data only: a ``!!python/...`` tag is an
error, never an object). Rejected with one error naming the file: bytes
that are not UTF-8, a missing or unterminated ``---`` block, YAML syntax
errors (with the line), a frontmatter that is not a mapping, non-string or
duplicate keys.

Example::

    fields, body = read_frontmatter(Path("agents/reviewer.md"), AgentFileError)
    fields["description"], body   # ('Reviews diffs.', 'You review code...')
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from subagents.errors import DefinitionFileError

DELIMITER = "---"


class _UniqueKeyLoader(yaml.SafeLoader):
    """A safe loader that refuses duplicate keys instead of keeping the last."""


class _DuplicateKey(yaml.constructor.ConstructorError):
    def __init__(self, key: str, mark: yaml.Mark) -> None:
        super().__init__(None, None, f"duplicate key {key!r}", mark)
        self.key = key


def _construct_mapping(loader: _UniqueKeyLoader, node: yaml.MappingNode, deep: bool = False) -> Any:
    seen: set[str] = set()
    for key_node, _ in node.value:
        key = loader.construct_object(key_node, deep=deep)
        if not isinstance(key, str):
            continue
        if key in seen:
            raise _DuplicateKey(key, key_node.start_mark)
        seen.add(key)
    return loader.construct_mapping(node, deep=deep)


_UniqueKeyLoader.add_constructor(
    yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG, _construct_mapping
)


def read_text(path: Path, error: type[DefinitionFileError]) -> str:
    """The file's text, BOM dropped and line ends made ``\\n``."""
    try:
        raw = path.read_bytes()
    except OSError as exc:
        raise error(path, f"cannot be read ({exc.strerror or exc})") from None
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
            f"got {lines[0][:40]!r}",
        )
    for i, line in enumerate(lines[1:], start=1):
        if line.rstrip() == DELIMITER:
            return "\n".join(lines[1:i]), "\n".join(lines[i + 1 :])
    raise error(path, f"has unterminated frontmatter; expected a closing '{DELIMITER}' line")


def parse_yaml(source: str, path: Path, error: type[DefinitionFileError]) -> dict[str, Any]:
    """The frontmatter as a dict of string keys (an empty block is ``{}``)."""
    try:
        data = yaml.load(source, Loader=_UniqueKeyLoader)  # noqa: S506 - a SafeLoader subclass
    except _DuplicateKey as exc:
        raise error(
            path, f"given twice (frontmatter line {_line(exc)}); expected each field once",
            field=exc.key,
        ) from None
    except yaml.constructor.ConstructorError as exc:
        problem = exc.problem or str(exc)
        if "constructor" in problem:
            tag = problem.split(" for the tag ")[-1].replace("tag:yaml.org,2002:", "!!")
            problem = f"the tag {tag} is not allowed; expected plain YAML data (safe loading only)"
        raise error(path, f"frontmatter line {_line(exc)}: {problem}") from None
    except yaml.YAMLError as exc:
        problem = getattr(exc, "problem", None) or str(exc)
        raise error(path, f"frontmatter line {_line(exc)}: invalid YAML: {problem}") from None
    if data is None:
        return {}
    if not isinstance(data, dict):
        raise error(path, f"frontmatter must be a mapping of fields, got a {type(data).__name__}")
    bad = [k for k in data if not isinstance(k, str)]
    if bad:
        raise error(path, f"frontmatter keys must be strings, got {bad[0]!r}")
    return data


def _line(exc: yaml.YAMLError) -> int | str:
    mark = getattr(exc, "problem_mark", None) or getattr(exc, "context_mark", None)
    # +2: the opening '---' is line 1 and marks count from 0.
    return mark.line + 2 if mark is not None else "?"


def read_frontmatter(path: Path, error: type[DefinitionFileError]) -> tuple[dict[str, Any], str]:
    """``(fields, body)`` of a frontmatter file; the body is stripped."""
    yaml_text, body = split_frontmatter(read_text(path, error), path, error)
    return parse_yaml(yaml_text, path, error), body.strip()
