"""Where ``Bash`` runs: confined by bubblewrap on Linux, the workspace writable and the rest not.

One profile, whatever the uid (root included): docs/cli.md ("Bash's sandbox") describes it. The run's
:class:`~deep_agent.tools._protected.Protected` set is read-only (a missing path a placeholder while the command runs;
what a command made there is set aside when it ends: :func:`set_aside_new_repositories`). Hooks and stdio MCP servers
of a process with a sandboxed ``Bash`` run in the same profile (:class:`Confinement`).

Example::

    sandbox = Sandbox.find()          # None without bwrap
    argv = sandbox.argv("/work/project", "ls -1")
"""

from __future__ import annotations

import contextlib
import dataclasses
import errno
import itertools
import os
import re
import secrets
import shlex
import shutil
import stat
import subprocess
import sys
import tempfile
import threading
import warnings
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import Any

from deep_agent.tools._confined import ENV_NAMES, STARTED, SpawnFailed, argv_file, end_recorded, fd_options, spawned
from deep_agent.tools._host_code import WORD_PARTS, shell_words
from deep_agent.tools._protected import CONFIG, VCS_DIRS, Protected, is_git_dir
from deep_agent.tools._workspace import homes, is_folder, lmode
from subagents._errors import SubagentsError
from subagents.definitions._on_host import absolute_path

ALLOWED_ENV = ("PATH", "LANG", "TERM", "TZ", "LC_ALL", "LC_CTYPE", "LC_COLLATE", "LC_MESSAGES", "LC_MONETARY",
               "LC_NUMERIC", "LC_TIME", "LC_ADDRESS", "LC_IDENTIFICATION", "LC_MEASUREMENT", "LC_NAME",
               "LC_PAPER", "LC_TELEPHONE")
"""Variables a sandboxed command gets (with ``pass_env``). ``LC_*`` by name: ``LC_API_TOKEN`` is no locale."""

class SandboxUnavailable(SpawnFailed):
    """What the sandbox needs is missing (:attr:`program`) or failed to start."""


class SetAsideUnchecked(SubagentsError, RuntimeError):
    """What a sandboxed command made at protected paths could not be checked (:attr:`cause`); the host may run it."""

    def __init__(self, cause: BaseException) -> None:
        super().__init__(f"what this command made at protected paths could not be checked "
                         f"({type(cause).__name__}: {cause}): a git repository or protected path it made may be left "
                         "in place, where the host would run it; look for new .git folders, and for protected paths "
                         "it made; no command runs in this workspace until this check, tried again at each start, "
                         "completes")
        self.cause = cause


