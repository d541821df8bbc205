"""What no tool of the agent may change: the paths that make code run later, outside any sandbox.

One set per run (:meth:`Protected.of`), obeyed by every writer: ``Bash``'s sandbox mounts each path read-only, and
:func:`~deep_agent.tools._workspace.open_regular` refuses them; docs/cli.md ("Bash's sandbox") lists the set. Hooks
and MCP servers run in the same sandbox (:class:`~deep_agent.tools._sandbox.Confinement`): nothing more here.

Example::

    protected = Protected.of("/home/me/project", state_dir=".deep_agent_state")
    protected.why(Path("/home/me/project/.git/config"))   # "a git directory (...)"
"""

from __future__ import annotations

import contextlib
import dataclasses
import errno
import importlib.machinery
import importlib.util
import itertools
import os
import re
import shlex
import shutil
import subprocess
import sys
import tomllib
import warnings
from collections.abc import Callable, Collection, Iterable, Iterator
from pathlib import Path

from deep_agent.tools._host_code import (
    _ASSIGNMENT,
    WHOLE,
    WORD_PARTS,
    _resolved,
    command_files,
    import_names,
    own_path,
    read_regular,
    read_text,
    script_text,
    shell_words,
    simple_commands,
    starts,
    would_import,
)
from subagents._errors import SubagentsError

AGENT_FILES = (".claude", ".agents", ".deep_agent", ".mcp.json")
VCS_DIRS = frozenset({".git", ".hg", ".jj", ".sl"})
"""Version-control metadata folders: each one's config runs hooks at its next command (Mercurial's ``[hooks]``)."""

GIT = ("a git directory, or another version control's (.hg, .jj, .sl) (its hooks, config and commondir run commands "
       "on the next command)")
AGENT = "agent, skill, hook or MCP files (the next run reads them)"
STATE = "the state folder"
CONFIG = "a path a git config names (git may read or run it on the host: an include, hooks, a command's script)"
RUN = ("what a command a git config names runs from the working tree's top, git's cwd for it (a python -m module, a "
       "script): git runs it on the host")
HOST_IMPORT = ("what a python a git config's command or a git hook starts would import from the folder first on its "
               "import path (the working tree's top, a script's folder): a missing module, or a standard library one")
DIRENV = ("a direnv .envrc and what it loads (dotenv's .env, source_env, source_up, watch_file, PATH_add): your "
          "shell loads them on entering the folder, direnv's allow covering the .envrc's bytes only")
RUNTIME = "the interpreter or virtual environment this program runs from"
IMPORTED = ("what this program imports from the workspace (through its import path or an editable install's "
            "finder: it would run on the host at the next start)")
STARTUP = ("what a python of a protected virtual environment runs at every start (sitecustomize or usercustomize in "
           "a folder its .pth files add)")
VENV = "a virtual environment in the workspace (its .pth files, and bin/activate, run at its next use)"
PROGRAMS = "a folder on PATH (hooks, MCP servers and git run the programs they find there, on the host)"


class ProtectedPath(SubagentsError, PermissionError):
    """A tool tried to write a protected path; :attr:`path` and :attr:`reason` say which and why."""

    def __init__(self, path: Path, reason: str) -> None:
        super().__init__(errno.EACCES, f"protected, not writable by the agent's tools: {reason}", str(path))
        self.path, self.reason = path, reason


