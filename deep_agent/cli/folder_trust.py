"""Folder trust: a cloned folder's agent files run no command until a person trusts the folder.

An agent file can start processes: its ``hooks`` run shell commands and its
``mcpServers`` start servers. ``deep-agent run`` reads the current folder's
agent files by default, so a checkout could run its own commands the moment
you type ``run`` in it. Like Claude Code, the CLI asks first: it shows every
command such files would run, and remembers the answer per folder and
content hash in your config directory (``$XDG_CONFIG_HOME/deep-agent/`` or
``~/.config/deep-agent/``, never in the folder, which the checkout controls).
Any change to those files asks again. Without a terminal an untrusted
folder's command-running agent files are not loaded (plain ones are: they run
nothing by themselves, and their tools follow your ``--permission-mode``).

Example::

    record = TrustRecord(config_dir=Path("/tmp/cfg"))
    assert not record.is_trusted(Path("/tmp/project"), "abc")
    record.trust(Path("/tmp/project"), "abc")
    assert record.is_trusted(Path("/tmp/project"), "abc")
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

TRUST_FILE = "trusted-folders.json"


def config_dir() -> Path:
    """The user's config directory for deep-agent (XDG's rule)."""
    base = os.environ.get("XDG_CONFIG_HOME") or str(Path.home() / ".config")
    return Path(base) / "deep-agent"


@dataclasses.dataclass(frozen=True)
class TrustRecord:
    """Trusted folders, each with the content hash it was trusted at (or, under another ``file_name``,
    any other answer kept per folder and content hash)."""

    config_dir: Path
    file_name: str = TRUST_FILE

    @property
    def path(self) -> Path:
        return self.config_dir / self.file_name

    def _read(self) -> dict[str, str]:
        try:
            data = json.loads(self.path.read_text(encoding="utf-8"))
        except FileNotFoundError:
            return {}
        except (OSError, ValueError) as exc:
            raise ValueError(f"{self.path}: cannot be read as a trust record ({exc})") from None
        if not isinstance(data, dict):
            raise ValueError(f"{self.path}: expected a mapping of folder to content hash")
        return {str(k): str(v) for k, v in data.items()}

    def is_trusted(self, folder: Path, digest: str) -> bool:
        return self._read().get(str(folder.resolve())) == digest

    def trust(self, folder: Path, digest: str) -> None:
        data = self._read()
        data[str(folder.resolve())] = digest
        self.config_dir.mkdir(parents=True, exist_ok=True)
        tmp = self.path.with_suffix(f".{os.getpid()}.tmp")  # two runs at once never share a half-written file
        tmp.write_text(json.dumps(data, indent=2, sort_keys=True), encoding="utf-8")
        tmp.replace(self.path)  # never a half-written record


def _commands(value: Any) -> Iterable[str]:
    """Every ``command`` (with its ``args``) found in a hooks or MCP mapping."""
    if isinstance(value, Mapping):
        if isinstance(value.get("command"), str):
            args = value.get("args") or []
            yield " ".join([value["command"], *map(str, args)]) if isinstance(args, list) else value["command"]
        elif isinstance(value.get("url"), str):
            yield f"connect to {value['url']}"
        for key, item in value.items():
            if key not in ("command", "args"):
                yield from _commands(item)
    elif isinstance(value, (list, tuple)):
        for item in value:
            yield from _commands(item)


def what_would_run(spec: Any) -> list[str]:
    """The commands an agent file's hooks and MCP servers would run; ``[]`` for a plain file."""
    found = [f"hook: {c}" for c in _commands(getattr(spec, "hooks", None) or {})]
    found += [f"MCP server: {c}" for c in _commands(getattr(spec, "mcp_config", None) or {})]
    return found


def fingerprint(files: Iterable[Path]) -> str:
    """One hash over the named files' paths and bytes: any change asks again."""
    digest = hashlib.sha256()
    for path in sorted(set(files)):
        digest.update(str(path).encode() + b"\0")
        try:
            digest.update(path.read_bytes())
        except OSError:
            digest.update(b"<unreadable>")
        digest.update(b"\0")
    return digest.hexdigest()


def folder_commands(definitions: Iterable[Any], folder: Path) -> dict[Path, list[str]]:
    """The folder's own agent files that run commands, each with what it runs."""
    root = folder.resolve()
    out: dict[Path, list[str]] = {}
    for definition in definitions:
        path = Path(definition.path).resolve()
        if root not in path.parents:
            continue  # the user's own level (home) is theirs, not the checkout's
        commands = what_would_run(definition.value)
        if commands:
            out[path] = commands
    return out


def describe(folder: Path, commands: Mapping[Path, list[str]]) -> str:
    """What trusting ``folder`` would let run, one command a line."""
    lines = [f"{folder}: these agent files run commands:"]
    for path, found in sorted(commands.items()):
        lines.append(f"  {path.relative_to(folder.resolve()) if folder.resolve() in path.parents else path}")
        lines += [f"    {command}" for command in found]
    return "\n".join(lines)


HOW_TO_TRUST = ("deep-agent: this folder is not trusted, so its agent files with hooks or MCP servers "
                "were not loaded; review them and run `deep-agent trust` (or pass --trust-folder)")