@dataclasses.dataclass(frozen=True)
class Sandbox:
    """A bubblewrap profile: ``bwrap``'s executable; ``network``: outbound through the ``pasta`` executable (default:
    none); ``pass_env``: names of variables the command also gets (their values from this process)."""

    bwrap: str
    network: bool = False
    pasta: str | None = None
    pass_env: tuple[str, ...] = ()

    @classmethod
    def find(cls, *, network: bool = False, pass_env: tuple[str, ...] = ()) -> Sandbox | None:
        """This machine's: ``None`` without ``bwrap`` or Linux, :class:`SandboxUnavailable` for ``network`` without
        ``pasta``. Only absolute ``PATH`` entries: a workspace's ``bin/bwrap`` would run every command unconfined."""
        found = shutil.which("bwrap", path=absolute_path())
        if not found or not sys.platform.startswith("linux"):
            return None
        pasta = shutil.which("pasta", path=absolute_path()) if network else None
        if network and pasta is None:
            raise SandboxUnavailable("network for Bash needs pasta, which is not installed "
                                     "(Debian: apt install passt)", "pasta")
        return cls(found, network, pasta, tuple(pass_env))

    def argv(self, workspace: str | os.PathLike[str], command: str, protected: Protected | None = None,
             *, sync_fds: tuple[int, int | None] | None = None, seccomp_fd: int | None = None,
             cwd: Path | None = None, reveal: Iterable[Path] = ()) -> list[str]:
        """The command line that runs ``command`` with ``bash -c`` inside the sandbox, in ``workspace``; ``protected``
        read-only (default: :meth:`Protected.of` it), and ``reveal`` outside it (a user hook's script in a home)."""
        root = Path(workspace).resolve()
        protected = protected if protected is not None else Protected.of(root)
        # Never the host's network: with `network`, running() gives the command's own namespace pasta's.
        # A user namespace of its own, in which no other can be made (--disable-userns): else a command
        # run by a normal user becomes root of a nested one (`unshare -Ur`), every capability back.
        args = [self.bwrap, *fd_options(sync_fds, seccomp_fd), "--unshare-all", "--unshare-user",
                "--disable-userns", "--cap-drop", "ALL", "--new-session", "--die-with-parent",
                "--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc",
                "--ro-bind", "/dev/null", "/proc/keys"]  # the keyring's names too (its calls: seccomp_filter)
        hidden = _hidden(str(root))
        args += [word for folder in hidden for word in ("--tmpfs", folder)]
        if str(root.parent) in hidden and str(root.parent) not in {*map(str, homes()), *_ALWAYS_HIDDEN}:
            # The interpreter's and PATH's folders in the emptied parent, shown read-only (with their environment).
            needed = {Path(os.path.realpath(p)) for p in (sys.base_prefix, sys.prefix, *os.get_exec_path()) if p}
            reveal = [*reveal, *{n.parent if (n.parent / "pyvenv.cfg").is_file() or n.parent.name == "node_modules"
                                 else n for n in needed if root.parent in n.parents and root not in (n, *n.parents)
                                 and os.path.exists(n)}]
        resolver = os.path.realpath("/etc/resolv.conf")
        if self.network and resolver.startswith("/run/"):  # DNS, where resolv.conf points into /run
            args += ["--ro-bind", os.path.dirname(resolver), os.path.dirname(resolver)]
        shown = sorted(set(map(str, reveal)), key=lambda p: p.count("/"))  # before the workspace: never over it
        args += [word for path in shown for word in ("--ro-bind", path, path)]
        args += ["--bind", str(root), str(root), *_binds(root, protected.inside(root))]
        # No --setenv: a value on a command line is anyone's to read (/proc/PID/cmdline); the command gets the
        # environment bubblewrap is started with, which its caller makes (environment(), and a server's own).
        return [*args, "--chdir", str(cwd or root), "--", "bash", "-c", command]

    def environment(self) -> dict[str, str]:
        """What the command gets: :data:`ALLOWED_ENV`, ``pass_env``, ``HOME`` (empty inside), and ``PATH``'s
        absolute entries (bubblewrap finds ``bash`` on it in the workspace: never a ``bin/bash`` of it)."""
        kept = {name: value for name, value in os.environ.items()
                if name in ALLOWED_ENV or name in self.pass_env}
        return {**kept, "HOME": str(Path.home()), "PATH": absolute_path()}

    @contextlib.contextmanager
    def holding(self, workspace: str | os.PathLike[str], protected: Protected | None = None,
                set_aside: list[Path] | None = None) -> Iterator[Protected]:
        """The workspace made ready for sandboxed commands while held (placeholders); its protected set. Afterwards
        what they made is set aside (appended to ``set_aside``), or :class:`SetAsideUnchecked`."""
        root = Path(workspace).resolve()
        protected = protected if protected is not None else Protected.of(root)
        try:  # worked out before anything runs: a set that cannot be is no command run, not one left unchecked
            protected.paths  # noqa: B018
        except Exception as exc:  # noqa: BLE001 - any cause refuses the command, named
            raise SandboxUnavailable(f"the protected paths of {root} could not be worked out "
                                     f"({type(exc).__name__}: {exc}); the command did not run", "bwrap") from exc
        if (earlier := _unchecked.get(root)) is not None:  # fail closed until the walk that failed completes
            try:
                _walk_or_refuse(root, earlier[1], set_aside)
            except SetAsideUnchecked as exc:
                raise SandboxUnavailable(f"refused, as every command since: {exc}", "bwrap") from exc
            if _unchecked.get(root) is earlier:  # not a later one of a command running beside
                del _unchecked[root]
        # What was there before the command: a repository found in the set since is still the command's, and so
        # is one at a protected path missing then (a placeholder, its own or a parallel command's, is not there).
        with _placeholder_lock:
            known = {p: why for p, why in protected.paths.items()
                     if p not in _placeholder_users and os.path.lexists(p)}
            before = _links_before(root, protected)
        try:
            with _placeholders(root, protected):
                yield protected
        finally:  # what the command made set aside; where that fails the user is told (a warning: the model's
            try:  # answer alone may never be read)
                _walk_or_refuse(root, lambda: set_aside_new_repositories(root, protected, known, before), set_aside)
            except SetAsideUnchecked as exc:
                warnings.warn(str(exc), RuntimeWarning, stacklevel=1)
                raise

    @contextlib.contextmanager
    def running(self, workspace: str | os.PathLike[str], command: str, protected: Protected | None = None,
                *, set_aside: list[Path] | None = None, **popen: Any) -> Iterator[subprocess.Popen[bytes]]:
        """``command`` started in the sandbox (``popen``: :class:`subprocess.Popen`'s), the workspace held."""
        root = Path(workspace).resolve()
        with self.holding(root, protected, set_aside) as held:
            # bwrap's own processes (its init is the command's pid 1, readable in /proc) get no more either.
            popen["env"] = self.environment()
            try:
                with spawned(lambda sync, seccomp: self.argv(root, command, held, sync_fds=sync, seccomp_fd=seccomp),
                             self.pasta if self.network else None, **popen) as process:
                    yield process
            except SpawnFailed as exc:
                raise SandboxUnavailable(str(exc), exc.program) from None