@dataclasses.dataclass(frozen=True)
class Protected:
    """Resolved paths -> why each is protected (a path inside one too); ``root``: the workspace, walked on first use."""

    fixed: dict[Path, str]
    root: Path | None = None

    @property
    def _found(self) -> tuple[dict[Path, str], frozenset[Path], dict[Path, str], dict[str, str]]:
        """Found on first use, the import-derived part again once this process imports more modules; the walk
        never again: a ``.git`` a command made since is new (set aside), never counted as known."""
        if "_imports" not in self.__dict__:  # sys.path's folders in root, existing or not: a src made is on it next
            folders = {Path(str(entry) or os.curdir).resolve() for entry in sys.path} if self.root else set()
            self.__dict__["_imports"] = sorted(f for f in folders if f == self.root or self.root in f.parents)
        if self.root is not None and self.__dict__.get("_modules") != len(sys.modules):
            self.__dict__.update(_modules=len(sys.modules), _loaded=_loaded_from(self.root))
        key = (self.__dict__["_imports"] and len(sys.modules), self.__dict__.get("_loaded"))
        if self.__dict__.get("_key") != key:
            found = dict(self.fixed)
            missing = {p for p, why in self.fixed.items() if why == STARTUP and not os.path.lexists(p)}
            if self.root is not None:  # what this program imports from the workspace
                found.update((p, IMPORTED) for p in self.__dict__["_loaded"] if p not in found)
                # What the next start could load from sys.path's folders, existing or not, for any name imported.
                names = import_names() | {name for name in list(sys.modules) if "." not in name}
                for path in (path for folder in self.__dict__["_imports"]
                             if not any(p in found for p in (folder, *folder.parents))
                             for path in would_import(folder, names)):
                    found.setdefault(path, IMPORTED)
                    missing |= set() if os.path.lexists(path) else {path}
            if "_walked" not in self.__dict__:
                self.__dict__["_walked"] = self._walk(found)
            walked, links = self.__dict__["_walked"]
            found.update((path, why) for path, why in walked.items() if path not in found)
            missing |= {p for p, why in walked.items() if why in (STARTUP, HOST_IMPORT) and not os.path.lexists(p)}
            folded = {str(path).casefold(): why for path, why in reversed(found.items())}  # the first reason wins
            self.__dict__.update(_key=key, _memo=(found, frozenset(missing), links, folded))
        memo: tuple[dict[Path, str], frozenset[Path], dict[Path, str], dict[str, str]] = self.__dict__["_memo"]
        return memo

    def _walk(self, known: dict[Path, str]) -> tuple[dict[Path, str], dict[Path, str]]:
        """The git directories in the workspace, what their configs name; symlinks to a protected path -> their text."""
        if self.root is None:
            return {}, {}
        found = dict(known)
        repos: list[tuple[Path | None, Path | None]] = [(None, None)]
        symlinks: list[Path] = []
        venvs: list[Path] = []
        envrcs: list[Path] = []
        for entry in _git_entries(self.root, symlinks, venvs, envrcs):
            found.update((path, GIT) for path in _leads_to(entry) if path not in found)
            repos.append((entry, entry.parent if entry.name in VCS_DIRS else None))
        for venv in venvs:  # every one, on PATH or not, with what its python runs at its start
            found.update((path, why) for path, why in _environment(venv, self.root, VENV).items() if path not in found)
        found.update((path, why) for path, why in _started_with(None, self.root, []) if path not in found)
        repos += _enclosing(self.root)
        found.update((p, DIRENV) for envrc in envrcs for p in _direnv_loads(envrc, self.root) if p not in found)
        for path, why in _named_by_config(self.root, repos):
            if not any(p in found for p in (path, *path.parents)):
                found[path] = why  # a missing one is held while a command runs, as any (CONFIG's a file: git reads it)
        # A link leading to a protected path, into one, or to a folder holding one (hooks -> tools/githooks).
        holders: dict[Path, str] = {}
        for path, why in found.items():
            for folder in path.parents:
                if folder in holders:
                    break  # and so is every folder above it
                holders[folder] = why
        links: dict[Path, str] = {}
        for link in symlinks:
            with contextlib.suppress(OSError, RuntimeError):
                target = link.resolve()
                if target == self.root or target in self.root.parents or any(p in found for p in link.parents):
                    continue  # leads to everything (the workspace or above), or in a protected folder already
                leads = holders.get(target) or next((found[p] for p in (target, *target.parents) if p in found), None)
                if leads is not None:
                    links[link] = os.readlink(link)
                    found.setdefault(link, leads)
        return {p: why for p, why in found.items() if p not in known}, links

    @property
    def paths(self) -> dict[Path, str]:
        """Every protected path -> why."""
        return self._found[0]

    @property
    def links(self) -> dict[Path, str]:
        """Symlinks leading to (into, or to a folder holding) a protected path -> their text, kept: what runs the path
        through the link would run whatever replaced it."""
        return self._found[2]

    @property
    def watched(self) -> frozenset[Path]:
        """The missing paths this program would load from the workspace: refused to writers, and set aside once
        a sandboxed command made one (not held by placeholders: there are thousands)."""
        return self._found[1]

    @classmethod
    def of(cls, workspace: str | os.PathLike[str], *, state_dir: str | os.PathLike[str] | None = None,
           agent_files: Iterable[str | os.PathLike[str]] = ()) -> Protected:
        """The protected set of ``workspace``; ``agent_files``: more paths the run reads to decide what runs or
        where keys go (definitions, model profiles, what a hook or server runs)."""
        root = Path(workspace).resolve()
        found = dict.fromkeys([(root / name).resolve() for name in (*AGENT_FILES, *agent_files)], AGENT)
        found.update((path, GIT) for path in _leads_to(root / ".git") if path not in found)
        if state_dir is not None:
            found.setdefault((root / state_dir).resolve(), STATE)
        runtimes = {sys.prefix, sys.exec_prefix, os.path.realpath(sys.executable)}
        found.update((p, RUNTIME) for p in map(Path.resolve, map(Path, runtimes)) if p not in found)
        # Hooks and servers look programs up there. Not ".", the workspace or above: nothing would be writable.
        for folder in os.get_exec_path():
            if os.path.isabs(folder) and (path := Path(folder).resolve()) not in (root, *root.parents):
                found.update((p, why) for p, why in _environment_of(path, root).items() if p not in found)
        return cls(found, root)

    def why(self, path: Path) -> str | None:
        """Why the resolved ``path`` (or a folder holding it) is protected, or ``None``. Names are compared without
        case: on macOS's default file system ``.GIT/hooks/x`` is ``.git/hooks/x``."""
        if self.root is not None and self.root in path.parents and (
                not VCS_DIRS.isdisjoint(str(path.relative_to(self.root)).casefold().split(os.sep))
                or _makes_git_dir(self.root, path)):
            return GIT
        folded = self._found[3]
        for candidate in (path, *path.parents):
            if (reason := folded.get(str(candidate).casefold())) is not None:
                return reason
        return None

    def check(self, path: Path) -> None:
        """Raise :class:`ProtectedPath` if the resolved ``path`` is protected."""
        if (reason := self.why(path)) is not None:
            raise ProtectedPath(path, reason)

    def inside(self, root: Path) -> list[Path]:
        """The protected paths in ``root`` but the :attr:`watched` ones and those inside another, shortest first (a
        folder on the way to one is bound writable: never inside one held whole, the workspace's top too)."""
        paths, watched = self._found[:2]
        held = {p for p in paths if p not in watched}
        return sorted((p for p in held if (p == root or root in p.parents) and held.isdisjoint(p.parents)),
                      key=lambda p: len(p.parts))


