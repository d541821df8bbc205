"""Folder trust: a cloned folder's agent files run no command until a person trusts the folder (docs/cli.md). The
answer is kept per folder and content hash in your config directory, never in the folder (the checkout's)."""

from __future__ import annotations

import contextlib
import dataclasses
import hashlib
import json
import os
import stat
import sys
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from deep_agent.cli._terminal import discard_typed_ahead, printable
from deep_agent.tools._host_code import files_run_by, what_would_run
from subagents._errors import StoredDataError

TRUST_FILE = "trusted-folders.json"
NOTES_FILE = "seen-notes.json"


def config_dir() -> Path:
    """The user's config directory for deep-agent (XDG's rule)."""
    base = os.environ.get("XDG_CONFIG_HOME") or str(Path.home() / ".config")
    return Path(base) / "deep-agent"


@dataclasses.dataclass(frozen=True)
class TrustRecord:
    """Trusted folders, each with the content hash it was trusted at (or another answer, under ``file_name``)."""

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
            raise StoredDataError(f"{self.path}: cannot be read as a trust record ({exc})") from None
        if not isinstance(data, dict):
            raise StoredDataError(f"{self.path}: expected a mapping of folder to content hash")
        return {str(k): str(v) for k, v in data.items()}

    def is_trusted(self, folder: Path, digest: str) -> bool:
        return self._read().get(str(folder.resolve())) == digest

    def trust(self, folder: Path, digest: str) -> None:
        data = self._read()
        data[str(folder.resolve())] = digest
        self.config_dir.mkdir(parents=True, exist_ok=True)
        tmp = self.path.with_suffix(f".{os.getpid()}.tmp")  # two runs at once never share a half-written file
        tmp.write_text(json.dumps(data, indent=2, sort_keys=True), encoding="utf-8")
        tmp.replace(self.path)


MAX_FINGERPRINT_FILES = 2_000  # files of one named folder hashed; past them, a change goes unseen


def fingerprint(files: Iterable[Path]) -> str:
    """One hash over the named files' paths and bytes (given :func:`folder_commands`' answer, also the files
    their hooks and servers name); a pipe or device is never opened."""
    paths = set(files)
    if isinstance(files, FolderCommands):
        paths.update(p for run in files.runs.values() for p in run)
    digest = hashlib.sha256()
    for path in sorted(paths):
        digest.update(str(path).encode() + b"\0")
        if os.path.isdir(path) and not os.path.islink(path):
            inner = sorted(Path(top, name) for top, _, names in os.walk(path) for name in names)
            for file in inner[:MAX_FINGERPRINT_FILES]:
                digest.update(str(file.relative_to(path)).encode() + b"\0")
                _hash_file(digest, file, follow=False)
            digest.update(b"<more files>" if len(inner) > MAX_FINGERPRINT_FILES else b"")
        else:
            _hash_file(digest, path, follow=True)
        digest.update(b"\0")
    return digest.hexdigest()


def _hash_file(digest: Any, path: Path, *, follow: bool) -> None:
    """The file's bytes into ``digest``; a symlink's target (``follow=False``), or what it is instead."""
    try:
        if not follow and os.path.islink(path):
            digest.update(b"<symlink>" + os.fsencode(os.readlink(path)))
            return
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)  # a pipe opens at once, then is refused
    except OSError as exc:
        digest.update(b"<missing>" if isinstance(exc, FileNotFoundError) else b"<unreadable>")
        return
    with os.fdopen(fd, "rb") as handle:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            digest.update(b"<not a regular file>")
            return
        while chunk := handle.read(1 << 20):
            digest.update(chunk)


class FolderCommands(dict[Path, list[str]]):
    """The folder's command-running agent files, each with what it runs; ``runs``: the files each runs."""

    def __init__(self) -> None:
        super().__init__()
        self.runs: dict[Path, list[Path]] = {}


def folder_commands(definitions: Iterable[Any], folder: Path) -> FolderCommands:
    """The folder's own agent files (keys: resolved paths) that run commands, each with what it runs (and, in
    ``runs``, the files). A file found inside the folder, or resolving into it, is the folder's."""
    root = folder.resolve()
    inside = {root, Path(os.path.abspath(folder))}
    out = FolderCommands()
    for definition in definitions:
        found = Path(os.path.abspath(definition.path))  # where it was found: no symlink followed
        path = Path(definition.path).resolve()
        if not any(top in p.parents for top in inside for p in (found, path)):
            continue  # the user's own level (home) is theirs, not the checkout's
        if commands := what_would_run(definition.value):
            out[path] = commands
            out.runs[path] = files_run_by(definition.value, root, outside=True)
    return out


def describe(folder: Path, commands: Mapping[Path, list[str]]) -> str:
    """What trusting ``folder`` would let run: every command, argument, env entry and cwd, escaped."""
    discard_typed_ahead(sys.stdin)  # it precedes the question: keys typed before it was shown answer nothing
    root = folder.resolve()
    runs = commands.runs if isinstance(commands, FolderCommands) else {}
    lines = [f"{printable(folder)}: these agent files run commands:"]
    for path, found in sorted(commands.items()):
        lines.append(f"  {printable(path.relative_to(root) if root in path.parents else path)}")
        lines += [f"    {printable(command)}" for command in found]
        # The ones there now: a missing one (json.py that an import could load instead) asks again once made.
        if there := [p for p in runs.get(path, ()) if os.path.lexists(p)]:
            shown = ", ".join(printable(p.relative_to(root) if root in p.parents else p) for p in there)
            lines.append(f"    files it runs (a change, or a new one, asks again): {shown}")
    return "\n".join(lines)


HOW_TO_TRUST = ("deep-agent: this folder is not trusted, so its agent files with hooks or MCP servers "
                "were not loaded; review them and run `deep-agent trust` (or pass --trust-folder)")


def notes_unseen(folder: Path, notes: Sequence[str], files: Iterable[Path], *, config: Path | None = None) -> bool:
    """True when ``notes`` about ``folder``'s agent files have not been shown since they or the files changed (said
    on every run, they would hide a new one); records them as seen (an unusable config folder: twice beats never)."""
    if not notes:
        return False
    digest = hashlib.sha256(("\0".join(notes) + "\0" + fingerprint(files)).encode()).hexdigest()
    record = TrustRecord(config or config_dir(), NOTES_FILE)
    with contextlib.suppress(OSError, ValueError):
        if record.is_trusted(folder, digest):
            return False
        record.trust(folder, digest)
    return True