@dataclasses.dataclass(frozen=True)
class Confinement:
    """Runs a hook's command or an MCP server as ``Bash``'s commands run (given to ``on_host.confine``)."""

    sandbox: Sandbox
    workspace: Path
    protected: Protected

    @contextlib.contextmanager
    def __call__(self, argv: list[str], cwd: str | None, declared: dict[str, str]) -> Iterator[tuple[list[str],
                                                                                                 dict[str, str]]]:
        # Where it starts, as named (no symlink followed: the agent may have made one): there if the sandbox
        # shows it, else the workspace. Only this program's interpreter (pyenv's, in a hidden home) and the
        # files the definition names (named_outside) are shown beyond what Bash's commands see.
        start = Path(os.path.normpath(os.path.join(os.getcwd(), cwd or "")))
        root = self.workspace
        hidden = _hidden(str(root))
        seen = root in (start, *start.parents) or not any(str(start) == h or str(start).startswith(h + "/")
                                                           for h in hidden)
        shown = [p for p in {Path(sys.base_prefix).resolve(), Path(sys.prefix).resolve()} if os.access(p, os.X_OK)
                 and any(str(p).startswith(h + "/") for h in hidden) and root not in (p, *p.parents)]
        # ${NAME} in a declared value is this process's NAME, as the MCP client would give it unconfined.
        env = {k: _BRACED.sub(lambda m: os.environ.get(m.group(1), m.group(0)), v) for k, v in declared.items()}
        with self.sandbox.holding(root, self.protected) as protected, tempfile.TemporaryDirectory() as folder:
            bwrap = self.sandbox.argv(root, STARTED + "exec " + shlex.join(argv), protected,
                                      cwd=start if seen else root, reveal=[*shown, *named_outside(argv, root, hidden)])
            pasta = ["--pasta", self.sandbox.pasta] if self.sandbox.network and self.sandbox.pasta else []
            # This program's interpreter, or where this process may not run it (its user changed), PATH's.
            python = (sys.executable if os.access(sys.executable, os.X_OK)
                      else shutil.which("python3", path=absolute_path()) or sys.executable)
            launcher = [python, "-I", LAUNCHER, folder, *pasta, *argv_file(folder, bwrap)]
            env = {**self.sandbox.environment(), **env}
            Path(folder, ENV_NAMES).write_text("\0".join(env))  # what the launcher passes on: these alone
            try:
                yield launcher, env
            finally:
                end_recorded(folder)

_BRACED = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)\}")
LAUNCHER = str(Path(__file__).with_name("_confined.py"))