def _environment_of(folder: Path, root: Path) -> dict[Path, str]:
    """A folder on ``PATH`` and what its programs load -> why, as docs/cli.md ("A ``PATH`` folder") says."""
    if root not in folder.parents:
        return {folder: PROGRAMS}
    if is_environment(folder.parent):
        return _environment(folder.parent, root, PROGRAMS)
    if folder.parent != root and folder.parent.name == "node_modules":
        return {folder.parent: PROGRAMS}
    targets = [folder]
    with contextlib.suppress(OSError), os.scandir(folder) as scan:
        for entry in scan:
            with contextlib.suppress(OSError, RuntimeError):
                if entry.is_symlink() and root in (target := Path(entry.path).resolve()).parents:
                    targets.append(target)
    return dict.fromkeys(targets, PROGRAMS)


def is_environment(folder: Path) -> bool:
    """Whether ``folder`` is a Python environment: a virtual one, conda's or pixi's, or an interpreter's own tree."""
    return ((folder / "pyvenv.cfg").is_file() or (folder / "conda-meta").is_dir()
            or (any(folder.glob("bin/python*")) and any(folder.glob("lib/python3*/site-packages"))))


def _environment(venv: Path, root: Path, why: str) -> dict[Path, str]:
    """``venv`` whole (at ``root``, its parts: the workspace is the agent's) -> ``why``; :func:`_started_with`."""
    parts = ("bin", "lib", "lib64", "pyvenv.cfg", "conda-meta")
    held = [venv] if venv != root else [root / name for name in parts]
    return {**dict.fromkeys(held, why), **dict(_started_with(venv, root, held))}


