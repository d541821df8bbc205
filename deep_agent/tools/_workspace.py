"""The folder the built-in tools may touch, and the bounds on what they return. Every path is resolved and refused
outside the workspace; files are then opened one name at a time following no symlink (:func:`open_regular`), so a path
changed after the check cannot lead outside either. Every write refuses the workspace's
:class:`~deep_agent.tools._protected.Protected` set. A home folder workspace is refused unless ``allow_home=True``: its
dotfiles run code."""

from __future__ import annotations

import contextlib
import errno
import os
import stat
from collections.abc import Callable
from pathlib import Path
from typing import IO, Any

from langchain_core.tools import ToolException

from deep_agent.tools._protected import Protected
from subagents._errors import InvalidArgument, SubagentsError
from subagents._transcripts import NOT_REGULAR, open_if_regular

MAX_OUTPUT_CHARS = 30_000  # what one tool call may return to the model (Claude Code's own bound for Bash)


class NotRegularFile(SubagentsError, OSError):
    """The path is a pipe, socket or device: reading or writing it would block or never end."""


class HomeWorkspace(SubagentsError, ValueError):
    """The workspace is, or holds, the user's home folder (:attr:`root`, :attr:`home`)."""

    def __init__(self, root: Path, home: Path) -> None:
        super().__init__(f"workspace {str(root)!r} is or holds your home folder {str(home)!r}: its dotfiles "
                         "(.bashrc, .ssh, .config) would be writable by the agent; choose a project folder "
                         "(the command line's --allow-home-workspace, the library's allow_home=True, allow it)")
        self.root, self.home = root, home


class ChangedWhileOpening(SubagentsError, OSError):
    """A symlink stood, at the moment of opening, where the checked path had a folder or file."""


class HardLinked(SubagentsError, OSError):
    """The file has more than one name (hard links): another may lie outside the workspace."""


CHANGED = ("changed while being opened: a symlink stood where the checked path had a folder or file "
           "(refused: it could lead out of the workspace)")


def open_regular(path: Path, mode: str = "rb", *, within: Workspace | None = None, **text: Any) -> IO[Any]:
    """``path`` opened (``"rb"``, ``"r"``, or ``"w"`` to create or truncate), if it is a regular file: opened
    without blocking and checked on the open file (a pipe swapped in would block), else :class:`NotRegularFile`.
    ``within``: walked from the workspace one name at a time with ``O_NOFOLLOW`` (:class:`ChangedWhileOpening`);
    ``"w"`` makes missing folders; a hard-linked file is refused before truncation."""
    writing = mode.startswith("w")
    if writing:
        if within is None:
            raise InvalidArgument("open_regular: a write goes through a workspace (within=), "
                                  "which checks its protected set")
        within.protected.check(path)
    flags = ((os.O_WRONLY | os.O_CREAT) if writing else os.O_RDONLY) | os.O_NONBLOCK | os.O_CLOEXEC
    try:
        fd = (_open_at(str(path), flags, None, path, open_if_regular) if within is None  # a write without: refused
              else _open_beneath(within, path, flags | os.O_NOFOLLOW, make_parents=writing))
    except OSError as exc:
        if exc.errno == errno.ENXIO:  # a pipe no one reads, opened to write without blocking
            raise NotRegularFile(errno.EINVAL, NOT_REGULAR, str(path)) from None
        raise
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise NotRegularFile(errno.EINVAL, NOT_REGULAR, str(path))
        if within is not None and info.st_nlink > 1:
            raise HardLinked(errno.EPERM, f"has {info.st_nlink} hard links, and one may be outside the workspace "
                             "(the file tools refuse a file with more than one name)", str(path))
        if writing:
            os.ftruncate(fd, 0)
        os.set_blocking(fd, True)
        return open(fd, mode, **text)
    except BaseException:
        os.close(fd)
        raise


def open_folder(within: Workspace, path: Path) -> int:
    """A descriptor of the workspace folder ``path``, reached as :func:`open_regular` reaches a file."""
    return _open_beneath(within, path, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC)