def named_outside(argv: list[str], root: Path, hidden: list[str]) -> list[Path]:
    """The files in ``hidden`` folders the command line names by an absolute path, outside ``root``: never by a
    relative word or through a symlink, which could lead wherever the agent's commands pointed it."""
    found: set[Path] = set()
    for word in (w for arg in argv for w in shell_words(arg)):
        for part in filter(None, WORD_PARTS.split(word)):
            named = os.path.expanduser(part.replace("${HOME}", "~").replace("$HOME", "~"))
            if not os.path.isabs(named):
                continue
            path = Path(os.path.normpath(named))
            with contextlib.suppress(OSError, RuntimeError, ValueError):
                if (os.path.realpath(path) == str(path) and root not in (path, *path.parents)
                        and os.path.isfile(path) and os.access(path, os.R_OK)
                        and any(str(path).startswith(h + "/") for h in hidden)):
                    found.add(path)
    return sorted(found)


SET_ASIDE = ".made-by-agent"
ON_THE_WAY = ("on the way to a protected path, a symlink or file the command put there or what replaced a symlink "
              "(what runs that path would go through it)")


def set_aside_new_repositories(root: Path, protected: Protected, known: dict[Path, str] | None = None,
                               before: dict[str, str | None] | None = None) -> list[Path]:
    """Rename every git repository in ``root`` not in the protected set (the host's next ``git status`` would run its
    config), every watched path now there, and each step on the way to a protected path not what it was (a symlink
    put back); the new names. ``known``, ``before``: the protected paths and :func:`_links_before` at the start."""
    before = _links_before(root, protected) if before is None else before
    moved: list[Path] = []
    watched = set(map(str, protected.watched))
    with _placeholder_lock:  # a parallel command's placeholder: read-only to every command, removed by its own
        others = set(map(str, _placeholder_users))
    # Each step on the way, by name as the host finds it (never through a symlink), not what it was ``before``:
    # set aside, a symlink that was there put back. A ``src`` swapped for a symlink ran its ``sitecustomize.py``.
    with _held(root) as held:
        for folder, names in _on_the_way(root, protected.paths):
            if (parent := _reach(held, len(Path(folder).parts) - len(root.parts), Path(folder))) is None:
                continue  # gone, no folder, or a symlink as it was (or set aside): nothing by this name below
            for name in names:
                if (step := folder + os.sep + name) in others:
                    continue
                if _kind(name, parent) != (was := before.get(step)):
                    moved += _set_aside(parent, Path(step)) if lmode(name, parent) else []
                    if was and not lmode(name, parent):  # a symlink was there
                        with contextlib.suppress(OSError):
                            os.symlink(was, name, dir_fd=parent)
                elif step in watched and lmode(name, parent):
                    moved += _set_aside(parent, Path(step))
    known = {p: why for p, why in protected.paths.items() if os.path.lexists(p)} if known is None else known
    with _placeholder_lock:  # a parallel command's placeholder: read-only to every command, removed by its own
        known = {**known, **dict.fromkeys(_placeholder_users, "")}
    skipped = known.keys() - protected.watched - protected.links.keys()  # read-only inside: nothing new there
    for here, fd, dirs, files in _walk_all(root):
        found = [here / name for name in sorted(VCS_DIRS & {*dirs, *files})]
        if here not in known and is_git_dir({*dirs, *files}):
            found.append(here / "HEAD")
        new = [new for path in found if path not in known for new in _set_aside(fd, path)]
        moved += new
        dirs[:] = [d for d in dirs if d not in VCS_DIRS and here / d not in skipped] + [
            n.name for n in new if n.parent == here and stat.S_ISDIR(lmode(n.name, fd))]  # walked too
    return moved


def _links_before(root: Path, protected: Protected) -> dict[str, str | None]:
    """Each step from ``root`` down to each protected path in it -> what stood there (:func:`_kind`) when the run
    first looked: kept with the set, so what a command running beside put there is never the reference."""
    seen: dict[str, str | None] = protected.__dict__.setdefault("_links_before", {})
    for folder, names in _on_the_way(root, protected.paths):
        seen.update((step, _kind(step, None)) for step in (folder + os.sep + n for n in names) if step not in seen)
    return seen