def _started_with(venv: Path | None, root: Path, held: list[Path]) -> Iterator[tuple[Path, str]]:
    """What ``venv``'s python (``None``: any python of the host's) runs at its start from ``root`` (docs/cli.md)."""

    def inside(path: str) -> Path | None:
        if (found := _resolved(Path(path))) is None:  # a NUL, a loop
            return None
        return found if (found == root or root in found.parents) and not any(
            found == part or part in found.parents for part in held) else None

    for line in read_regular(venv / "pyvenv.cfg", 65536).decode("utf-8", "replace").splitlines() if venv else ():
        key, _, value = line.partition("=")
        if key.strip() == "home" and (home := inside(value.strip())) not in (None, root):
            yield (home.parent if home.parent != root else home), PROGRAMS  # never the whole workspace
    user = Path(os.environ.get("PYTHONUSERBASE") or os.path.expanduser("~/.local"))
    on_path = (Path(p).parent for p in os.get_exec_path() if os.path.isabs(p))
    prefixes = [venv] if venv else {user, *on_path, Path(sys.base_prefix)}
    pths: set[Path] = set()
    for prefix in prefixes:
        with contextlib.suppress(OSError):  # a folder this user cannot read: nor can its python
            pths.update(pth for site in (*prefix.glob("lib*/python*/*-packages"), prefix / "Lib" / "site-packages")
                        if site.is_dir() for pth in site.glob("*.pth"))
    suffixes = importlib.machinery.all_suffixes()
    for pth in sorted(pths):
        for line in read_regular(pth, 1 << 20).decode("utf-8", "replace").splitlines():
            # site.addpackage's own rules: an import line runs (a folder it names may be put on the path)
            imports = line.startswith(("import ", "import\t"))
            named = re.findall(r"['\"]([^'\"]+)['\"]", line) if imports else [line.rstrip()]
            for entry in named if line.strip() and not line.startswith("#") else []:
                if (folder := inside(os.path.join(pth.parent, entry))) is None:
                    continue  # a missing one too: site adds it at the start after a command made it
                # Imported at every start, unasked, from any folder on the path ("": a package).
                startup = [folder / f"{n}{x}" for n in ("sitecustomize", "usercustomize") for x in ("", *suffixes)]
                yield from ((path, STARTUP) for path in _with_bytecode(folder, startup))


def _loaded_from(root: Path) -> frozenset[Path]:
    """The top-level packages and modules in ``root`` this program loaded or would load (an editable finder's too)."""
    folders: dict[str, str] = {}
    prefix = os.path.join(str(root), "")

    def inside(place: str) -> Path | None:  # the place resolved, if in root
        if not place or not os.path.isabs(place):
            return None
        folder, name = os.path.split(place)
        if (real := folders.get(folder)) is None:
            real = folders[folder] = os.path.realpath(folder)
        path = os.path.join(real, name)
        return Path(path) if path.startswith(prefix) and name else None

    def mine(module: object) -> set[Path]:
        return {path for place in _places(module) if (path := inside(place)) is not None}

    found: set[Path] = set()
    for name, module in list(sys.modules.items()):
        if places := mine(module):
            found |= places | mine(sys.modules.get(name.partition(".")[0]))  # its top-level package, whole
    if (specs := _SPECS.get(root)) is None:
        specs = _SPECS[root] = frozenset().union(*(mine(_spec(name)) for name in
                                                   sorted(import_names() - sys.stdlib_module_names)))
    return frozenset(found | specs)


_SPECS: dict[Path, frozenset[Path]] = {}  # workspace -> what names not loaded would load: asked once a process


def _spec(name: str) -> importlib.machinery.ModuleSpec | None:
    """Where top-level ``name`` would be loaded from, without loading it; ``None`` if a finder fails."""
    if name in sys.modules:
        return None  # loaded: its own places are read
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            return importlib.util.find_spec(name)
    except Exception:  # noqa: BLE001 - a finder's own failure: it would load nothing either
        return None


def _places(module: object) -> list[str]:
    """Where a module (or a spec) was loaded from: a package's folders, a module's file and its bytecode."""
    if module is None:
        return []
    if isinstance(module, importlib.machinery.ModuleSpec):
        return [*(module.submodule_search_locations or ()), *(() if module.submodule_search_locations is not None
                                                               else (module.origin or "", module.cached or ""))]
    folders = getattr(module, "__path__", None)
    if folders is not None:
        with contextlib.suppress(Exception):  # a module's own __path__: any object
            return [str(p) for p in list(folders) if isinstance(p, str)]
        return []
    return [p for p in (getattr(module, "__file__", None), getattr(module, "__cached__", None)) if isinstance(p, str)]