def _open_beneath(ws: Workspace, path: Path, flags: int, *, make_parents: bool = False) -> int:
    """``os.open`` of ``path`` one name at a time from the workspace's folder, following no symlink."""
    # Checked inside and resolved (no ".."): outside now, or a "..", it changed since.
    names = path.relative_to(ws.root).parts if path.is_relative_to(ws.root) else ("..",)
    if ".." in names:
        raise ChangedWhileOpening(errno.EXDEV, CHANGED, str(path))
    folder = os.open(ws.root, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        for depth, name in enumerate(names[:-1], 1):
            here = ws.root.joinpath(*names[:depth])  # what an error names
            if make_parents:
                try:
                    os.mkdir(name, 0o777, dir_fd=folder)
                except FileExistsError:
                    pass
                except OSError as exc:  # named with its path
                    raise OSError(exc.errno, exc.strerror, str(here)) from None
            inner = _open_at(name, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC, folder, here)
            os.close(folder)
            folder = inner
        if not names:  # the workspace's folder itself
            return os.dup(folder)
        reading = not flags & (os.O_WRONLY | os.O_RDWR | os.O_DIRECTORY)  # a file: looked at before it is opened
        return _open_at(names[-1], flags, folder, path, open_if_regular if reading else None)
    finally:
        os.close(folder)


def _open_at(name: str, flags: int, folder: int | None, path: Path, opener: Callable[..., int] | None = None) -> int:
    try:
        return opener(name, flags, dir_fd=folder) if opener else os.open(name, flags, 0o666, dir_fd=folder)
    except OSError as exc:
        if exc.errno == errno.ELOOP or (exc.errno == errno.ENOTDIR and stat.S_ISLNK(lmode(name, folder))):
            raise ChangedWhileOpening(errno.ELOOP, CHANGED, str(path)) from None
        if exc.strerror == NOT_REGULAR:
            raise NotRegularFile(errno.EINVAL, NOT_REGULAR, str(path)) from None
        raise OSError(exc.errno, exc.strerror, str(path)) from None


def is_folder(entry: os.DirEntry[str], *, follow_symlinks: bool = True) -> bool:
    """``entry.is_dir()`` (a stat, never an open), ``False`` where that fails."""
    try:
        return entry.is_dir(follow_symlinks=follow_symlinks)
    except OSError:
        return False


def lmode(name: str, folder: int | None) -> int:
    """The mode of ``name`` in ``folder`` (``None``: as a path), not following a symlink; ``0`` if there is none."""
    try:
        return os.lstat(name, dir_fd=folder).st_mode
    except OSError:
        return 0


class Workspace:
    """A resolved, existing folder (``root``, default: the current one); :meth:`path` confines a path to it.
    ``max_output_chars`` bounds one tool result; ``protected``: what no tool may write (default: :meth:`Protected.of`
    the root, computed here once); ``allow_home``: accept a root that is, or holds, the home folder."""

    def __init__(self, root: str | os.PathLike[str] | None = None, *,
                 max_output_chars: int = MAX_OUTPUT_CHARS, protected: Protected | None = None,
                 allow_home: bool = False) -> None:
        path = Path(root if root is not None else os.getcwd()).expanduser()
        if not path.is_dir():
            raise NotADirectoryError(f"workspace {str(path)!r} is not a directory")
        self.root = path.resolve()
        for home in homes():
            if not allow_home and (self.root == home or self.root in home.parents):
                raise HomeWorkspace(self.root, home)
        self.max_output_chars = max_output_chars
        self.protected = protected if protected is not None else Protected.of(self.root)

    def path(self, raw: str | None, *, field: str = "file_path") -> Path:
        """``raw`` (relative to the workspace, or absolute) resolved, if it stays inside."""
        if raw is None or str(raw).strip() == "":
            return self.root
        check_text(str(raw), field)
        try:
            candidate = Path(str(raw)).expanduser()  # '~nobody/x' raises RuntimeError
            if not candidate.is_absolute():
                candidate = self.root / candidate
            resolved = candidate.resolve()
        except (OSError, RuntimeError) as exc:  # a symlink loop, for one
            raise ToolException(f"{field} {_short(raw)}: cannot be resolved ({exc})") from None
        if not self.contains(resolved):
            raise ToolException(f"{field} {_short(raw)} is outside the workspace {self.root}; "
                                "only paths inside it can be used")
        return resolved

    def contains(self, resolved: Path) -> bool:
        """Whether an already resolved path lies in the workspace."""
        return resolved == self.root or self.root in resolved.parents

    def holds(self, path: Path) -> bool:
        """Whether ``path`` resolves inside the workspace (a symlink loop does not)."""
        try:
            return self.contains(path.resolve())
        except (OSError, RuntimeError):
            return False

    def shown(self, path: Path) -> str:
        """A path as the model sees it: relative to the workspace when inside."""
        try:
            return str(path.relative_to(self.root)) or "."
        except ValueError:
            return str(path)

    def bound(self, text: str) -> str:
        """``text`` cut to :attr:`max_output_chars`, saying how much was dropped."""
        if len(text) <= self.max_output_chars:
            return text
        dropped = len(text) - self.max_output_chars
        return f"{text[: self.max_output_chars]}\n... [output truncated: {dropped} more characters]"


def homes() -> list[Path]:
    """The user's home folders, resolved: ``$HOME``'s, and the account's own when ``HOME`` says another."""
    found = [Path.home().resolve()]
    with contextlib.suppress(ImportError, KeyError, OSError):  # no pwd module, or no account entry
        import pwd

        found.append(Path(pwd.getpwuid(os.getuid()).pw_dir).resolve())
    return list(dict.fromkeys(found))


def check_text(value: str, field: str, *, nul: bool = False) -> None:
    """Refuse a lone surrogate (no file can hold it), and a NUL byte unless ``nul`` (a file's text may)."""
    if not nul and "\x00" in value:
        raise ToolException(f"{field} {_short(value)}: contains a NUL byte, which a path or command cannot hold")
    try:
        value.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise ToolException(f"{field} {_short(value)}: holds the lone surrogate U+{ord(value[exc.start]):04X}, "
                            "which is not valid UTF-8 text") from None


def sendable(text: str) -> str:
    """``text`` as valid UTF-8 (lone surrogates no provider can send shown as ``\\xe9``)."""
    try:  # valid text comes back as it is
        return text.encode("utf-8", "surrogateescape").decode("utf-8", "backslashreplace")
    except UnicodeEncodeError:  # a surrogate no file name decodes to
        return text.encode("utf-8", "backslashreplace").decode("utf-8")


def os_error(exc: OSError, ws: Workspace, label: str) -> ToolException:
    """An ``OSError`` from the file system as an error the model can read, naming the path."""
    target = f" {_short(ws.shown(Path(exc.filename)))}" if exc.filename else ""
    return ToolException(f"{label}{target}: {exc.strerror or exc}")


def _short(value: object, limit: int = 200) -> str:
    text = repr(str(value))
    return text if len(text) <= limit else text[:limit] + "...'"
