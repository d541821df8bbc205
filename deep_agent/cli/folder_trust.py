"""Folder trust: a cloned folder's agent files run no command until a person trusts the folder.

An agent file can start processes: its ``hooks`` run shell commands and its
``mcpServers`` start servers. ``deep-agent run`` reads the current folder's
agent files by default, so a checkout could run its own commands the moment
you type ``run`` in it. Like Claude Code, the CLI asks first: it shows every
command such files would run (with each server's ``env`` and ``cwd``, all
escaped: :func:`describe`), and remembers the answer per folder and content
hash in your config directory (``$XDG_CONFIG_HOME/deep-agent/`` or
``~/.config/deep-agent/``, never in the folder, which the checkout controls).
Any change to those files, or to the files their commands run
(:func:`files_run_by`: the folder's, what their scripts source in turn,
and what they name outside it with ``../``), asks again. Without a terminal an untrusted
folder's command-running agent files are not loaded (plain ones are: they run
nothing by themselves, and their tools follow your ``--permission-mode``).

Example::

    record = TrustRecord(config_dir=Path("/tmp/cfg"))
    assert not record.is_trusted(Path("/tmp/project"), "abc")
    record.trust(Path("/tmp/project"), "abc")
    assert record.is_trusted(Path("/tmp/project"), "abc")
"""

from __future__ import annotations

import ast
import dataclasses
import hashlib
import importlib.machinery
import json
import os
import re
import shlex
import shutil
import stat
import sys
from collections.abc import Iterable, Iterator, Mapping
from pathlib import Path
from typing import Any

from deep_agent.cli.terminal import printable
from deep_agent.tools.protected import WORD_PARTS, read_regular, shell_words

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


def _hook_commands(value: Any, event: str = "") -> Iterator[tuple[str, str]]:
    """``(event, shell command)`` for every hook command of a hooks mapping, at any depth."""
    if isinstance(value, Mapping):
        if isinstance(value.get("command"), str):
            yield event, value["command"]
        for key, item in value.items():
            yield from _hook_commands(item, event or str(key))
    elif isinstance(value, (list, tuple)):
        for item in value:
            yield from _hook_commands(item, event)


def _servers(value: Any) -> Iterator[tuple[str, Mapping[str, Any]]]:
    """``(name, config)`` of every MCP server of a normalised ``mcp_config``."""
    if isinstance(value, Mapping):
        for name, config in value.items():
            if isinstance(config, Mapping):
                yield str(name), config


def _args(server: Mapping[str, Any]) -> list[str]:
    args = server.get("args")
    return [str(a) for a in args] if isinstance(args, list) else []


def _env(server: Mapping[str, Any]) -> Mapping[str, Any]:
    env = server.get("env")
    return env if isinstance(env, Mapping) else {}


def what_would_run(spec: Any) -> list[str]:
    """What an agent file's hooks and MCP servers would run, whole; ``[]`` for a plain file.

    Every hook command; every server's command line (quoted as a shell
    would read it, so each argument's bounds show), each ``env`` entry (name
    and value) and its ``cwd``, or the URL it connects to. Lines are raw
    text: :func:`describe` escapes them for the terminal.
    """
    found = [f"hook{f' ({event})' if event else ''}: {command}"
             for event, command in _hook_commands(getattr(spec, "hooks", None) or {})]
    for name, server in _servers(getattr(spec, "mcp_config", None) or {}):
        if isinstance(server.get("command"), str):
            found.append(f"MCP server {name}: {shlex.join([server['command'], *_args(server)])}")
            found += [f"  env {key}={value}" for key, value in _env(server).items()]
            if server.get("cwd"):
                found.append(f"  cwd {server['cwd']}")
        elif isinstance(server.get("url"), str):
            found.append(f"MCP server {name}: connects to {server['url']}")
    return found


# ----------------------------------------------------------------------------
# The files a folder's hooks and MCP servers run: trusted with the agent files.
#
# An agent file that says ``command: sh scripts/check.sh`` runs whatever
# ``scripts/check.sh`` holds the day it runs. :func:`files_run_by` names
# those files; the trust fingerprint covers them, so a changed script asks
# again, and a run can keep them out of reach of what it lets write.
#
# Example::
#
#     files_run_by(spec, Path("/home/me/project"))
#     # [PosixPath('/home/me/project/.cache'), PosixPath('/home/me/project/scripts/check.sh')]
# ----------------------------------------------------------------------------