def _git_entries(root: Path, symlinks: list[Path], venvs: list[Path], envrcs: list[Path]) -> Iterator[Path]:
    """Every :data:`VCS_DIRS` entry in the workspace and folder git takes for a git directory; the symlinks, Python
    environments (the root too) and ``.envrc`` files met go to the lists named so."""
    todo = [root]
    while todo:
        folder = todo.pop()
        try:
            with os.scandir(folder) as scan:
                entries = list(scan)
        except OSError:
            continue
        names = {entry.name for entry in entries}
        symlinks += [Path(entry.path) for entry in entries if entry.is_symlink()]
        envrcs += [folder / ".envrc"] if ".envrc" in names else []
        if is_git_dir(names):
            yield folder
            continue
        if names & {"pyvenv.cfg", "conda-meta", "bin"} and is_environment(folder):
            venvs.append(folder)
        yield from (folder / name for name in sorted(VCS_DIRS & names))  # a .git's own modules/: in it, whole
        todo += [Path(entry.path) for entry in entries
                 if entry.name not in VCS_DIRS and entry.is_dir(follow_symlinks=False)]


def is_git_dir(names: Collection[str]) -> bool:
    """Whether a folder holding the entries ``names`` is one git takes for a git directory (git's
    ``is_git_directory``, loosened towards protecting: any ``HEAD``, any ``commondir``)."""
    return "HEAD" in names and ("commondir" in names or ("objects" in names and "refs" in names))


def _makes_git_dir(root: Path, path: Path) -> bool:
    """Whether a folder from ``root`` down to ``path``'s is, or becomes once ``path`` exists, a git directory."""
    for folder in reversed(path.parents):
        if folder != root and root not in folder.parents:
            continue
        first = path.relative_to(folder).parts[0].casefold()  # "head" is HEAD where case is not told apart
        names = {n for n in ("HEAD", "objects", "refs", "commondir")
                 if os.path.lexists(folder / n) or n.casefold() == first}
        if is_git_dir(names):
            return True
    return False


def _config_entries(git_dir: Path | None) -> Iterator[tuple[Path | None, str, str]]:
    """``(file, key, value)`` of every entry git reads for ``git_dir`` (``None``: outside any repository), and of
    every file an ``includeIf`` names, whatever its condition (``onbranch:`` holds after the next ``git switch``)."""
    todo, read = [["--git-dir", str(git_dir), "config"] if git_dir is not None else ["config"]], set()
    # The configs the user's own git reads: theirs, not this process's overrides.
    env = {"PATH": os.environ.get("PATH", os.defpath), "HOME": str(Path.home()), "LC_ALL": "C", **{
        name: os.environ[name] for name in ("XDG_CONFIG_HOME", "GIT_CONFIG_GLOBAL", "GIT_CONFIG_SYSTEM",
                                            "GIT_CONFIG_NOSYSTEM") if name in os.environ}}
    while todo:
        try:
            done = subprocess.run([shutil.which("git") or "git", *todo.pop(), "--list", "--includes",
                                   "--show-origin", "-z"], env=env, cwd=os.sep,
                                  stdin=subprocess.DEVNULL, capture_output=True, timeout=30, check=False)
        except (OSError, subprocess.TimeoutExpired):
            return  # no git here: nothing reads the config either
        fields = done.stdout.decode("utf-8", "replace").split("\0")
        for origin, entry in zip(fields[0::2], fields[1::2], strict=False):
            key, _, value = entry.partition("\n")
            if _REFS.fullmatch(key) or (_URLS.fullmatch(key) and _NETWORK_URL.match(value)):
                continue  # refs and a network remote's address: no file of the workspace (a clone's config has them)
            file = Path(origin.removeprefix("file:")).resolve() if origin.startswith("file:") else None
            if file is not None and _INCLUDE_IF.fullmatch(key):
                with contextlib.suppress(OSError, RuntimeError):  # ~nobody, a symlink loop
                    if (named := (file.parent / Path(value).expanduser()).resolve()) not in read:
                        read.add(named)
                        todo.append(["config", "--file", str(named)])
            yield file, key, value