def _kind(name: str, parent: int | None) -> str | None:
    """What stands at ``name`` in ``parent`` (``None``: ``name`` is absolute): a symlink's text, ``""`` for any
    other file, ``None`` for a folder or nothing (a folder a command makes where none was is its work)."""
    try:
        mode = os.lstat(name, dir_fd=parent).st_mode
        return os.readlink(name, dir_fd=parent) if stat.S_ISLNK(mode) else None if stat.S_ISDIR(mode) else ""
    except OSError:
        return None


def _on_the_way(root: Path, paths: Iterable[Path]) -> list[tuple[str, list[str]]]:
    """Each folder from ``root`` down to ``paths`` in it, a folder before those in it, with the names on the way."""
    top = os.path.join(str(root), "")
    names: dict[str, set[str]] = {}
    for step in map(str, paths):
        while step.startswith(top):
            folder, _, name = step.rpartition(os.sep)
            new = folder not in names
            names.setdefault(folder, set()).add(name)
            step = folder if new else ""
    return sorted(((f, sorted(n)) for f, n in names.items()), key=lambda item: item[0].split(os.sep))


_FOLDER = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC  # by name in its folder: never a symlink
_HELD = 64  # descriptors a walk holds at most


def _walk_all(root: Path) -> Iterator[tuple[Path, int, list[str], list[str]]]:
    """Each folder in ``root``, its descriptor (valid until the next step), its folders' (pruned in place: not walked)
    and other entries' names; opened by name from its parent's, never through a symlink (a swapped one had an outside
    ``.git`` renamed). Not ``os.walk``: it recursed (1,200 deep) and skipped an unlistable folder (``chmod 0311``)."""
    pending: list[tuple[int, Path]] = [(0, root)]
    with _held(root) as held:
        while pending:
            depth, here = pending.pop()
            fd = _reach(held, depth, here)
            if fd is None:
                continue
            dirs: list[str] = []
            files: list[str] = []
            with os.scandir(fd) as scan:
                for entry in scan:
                    (dirs if is_folder(entry, follow_symlinks=False) else files).append(entry.name)
            yield here, fd, dirs, files
            pending += [(depth + 1, here / d) for d in reversed(dirs)]


def _reach(held: list[tuple[int, int]], depth: int, here: Path) -> int | None:
    """A descriptor of ``here`` (``depth`` down), opened from the deepest of its folders ``held``; ``None`` if gone."""
    while len(held) > 1 and held[-1][0] >= depth:  # depth first: whatever is held deeper is done with
        os.close(held.pop()[1])
    for step in range(held[-1][0] + 1, depth + 1):
        fd = _open_folder(here.parts[step - depth - 1], held[-1][1])
        if fd is None:
            return None
        held.append((step, fd))
        if len(held) > _HELD:  # the workspace's is kept: what was let go is opened again from there
            os.close(held.pop(1)[1])
    return held[-1][1]


def _open_folder(name: str, parent: int | None) -> int | None:
    """The folder ``name`` in ``parent`` (``None``: ``name`` is absolute) opened, its owner's read and search bits
    given back first (``chmod 0311 d`` hides nothing); ``None`` if gone, not a folder, or still not readable."""
    try:
        held = os.open(name, os.O_PATH | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=parent)
    except OSError as exc:
        if exc.errno in (errno.ENOENT, errno.ENOTDIR, errno.ELOOP, errno.EACCES, errno.EPERM):  # gone, now a file
            return None  # or a symlink, or not the user's
        raise
    try:
        if not stat.S_ISDIR(os.fstat(held).st_mode):  # a symlink is opened as itself (O_PATH | O_NOFOLLOW)
            return None
        with contextlib.suppress(OSError):
            _give_owner_bits(held, stat.S_IRUSR | stat.S_IXUSR)
        return os.open(f"/proc/self/fd/{held}", os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)  # that very folder
    except PermissionError:
        return None
    finally:
        os.close(held)


@contextlib.contextmanager
def _held(root: Path) -> Iterator[list[tuple[int, int]]]:
    """``(depth, descriptor)`` along a walk's path (:func:`_reach`), closed at its end; first the workspace's, opened
    as :func:`_open_folder` opens one (``chmod 0311 .`` hides nothing)."""
    if (fd := _open_folder(str(root), None)) is None:
        raise NotADirectoryError(errno.ENOTDIR, "the workspace cannot be opened as a folder", str(root))
    held = [(0, fd)]
    try:
        yield held
    finally:
        for _, step in held:
            os.close(step)