def files_run_by(spec: Any, folder: Path, *, within: Path | None = None, outside: bool = False) -> list[Path]:
    """The files (and folders) inside ``folder`` that one agent definition's hooks and MCP servers run or load.

    ``spec`` is a discovered definition's value (a ``SubagentSpec``, or
    anything with its normalised ``hooks`` and ``mcp_config``); ``folder``
    is the folder the run starts in: hooks run their shell there, and an MCP
    server's ``cwd`` is resolved from it. Named are:

    * each word of a hook's command line (split as the shell splits it, and
      at ``=`` and ``:``) that names an existing file, or that holds a ``/``
      (a script not there yet), resolved against ``folder``;
    * an MCP server's ``command`` if it holds a ``/``, or if a ``PATH`` in
      its ``env`` leads to it inside the folder; each of its ``args`` as a
      hook's words, resolved against the server's ``cwd``;
    * each path an ``env`` value names (``PYTHONPATH=./lib:./.cache``,
      ``NODE_OPTIONS=--require ./x.js``), folders included;
    * the module files of ``python -m pkg.mod`` (in a hook or a server);
    * in turn, each existing file a script named so far names (:func:`_named_by_scripts`:
      ``. scripts/lib.sh``, ``source "$(dirname "$0")/lib.sh"``).

    Returned: sorted, de-duplicated, resolved (symlinks followed), and only
    what lies strictly inside ``folder`` (never ``folder`` itself: it is the
    workspace). A path may not exist yet; a caller that binds these
    read-only skips or creates the missing ones. Folders are named only by
    ``env`` entries (a server's ``env``, or a hook's ``NAME=value`` word): a
    folder as an argument (``ruff check src``) is work, not code to keep. A
    file a hook names to write (``touch out/done``) is named too: once it
    changes, the trust fingerprint asks again. Call it once per definition, e.g.
    ``{p for d in found.definitions.values() for p in files_run_by(d.value, Path.cwd())}``.

    ``within`` (default ``folder``): the folder whose files are kept, for a
    caller protecting a workspace that holds ``folder`` (``../scripts/x.sh``
    from a subfolder is the workspace's file too). ``outside``: also what a
    relative word names outside it (``../shared/x.sh``, a symlink leading
    out), for the trust fingerprint; never what an absolute path names (the
    machine's own programs), nor a folder holding ``folder``.
    """
    start = folder.resolve()
    root = None if outside else within.resolve() if within is not None else start
    found: set[Path] = set()
    for _, command in _hook_commands(getattr(spec, "hooks", None) or {}):
        found.update(_named_files(shell_words(command), start, root))
    for _, server in _servers(getattr(spec, "mcp_config", None) or {}):
        if not isinstance(server.get("command"), str):
            continue
        base = _resolved(start / str(server["cwd"])) if server.get("cwd") else start
        if base is None:
            continue
        env = _env(server)
        for value in env.values():
            words = [w for w in WORD_PARTS.split(str(value)) if w]
            found.update(p for w in words if (p := _inside(w, base, root, folders=True)) is not None)
        command = str(server["command"])
        if "/" not in command:  # looked up on PATH: one the file gives may lead into the folder
            path_dirs = [d for d in str(env.get("PATH", "")).split(os.pathsep) if d]
            found.update(p for d in path_dirs
                         if (p := _inside(str(Path(d) / command), base, root, folders=False)) is not None
                         and p.exists())
        found.update(_named_files([command, *_args(server)], base, root))
    return sorted(_named_by_scripts(found, start, root))


def protect_what_runs(definitions: Iterable[Any], folder: Path | None = None) -> list[Path]:
    """Keep what these definitions' hooks and MCP servers run or load out of every tool's reach; those paths.

    Each is named by :func:`files_run_by` from ``folder`` (default: the
    current one, where hooks run their shell), wherever it lies, with the
    ``__pycache__`` folder beside each Python file, and added to
    :data:`~deep_agent.tools.protected.HOST_CODE`: the protected set of every
    workspace holds those inside it, made before or after. ``deep-agent run``
    calls it for every agent file it finds (trusted or not: one trusted later
    runs them), ``create_deep_agent`` for the hooks, servers and agents it is given.
    """
    from deep_agent.tools.protected import HOST_CODE

    start = (folder or Path.cwd()).resolve()
    run = {path for spec in definitions for path in files_run_by(spec, start, within=Path(start.anchor))}
    # Python runs a module's cached bytecode in place of its source when the cache's stamp matches the
    # source's (mtime and size, which a command can read): a .pyc planted in __pycache__ ran as the hook's
    # module. That folder is Python's to write when the hook runs, never the agent's (nor in the fingerprint).
    run |= {path.parent / "__pycache__" for path in run if path.suffix == ".py"}
    HOST_CODE.update(run)
    return sorted(run)


_ASSIGNMENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*=")


def _named_files(words: list[str], base: Path, root: Path | None) -> Iterator[Path]:
    """The files inside ``root`` that ``words`` name, relative to ``base``, and to each folder a word
    names (``cd scripts && sh guard.sh``); of a word holding a ``/``, what follows each ``/`` too if an
    existing file (``sh "$(pwd)/scripts/guard.sh"``), as in a script's text."""
    bases = [base, *(p for w in words if (p := _inside(w, base, root, folders=True)) is not None and p.is_dir())]
    for before, word in zip(["", *words], words, strict=False):
        module = word if before == "-m" else word[2:] if word.startswith("-m") else ""
        if module and all(part.isidentifier() for part in module.split(".")):
            # python -m pkg.mod: the folder it starts in is first on Python's path, so whatever would be
            # loaded from there, existing or not (a module installed elsewhere is shadowed by one put here).
            for name in (*_module_files(module), Path(*module.split("."), "__main__.py")):
                if (p := _inside(f"./{name}", base, root, folders=False)) is not None:
                    yield p
        assignment = _ASSIGNMENT.match(word) is not None  # PYTHONPATH=./lib cmd: an env entry, folders too
        parts = [part for part in WORD_PARTS.split(word) if part]
        for part in parts if len(parts) > 1 else [word]:  # --out=./x: ./x alone
            if (p := _inside(part, base, root, folders=assignment)) is not None:
                yield p
            tails = [part[i + 1:] for i, c in enumerate(part) if c == "/"]
            for text, folder in [(part, b) for b in bases[1:]] + [(tail, b) for tail in tails for b in bases]:
                if os.path.isfile(os.path.join(folder, text)) and (
                        p := _inside(text, folder, root, folders=False)) is not None:
                    yield p


def _inside(word: str, base: Path, root: Path | None, *, folders: bool) -> Path | None:
    """``word`` as a path from ``base``, if it names a file (or a folder) strictly inside ``root``;
    with no ``root``, a relative ``word`` wherever it leads, but to ``base`` or a folder holding it."""
    if not word or "\x00" in word or "://" in word or word.startswith("-"):
        return None
    if root is None and word.startswith(("/", "~")):
        return None  # the machine's own files, not the folder's
    try:
        path = _resolved(base / Path(word).expanduser())
    except RuntimeError:  # ~nobody: no such user
        return None
    if path is None or (root not in path.parents if root is not None else path == base or path in base.parents):
        return None
    if path.is_dir():
        return path if folders else None
    # "/": a script that may be created later; not a word the shell expands ("$(pwd)/x": its tail is named)
    return path if path.exists() or ("/" in word and not {"$", "`"} & set(word)) else None


MAX_SCRIPT_BYTES = 256 * 1024
"""Of each file hooks and servers run, what is read for the files it names in turn."""


def _named_by_scripts(found: set[Path], start: Path, root: Path | None) -> set[Path]:
    """``found`` and every existing file a script in it names, and so on: what ``sh scripts/guard.sh`` runs
    when it sources ``scripts/lib.sh``.

    A script's words are split as a command line's (:func:`shell_words`),
    each resolved from the script's folder and from ``start``; of a word
    holding a ``/`` (``"$DIR/lib.sh"``), what follows each ``/`` from the
    script's folder too; and each word with the script's own suffix from
    its folder (``import helpers`` in a ``.py``, ``require('./util')`` in a
    ``.js``); each an existing file that can run (:func:`_code`). Not
    followed: a dotted module (``from pkg.mod import x``), a package an
    interpreter finds elsewhere, a name built at run time.
    """
    found = set(found)
    todo = sorted(found)
    import_roots: dict[Path, set[Path]] = {}
    while todo:
        script = todo.pop()
        words = shell_words(_script_text(script))
        pairs = {(part, before) for before, word in zip(["", *words], words, strict=False)
                 for part in WORD_PARTS.split(word) if part}
        for part, before in pairs:
            tails = [(part[i + 1:], script.parent) for i, c in enumerate(part) if c == "/"]  # "$DIR/lib.sh"
            module = [(part + script.suffix, script.parent)] if script.suffix else []  # import helpers
            for name, base in [(part, script.parent), (part, start), *tails, *module]:
                if not os.path.isfile(os.path.join(base, name)):  # most words name nothing: no resolving
                    continue
                path = _inside(name, base, root, folders=False)
                if path is not None and path not in found and (_code(path, script) or _program(before)):
                    found.add(path)
                    todo.append(path)
        # What a module imports is found on the path of the script that runs (its folder first), not its own.
        folders = import_roots.setdefault(script, {script.parent, *([start] if (script.parent / "__init__.py")
                                                                     .is_file() else [])})
        for path in _imported(script, folders, root) - found:
            found.add(path)
            if path.is_file():
                import_roots[path] = folders
                todo.append(path)
        found |= _required(script, root or start)
    return found