def _hgrc_entries(hgrc: Path) -> Iterator[tuple[Path | None, str, str]]:
    """``(file it came from, its section, value)`` of every entry of Mercurial's (or Sapling's) ``hgrc`` (a ``[hooks]``
    value is a command) and of every file it ``%include``s, the include's path a value too (``include.path``)."""
    todo, read, section = [hgrc], set(), ""
    while todo:
        with contextlib.suppress(OSError, RuntimeError, ValueError):  # a symlink loop, a NUL
            if (file := todo.pop().resolve()) in read:
                continue
            read.add(file)
            text = read_text(file)
            for line in text.splitlines() if text != WHOLE else [f"={WHOLE}"]:  # past the bound: a command of its own
                if line.startswith("["):
                    section = line.strip("[] \t")
                if not line.strip() or line.lstrip().startswith(("#", ";", "[", "%unset")):
                    continue
                if line.startswith("%include"):
                    yield file, "include.path", (named := line.removeprefix("%include").strip())
                    with contextlib.suppress(RuntimeError):  # ~nobody: hg reads the rest of the file all the same
                        todo.append(file.parent / Path(os.path.expandvars(named)).expanduser())
                else:  # key = value, or a value's indented continuation
                    yield file, section, (line if line[:1] in " \t" else line.partition("=")[2]).strip()


def _jj_entries(config: Path) -> Iterator[tuple[Path | None, str, str]]:
    """``(file, "", value)`` of every string of Jujutsu's ``config.toml``, a list of strings (a command) as one."""
    try:
        todo: list[object] = [WHOLE if (text := read_text(config)) == WHOLE else tomllib.loads(text)]
    except (OSError, RecursionError, tomllib.TOMLDecodeError):
        return  # none, or one jj refuses to run with too
    while todo:
        if isinstance(value := todo.pop(), str):
            yield config, "", value
        elif isinstance(value, list) and value and all(isinstance(word, str) for word in value):
            yield config, "", shlex.join(value)
        elif isinstance(value, (dict, list)):
            todo += value.values() if isinstance(value, dict) else value


_Reader = Callable[[Path], Iterator[tuple[Path | None, str, str]]]
_VCS_CONFIGS: dict[str, tuple[str, _Reader, str, tuple[str, ...]]] = {
    ".hg": ("hgrc", _hgrc_entries, "HGRCPATH",
            ("/etc/mercurial/hgrc", "/etc/mercurial/hgrc.d", "~/.hgrc", "$XDG_CONFIG_HOME/hg/hgrc")),
    ".sl": ("config", _hgrc_entries, "SL_CONFIG_PATH",
            ("/etc/sapling/system.conf", "$XDG_CONFIG_HOME/sapling/sapling.conf")),
    ".jj": ("repo/config.toml", _jj_entries, "JJ_CONFIG",
            ("$XDG_CONFIG_HOME/jj/config.toml", "$XDG_CONFIG_HOME/jj/conf.d"))}
"""Each other version control's repository config in its metadata folder, its reader, and the user's and the system's
configs it reads too (the variable's list instead, if set; a folder: its files): their commands run here too."""


def _vcs_config_files(git_dir: Path, other: tuple[str, _Reader, str, tuple[str, ...]]) -> Iterator[Path]:
    """The repository's config of ``git_dir``'s version control (:data:`_VCS_CONFIGS`), then the others it reads."""
    xdg = os.environ.get("XDG_CONFIG_HOME") or str(Path.home() / ".config")
    yield git_dir / other[0]
    for listed in filter(None, os.environ[other[2]].split(os.pathsep) if other[2] in os.environ else other[3]):
        with contextlib.suppress(OSError, RuntimeError):  # unreadable, ~nobody: what the VCS cannot read either
            path = Path(listed.replace("$XDG_CONFIG_HOME", xdg)).expanduser()
            yield from sorted(path.iterdir()) if path.is_dir() else [path]


_INCLUDE_IF = re.compile(r"includeif\..*\.path", re.IGNORECASE | re.DOTALL)
_REFS = re.compile(r"remote\..+\.(fetch|push)|branch\..+\.merge", re.IGNORECASE)  # refspecs, never paths
_URLS = re.compile(r"(remote\..+\.(url|pushurl))|(url\..+\.(insteadof|pushinsteadof))", re.IGNORECASE)
# A URL with a scheme, or user@host:path: the remote is elsewhere (a local path is still a path).
_NETWORK_URL = re.compile(r"[a-z][a-z0-9+.-]*://|[^/\s]+@[^/\s]+:", re.IGNORECASE)