def _give_owner_bits(fd: int, bits: int = stat.S_IRWXU) -> None:
    """The folder open at ``fd`` (an ``O_PATH`` one too, never a symlink's target) given its owner's ``bits``."""
    mode = os.fstat(fd).st_mode
    if stat.S_ISDIR(mode) and mode & bits != bits:
        os.chmod(f"/proc/self/fd/{fd}", stat.S_IMODE(mode) | bits)


@contextlib.contextmanager
def _folder_of(root: Path, path: Path) -> Iterator[int | None]:
    """The folder holding ``path`` (in ``root``), opened step by step, no symlink; ``None`` if a step is no folder."""
    fd: int | None = None
    try:
        fd = os.open(root, _FOLDER)
        for name in path.parent.relative_to(root).parts:
            step = os.open(name, _FOLDER, dir_fd=fd)
            os.close(fd)
            fd = step
    except (OSError, ValueError):  # never the last folder reached: a placeholder there is in the wrong one
        if fd is not None:
            os.close(fd)
        fd = None
    try:
        yield fd if fd is not None and root in path.parents else None
    finally:
        if fd is not None:
            os.close(fd)


def _set_aside(parent: int, path: Path) -> list[Path]:
    """``path`` (in the folder open at ``parent``) renamed with :data:`SET_ASIDE` (and a random part where taken),
    the folder's write bit given back to retry; else removed (``[]``), or ``[path]`` if still there."""
    name = path.name
    for _ in range(2):
        target = name + SET_ASIDE
        if lmode(target, parent):
            target = f"{name}{SET_ASIDE}-{secrets.token_hex(8)}"
        try:
            os.rename(name, target, src_dir_fd=parent, dst_dir_fd=parent)  # a symlink is renamed, never followed
            return [path.with_name(target)]
        except OSError:
            with contextlib.suppress(OSError):
                _give_owner_bits(parent, stat.S_IWUSR | stat.S_IXUSR)
    with contextlib.suppress(OSError):  # what the command made there is gone rather than left for git to run
        if stat.S_ISDIR(lmode(name, parent)):
            shutil.rmtree(name, dir_fd=parent)
        else:
            os.unlink(name, dir_fd=parent)
    return [path] if lmode(name, parent) else []


def _walk_or_refuse(root: Path, walk: Callable[[], list[Path]], report: list[Path] | None) -> None:
    """``walk`` run, what it set aside added to ``report``; where it fails or leaves one in place, no command
    runs in ``root`` until it is run again and completes (:class:`SetAsideUnchecked`)."""
    try:
        moved = walk()
        if report is not None:
            report += moved
        if stuck := [str(p) for p in moved if SET_ASIDE not in p.name]:
            raise FileExistsError(errno.EEXIST, "left in place, neither renamed nor removed", ", ".join(stuck))
    except Exception as exc:  # never a silent pass: what the walk did not reach may be a repository
        _unchecked[root] = (SetAsideUnchecked(exc), walk)
        raise _unchecked[root][0] from exc


_unchecked: dict[Path, tuple[SetAsideUnchecked, Callable[[], list[Path]]]] = {}
"""Workspaces where what a command made could not be set aside -> the walk to try again (with what it knew then)."""


_placeholder_lock = threading.Lock()
_placeholder_users: dict[Path, int] = {}  # placeholder -> running commands needing it (parallel ones share)


def _mask(root: Path, path: Path) -> Path | None:
    """Where a protected path is missing: its placeholder or first missing step, or a file standing where a
    folder on its way should be (bound read-only, it cannot be replaced by the folder either)."""
    for step in (*reversed(path.parents), path):
        if root not in step.parents:
            continue
        if step in _placeholder_users or not os.path.lexists(step):
            return step
        with contextlib.suppress(OSError):
            if step != path and not stat.S_ISDIR(os.lstat(step).st_mode):
                return step
    return None