def _imported(script: Path, folders: set[Path], root: Path | None) -> set[Path]:
    """What a Python ``script``'s imports would load from ``folders``, the first on Python's path, existing
    or not: a file put there later (``json.py`` beside ``import json``) runs instead of the module meant.

    Those folders are the running script's own (``python scripts/check.py``), and the start folder too
    for a module of a package (``python -m pkg.mod`` runs from there); each name's files are
    :func:`_module_files`.
    """
    if script.suffix != ".py":
        return set()
    try:
        tree = ast.parse(_script_text(script))
    except (SyntaxError, ValueError):
        return set()
    names = {alias.name for node in ast.walk(tree) if isinstance(node, ast.Import) for alias in node.names}
    names |= {node.module for node in ast.walk(tree)
              if isinstance(node, ast.ImportFrom) and node.module and not node.level}
    return {p for folder in folders for name in names for file in _module_files(name)
            if (p := _inside(f"./{file}", folder, root, folders=False)) is not None}


_NODE_SCRIPTS = frozenset({".js", ".mjs", ".cjs"})
_NODE_IMPORT = re.compile(r"""(?:\brequire\s*\(\s*|\bimport\s*\(\s*|\bfrom\s+|\bimport\s+)(['"])([^'"\s]+)\1""")


def _required(script: Path, root: Path) -> set[Path]:
    """What a Node script's packages would load from: ``node_modules/<package>`` in each folder Node looks
    in, from the script's own up to ``root`` (the workspace's, else the folder the run starts in),
    existing or not.

    ``require('minimist')`` in ``hooks/check.js`` loads ``hooks/node_modules/minimist`` first when it is
    there: a package the agent put in a nearer folder, or a file it changed in the one meant, ran on the
    host. (A core module's name, ``fs``, is named too: a folder no one writes costs nothing.)
    """
    if script.suffix not in _NODE_SCRIPTS:
        return set()
    names = {m.group(2) for m in _NODE_IMPORT.finditer(_script_text(script))}
    packages = {"/".join(name.split("/")[:2 if name.startswith("@") else 1]) for name in names
                if not name.startswith((".", "/", "node:"))}
    packages = {p for p in packages if p and ".." not in p.split("/")}
    folders = [f for f in (script.parent, *script.parent.parents) if f == root or root in f.parents]
    return {folder / "node_modules" / package for folder in folders for package in packages}


def _module_files(dotted: str) -> list[Path]:
    """The files, relative to a folder on Python's path, that importing ``dotted`` could load from it: its
    packages' ``__init__.py``, and the first part and the whole with every suffix the interpreter imports
    (``.py``, ``.pyc``, extension modules: :func:`importlib.machinery.all_suffixes`)."""
    parts = dotted.split(".")
    files = [Path(*parts[:n], "__init__.py") for n in range(1, len(parts) + 1)]
    return files + [Path(*parts[:n - 1], parts[n - 1] + suffix) for n in {1, len(parts)}
                    for suffix in importlib.machinery.all_suffixes()]


def _program(word: str) -> bool:
    """Whether ``word`` names a program (``python3``, ``node``, ``/usr/bin/env``): the file it is given
    first is what it runs (``python3 tools/check.py``), whatever that file's suffix or mode."""
    return bool(word) and not word.startswith("-") and shutil.which(word) is not None


def _code(path: Path, script: Path) -> bool:
    """Whether a file ``script`` names can run: of its language (its suffix), executable, or a ``#!`` script.

    What else a script names is its work (``grep x README.md``), as a folder a hook names is."""
    return bool(script.suffix and path.suffix == script.suffix) or os.access(path, os.X_OK) or (
        read_regular(path, 2) == b"#!")