def _named_by_config(root: Path, repos: list[tuple[Path | None, Path | None]]) -> Iterator[tuple[Path, str]]:
    """Each path in ``root`` a config git (or :data:`_VCS_CONFIGS`) reads for ``repos`` (``(git dir, working tree)``)
    names, or a value (a hook's lines too) run as a command runs and starts from the top, as docs/cli.md says -> why."""
    seen: set[tuple[Path | None, str, Path | None]] = set()
    started: set[tuple[str, Path, str]] = set()
    for git_dir, worktree in repos:
        other = _VCS_CONFIGS.get(git_dir.name) if git_dir is not None else None
        top = worktree or root
        hooks = [p / "hooks" for p in _leads_to(git_dir)] if git_dir and not other else []
        entries = (itertools.chain.from_iterable(map(other[1], _vcs_config_files(git_dir, other))) if git_dir and other
                   else _config_entries(git_dir))
        for n, (origin, key, value) in enumerate(itertools.chain(entries, _hook_entries(hooks))):  # hooksPath's too
            if n == MOST_VALUES:  # more than any config holds (a checkout's hgrc of 10^5 hooks): no more read, all held
                yield top, RUN
                break
            if key.casefold() == "core.hookspath":
                with contextlib.suppress(OSError, RuntimeError):  # ~nobody, a symlink loop
                    hooks.append(hooks_path := (top / Path(value).expanduser()).resolve())
                    yield hooks_path, CONFIG  # a path, whatever its shape: `githooks`, missing yet
            if "\x00" in value or (origin, value, worktree) in seen:
                continue  # a NUL: no command nor path (a compiled hook's bytes: git runs the file, read as its path)
            seen.add((origin, value, worktree))
            if origin is not None and root in origin.parents:
                yield origin, CONFIG
            bases = {root, *(p for p in (worktree, origin and origin.parent) if p is not None)}
            words = shell_words(script_text(value.removeprefix("!")))  # a heredoc too
            command = len(words) > 1 or value.startswith("!")
            for part in (part for word in words for part in WORD_PARTS.split(word) if part not in ("", ".", "..")):
                # A path whatever its shape: an include's, or a file a hook or an extension loads (python:x.py:f).
                shaped = "/" in part or part.startswith((".", "~")) or key.casefold().endswith("path") or (
                    key in ("hooks", "extensions") and bool(Path(part).suffix))
                tails = [part[i + 1:] for i, c in enumerate(part) if c == "/"]  # "$(git rev-parse --show-toplevel)/x"
                for base, name in [(base, name) for base in bases for name in (part, *tails)]:
                    try:
                        path = (base / Path(name).expanduser()).resolve()
                    except (OSError, RuntimeError):  # ~nobody, a symlink loop
                        continue
                    if root not in path.parents or os.path.lexists(path / ".git"):
                        continue  # outside, or a working tree (a submodule's core.worktree)
                    # A tail names a file; a whole part missing its shape, existing a file or a value's folder (a
                    # folder a command is given is its work).
                    if (os.path.isfile(path) if name != part else shaped if not os.path.lexists(path)
                            else not command or not os.path.isdir(path)):
                        yield path, CONFIG
            # What the value run as a command runs or imports from its cwd, git's: the working tree's top.
            yield from ((path, RUN) for path in command_files(words, top, root))
            started.update(s for command, cwd in simple_commands(words, top) for s in starts(command, cwd))
    yield from _loaded_by_host(root, started)


MOST_VALUES = 1000
"""The values read for one repository (its configs, their includes, its hooks' lines), about 1 s; past it, the
working tree is held whole."""


def _hook_entries(hooks: list[Path]) -> Iterator[tuple[Path | None, str, str]]:
    """``(hook, "", value)`` for each hook in ``hooks``: its path, its ``#!`` line's command, its lines as one."""
    for hook in (Path(e.path) for folder in hooks if folder.is_dir() for e in os.scandir(folder)
                 if not e.name.endswith(".sample")):  # git init's examples: git runs none of them
        text = read_text(hook)
        quoted = shlex.quote(str(hook))
        shebang = [f"{text[2:].partition(chr(10))[0]} {quoted}"] if text.startswith("#!") else []
        yield from ((hook, "", value) for value in (quoted, *shebang, script_text(own_path(text, hook))))


def _loaded_by_host(root: Path, started: Iterable[tuple[str, Path, str]]) -> Iterator[tuple[Path, str]]:
    """What the host's runs of ``started`` load from ``root``: ``node_modules`` whole; from a python's start folder,
    any name's missing import forms, a standard library name's existing ones (a project's own stays its work)."""
    folders: dict[Path, set[str]] = {}
    for kind, folder, module in started:
        if folder == root or root in folder.parents:
            if kind == "node":  # node resolves a require from each node_modules up from its script's folder
                yield from ((path, RUN) for up in (folder, *folder.parents) if up == root or root in up.parents
                            for path in _environment_of(up / "node_modules" / ".bin", root))
            else:
                folders.setdefault(folder, set(import_names())).update((module, *_installed(kind)))
    for folder, names in folders.items():
        held = [path for name in filter(str.isidentifier, names) for path in would_import(folder, [name])
                if path.name != "__pycache__" and (name in sys.stdlib_module_names or not os.path.lexists(path))]
        yield from ((path, HOST_IMPORT) for path in _with_bytecode(folder, held))