def _binds(root: Path, protected: list[Path]) -> list[str]:
    """``--ro-bind`` for each protected path in ``root`` (or its placeholder), ``--bind`` for each folder on its way: a
    mount point cannot be renamed (``mv scripts x && mkdir scripts``; the walk after is late: the host finds them)."""
    with _placeholder_lock:
        targets = {_mask(root, path) or path for path in protected}
    # Missing with no placeholder: only argv() outside running(), which cannot bind it.
    read_only = {t for t in targets if os.path.lexists(t)}
    # A symlink cannot be mounted on (the mount would land on its target): its folders are bound, so it
    # cannot move with them, and set_aside_new_repositories puts it back if the command replaced it.
    mounts = {str(t): "--ro-bind" for t in read_only if not os.path.islink(t)}
    within = {str(t) for t in read_only}
    for target in map(str, read_only):  # by strings: a tree 1,900 deep has as many folders on its way
        folders = (target[:i] for i, c in enumerate(target) if c == "/" and i > len(str(root)))
        for folder in itertools.takewhile(lambda f: f not in within, folders):  # never writable inside one
            mounts.setdefault(folder, "--bind")
    args: list[str] = []
    for path in sorted(mounts, key=lambda p: p.count("/")):  # a folder before what is bound inside it
        args += [mounts[path], path, path]
    return args


@contextlib.contextmanager
def _placeholders(root: Path, protected: Protected) -> Iterator[None]:
    """An empty folder where a protected path (or the first folder on its way) is missing, an empty file where a git
    config names it; one that cannot be made is no command run: unbound, the path would be the command's."""
    made: list[Path] = []
    failed: list[str] = []
    with _placeholder_lock:
        for path in protected.inside(root):
            if (target := _mask(root, path)) is None or target in made:
                continue
            if target not in _placeholder_users:
                with _folder_of(root, target) as parent:  # never made through a symlink a command put on the way
                    try:
                        if parent is None:
                            raise FileNotFoundError(errno.ENOENT, "a folder on its way is missing or not a folder")
                        if protected.paths[path] == CONFIG:
                            os.close(os.open(target.name, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW,
                                             0o644, dir_fd=parent))
                        else:
                            os.mkdir(target.name, dir_fd=parent)
                    except FileExistsError:
                        continue  # there after all: bound read-only as it is
                    except OSError as exc:
                        failed.append(f"{target} ({exc.strerror or exc})")
                        continue
            _placeholder_users[target] = _placeholder_users.get(target, 0) + 1
            made.append(target)
    try:
        if failed:
            raise SandboxUnavailable("a missing protected path could not be held read-only while the command runs "
                                     f"({'; '.join(failed)}); the command did not run", "bwrap")
        yield
    finally:
        with _placeholder_lock:
            for target in made:
                _placeholder_users[target] -= 1
                if not _placeholder_users[target]:
                    del _placeholder_users[target]
                    with _folder_of(root, target) as parent, contextlib.suppress(OSError):
                        if parent is None:
                            continue
                        made_as = os.lstat(target.name, dir_fd=parent)  # only if still empty: never anyone's content
                        if stat.S_ISDIR(made_as.st_mode):
                            os.rmdir(target.name, dir_fd=parent)
                        elif stat.S_ISREG(made_as.st_mode) and not made_as.st_size:
                            os.unlink(target.name, dir_fd=parent)


def _hidden(root: str) -> list[str]:
    """Folders mounted empty: homes (but ``/`` or one holding ``bash``, a system account's), temporary and runtime
    files, and the workspace's parent unless ``/`` (the interpreter and ``PATH`` there: :meth:`Sandbox.argv`)."""
    parent = str(Path(root).parent)
    shell = os.path.realpath(shutil.which("bash", path=absolute_path()) or "/bin/bash")
    candidates = [h for h in map(str, homes()) if h != "/" and not shell.startswith(h + "/")]
    candidates += [*_ALWAYS_HIDDEN, *([] if parent == "/" else [parent])]
    folders = sorted({p for p in candidates if p != root and os.path.isdir(p)}, key=len)
    # A folder inside one already hidden is gone with it (the workspace is mounted back afterwards).
    return [p for p in folders if not any(p.startswith(q + "/") for q in folders if q != p)]


_ALWAYS_HIDDEN = ("/tmp", "/var/tmp", "/run", "/home", "/root")