def _script_text(path: Path) -> str:
    """The first :data:`MAX_SCRIPT_BYTES` bytes of a regular file as text; ``""`` for a program (a NUL byte)."""
    data = read_regular(path, MAX_SCRIPT_BYTES)
    return "" if b"\0" in data else data.decode("utf-8", "replace")


def _resolved(path: Path) -> Path | None:
    try:
        return path.resolve()
    except (OSError, RuntimeError):  # a symlink loop
        return None


MAX_FINGERPRINT_FILES = 2_000
"""Files of one folder (a ``PYTHONPATH`` entry) the fingerprint reads; past them, a change goes unseen."""


def fingerprint(files: Iterable[Path]) -> str:
    """One hash over the named files' paths and bytes: any change asks again.

    Given :func:`folder_commands`' answer, it covers the agent files and the
    files their hooks and servers run (:func:`files_run_by`): for a folder,
    the names and bytes of the files in it. A pipe or device is never opened.
    """
    paths = set(files)
    if isinstance(files, FolderCommands):
        paths.update(p for run in files.runs.values() for p in run)
    digest = hashlib.sha256()
    for path in sorted(paths):
        digest.update(str(path).encode() + b"\0")
        if path.is_dir() and not path.is_symlink():
            inner = sorted(Path(top, name) for top, _, names in os.walk(path) for name in names)
            for count, file in enumerate(inner):
                if count >= MAX_FINGERPRINT_FILES:
                    digest.update(b"<more files>")
                    break
                digest.update(str(file.relative_to(path)).encode() + b"\0")
                _hash_file(digest, file, follow=False)
        else:
            _hash_file(digest, path, follow=True)
        digest.update(b"\0")
    return digest.hexdigest()


def _hash_file(digest: Any, path: Path, *, follow: bool) -> None:
    """The file's bytes into ``digest``; a symlink's target (``follow=False``), or what it is instead."""
    try:
        if not follow and path.is_symlink():
            digest.update(b"<symlink>" + os.fsencode(os.readlink(path)))
            return
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)  # a pipe opens at once, then is refused
    except FileNotFoundError:
        digest.update(b"<missing>")
        return
    except OSError:
        digest.update(b"<unreadable>")
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
    """The folder's own agent files that run commands, each with what it runs (and, in ``runs``, the files).

    A file is the folder's if it was found inside the folder (its agent
    directories), wherever a symlink on the way points: a checkout's
    ``.claude/agents/x.md`` linking to ``../../x.md`` is still the
    checkout's. A file that resolves into the folder is the folder's too.
    Only what is found outside and lies outside (the user's own level) is
    not asked about. Keys are resolved paths.
    """
    root = folder.resolve()
    inside = {root, Path(os.path.abspath(folder))}
    out = FolderCommands()
    for definition in definitions:
        found = Path(os.path.abspath(definition.path))  # where it was found: no symlink followed
        path = Path(definition.path).resolve()
        if not any(top in p.parents for top in inside for p in (found, path)):
            continue  # the user's own level (home) is theirs, not the checkout's
        commands = what_would_run(definition.value)
        if commands:
            out[path] = commands
            out.runs[path] = files_run_by(definition.value, root, outside=True)
    return out


def describe(folder: Path, commands: Mapping[Path, list[str]]) -> str:
    """What trusting ``folder`` would let run: every command, argument, env entry and cwd, escaped.

    The text goes through the CLI's one escape (:func:`~deep_agent.cli.terminal.printable`):
    a carriage return or an escape sequence in a command shows as ``\\r`` or
    ``\\x1b``, and cannot hide the command's head behind a harmless tail.
    As it precedes the question, on a terminal it first discards what was
    typed before it (``tcflush``): a key pressed before the commands were
    shown never answers.
    """
    _discard_typed_ahead()
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


def _discard_typed_ahead() -> None:
    """Drop the keys typed on the terminal and not yet read (nothing without a terminal)."""
    try:
        import termios
    except ImportError:  # no terminal control here: nothing to discard
        return
    try:
        if sys.stdin is not None and sys.stdin.isatty():
            termios.tcflush(sys.stdin.fileno(), termios.TCIFLUSH)
    except (OSError, ValueError, termios.error):  # a flush that fails still asks
        pass


HOW_TO_TRUST = ("deep-agent: this folder is not trusted, so its agent files with hooks or MCP servers "
                "were not loaded; review them and run `deep-agent trust` (or pass --trust-folder)")