def _with_bytecode(folder: Path, held: list[Path]) -> list[Path]:
    """``held`` with ``folder``'s ``__pycache__`` whole where one is an existing source: Python runs a bytecode there
    in place of a source whose mtime and size its header records."""
    sources = importlib.machinery.SOURCE_SUFFIXES
    return [*held, *[folder / "__pycache__"][:any(p.parent == folder and p.suffix in sources and p.is_file()
                                                  for p in held)]]


def _installed(python: str) -> set[str]:
    """The top-level names the environment of the interpreter a command names (``/opt/nb/bin/python3``) installs."""
    if "$" in python or (found := shutil.which(os.path.expanduser(python))) is None:
        return set()
    prefix = Path(found).parent.parent  # not resolved: a virtual environment's python is a link to its base's
    return {entry.name.partition(".")[0] for pattern in ("lib*/python3*/site-packages/*", "lib/python3/dist-packages/*")
            for entry in prefix.glob(pattern)}


_DIRENV = {"dotenv": ".env", "dotenv_if_exists": ".env", "source_env": "", "source_env_if_exists": "",
           "source_up": ".envrc", "source_up_if_exists": ".envrc", "watch_file": "", "PATH_add": "", "path_add": "",
           "source": "", ".": ""}
"""direnv's commands (and the shell's ``source``/``.``: an ``.envrc`` is bash) that load (or watch) a path, and
the one each takes when given none."""


def _direnv_loads(envrc: Path, root: Path) -> Iterator[Path]:
    """A direnv ``.envrc`` and what it and each file it sources load in ``root``, existing or not (docs/cli.md)."""
    todo, read = [envrc], set()
    while todo:
        if (file := todo.pop()) in read or (file != root and root not in file.parents):
            continue
        read.add(file)
        yield file
        base = file if (is_dir := os.path.isdir(file)) else file.parent
        text = read_text(file / ".envrc" if is_dir else file)
        # What any command names, a folder whole: direnv's functions take folders (PATH_add, expand_path, layout).
        todo += command_files(words := shell_words(script_text(text)), base, root, folders=True)
        for command, _ in simple_commands(words, base):
            name, *args = [w for w in command if not _ASSIGNMENT.match(w)] or [""]  # past the exports before it
            if (default := _DIRENV.get(name)) is not None:
                folders = file.parent.parents if name.startswith("source_up") else [file.parent]
                for arg in args[name == "path_add":] or [default]:
                    with contextlib.suppress(OSError, RuntimeError, ValueError):  # ~nobody, a symlink loop, a NUL
                        todo += [(folder / Path(arg).expanduser()).resolve() for folder in folders if arg]


def _enclosing(root: Path) -> list[tuple[Path, Path]]:
    """``(git directory, working tree)`` of the repository the workspace sits in, as git finds it from there."""
    for folder in root.parents if not os.path.lexists(root / ".git") else ():  # else git finds that one first
        if os.path.lexists(folder / ".git"):
            return [(folder / ".git", folder)]
        with contextlib.suppress(OSError):
            if is_git_dir(os.listdir(folder)):
                return [(folder, folder)]
    return []


def _leads_to(dot_git: Path) -> Iterator[Path]:
    """A ``.git`` entry, the git directory a ``.git`` file points to, and that directory's ``commondir``."""
    def pointer(path: Path) -> str:  # a small file's text; "" if not a regular file
        return read_regular(path, 4096).decode("utf-8", "replace").strip()

    yield dot_git
    gitdir = dot_git.resolve()
    if os.path.isfile(dot_git):
        if not (text := pointer(dot_git)).startswith("gitdir:"):
            return
        if (pointed := _resolved(dot_git.parent / text.removeprefix("gitdir:").strip())) is None:
            return  # a NUL, a loop: git reads no repository there either
        yield (gitdir := pointed)
    if (common := pointer(gitdir / "commondir")) and (shared := _resolved(gitdir / common)) is not None:
        yield shared


